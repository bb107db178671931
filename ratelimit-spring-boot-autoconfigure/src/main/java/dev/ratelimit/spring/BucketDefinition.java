package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Duration;

import org.jspecify.annotations.Nullable;

import dev.ratelimit.core.Rate;

/**
 * A bucket as configured under {@code ratelimit.buckets.<name>}, checked and resolved: defaults
 * applied, a fractional rate turned into an exact whole number of tokens per period.
 *
 * @param name the bucket name
 * @param type the limiter
 * @param backend where the state lives
 * @param rate the rate as configured, per {@code period}
 * @param period the period as configured
 * @param exactRate {@code rate} per {@code period} as the core's exact {@link Rate} (2.5 per second is 5
 *        per two seconds)
 * @param limit shared: the most tokens banked; hybrid: the active pool in operations, or {@code null}
 *        for the pacer's default
 * @param initial shared: tokens at start; hybrid: {@code null}
 * @param cappedRelease shared: whether tokens return only on release
 * @param maxWait the longest a caller waits, {@link Duration#ZERO} for never
 * @param burstRatio hybrid: the catch-up ratio; shared: {@code 1.0}
 * @param maxBacklog hybrid: the most schedule time caught up, or {@code null} for no bound; shared:
 *        {@code null}
 * @param redis the Redis settings (used only by the redis backend)
 */
