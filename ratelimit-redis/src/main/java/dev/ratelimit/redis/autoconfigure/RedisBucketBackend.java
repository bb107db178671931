package dev.ratelimit.redis.autoconfigure;

import dev.ratelimit.core.Rate;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.redis.RedisBuckets;
import dev.ratelimit.redis.RedisCalendarQuota;
import dev.ratelimit.redis.RedisTokenBucket;
import dev.ratelimit.redis.RedisTokenBucketBuilder;
import dev.ratelimit.spring.Backend;
import dev.ratelimit.spring.BucketBackend;
import dev.ratelimit.spring.BucketDefinition;
import dev.ratelimit.spring.BucketMode;
import dev.ratelimit.spring.BucketStats;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.DisposableBean;
import org.springframework.context.SmartLifecycle;
import org.springframework.data.redis.connection.RedisConnectionFactory;

/**
 * The {@code redis} backend: makes a {@link RedisTokenBucket} (a {@link RedisCalendarQuota} for
 * {@code type: quota}) for every bucket whose {@code backend} is {@code redis}, on the application's {@link RedisConnectionFactory}, through one
 * {@link RedisBuckets} (one connection; the settings in force of a bucket shared by its overflow bucket
 * and its keys' buckets).
 *
 * <p>The bucket's mode is shared the same way: when the statistics the starter gives are a
 * {@link BucketStats}, its mode switches are stored in Redis through the bucket, and it takes on the
 * mode the replies carry.
 */
public class RedisBucketBackend implements BucketBackend, SmartLifecycle, DisposableBean {

	private final RedisBuckets buckets;

	/** Just above the connection factory's: stopped (its connections closed) right before the factory stops. */
	private final int phase;

	private volatile boolean running = true;

	/**
	 * Creates the backend.
	 *
	 * @param connectionFactory the application's Redis connection factory
	 */
	public RedisBucketBackend(RedisConnectionFactory connectionFactory) {
		this.buckets = new RedisBuckets(connectionFactory);
		this.phase = (connectionFactory instanceof SmartLifecycle lifecycle && lifecycle.getPhase() < Integer.MAX_VALUE)
				? lifecycle.getPhase() + 1 : SmartLifecycle.DEFAULT_PHASE;
	}

	/** The buckets, for the outbound rules' gates ({@link RedisGates}). */
	RedisBuckets buckets() {
		return this.buckets;
	}

	@Override
	public Backend backend() {
		return Backend.REDIS;
	}

	@Override
	public RateLimiter create(BucketDefinition bucket, StatsRecorder stats, @Nullable String key) {
		if (bucket instanceof BucketDefinition.Quota quota) {
			return this.buckets.buildQuota(quotaBuilder(quota, stats), (key != null) ? key : "");
		}
		return this.buckets.build(builder(bucket, stats), (key != null) ? key : "", (first) -> shareMode(first, stats));
	}

	/**
	 * A key on a plan of a Redis token bucket (contract revision 3, "Plans"): it calls with the plan's settings
	 * in force, from the plan's record in Redis ({@link RedisBuckets#buildForPlan}). A quota's key, or a key on
	 * the template, is made as any key's.
	 */
	@Override
	public RateLimiter create(BucketDefinition bucket, StatsRecorder stats, String key, @Nullable String plan) {
		if (plan == null || bucket instanceof BucketDefinition.Quota || key.isEmpty()) {
			return create(bucket, stats, key);
		}
		return this.buckets.buildForPlan(builder(bucket, stats), key, plan);
	}

	/**
	 * A key's token bucket takes its plan's record (the template's for none) from its next call on, keeping its
	 * tokens up to the new limit ({@link RedisBuckets#follow}); a retune of its plan it reads from Redis. A
	 * quota's key is left to the starter (its plan's limit, passed with every call).
	 */
	@Override
	public boolean follow(RateLimiter keyBucket, BucketDefinition definition, @Nullable String plan) {
		if (!(keyBucket instanceof RedisTokenBucket bucket) || definition instanceof BucketDefinition.Quota) {
			return false;
		}
		this.buckets.follow(bucket, builder(definition, StatsRecorder.disabled()), plan);
		return true;
	}

