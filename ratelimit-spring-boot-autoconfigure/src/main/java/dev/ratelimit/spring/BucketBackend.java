package dev.ratelimit.spring;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.StatsRecorder;

/**
 * Makes the limiters of buckets whose state does not live in this JVM: a bean of this type serves
 * every bucket whose {@code backend} is its {@link #backend()}. The {@code ratelimit-redis} module
 * contributes the {@code redis} backend.
 */
public interface BucketBackend {

	/**
	 * The value of {@code ratelimit.buckets.<name>.backend} this backend serves.
	 *
	 * @return the backend
	 */
	Backend backend();

	/**
	 * Creates the limiter of one bucket.
	 *
	 * @param definition the checked bucket definition
	 * @param stats where the limiter counts its calls
	 * @return the limiter
	 */
	RateLimiter create(BucketDefinition definition, StatsRecorder stats);
}
