package dev.ratelimit.spring;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.StatsRecorder;
import org.jspecify.annotations.Nullable;

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

	/**
	 * Creates the limiter of one key of a bucket used with a key (contract revision 2, "Per-key
	 * buckets"): the bucket's settings, its own state.
	 *
	 * @param definition the checked bucket definition (the template)
	 * @param stats where the limiter counts its calls (the template's)
	 * @param key the key's value as a string, or {@code null} for the overflow bucket shared by keys
	 *        without room
	 * @return the limiter
	 * @throws UnsupportedOperationException when the backend has no per-key buckets
	 */
	default RateLimiter create(BucketDefinition definition, StatsRecorder stats, @Nullable String key) {
		throw new UnsupportedOperationException("The " + backend().value() + " backend has no per-key buckets");
	}
}
