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

	/**
	 * What dropping the object of one key's bucket made by this backend would lose (contract revision 3,
	 * "per-key buckets under attack"): the nanoseconds until what it keeps in this JVM is full again (0:
	 * nothing to lose), or {@code -1} while it cannot be dropped (callers waiting, tokens in flight here).
	 * The per-key store records it before it forgets the object, and hands it to {@link #owe} when it makes
	 * the key's object again.
	 *
	 * @param keyBucket a limiter made by {@link #create(BucketDefinition, StatsRecorder, String)}
	 * @return nanoseconds, 0, or {@code -1}
	 * @throws UnsupportedOperationException when the backend has no per-key buckets
	 */
	default long untilFullHere(RateLimiter keyBucket) {
		throw new UnsupportedOperationException("The " + backend().value() + " backend has no per-key buckets");
	}

	/**
	 * Makes the object of one key's bucket, just made again, owe what its forgotten object owed in this JVM
	 * ({@link #untilFullHere}): {@code tokens} taken from its state here only.
	 *
	 * @param keyBucket a limiter made by {@link #create(BucketDefinition, StatsRecorder, String)}
	 * @param tokens the tokens, {@code >= 1}
	 * @throws UnsupportedOperationException when the backend has no per-key buckets
	 */
	default void owe(RateLimiter keyBucket, long tokens) {
		throw new UnsupportedOperationException("The " + backend().value() + " backend has no per-key buckets");
	}
}
