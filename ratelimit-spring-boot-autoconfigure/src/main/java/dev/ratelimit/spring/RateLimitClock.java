package dev.ratelimit.spring;

/**
 * The nanosecond clock the configured buckets read; define a bean of this type to drive them from
 * another clock (tests do, to measure rates exactly). By default {@link System#nanoTime()}.
 */
@FunctionalInterface
public interface RateLimitClock {

	/**
	 * The current reading, in nanoseconds from an arbitrary origin.
	 *
	 * @return the reading
	 */
	long nanoTime();
}
