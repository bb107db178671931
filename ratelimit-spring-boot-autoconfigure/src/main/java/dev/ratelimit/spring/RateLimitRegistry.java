package dev.ratelimit.spring;

/**
 * Puts the application's buckets back to full (contract revision 3), as {@code DELETE
 * /actuator/ratelimits/{name}} does: tests that share an application context use it between cases.
 *
 * <pre>{@code
 * @Autowired
 * RateLimitRegistry rateLimits;
 *
 * @AfterEach
 * void fullBucketsForTheNextTest() {
 *     this.rateLimits.resetAll();
 * }
 * }</pre>
 *
 * <p>A reset makes the bucket full again: its keys' buckets are dropped (a key's bucket still in use, with
 * callers waiting or, capped, tokens in flight, is made full and kept until it is idle), what callers owed is
 * forgotten, and callers waiting are woken to claim again from the full bucket, in the order in which they
 * asked. The counts of granted and rejected calls are kept. On Redis the bucket is reset for every instance.
 * See {@link dev.ratelimit.core.RateLimiter#reset()} for what a reset does to one limiter.
 *
 * <p>The starter's registry bean ({@link RateLimiterRegistry}) is one.
 */
public interface RateLimitRegistry {

	/**
	 * Resets one bucket.
	 *
	 * @param name the bucket's name, the key under {@code ratelimit.buckets}
	 * @throws IllegalArgumentException naming the unknown bucket and listing the configured ones
	 * @throws dev.ratelimit.core.BackendUnavailableException when the bucket's backend (Redis) does not answer:
	 *         the bucket may then not be reset
	 */
	void reset(String name);

	/**
	 * Resets every bucket, in configuration order.
	 *
	 * @throws dev.ratelimit.core.BackendUnavailableException as {@link #reset(String)}
	 */
	void resetAll();
}
