package dev.ratelimit.core;

import java.time.Duration;
import java.util.Objects;

import org.jspecify.annotations.Nullable;

/**
 * Thrown when a {@link RateLimiter} refuses a call: the tokens asked for could not be had within the
 * caller's max-wait. The caller kept no token.
 *
 * <p>In a Spring MVC or WebFlux application it becomes HTTP 429 with a {@code Retry-After} header.
 */
public class RateLimitExceededException extends RuntimeException {

	private static final long serialVersionUID = 1L;

	private final @Nullable String bucket;

	private final long cost;

	private final Duration retryAfter;

	private final @Nullable String key;

	/**
	 * Creates the exception with a message that names the bucket, the cost and the wait.
	 *
	 * @param bucket the limiter's name, or {@code null} for an unnamed limiter
	 * @param cost the tokens asked for
	 * @param retryAfter the wait that would have been needed, {@code >= 0}
	 */
	public RateLimitExceededException(@Nullable String bucket, long cost, Duration retryAfter) {
		this(bucket, cost, retryAfter, defaultMessage(bucket, cost, retryAfter));
	}

	/**
	 * Creates the exception with a message of the caller's.
	 *
	 * @param bucket the limiter's name, or {@code null} for an unnamed limiter
	 * @param cost the tokens asked for
	 * @param retryAfter the wait that would have been needed, {@code >= 0}
	 * @param message the detail message
	 */
	public RateLimitExceededException(@Nullable String bucket, long cost, Duration retryAfter, String message) {
		this(bucket, null, cost, retryAfter, message);
	}

	/**
	 * Creates the exception for one key of a per-key bucket, with a message that names the bucket, the
	 * cost and the wait (not the key, which may be personal data: it is carried by {@link #getKey()}).
	 *
	 * @param bucket the bucket's name
	 * @param key the key whose bucket refused the call, or {@code null} for a bucket without keys
	 * @param cost the tokens asked for
	 * @param retryAfter the wait that would have been needed, {@code >= 0}
	 */
	public RateLimitExceededException(String bucket, @Nullable String key, long cost, Duration retryAfter) {
		this(bucket, key, cost, retryAfter, defaultMessage(bucket, cost, retryAfter));
	}

	/**
	 * Creates the exception for one key of a per-key bucket, with a message of the caller's.
	 *
	 * @param bucket the bucket's name, or {@code null} for an unnamed limiter
	 * @param key the key whose bucket refused the call, or {@code null} for a bucket without keys
	 * @param cost the tokens asked for
	 * @param retryAfter the wait that would have been needed, {@code >= 0}
	 * @param message the detail message
	 */
	public RateLimitExceededException(@Nullable String bucket, @Nullable String key, long cost, Duration retryAfter,
			String message) {
		super(message, null, false, false);
		this.bucket = bucket;
		this.key = key;
		this.cost = cost;
		this.retryAfter = Objects.requireNonNull(retryAfter, "retryAfter");
	}

	private static String defaultMessage(@Nullable String bucket, long cost, Duration retryAfter) {
		return exceeded(bucket, cost) + " would need a wait of " + retryAfter;
	}

	/** The start of every refusal's message: the bucket and the tokens, e.g. "... on bucket 'x': 1 token". */
	static String exceeded(@Nullable String bucket, long cost) {
		String who = (bucket != null) ? "bucket '" + bucket + "'" : "rate limiter";
		return "Rate limit exceeded on " + who + ": " + cost + (cost == 1 ? " token" : " tokens");
	}

	/**
	 * The name of the bucket that refused the call.
	 *
	 * @return the name, or {@code null} for an unnamed core limiter
	 */
	public @Nullable String getBucket() {
		return this.bucket;
	}

	/**
	 * The key of the per-key bucket that refused the call, as a string.
	 *
	 * @return the key, or {@code null} for a bucket without keys
	 */
	public @Nullable String getKey() {
		return this.key;
	}

	/**
	 * The tokens (for the pacer: operations) that were asked for.
	 *
	 * @return the cost of the refused call
	 */
	public long getCost() {
		return this.cost;
	}

	/**
	 * The wait that would have been needed for the tokens.
	 *
	 * @return the wait, never {@code null}
	 */
	public Duration getRetryAfter() {
		return this.retryAfter;
	}
}
