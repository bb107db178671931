package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.time.Duration;

import dev.ratelimit.core.InvalidArgumentException;
import dev.ratelimit.core.Rate;
import dev.ratelimit.core.SharedTokenBucket;
import org.jspecify.annotations.Nullable;

/**
 * A bucket as configured under {@code ratelimit.buckets.<name>}, checked and resolved: defaults
 * applied, a fractional rate turned into the core's exact {@link Rate}. A definition is either
 * {@link Shared} or {@link Hybrid}, so a property of the other type has nowhere to go.
 */
public sealed interface BucketDefinition permits BucketDefinition.Shared, BucketDefinition.Hybrid {

	/** What a rate may be, as the messages say it. */
	String RATE_ACCEPTED = CoreArguments.accepted("rate");

	/**
	 * The bucket name.
	 *
	 * @return the name
	 */
	String name();

	/**
	 * The limiter.
	 *
	 * @return the type
	 */
	default BucketType type() {
		return (this instanceof Hybrid) ? BucketType.HYBRID : BucketType.SHARED;
	}

	/**
	 * Where the state lives.
	 *
	 * @return the backend
	 */
	Backend backend();

	/**
	 * The rate as configured, per {@link #period()}.
	 *
	 * @return the rate
	 */
	BigDecimal rate();

	/**
	 * The period as configured.
	 *
	 * @return the period
	 */
	Duration period();

	/**
	 * {@link #rate()} per {@link #period()} as the core's exact rate (2.5 per second is 5 per two
	 * seconds).
	 *
	 * @return the exact rate
	 */
	Rate exactRate();

	/**
	 * The longest a caller waits.
	 *
	 * @return the max-wait, {@link Duration#ZERO} for never
	 */
	Duration maxWait();

	/**
	 * A copy with a new rate and/or limit, checked as the configuration is checked.
	 *
	 * @param newRate the new rate per {@link #period()}, or {@code null} to keep it
	 * @param newLimit the new limit, or {@code null} to keep it
	 * @return the changed definition
	 * @throws RateLimitConfigurationException naming the bucket, the property and the accepted values
	 */
	BucketDefinition withRateAndLimit(@Nullable BigDecimal newRate, @Nullable Long newLimit);

	/**
	 * The most keys with a bucket of their own, when the bucket is used with a key.
	 *
	 * @return {@code keys.max}, {@code >= 1}
	 */
	int keysMax();

	/**
	 * Checks and resolves one configured bucket.
	 *
	 * @param name the bucket name
	 * @param bucket the bound properties
	 * @return the definition
	 * @throws RateLimitConfigurationException naming the bucket, the property and the accepted values
	 */
	static BucketDefinition of(String name, RateLimitProperties.Bucket bucket) {
		BucketType type = bucket.getType();
		if (type == null) {
			throw RateLimitConfigurationException.invalidProperty(name, "type", null, "shared or hybrid");
		}
		Backend backend = bucket.getBackend();
		if (backend == null) {
			throw RateLimitConfigurationException.invalidProperty(name, "backend", null, "local or redis");
		}
		if (bucket.getRate() == null) {
			throw RateLimitConfigurationException.missingProperty(name, "rate", RATE_ACCEPTED);
		}
		Duration period = bucket.getPeriod();
		Rate exact = resolveRate(name, bucket.getRate(), period);
		Duration maxWait = bucket.getMaxWait();
		if (maxWait == null || maxWait.isNegative()) {
			throw RateLimitConfigurationException.invalidProperty(name, "max-wait", maxWait,
					CoreArguments.accepted("max-wait"));
		}
		RateLimitProperties.Redis redis = bucket.getRedis();
		checkRedis(name, redis);
		Long limit = bucket.getLimit();
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
			return new Hybrid(name, bucket.getRate(), period, exact, limit, maxWait, bucket.getBurstRatio(),
					bucket.getMaxBacklog(), keysMax(name, bucket));
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
		boolean capped = Boolean.TRUE.equals(bucket.getCappedRelease());
		return new Shared(name, backend, bucket.getRate(), period, exact, resolvedLimit, initial, capped, maxWait,
				redis, keysMax(name, bucket));
	}

