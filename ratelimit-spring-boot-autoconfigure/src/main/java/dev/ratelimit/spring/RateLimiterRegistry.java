package dev.ratelimit.spring;

import java.util.Optional;
import java.util.Set;

/**
 * The application's buckets by name: those configured under {@code ratelimit.buckets}, each also a
 * bean named after its bucket. The {@code @RateLimited} interceptor, the meters and the
 * {@code ratelimits} endpoint all find buckets here. It is the {@link RateLimitRegistry} of the
 * contract too: {@link #reset(String)} and {@link #resetAll()} reset the buckets it finds.
 */
public interface RateLimiterRegistry extends RateLimitRegistry {

	/**
	 * The bucket names, in the order they were configured.
	 *
	 * @return the names, unmodifiable
	 */
	Set<String> names();

	/**
	 * The bucket with this name.
	 *
	 * @param name the bucket name
	 * @return the bucket, or empty when none has this name
	 */
	Optional<RegisteredBucket> find(String name);

	/**
	 * The bucket with this name, or an error that lists the buckets that exist.
	 *
	 * @param name the bucket name
	 * @return the bucket
	 * @throws IllegalArgumentException naming the unknown bucket and listing the configured ones
	 */
	RegisteredBucket get(String name);

	/**
	 * {@inheritDoc}
	 *
	 * <p>Finds the bucket with {@link #get(String)} and resets it ({@link RegisteredBucket#reset()}).
	 */
	@Override
	default void reset(String name) {
		get(name).reset();
	}

	/**
	 * {@inheritDoc}
	 *
	 * <p>Resets each of {@link #names()} in turn; the first backend that does not answer stops it.
	 */
	@Override
	default void resetAll() {
		for (String name : names()) {
			reset(name);
		}
	}
}
