package dev.ratelimit.redis;


import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.spring.Backend;
import dev.ratelimit.spring.BucketBackend;
import dev.ratelimit.spring.BucketDefinition;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.DisposableBean;
import org.springframework.data.redis.connection.RedisConnectionFactory;

/**
 * The {@code redis} backend: makes a {@link RedisTokenBucket} for every bucket whose {@code backend}
 * is {@code redis}, on the application's {@link RedisConnectionFactory}.
 */
public class RedisBucketBackend implements BucketBackend, DisposableBean {

	private final RedisConnectionFactory connectionFactory;

	private volatile @Nullable ScriptConnection connection;

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
		return builder(bucket, stats).perKey((key != null) ? key : "").build();
	}

	@Override
	public RateLimiter create(BucketDefinition bucket, StatsRecorder stats) {
		return builder(bucket, stats).build();
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