	/** A plan of a Redis token bucket is retuned in its record, for every instance ({@link RedisBuckets#retunePlan}). */
	@Override
	public boolean retunePlan(BucketDefinition configured, String plan, @Nullable Rate rate, @Nullable Long limit) {
		if (configured instanceof BucketDefinition.Quota) {
			return false; // (a quota's plan's limit is passed with every call: the starter's retune is all there is)
		}
		this.buckets.retunePlan(builder(configured, StatsRecorder.disabled()), plan, rate, limit);
		return true;
	}

	/**
	 * A key's state lives in Redis; here only the {@code local} policy's in-memory bucket or quota can owe
	 * tokens (a quota that owes is never forgotten: {@link RedisCalendarQuota#untilLocalFull()}).
	 */
	@Override
	public long untilFullHere(RateLimiter keyBucket) {
		if (keyBucket instanceof RedisCalendarQuota quota) {
			return quota.untilLocalFull();
		}
		return ((RedisTokenBucket) keyBucket).untilLocalFull();
	}

	@Override
	public void owe(RateLimiter keyBucket, long tokens) {
		if (keyBucket instanceof RedisTokenBucket bucket) {
			bucket.oweLocally(tokens);
		}
		// (a quota is never forgotten while it owes: nothing is owed to one made again)
	}

	@Override
	public RateLimiter create(BucketDefinition bucket, StatsRecorder stats) {
		if (bucket instanceof BucketDefinition.Quota quota) {
			return this.buckets.buildQuota(quotaBuilder(quota, stats), null);
		}
		return this.buckets.build(builder(bucket, stats), null, (first) -> shareMode(first, stats));
	}

	/** One mode per bucket, the template's, in Redis with its retune. */
	private static void shareMode(RedisTokenBucket first, StatsRecorder stats) {
		if (stats instanceof BucketStats bucketStats) {
			first.onModeChange((shadow) -> bucketStats
				.adoptShared((shadow == null) ? null : shadow ? BucketMode.SHADOW : BucketMode.ENFORCE));
			bucketStats.shareModeThrough((mode) -> first.switchMode(mode == BucketMode.SHADOW));
		}
	}

	/** A calendar quota on Redis ({@code type: quota}): its count in one hash until its period ends. */
	private static RedisCalendarQuota.Builder quotaBuilder(BucketDefinition.Quota quota, StatsRecorder stats) {
		return RedisCalendarQuota.builder()
			.name(quota.name())
			.keyPrefix(quota.redis().getKeyPrefix())
			.limit(quota.limit())
			.calendar(quota.calendar(), quota.zone())
			.timeout(quota.redis().getTimeout())
			.onFailure(RedisTokenBucket.OnFailure.valueOf(quota.redis().getOnFailure().name()))
			.stats(stats);
	}

	private static RedisTokenBucketBuilder builder(BucketDefinition bucket, StatsRecorder stats) {
		// hybrid buckets are local only (the configuration says so): a Redis bucket is a shared one
		BucketDefinition.Shared definition = (BucketDefinition.Shared) bucket;
		return RedisTokenBucket.builder()
			.name(definition.name())
			.keyPrefix(definition.redis().getKeyPrefix())
			.rate(definition.exactRate())
			.limit(definition.limit())
			.cappedRelease(definition.cappedRelease())
			.timeout(definition.redis().getTimeout())
			.lease(definition.redis().getLease())
			.batch(definition.redis().getBatch())
			.batchHold(definition.redis().getBatchHold())
			.onFailure(RedisTokenBucket.OnFailure.valueOf(definition.redis().getOnFailure().name()))
			.stats(stats);
	}

	/** Nothing to start: the buckets open their connection when the first is made. */
	@Override
	public void start() {
		this.running = true;
	}

	/**
	 * Closes the buckets' connection before the connection factory stops (Spring Data Redis shuts its
	 * client down then, before any bean is destroyed): closed twice, a connection logs "Connection is
	 * already closed". The buckets are not opened again by a later {@link #start()}.
	 */
	@Override
	public void stop() {
		this.buckets.close();
		this.running = false;
	}

	@Override
	public boolean isRunning() {
		return this.running;
	}

	@Override
	public int getPhase() {
		return this.phase;
	}

	/** Closes the buckets' connection, if {@link #stop()} did not. */
	@Override
	public void destroy() {
		this.buckets.close();
	}
}
