package dev.ratelimit.core;

/**
 * What the builders of token buckets share, on any backend: capped release, and the limit's default
 * (one period's tokens) and its check.
 *
 * @param <B> the concrete builder, returned by every setter
 */
public abstract class TokenBucketBuilder<B extends TokenBucketBuilder<B>> extends RateLimiterBuilder<B> {

	private boolean cappedRelease;

	/**
	 * For the builders of this package and of backend modules.
	 */
	protected TokenBucketBuilder() {
	}

	/**
	 * Whether tokens return only when released (the head may not pass the ceiling): the bucket then
	 * also bounds the calls in flight to its limit.
	 *
	 * @param cappedRelease {@code true} for capped release
	 * @return this builder
	 */
	@SuppressWarnings("unchecked")
	public B cappedRelease(boolean cappedRelease) {
		this.cappedRelease = cappedRelease;
		return (B) this;
	}

	/**
	 * Whether capped release was asked for.
	 *
	 * @return {@code true} for capped release
	 */
	protected final boolean isCappedRelease() {
		return this.cappedRelease;
	}

	/**
	 * The limit given, or one period's tokens by default ({@link SharedTokenBucket#defaultLimit}),
	 * checked.
	 *
	 * @param rate the bucket's rate
	 * @return the limit, {@code 1..2^50}
	 * @throws IllegalArgumentException naming {@code limit} when it is below 1 or above 2^50, given or by
	 *         default (a bucket whose full contents could not be taken at once is a trap)
	 */
	protected final long checkedLimit(Rate rate) {
		Long given = limiterLimit();
		long limit = (given != null) ? given : SharedTokenBucket.defaultLimit(rate);
		if (limit < 1) {
			throw new InvalidArgumentException("limit", limit, 1L, SharedTokenBucket.MAX_COST, "limit must be >= 1, was " + limit);
		}
		if (limit > SharedTokenBucket.MAX_COST) {
			throw new InvalidArgumentException("limit", limit, 1L, SharedTokenBucket.MAX_COST, "limit must be at most 2^50 (" + SharedTokenBucket.MAX_COST + "), was "
					+ limit + ((given != null) ? "" : " (by default one period's rate: give a limit)"));
		}
		return limit;
	}
}
