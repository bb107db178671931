package dev.ratelimit.spring.engine;

import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import dev.ratelimit.core.RateLimitExceededException;
import org.jspecify.annotations.Nullable;

/**
 * The refusals of one call's buckets, decided together, whether found at the claim or later (a Redis
 * answer, a capped wait for releases past its max-wait): the refusing bucket whose wait was longest is
 * named and alone counts the refusal, and every refusing bucket is listed ({@link SeveralBucketsExceeded}).
 * Made only when a bucket refuses.
 */
final class Refusals {

	private final Set<String> buckets = new LinkedHashSet<>();

	private RateLimitExceededException worst;

	private Limit named;

	Refusals(Limit limit, RateLimitExceededException refusal) {
		this.worst = refusal;
		this.named = limit;
		this.buckets.add(limit.bucket);
	}

	/**
	 * Adds a refusal: {@code refusals} itself, or a new one when it is {@code null}.
	 *
	 * @return the refusals
	 */
	static Refusals add(@Nullable Refusals refusals, Limit limit, RateLimitExceededException refusal) {
		if (refusals == null) {
			return new Refusals(limit, refusal);
		}
		refusals.buckets.add(limit.bucket);
		if (refusal.getRetryAfter().compareTo(refusals.worst.getRetryAfter()) > 0) {
			refusals.worst = refusal;
			refusals.named = limit;
		}
		return refusals;
	}

	/**
	 * The refusals of a call's claims, listed in claim order.
	 *
	 * @param limits the call's buckets
	 * @param refused each claim's refusal, {@code null} where it did not refuse
	 * @return the refusals, or {@code null} when none refused
	 */
	static @Nullable Refusals inClaimOrder(Limit[] limits, @Nullable RateLimitExceededException[] refused) {
		Refusals refusals = null;
		for (int i = 0; i < limits.length; i++) {
			if (refused[i] != null) {
				refusals = add(refusals, limits[i], refused[i]);
			}
		}
		return refusals;
	}

	/**
	 * Counts the refusal on the bucket it names (with refusals deferred, no other counted it).
	 *
	 * @return what the call throws
	 */
	RateLimitExceededException decide() {
		this.named.stats.refused();
		return (this.buckets.size() > 1) ? new SeveralBucketsExceeded(this.worst, List.copyOf(this.buckets))
				: this.worst;
	}
}
