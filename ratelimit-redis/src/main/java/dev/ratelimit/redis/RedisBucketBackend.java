package dev.ratelimit.redis;


import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.spring.Backend;
import dev.ratelimit.spring.BucketBackend;
import dev.ratelimit.spring.BucketDefinition;

import org.springframework.data.redis.connection.RedisConnectionFactory;

/**
 * The {@code redis} backend: makes a {@link RedisTokenBucket} for every bucket whose {@code backend}
 * is {@code redis}, on the application's {@link RedisConnectionFactory}.
 */
public class RedisBucketBackend implements BucketBackend {

	private final RedisConnectionFactory connectionFactory;

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
	public RateLimiter create(BucketDefinition bucket, StatsRecorder stats) {
		// hybrid buckets are local only (the configuration says so): a Redis bucket is a shared one
		BucketDefinition.Shared definition = (BucketDefinition.Shared) bucket;
		return RedisTokenBucket.builder()
			.name(definition.name())
			.connectionFactory(this.connectionFactory)
			.keyPrefix(definition.redis().getKeyPrefix())
			.rate(definition.exactRate().tokens(), definition.exactRate().period())
			.limit(definition.limit())
			.cappedRelease(definition.cappedRelease())
			.timeout(definition.redis().getTimeout())
			.onFailure(RedisTokenBucket.OnFailure.valueOf(definition.redis().getOnFailure().name()))
			.stats(stats)
			.build();
	}
}
