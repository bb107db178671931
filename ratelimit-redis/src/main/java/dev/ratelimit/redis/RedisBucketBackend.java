package dev.ratelimit.redis;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.spring.Backend;
import dev.ratelimit.spring.BucketBackend;
import dev.ratelimit.spring.BucketDefinition;
import dev.ratelimit.spring.BucketStats;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.DisposableBean;
import org.springframework.data.redis.connection.RedisConnectionFactory;

/**
 * The {@code redis} backend: makes a {@link RedisTokenBucket} for every bucket whose {@code backend}
 * is {@code redis}, on the application's {@link RedisConnectionFactory}.
 *
 * <p>A bucket used with a key has one {@link TemplateTune} on this instance, made with the bucket
 * itself (from its configuration, at start-up) and shared by its overflow bucket and the buckets of
 * its keys, whatever definition they are made from later (after a retune, the starter makes new keys'
 * buckets from the retuned definition; the configuration that a retune applies to stays the one the
 * instance started with).
 *
 * <p>The bucket's mode is shared the same way: when the statistics the starter gives are a
 * {@link BucketStats}, its mode switches are stored in Redis through the {@link TemplateTune}, and it
 * takes on the mode the replies carry.
 */
public class RedisBucketBackend implements BucketBackend, DisposableBean {

	private final RedisConnectionFactory connectionFactory;

	private volatile @Nullable ScriptConnection connection;

	/** The settings of each bucket (by name) shared with its overflow bucket and its keys' buckets. */
	private final Map<String, TemplateTune> tunes = new ConcurrentHashMap<>();

	/**
	 * Creates the backend.
	 *
	 * @param connectionFactory the application's Redis connection factory
	 */
	public RedisBucketBackend(RedisConnectionFactory connectionFactory) {
		this.connectionFactory = connectionFactory;
	}

	@Override
	public Backend backend() {
		return Backend.REDIS;
	}

	@Override
	public RateLimiter create(BucketDefinition bucket, StatsRecorder stats, @Nullable String key) {
		return build(builder(bucket, stats).perKey((key != null) ? key : ""), bucket.name(), stats);
	}

	@Override
	public RateLimiter create(BucketDefinition bucket, StatsRecorder stats) {
		return build(builder(bucket, stats), bucket.name(), stats);
	}

	/** Builds a bucket that shares the settings in force of every bucket of that name made here. */
	private RedisTokenBucket build(RedisTokenBucket.Builder builder, String name, StatsRecorder stats) {
		TemplateTune tune = this.tunes.get(name);
		if (tune != null) {
			return builder.tune(tune).build();
		}
		synchronized (this.tunes) {
			tune = this.tunes.get(name);
			if (tune != null) {
				return builder.tune(tune).build();
			}
			// no bucket of that name made here first (not the starter's order): this one's settings start it
			RedisTokenBucket made = builder.build();
			TemplateTune madeTune = made.tune();
			if (stats instanceof BucketStats bucketStats) {
				// one mode per bucket, the template's, in Redis with its retune
				madeTune.onModeChange(bucketStats::adoptShared);
				bucketStats.shareModeThrough(madeTune::switchMode);
			}
			this.tunes.put(name, madeTune);
			return made;
		}
	}

	private RedisTokenBucket.Builder builder(BucketDefinition bucket, StatsRecorder stats) {
		// hybrid buckets are local only (the configuration says so): a Redis bucket is a shared one
		BucketDefinition.Shared definition = (BucketDefinition.Shared) bucket;
		return RedisTokenBucket.builder()
			.name(definition.name())
			.connection(connection())
			.keyPrefix(definition.redis().getKeyPrefix())
			.rate(definition.exactRate())
			.limit(definition.limit())
			.cappedRelease(definition.cappedRelease())
			.timeout(definition.redis().getTimeout())
			.lease(definition.redis().getLease())
			.onFailure(RedisTokenBucket.OnFailure.valueOf(definition.redis().getOnFailure().name()))
			.stats(stats);
	}

	/** One connection for every bucket of this backend, opened (and the script loaded) with the first. */
	private synchronized ScriptConnection connection() {
		ScriptConnection open = this.connection;
		if (open == null) {
			open = ScriptConnection.of(this.connectionFactory);
			this.connection = open;
		}
		return open;
	}

	@Override
	public void destroy() {
		ScriptConnection open = this.connection;
		if (open != null) {
			open.close();
		}
	}
}
