package dev.ratelimit.spring;

import dev.ratelimit.core.Rate;
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
	 * Creates the limiter of one key on a plan of a bucket with plans (contract revision 3, "Plans"). The
	 * default makes it as any key's bucket, with the plan's settings ({@code definition}).
	 *
	 * @param definition the plan's settings in force on this instance
	 * @param stats where the limiter counts its calls (the template's)
	 * @param key the key's value as a string
	 * @param plan the plan's name, or {@code null} for a key on the template's settings
	 * @return the limiter
	 * @throws UnsupportedOperationException when the backend has no per-key buckets
	 */
	default RateLimiter create(BucketDefinition definition, StatsRecorder stats, String key, @Nullable String plan) {
		return create(definition, stats, key);
	}

	/**
	 * Brings a key's bucket made by this backend to the settings of its plan (contract revision 3, "Plans"):
	 * the key's plan changed, or its plan (or the template) was retuned. {@code false} (the default) leaves it to
	 * the starter, which calls the bucket's {@code updateRate} and {@code updateLimit} with the plan's settings.
	 *
	 * @param keyBucket a limiter made by this backend for a key (or the overflow bucket)
	 * @param definition the plan's settings in force on this instance (the template's for no plan)
	 * @param plan the plan's name, or {@code null} for the template
	 * @return whether the backend brought it to them
	 */
	default boolean follow(RateLimiter keyBucket, BucketDefinition definition, @Nullable String plan) {
		return false;
	}

	/**
	 * Retunes one plan of a bucket with plans (contract revision 3, "Plans") where the backend keeps the
	 * settings in force of its plans, for every instance. {@code false} (the default): the backend keeps none,
	 * and the starter's retune of the plan on this instance is all there is.
	 *
	 * @param configured the plan's settings as configured
	 * @param plan the plan's name
	 * @param rate the new rate, or {@code null} to keep it
	 * @param limit the new limit, or {@code null} to keep it
	 * @return whether the backend retuned the plan
	 * @throws IllegalArgumentException naming what the settings cannot be
	 * @throws IllegalStateException when the backend cannot be reached (nothing changed)
	 */
	default boolean retunePlan(BucketDefinition configured, String plan, @Nullable Rate rate, @Nullable Long limit) {
		return false;
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
