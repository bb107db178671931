package dev.ratelimit.spring;

/**
 * Implemented by limiters whose state lives outside this JVM (the Redis bucket), so that the meters
 * can show whether their backend answers: {@code ratelimit.backend.up} is 1 while it does, 0 while the
 * bucket applies its failure policy.
 */
public interface BackendHealth {

	/**
	 * Whether the last call reached the backend.
	 *
	 * @return {@code true} while the backend answers
	 */
	boolean isUp();

	/**
	 * A short description: {@code up}, or {@code down} with the last error.
	 *
	 * @return the health
	 */
	String health();
}
