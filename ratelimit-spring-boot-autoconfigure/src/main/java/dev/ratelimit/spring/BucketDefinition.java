package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Duration;

import dev.ratelimit.core.Rate;
import org.jspecify.annotations.Nullable;
import org.springframework.util.unit.DataSize;

/**
 * A bucket as configured under {@code ratelimit.buckets.<name>}, checked and resolved: defaults
 * applied, a fractional rate turned into the core's exact {@link Rate}. A definition is either
 * {@link Shared} or {@link Hybrid}, so a property of the other type has nowhere to go.
 */
public sealed interface BucketDefinition permits BucketDefinition.Shared, BucketDefinition.Hybrid {

	/** What a rate may be, as the messages say it. */
	String RATE_ACCEPTED = "a number > 0 (fractions allowed, e.g. 0.5)";

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
	 * The most keys with a bucket of their own, when the bucket is used with a key (revision 2; with it,
	 * keys beyond share an overflow bucket).
	 *
	 * @return {@code keys.max}, {@code >= 1}, or {@code 0} when not set (the memory alone bounds the keys)
	 */
	int keysMax();

	/**
	 * The most bytes the keys' buckets take, when the bucket is used with a key (revision 3).
	 *
	 * @return {@code keys.memory} in bytes, from 1 MB to {@link KeyedBuckets#MAX_MEMORY}
	 */
	long keysMemory();

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
					"a duration >= 0, e.g. 0, 100ms or 2s");
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
					bucket.getMaxBacklog(), keysMax(name, bucket), keysMemory(name, bucket));
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
				redis, keysMax(name, bucket), keysMemory(name, bucket));
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
	 * @param keysMax the most keys with a bucket of their own, 0 for no bound but the memory
	 * @param keysMemory the most bytes the keys' buckets take
	 */
	record Shared(String name, Backend backend, BigDecimal rate, Duration period, Rate exactRate, long limit,
			long initial, boolean cappedRelease, Duration maxWait, RateLimitProperties.Redis redis, int keysMax,
			long keysMemory)
			implements BucketDefinition {

		@Override
		public Shared withRateAndLimit(@Nullable BigDecimal newRate, @Nullable Long newLimit) {
			BigDecimal r = (newRate != null) ? newRate : this.rate;
			long l = (newLimit != null) ? newLimit : this.limit;
			// a full bucket's initial follows its limit: a key's bucket made after the retune starts full (K4)
			long i = (this.initial == this.limit) ? l : Math.max(Math.min(this.initial, l), 0);
			return new Shared(this.name, this.backend, r, this.period, resolveRate(this.name, r, this.period), l, i,
					this.cappedRelease, this.maxWait, this.redis, this.keysMax, this.keysMemory);
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
	 * @param keysMax the most keys with a bucket of their own, 0 for no bound but the memory
	 * @param keysMemory the most bytes the keys' buckets take
	 */
	record Hybrid(String name, BigDecimal rate, Duration period, Rate exactRate, @Nullable Long limit,
			Duration maxWait, @Nullable Double burstRatio, @Nullable Duration maxBacklog, int keysMax, long keysMemory)
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
					this.burstRatio, this.maxBacklog, this.keysMax, this.keysMemory);
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
		Integer max = bucket.getKeys().getMax();
		if (max == null) {
			return 0;
		}
		if (max < 1) {
			throw RateLimitConfigurationException.invalidProperty(name, "keys.max", max, "a whole number >= 1");
		}
		return max;
	}

	private static long keysMemory(String name, RateLimitProperties.Bucket bucket) {
		DataSize memory = bucket.getKeys().getMemory();
		if (memory == null || memory.toBytes() < (1L << 20) || memory.toBytes() > KeyedBuckets.MAX_MEMORY) {
			throw RateLimitConfigurationException.invalidProperty(name, "keys.memory", memory,
					"a size from 1MB to 64MB, e.g. 16MB (default 64MB)");
		}
		return memory.toBytes();
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
	private static Rate resolveRate(String name, @Nullable BigDecimal rate, Duration period) {
		if (rate == null || rate.signum() <= 0) {
			throw RateLimitConfigurationException.invalidProperty(name, "rate", rate, RATE_ACCEPTED);
		}
		try {
			return Rate.of(rate, period);
		}
		catch (IllegalArgumentException ex) {
			if (String.valueOf(ex.getMessage()).startsWith("period")) {
				throw RateLimitConfigurationException.invalidProperty(name, "period", period,
						"a positive duration, e.g. 1s or 500ms");
			}
			throw RateLimitConfigurationException.invalidProperty(name, "rate", rate,
					RATE_ACCEPTED + " with fewer digits: " + ex.getMessage());
		}
	}

}