public record BucketDefinition(String name, BucketType type, Backend backend, BigDecimal rate, Duration period,
		Rate exactRate, @Nullable Long limit, @Nullable Long initial, boolean cappedRelease, Duration maxWait,
		double burstRatio, @Nullable Duration maxBacklog, RateLimitProperties.Redis redis) {

	private static final String RATE_ACCEPTED = "a number > 0 (fractions allowed, e.g. 0.5)";

	/**
	 * Checks and resolves one configured bucket.
	 *
	 * @param name the bucket name
	 * @param bucket the bound properties
	 * @return the definition
	 * @throws RateLimitConfigurationException naming the bucket, the property and the accepted values
	 */
	public static BucketDefinition of(String name, RateLimitProperties.Bucket bucket) {
		BucketType type = bucket.getType();
		if (type == null) {
			throw RateLimitConfigurationException.invalidProperty(name, "type", null, "shared or hybrid");
		}
		Backend backend = bucket.getBackend();
		if (backend == null) {
			throw RateLimitConfigurationException.invalidProperty(name, "backend", null, "local or redis");
		}
		if (bucket.getRate() == null) {
			throw RateLimitConfigurationException.invalidProperty(name, "rate", "missing", RATE_ACCEPTED);
		}
		Duration period = bucket.getPeriod();
		if (period == null || period.isZero() || period.isNegative()) {
			throw RateLimitConfigurationException.invalidProperty(name, "period", period,
					"a positive duration, e.g. 1s or 500ms");
		}
		Rate exact = exactRate(name, bucket.getRate(), period);
		Duration maxWait = bucket.getMaxWait();
		if (maxWait == null || maxWait.isNegative()) {
			throw RateLimitConfigurationException.invalidProperty(name, "max-wait", maxWait,
					"a duration >= 0, e.g. 0, 100ms or 2s");
		}
		RateLimitProperties.Redis redis = bucket.getRedis();
		checkRedis(name, redis);
		Long limit = bucket.getLimit();
		if (limit != null && limit < 1) {
			throw RateLimitConfigurationException.invalidProperty(name, "limit", limit, "a whole number >= 1");
		}
		if (type == BucketType.HYBRID) {
			if (bucket.getInitial() != null) {
				throw RateLimitConfigurationException.wrongType(name, "initial", type.value(), "shared");
			}
			if (bucket.getCappedRelease() != null) {
				throw RateLimitConfigurationException.wrongType(name, "capped-release", type.value(), "shared");
			}
			if (backend != Backend.LOCAL) {
				throw RateLimitConfigurationException.invalidProperty(name, "backend", backend.value(),
						"local: hybrid buckets run in this JVM only (shared buckets may use redis)");
			}
			double ratio = (bucket.getBurstRatio() != null) ? bucket.getBurstRatio() : 1.1;
			if (!(ratio >= 1.0) || Double.isInfinite(ratio)) {
				throw RateLimitConfigurationException.invalidProperty(name, "burst-ratio", bucket.getBurstRatio(),
						"a number >= 1.0 (1.0 never catches up)");
			}
			Duration maxBacklog = bucket.getMaxBacklog();
			if (maxBacklog != null && maxBacklog.isNegative()) {
				throw RateLimitConfigurationException.invalidProperty(name, "max-backlog", maxBacklog,
						"a duration >= 0, e.g. 10s (leave it out for no bound)");
			}
			return new BucketDefinition(name, type, backend, bucket.getRate(), period, exact, limit, null, false,
					maxWait, ratio, maxBacklog, redis);
		}
		if (bucket.getBurstRatio() != null) {
			throw RateLimitConfigurationException.wrongType(name, "burst-ratio", type.value(), "hybrid");
		}
		if (bucket.getMaxBacklog() != null) {
			throw RateLimitConfigurationException.wrongType(name, "max-backlog", type.value(), "hybrid");
		}
		if (backend != Backend.LOCAL && bucket.getInitial() != null) {
			throw RateLimitConfigurationException.invalidProperty(name, "initial", bucket.getInitial(),
					"nothing: a bucket on Redis is shared by every instance and starts full; remove it");
		}
		long resolvedLimit = (limit != null) ? limit : defaultLimit(bucket.getRate());
		long initial = (bucket.getInitial() != null) ? bucket.getInitial() : resolvedLimit;
		if (initial < 0 || initial > resolvedLimit) {
			throw RateLimitConfigurationException.invalidProperty(name, "initial", bucket.getInitial(),
					"a whole number from 0 to the limit (" + resolvedLimit + ")");
		}
		boolean capped = Boolean.TRUE.equals(bucket.getCappedRelease());
		return new BucketDefinition(name, type, backend, bucket.getRate(), period, exact, resolvedLimit, initial,
				capped, maxWait, 1.0, null, redis);
	}

	/**
	 * A copy with a new rate and/or limit, checked as the configuration is checked.
	 *
	 * @param newRate the new rate per {@link #period()}, or {@code null} to keep it
	 * @param newLimit the new limit, or {@code null} to keep it
	 * @return the changed definition
	 * @throws RateLimitConfigurationException naming the bucket, the property and the accepted values
	 */
	public BucketDefinition withRateAndLimit(@Nullable BigDecimal newRate, @Nullable Long newLimit) {
		BigDecimal r = (newRate != null) ? newRate : this.rate;
		Rate exact = exactRate(this.name, r, this.period);
		Long l = (newLimit != null) ? newLimit : this.limit;
		if (l != null && l < 1) {
			throw RateLimitConfigurationException.invalidProperty(this.name, "limit", l, "a whole number >= 1");
		}
		Long init = this.initial;
		if (init != null && l != null && init > l) {
			init = l;
		}
		return new BucketDefinition(this.name, this.type, this.backend, r, this.period, exact, l, init,
				this.cappedRelease, this.maxWait, this.burstRatio, this.maxBacklog, this.redis);
	}

	private static void checkRedis(String name, RateLimitProperties.Redis redis) {
		if (redis.getOnFailure() == null) {
			throw RateLimitConfigurationException.invalidProperty(name, "redis.on-failure", null, "allow, deny or local");
		}
		Duration timeout = redis.getTimeout();
		if (timeout == null || timeout.isZero() || timeout.isNegative()) {
			throw RateLimitConfigurationException.invalidProperty(name, "redis.timeout", timeout,
					"a positive duration, e.g. 100ms");
		}
		if (redis.getKeyPrefix() == null) {
			throw RateLimitConfigurationException.invalidProperty(name, "redis.key-prefix", null,
					"a string (may be empty)");
		}
	}

	/** One period's rate, rounded down, at least 1. */
	private static long defaultLimit(BigDecimal rate) {
		BigInteger whole = rate.toBigInteger();
		return (whole.compareTo(BigInteger.ONE) < 0) ? 1
				: (whole.bitLength() > 62) ? Long.MAX_VALUE / 4 : whole.longValue();
	}

	/**
	 * {@code rate} per {@code period} as the core's exact rate, or the configuration's message naming
	 * the bucket and the property.
	 */
	static Rate exactRate(String name, @Nullable BigDecimal rate, Duration period) {
		if (rate == null || rate.signum() <= 0) {
			throw RateLimitConfigurationException.invalidProperty(name, "rate", rate, RATE_ACCEPTED);
		}
		try {
			return Rate.of(rate, period);
		}
		catch (IllegalArgumentException ex) {
			throw RateLimitConfigurationException.invalidProperty(name, "rate", rate,
					RATE_ACCEPTED + " with fewer digits: " + ex.getMessage());
		}
	}

}
