package dev.ratelimit.spring;

/**
 * {@code ratelimit.buckets.<name>.redis.on-failure}: what a call does when the bucket's backend does
 * not answer within its timeout.
 */
public enum OnFailure {

	/** Let the call through. */
	ALLOW,

	/** Refuse it with {@code RateLimitExceededException}. */
	DENY,

	/** Limit it with an in-memory bucket of the same rate and limit. */
	LOCAL
}
