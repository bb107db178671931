package dev.ratelimit.redis;

import dev.ratelimit.spring.RateLimitAutoConfiguration;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.context.annotation.Bean;
import org.springframework.data.redis.connection.RedisConnectionFactory;

/**
 * The {@code redis} bucket backend, when Spring Data Redis is on the class path and the application
 * has a {@link RedisConnectionFactory}. Buckets say {@code backend: redis} to use it.
 */
@AutoConfiguration(before = RateLimitAutoConfiguration.class,
		afterName = "org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration")
@ConditionalOnClass(RedisConnectionFactory.class)
@ConditionalOnBean(RedisConnectionFactory.class)
public final class RateLimitRedisAutoConfiguration {

	@Bean
	RedisBucketBackend rateLimitRedisBucketBackend(RedisConnectionFactory connectionFactory) {
		return new RedisBucketBackend(connectionFactory);
	}
}
