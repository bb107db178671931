package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.time.Duration;
import java.time.ZoneId;
import java.time.ZoneOffset;

import dev.ratelimit.core.CalendarQuota;
import dev.ratelimit.core.QuotaCalendar;
import dev.ratelimit.core.InvalidArgumentException;
import dev.ratelimit.core.Rate;
import dev.ratelimit.core.SharedTokenBucket;
import org.jspecify.annotations.Nullable;
import org.springframework.util.unit.DataSize;

/**
 * A bucket as configured under {@code ratelimit.buckets.<name>}, checked and resolved: defaults
 * applied, a fractional rate turned into the core's exact {@link Rate}. A definition is
 * {@link Shared}, {@link Hybrid} or {@link Quota}, so a property of another type has nowhere to go.
 */
public sealed interface BucketDefinition permits BucketDefinition.Shared, BucketDefinition.Hybrid, BucketDefinition.Quota {

	/** What a rate may be, as the messages say it. */
	String RATE_ACCEPTED = CoreArguments.accepted("rate");

	/** The bucket types, as the messages say them. */
	String TYPES_ACCEPTED = "shared, hybrid or quota";

	/** What a quota's calendar may be, as the messages say it. */
	String CALENDAR_ACCEPTED = "minute, hour, day, week, month or year";

