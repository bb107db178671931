package dev.ratelimit.spring;

import dev.ratelimit.core.StatsRecorder;

/**
 * Makes the {@link StatsRecorder} each configured bucket counts its calls with. The default counts in
 * striped counters; with Micrometer present, the metrics auto-configuration supplies one that also
 * times the waits. Define a bean of this type to replace both.
 */
@FunctionalInterface
public interface BucketStatsFactory {

	/**
	 * Creates the recorder for one bucket.
	 *
	 * @param bucket the bucket name
	 * @return a new, thread-safe recorder
	 */
	StatsRecorder create(String bucket);
}
