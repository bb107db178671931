package dev.ratelimit.core;

import java.time.Duration;
import java.util.Objects;

import org.jspecify.annotations.Nullable;

/**
 * A consistent view of a {@link RateLimiter} at one instant, as {@link RateLimiter#snapshot()}
 * returns it. Token figures are in the limiter's unit: tokens for the rover bucket, operations
 * (possibly fractional) for the pacer.
 *
 * @param rate tokens (operations) per {@code period}
 * @param period the period of the rate
 * @param limit the most tokens banked (the pacer: its active pool, in operations)
 * @param cappedRelease whether tokens return only when the guarded work completes
 * @param available tokens a caller could take now without waiting, {@code >= 0}
 * @param deficiency tokens claimed by waiting callers but not yet there, {@code >= 0}
 * @param waiting callers waiting now
 * @param inFlight tokens taken by calls that have not released them yet (0 unless capped release)
 * @param granted calls let through since start (0 when the limiter records no statistics)
 * @param rejected calls refused since start (0 when the limiter records no statistics)
 * @param pools the pacer's pools, {@code null} for the rover bucket
 * @param behindSchedule how far callers are behind the pacer's schedule; {@link Duration#ZERO} for
 *        the rover bucket
 */
public record RateLimiterSnapshot(long rate, Duration period, double limit, boolean cappedRelease,
		double available, double deficiency, int waiting, double inFlight, long granted, long rejected,
		@Nullable Pools pools, Duration behindSchedule) {

	/**
	 * Checks the figures that every view must have.
	 */
	public RateLimiterSnapshot {
		Objects.requireNonNull(period, "period");
		Objects.requireNonNull(behindSchedule, "behindSchedule");
	}

	/**
	 * The three pools of the {@link HybridRateLimiter pacer}, in operations.
	 *
	 * @param active schedule time ready to be granted
	 * @param burst schedule time recovered from the backlog, usable at up to the burst ratio
	 * @param waiting schedule time that passed unclaimed: how far callers are behind
	 */
	public record Pools(double active, double burst, double waiting) {
	}
}
