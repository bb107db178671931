package dev.ratelimit.core;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.time.Duration;
import java.time.Instant;
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
 * @param untilFull how long until {@code limit} tokens are available if no caller takes or gives back
 *        any: {@link Duration#ZERO} when they are, and otherwise counting the part of the next token
 *        that time has already made (2 tokens per 3 s, one token taken 1.2 s ago from a full bucket:
 *        0.3 s, where counting whole tokens would say 1.5 s). With capped release, tokens in flight come
 *        back only when released, which no clock predicts: the rate alone is counted, for whole tokens,
 *        as if they were released now. Rounded up to a nanosecond.
 * @param resetsAt a {@link CalendarQuota}'s next boundary, when its allowance is there again (the end of
 *        the running calendar period); {@code null} for every other limiter
 * @param untilReset the time from the view's instant to {@code resetsAt} (exact, to the nanosecond of
 *        the wall clock); {@link Duration#ZERO} when {@code resetsAt} is {@code null}
 */
public record RateLimiterSnapshot(long rate, Duration period, double limit, boolean cappedRelease,
		double available, double deficiency, int waiting, double inFlight, long granted, long rejected,
		@Nullable Pools pools, Duration behindSchedule, Duration untilFull, @Nullable Instant resetsAt,
		Duration untilReset) {

	/**
	 * Checks the figures that every view must have.
	 */
	public RateLimiterSnapshot {
		Objects.requireNonNull(period, "period");
		Objects.requireNonNull(behindSchedule, "behindSchedule");
		Objects.requireNonNull(untilFull, "untilFull");
		Objects.requireNonNull(untilReset, "untilReset");
	}

	/**
	 * A view of a limiter without calendar periods (no {@code resetsAt}).
	 *
	 * @param rate tokens (operations) per {@code period}
	 * @param period the period of the rate
	 * @param limit the most tokens banked
	 * @param cappedRelease whether tokens return only when the guarded work completes
	 * @param available tokens a caller could take now without waiting
	 * @param deficiency tokens claimed by waiting callers but not yet there
	 * @param waiting callers waiting now
	 * @param inFlight tokens taken and not released yet
	 * @param granted calls let through since start
	 * @param rejected calls refused since start
	 * @param pools the pacer's pools, {@code null} for the rover bucket
	 * @param behindSchedule how far callers are behind the pacer's schedule
	 * @param untilFull how long until {@code limit} tokens are available
	 */
	public RateLimiterSnapshot(long rate, Duration period, double limit, boolean cappedRelease, double available,
			double deficiency, int waiting, double inFlight, long granted, long rejected, @Nullable Pools pools,
			Duration behindSchedule, Duration untilFull) {
		this(rate, period, limit, cappedRelease, available, deficiency, waiting, inFlight, granted, rejected, pools,
				behindSchedule, untilFull, null, Duration.ZERO);
	}

	/**
	 * A view whose {@link #untilFull()} is worked out from the figures given: the tokens missing
	 * ({@code limit - available + deficiency}) at the rate. Exact for a limiter whose figures are exact
	 * (the pacer's are fractional); a limiter that counts whole tokens gives its own, which counts the
	 * part of the next token already made.
	 *
	 * @param rate tokens (operations) per {@code period}
	 * @param period the period of the rate
	 * @param limit the most tokens banked
	 * @param cappedRelease whether tokens return only when the guarded work completes
	 * @param available tokens a caller could take now without waiting
	 * @param deficiency tokens claimed by waiting callers but not yet there
	 * @param waiting callers waiting now
	 * @param inFlight tokens taken and not released yet
	 * @param granted calls let through since start
	 * @param rejected calls refused since start
	 * @param pools the pacer's pools, {@code null} for the rover bucket
	 * @param behindSchedule how far callers are behind the pacer's schedule
	 */
	public RateLimiterSnapshot(long rate, Duration period, double limit, boolean cappedRelease, double available,
			double deficiency, int waiting, double inFlight, long granted, long rejected, @Nullable Pools pools,
			Duration behindSchedule) {
		this(rate, period, limit, cappedRelease, available, deficiency, waiting, inFlight, granted, rejected, pools,
				behindSchedule, timeFor(limit - available + deficiency, rate, period));
	}

	private static final BigDecimal LONGEST = BigDecimal.valueOf(Long.MAX_VALUE);

	/**
	 * How long {@code tokens} take at {@code rate} per {@code period}, rounded up to a nanosecond.
	 */
	private static Duration timeFor(double tokens, long rate, Duration period) {
		if (!(tokens > 0) || rate <= 0) {
			return Duration.ZERO;
		}
		BigDecimal nanos = new BigDecimal(tokens).multiply(BigDecimal.valueOf(period.toNanos()))
			.divide(BigDecimal.valueOf(rate), 0, RoundingMode.CEILING);
		return Duration.ofNanos((nanos.compareTo(LONGEST) <= 0) ? nanos.longValue() : Long.MAX_VALUE);
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
