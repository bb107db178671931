package dev.ratelimit.spring.engine;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import org.jspecify.annotations.Nullable;

/**
 * A refusal by one key's bucket of a per-key bucket: like any refusal it carries the bucket's name, the
 * key, the cost and the wait; it also holds the limiter that refused, the key's own bucket or the
 * overflow bucket shared by keys without room, so that the 429's {@code RateLimit} fields describe the
 * bucket that decided (the template, from which keyed calls never take, is always full; and looking
 * the key up again could make a new, full bucket for it).
 */
public final class KeyedBucketExceeded extends RateLimitExceededException {

	private static final long serialVersionUID = 1L;

	/** Not serialized: a limiter belongs to this JVM. */
	private final transient @Nullable RateLimiter refusedBy;

	KeyedBucketExceeded(RateLimitExceededException refusal, String key, RateLimiter refusedBy) {
		super(refusal.getBucket(), key, refusal.getCost(), refusal.getRetryAfter(), refusal.getMessage());
		this.refusedBy = refusedBy;
	}

	/**
	 * The limiter that refused a call, when the refusal is one of a key's bucket (possibly named by a
	 * {@link SeveralBucketsExceeded}).
	 *
	 * @param refusal a refusal
	 * @return the key's own bucket or the overflow bucket, or {@code null} when the refusal is not a key's
	 *         (the named bucket's own limiter refused it) or has crossed a JVM boundary
	 */
	public static @Nullable RateLimiter refusedBy(RateLimitExceededException refusal) {
		if (refusal instanceof KeyedBucketExceeded keyed) {
			return keyed.refusedBy;
		}
		if (refusal instanceof SeveralBucketsExceeded several) {
			return several.refusedBy();
		}
		return null;
	}
}
