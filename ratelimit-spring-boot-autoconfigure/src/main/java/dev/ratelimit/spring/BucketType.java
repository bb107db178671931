package dev.ratelimit.spring;

import java.util.Locale;

/**
 * {@code ratelimit.buckets.<name>.type}: which limiter a bucket is.
 */
public enum BucketType {

	/** The rover token bucket ({@code SharedTokenBucket}): bursts up to its limit. */
	SHARED,

	/** The three-pool pacer ({@code HybridRateLimiter}): holds a schedule. */
	HYBRID,

	/** The calendar quota ({@code CalendarQuota}): a fixed allowance per calendar period. */
	QUOTA;

	/**
	 * The value as written in the configuration and shown by the endpoint.
	 *
	 * @return {@code shared}, {@code hybrid} or {@code quota}
	 */
	public String value() {
		return name().toLowerCase(Locale.ROOT);
	}
}