	/**
	 * A rover bucket ({@code type: shared}).
	 *
	 * @param name the bucket name
	 * @param backend where the state lives
	 * @param rate the rate as configured
	 * @param period the period as configured
	 * @param exactRate the exact rate
	 * @param limit the most tokens banked
	 * @param initial tokens at start
	 * @param cappedRelease whether tokens return only on release
	 * @param maxWait the longest a caller waits
	 * @param redis the Redis settings (used only by the redis backend)
	 * @param keysMax the most keys with a bucket of their own
	 */
	record Shared(String name, Backend backend, BigDecimal rate, Duration period, Rate exactRate, long limit,
			long initial, boolean cappedRelease, Duration maxWait, RateLimitProperties.Redis redis, int keysMax)
			implements BucketDefinition {

		@Override
		public Shared withRateAndLimit(@Nullable BigDecimal newRate, @Nullable Long newLimit) {
			BigDecimal r = (newRate != null) ? newRate : this.rate;
			long l = (newLimit != null) ? newLimit : this.limit;
			return new Shared(this.name, this.backend, r, this.period, resolveRate(this.name, r, this.period), l,
					Math.max(Math.min(this.initial, l), 0), this.cappedRelease, this.maxWait, this.redis, this.keysMax);
		}
	}

	/**
	 * A pacer ({@code type: hybrid}), always local.
	 *
	 * @param name the bucket name
	 * @param rate the rate as configured
	 * @param period the period as configured
	 * @param exactRate the exact rate
	 * @param limit the active pool in operations, or {@code null} for the pacer's default
	 * @param maxWait the longest a caller waits
	 * @param burstRatio the catch-up ratio, or {@code null} for the pacer's default
	 * @param maxBacklog the most schedule time caught up, or {@code null} for no bound
	 * @param keysMax the most keys with a bucket of their own
	 */
	record Hybrid(String name, BigDecimal rate, Duration period, Rate exactRate, @Nullable Long limit,
			Duration maxWait, @Nullable Double burstRatio, @Nullable Duration maxBacklog, int keysMax)
			implements BucketDefinition {

		@Override
		public Backend backend() {
			return Backend.LOCAL;
		}

		@Override
		public Hybrid withRateAndLimit(@Nullable BigDecimal newRate, @Nullable Long newLimit) {
			BigDecimal r = (newRate != null) ? newRate : this.rate;
			Long l = (newLimit != null) ? newLimit : this.limit;
			return new Hybrid(this.name, r, this.period, resolveRate(this.name, r, this.period), l, this.maxWait,
					this.burstRatio, this.maxBacklog, this.keysMax);
		}
	}

	private static void checkRedis(String name, RateLimitProperties.Redis redis) {
		if (redis.getOnFailure() == null) {
			throw RateLimitConfigurationException.invalidProperty(name, "redis.on-failure", null, "allow, deny or local");
		}
		if (redis.getKeyPrefix() == null) {
			throw RateLimitConfigurationException.invalidProperty(name, "redis.key-prefix", null,
					"a string (may be empty)");
		}
	}

	private static int keysMax(String name, RateLimitProperties.Bucket bucket) {
		int max = bucket.getKeys().getMax();
		if (max < 1) {
			throw RateLimitConfigurationException.invalidProperty(name, "keys.max", max, CoreArguments.accepted("keys.max"));
		}
		return max;
	}

	/**
	 * The core's one rule ({@link SharedTokenBucket#defaultLimit(BigDecimal)}) applied to the rate as
	 * configured, per the configured period (2.5 per 1s: 2), and passed to the builder as the limit.
	 */
	private static long defaultLimit(BigDecimal rate) {
		return SharedTokenBucket.defaultLimit(rate);
	}

	/**
	 * {@code rate} per {@code period} as the core's exact rate, or the configuration's message naming
	 * the bucket and the property.
	 */
	private static Rate resolveRate(String name, @Nullable BigDecimal rate, Duration period) {
		if (rate == null || rate.signum() <= 0) {
			throw RateLimitConfigurationException.invalidProperty(name, "rate", rate, RATE_ACCEPTED);
		}
		try {
			return Rate.of(rate, period);
		}
		catch (IllegalArgumentException ex) {
			if (ex instanceof InvalidArgumentException invalid && invalid.argument().equals("period")) {
				throw RateLimitConfigurationException.invalidProperty(name, "period", period,
						CoreArguments.accepted("period"));
			}
			throw RateLimitConfigurationException.invalidProperty(name, "rate", rate,
					RATE_ACCEPTED + " with fewer digits: " + ex.getMessage());
		}
	}

}