	/** What a quota takes, as the messages say it. */
	String QUOTA_PROPERTIES = "limit, calendar, zone, max-wait, mode, keys.max and backend";

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
		return (this instanceof Hybrid) ? BucketType.HYBRID : (this instanceof Quota) ? BucketType.QUOTA
				: BucketType.SHARED;
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
	 * The most bytes the store of the keys' buckets takes, when the bucket is used with a key (revision 3).
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
		return of(name, bucket, "");
	}

	/**
	 * Checks and resolves one configured bucket, or one plan of it merged with it.
	 *
	 * @param at where its properties are, relative to the bucket ({@code ""}, or {@code plans.<plan>.})
	 */
	private static BucketDefinition of(String name, RateLimitProperties.Bucket bucket, String at) {
		BucketType type = bucket.getType();
		if (type == null) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "type", null, TYPES_ACCEPTED);
		}
		Backend backend = bucket.getBackend();
		if (backend == null) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "backend", null, "local or redis");
		}
		if (type == BucketType.QUOTA) {
			return quota(name, bucket, backend, at);
		}
		if (bucket.getCalendar() != null) {
			throw RateLimitConfigurationException.wrongType(name, at + "calendar", type.value(), "quota");
		}
		if (bucket.getZone() != null) {
			throw RateLimitConfigurationException.wrongType(name, at + "zone", type.value(), "quota");
		}
		if (bucket.getRate() == null) {
			throw RateLimitConfigurationException.missingProperty(name, at + "rate", RATE_ACCEPTED);
		}
		Duration period = bucket.getPeriod();
		Rate exact = resolveRate(name, bucket.getRate(), period, at);
		Duration maxWait = bucket.getMaxWait();
		if (maxWait == null || maxWait.isNegative()) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "max-wait", maxWait,
					CoreArguments.accepted("max-wait"));
		}
		RateLimitProperties.Redis redis = bucket.getRedis();
		checkRedis(name, redis, at);
		if (type == BucketType.HYBRID) {
			return hybrid(name, bucket, backend, exact, maxWait, at);
		}
		if (bucket.getBurstRatio() != null) {
			throw RateLimitConfigurationException.wrongType(name, at + "burst-ratio", type.value(), "hybrid");
		}
		if (bucket.getMaxBacklog() != null) {
			throw RateLimitConfigurationException.wrongType(name, at + "max-backlog", type.value(), "hybrid");
		}
		Long limit = bucket.getLimit();
		if (backend != Backend.LOCAL && bucket.getInitial() != null) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "initial", bucket.getInitial(),
					"nothing: a bucket on Redis is shared by every instance and starts full; remove it");
		}
		long resolvedLimit = (limit != null) ? limit : defaultLimit(bucket.getRate());
		long initial = (bucket.getInitial() != null) ? bucket.getInitial() : resolvedLimit;
		boolean capped = Boolean.TRUE.equals(bucket.getCappedRelease());
		checkBatch(name, redis, backend, resolvedLimit, capped, at);
		return new Shared(name, backend, bucket.getRate(), period, exact, resolvedLimit, initial, capped, maxWait,
				redis, keysMax(name, bucket, at), keysMemory(name, bucket, at));
	}

	/**
	 * Checks and resolves one plan of a bucket (contract revision 3, "Plans"): the bucket's properties,
	 * with the plan's where it sets them, and without {@code initial} (a key's bucket starts full). A
	 * plan's {@code limit} left unset is the bucket's when the bucket sets one, else one period of the
	 * plan's rate. Errors name the plan's property ({@code ratelimit.buckets.api.plans.pro.rate}).
	 *
	 * <p>A plan takes every bucket property but {@code type}, {@code backend}, {@code keys}, {@code plans}
	 * and {@code initial}. When a key's plan changes, its bucket takes the new plan's rate, period, limit,
	 * max-wait and burst ratio at once, keeping its tokens; the properties that make the kind of bucket a
	 * key has ({@code capped-release}, {@code max-backlog}, {@code calendar}, {@code zone},
	 * {@code redis.*}) are those of the plan the key's bucket was made on, until it is made again (a key
	 * new to the bucket, or whose bucket was dropped as full and idle): a bucket cannot turn capped release
	 * on with tokens in flight, nor a quota move its count to another calendar. A plan's {@code mode:
	 * shadow} puts the calls of the keys on it in shadow mode at once (the plan's mode is not stored with
	 * the bucket); {@code enforce} leaves the bucket's mode.
	 *
	 * @param name the bucket name
	 * @param bucket the bucket's bound properties (the template)
	 * @param plan the plan's name
	 * @param settings the plan's bound properties
	 * @return the plan's definition, named after the bucket
	 * @throws RateLimitConfigurationException naming the bucket, the plan's property and the accepted values
	 */
	static BucketDefinition plan(String name, RateLimitProperties.Bucket bucket, String plan,
			RateLimitProperties.Plan settings) {
		RateLimitProperties.Bucket merged = new RateLimitProperties.Bucket();
		merged.setType(bucket.getType());
		merged.setBackend(bucket.getBackend());
		merged.setMode(bucket.getMode());
		merged.setRate((settings.getRate() != null) ? settings.getRate() : bucket.getRate());
		if (settings.getPeriod() != null) {
			merged.setPeriod(settings.getPeriod());
		}
		else if (bucket.isPeriodSet()) {
			merged.setPeriod(bucket.getPeriod());
		}
		merged.setLimit((settings.getLimit() != null) ? settings.getLimit() : bucket.getLimit());
		merged.setCappedRelease(or(settings.getCappedRelease(), bucket.getCappedRelease()));
		merged.setMaxWait(or(settings.getMaxWait(), bucket.getMaxWait()));
		merged.setBurstRatio(or(settings.getBurstRatio(), bucket.getBurstRatio()));
		merged.setMaxBacklog(or(settings.getMaxBacklog(), bucket.getMaxBacklog()));
		merged.setCalendar(or(settings.getCalendar(), bucket.getCalendar()));
		merged.setZone(or(settings.getZone(), bucket.getZone()));
		merged.getKeys().setMax(bucket.getKeys().getMax());
		merged.getKeys().setMemory(bucket.getKeys().getMemory());
		RateLimitProperties.PlanRedis redis = settings.getRedis();
		merged.getRedis().setKeyPrefix(or(redis.getKeyPrefix(), bucket.getRedis().getKeyPrefix()));
		merged.getRedis().setTimeout(or(redis.getTimeout(), bucket.getRedis().getTimeout()));
		merged.getRedis().setOnFailure(or(redis.getOnFailure(), bucket.getRedis().getOnFailure()));
		merged.getRedis().setLease(or(redis.getLease(), bucket.getRedis().getLease()));
		return of(name, merged, "plans." + plan + ".");
	}

	/** A plan's setting, or the bucket's where the plan sets none. */
	private static <T> @Nullable T or(@Nullable T plan, @Nullable T bucket) {
		return (plan != null) ? plan : bucket;
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
	 * @param keysMemory the most bytes the store of the keys' buckets takes
	 */
	record Shared(String name, Backend backend, BigDecimal rate, Duration period, Rate exactRate, long limit,
			long initial, boolean cappedRelease, Duration maxWait, RateLimitProperties.Redis redis, int keysMax,
			long keysMemory) implements BucketDefinition {

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
	 * @param keysMemory the most bytes the store of the keys' buckets takes
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

	/**
	 * A calendar quota ({@code type: quota}), in this JVM or on Redis. Its allowance is its limit per
	 * calendar period; it has no rate.
	 *
	 * @param name the bucket name
	 * @param limit the tokens per calendar period
	 * @param calendar the calendar period
	 * @param zone the calendar's time zone
	 * @param maxWait the longest a caller waits (for the next boundary)
	 * @param keysMax the most keys with a bucket of their own, 0 for no bound but the memory
	 * @param backend where the count lives
	 * @param redis the Redis settings (used only by the redis backend)
	 * @param keysMemory the most bytes the store of the keys' buckets takes
	 */
	record Quota(String name, long limit, QuotaCalendar.Unit calendar, ZoneId zone, Duration maxWait, int keysMax,
			Backend backend, RateLimitProperties.Redis redis, long keysMemory) implements BucketDefinition {

		/**
		 * The limit: tokens per calendar period (the view's {@code rate}).
		 *
		 * @return the limit
		 */
		@Override
		public BigDecimal rate() {
			return BigDecimal.valueOf(this.limit);
		}

		/**
		 * The calendar period's nominal length (a month: a twelfth of a mean Gregorian year); the quota's
		 * view shows the running period's real length.
		 *
		 * @return the nominal length
		 */
		@Override
		public Duration period() {
			return this.calendar.nominalLength();
		}

		/**
		 * The limit per nominal period, for what needs a rate to compare; a quota is never given a rate.
		 *
		 * @return the rate
		 */
		@Override
		public Rate exactRate() {
			return Rate.of(this.limit, period());
		}

		/**
		 * A quota with a new limit; a rate is refused (a quota has none).
		 *
		 * @throws RateLimitConfigurationException naming the bucket and the property
		 */
		@Override
		public Quota withRateAndLimit(@Nullable BigDecimal newRate, @Nullable Long newLimit) {
			if (newRate != null) {
				throw RateLimitConfigurationException.invalidProperty(this.name, "rate", newRate,
						"nothing: a quota has no rate; its allowance is its limit per " + this.calendar
								+ ", change the limit instead");
			}
			long l = (newLimit != null) ? checkedQuotaLimit(this.name, newLimit) : this.limit;
			return new Quota(this.name, l, this.calendar, this.zone, this.maxWait, this.keysMax, this.backend, this.redis,
					this.keysMemory);
		}
	}

	/** Checks a quota: what it refuses, what it needs, the zone's default. */
	/** The rest of {@link #of}'s checks for a pacer ({@code type: hybrid}), whose rate and max-wait are checked. */
	private static Hybrid hybrid(String name, RateLimitProperties.Bucket bucket, Backend backend, Rate exact,
			Duration maxWait, String at) {
		String type = BucketType.HYBRID.value();
		if (bucket.getInitial() != null) {
			throw RateLimitConfigurationException.wrongType(name, at + "initial", type, "shared");
		}
		if (bucket.getCappedRelease() != null) {
			throw RateLimitConfigurationException.wrongType(name, at + "capped-release", type, "shared");
		}
		if (backend != Backend.LOCAL) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "backend", backend.value(),
					"local: hybrid buckets run in this JVM only (shared buckets may use redis)");
		}
		return new Hybrid(name, bucket.getRate(), bucket.getPeriod(), exact, bucket.getLimit(), maxWait,
				bucket.getBurstRatio(), bucket.getMaxBacklog(), keysMax(name, bucket, at), keysMemory(name, bucket, at));
	}

	private static Quota quota(String name, RateLimitProperties.Bucket bucket, Backend backend, String at) {
		refuseOnQuota(name, at + "rate", bucket.getRate() != null);
		refuseOnQuota(name, at + "period", bucket.isPeriodSet());
		refuseOnQuota(name, at + "initial", bucket.getInitial() != null);
		refuseOnQuota(name, at + "capped-release", bucket.getCappedRelease() != null);
		refuseOnQuota(name, at + "burst-ratio", bucket.getBurstRatio() != null);
		refuseOnQuota(name, at + "max-backlog", bucket.getMaxBacklog() != null);
		if (bucket.getLimit() == null) {
			throw RateLimitConfigurationException.missingProperty(name, at + "limit",
					"the tokens of each calendar period, a whole number from 1 to " + CalendarQuota.MAX_LIMIT);
		}
		long limit = checkedQuotaLimit(name, bucket.getLimit(), at);
		if (bucket.getCalendar() == null) {
			throw RateLimitConfigurationException.missingProperty(name, at + "calendar", CALENDAR_ACCEPTED);
		}
		Duration maxWait = bucket.getMaxWait();
		if (maxWait == null || maxWait.isNegative()) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "max-wait", maxWait,
					"a duration >= 0, e.g. 0, 100ms or 2s");
		}
		ZoneId zone = (bucket.getZone() != null) ? bucket.getZone() : ZoneOffset.UTC;
		RateLimitProperties.Redis redis = bucket.getRedis();
		checkRedis(name, redis, at);
		return new Quota(name, limit, bucket.getCalendar(), zone, maxWait, keysMax(name, bucket, at), backend, redis,
				keysMemory(name, bucket, at));
	}

	private static void refuseOnQuota(String name, String property, boolean set) {
		if (set) {
			throw RateLimitConfigurationException.notForQuota(name, property, QUOTA_PROPERTIES);
		}
	}

	private static long checkedQuotaLimit(String name, long limit) {
		return checkedQuotaLimit(name, limit, "");
	}

	private static long checkedQuotaLimit(String name, long limit, String at) {
		if (limit < 1 || limit > CalendarQuota.MAX_LIMIT) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "limit", limit,
					"a whole number from 1 to " + CalendarQuota.MAX_LIMIT);
		}
		return limit;
	}

	private static void checkRedis(String name, RateLimitProperties.Redis redis, String at) {
		if (redis.getOnFailure() == null) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "redis.on-failure", null, "allow, deny or local");
		}
		if (redis.getKeyPrefix() == null) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "redis.key-prefix", null,
					"a string (may be empty)");
		}
	}

	/** Contract revision 3, batches: {@code redis.batch} and {@code redis.batch-hold}, on Redis only. */
	private static void checkBatch(String name, RateLimitProperties.Redis redis, Backend backend, long limit,
			boolean capped, String at) {
		String batch = redis.getBatch();
		String spec = (batch != null) ? batch.strip() : "";
		boolean none = spec.equals("none");
		if (!none && backend == Backend.LOCAL) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "redis.batch", batch,
					"none on a local bucket: batches take tokens from a bucket on Redis (backend: redis)");
		}
		if (!none && !spec.equals("auto")) {
			long n;
			try {
				n = Long.parseLong(spec);
			}
			catch (NumberFormatException ex) {
				n = 0;
			}
			if (n < 1 || n > limit) {
				throw RateLimitConfigurationException.invalidProperty(name, at + "redis.batch", batch,
						"none | auto | a whole number from 1 to the limit (" + limit + ")");
			}
		}
		if (!none && capped) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "redis.batch", batch,
					"none with capped-release: true (tokens in flight are released one call at a time)");
		}
		Duration hold = redis.getBatchHold();
		if (hold == null || hold.toMillis() < 1) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "redis.batch-hold", hold,
					"a duration of at least 1ms, e.g. 100ms");
		}
	}

	private static int keysMax(String name, RateLimitProperties.Bucket bucket, String at) {
		Integer max = bucket.getKeys().getMax();
		if (max == null) {
			return 0;
		}
		if (max < 1) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "keys.max", max, CoreArguments.accepted("keys.max"));
		}
		return max;
	}

	private static long keysMemory(String name, RateLimitProperties.Bucket bucket, String at) {
		DataSize memory = bucket.getKeys().getMemory();
		if (memory == null || memory.toBytes() < (1L << 20) || memory.toBytes() > KeyedBuckets.MAX_MEMORY) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "keys.memory", memory,
					"a size from 1MB to 64MB, e.g. 16MB (default 64MB)");
		}
		return memory.toBytes();
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
		return resolveRate(name, rate, period, "");
	}

	private static Rate resolveRate(String name, @Nullable BigDecimal rate, Duration period, String at) {
		if (rate == null || rate.signum() <= 0) {
			throw RateLimitConfigurationException.invalidProperty(name, at + "rate", rate, RATE_ACCEPTED);
		}
		try {
			return Rate.of(rate, period);
		}
		catch (IllegalArgumentException ex) {
			if (ex instanceof InvalidArgumentException invalid && invalid.argument().equals("period")) {
				throw RateLimitConfigurationException.invalidProperty(name, at + "period", period,
						CoreArguments.accepted("period"));
			}
			throw RateLimitConfigurationException.invalidProperty(name, at + "rate", rate,
					RATE_ACCEPTED + " with fewer digits: " + ex.getMessage());
		}
	}

}
