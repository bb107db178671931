package dev.ratelimit.redis;

import dev.ratelimit.spring.Backend;
import dev.ratelimit.spring.RateLimitAutoConfiguration;
import dev.ratelimit.spring.UnavailableBucketBackend;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingClass;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.data.redis.connection.RedisConnectionFactory;

/**
 * The {@code redis} bucket backend, when Spring Data Redis is on the class path and the application
 * has a {@link RedisConnectionFactory}; otherwise a backend that explains what is missing, so that a
 * bucket that says {@code backend: redis} fails start-up saying so. Buckets say
 * {@code backend: redis} to use it.
 */
@AutoConfiguration(before = RateLimitAutoConfiguration.class,
		afterName = "org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration")
public final class RateLimitRedisAutoConfiguration {

	@Configuration(proxyBeanMethods = false)
	@ConditionalOnClass(RedisConnectionFactory.class)
	@ConditionalOnBean(RedisConnectionFactory.class)
	static class RedisBackendConfiguration {

		@Bean
		RedisBucketBackend rateLimitRedisBucketBackend(RedisConnectionFactory connectionFactory) {
			return new RedisBucketBackend(connectionFactory);
		}
	}

	@Configuration(proxyBeanMethods = false)
	@ConditionalOnClass(RedisConnectionFactory.class)
	@ConditionalOnMissingBean(RedisConnectionFactory.class)
	static class NoConnectionFactoryConfiguration {

		@Bean
		UnavailableBucketBackend rateLimitRedisBucketBackend() {
			return new UnavailableBucketBackend(Backend.REDIS, "no RedisConnectionFactory bean exists",
					"Configure a Redis connection (spring.data.redis.*, with spring-boot-starter-data-redis) or"
							+ " define a RedisConnectionFactory bean.");
		}
	}

	@Configuration(proxyBeanMethods = false)
	@ConditionalOnMissingClass("org.springframework.data.redis.connection.RedisConnectionFactory")
	static class NoSpringDataRedisConfiguration {

		@Bean
		UnavailableBucketBackend rateLimitRedisBucketBackend() {
			return new UnavailableBucketBackend(Backend.REDIS, "Spring Data Redis is not on the class path",
					"Add spring-boot-starter-data-redis and configure a Redis connection (spring.data.redis.*).");
		}
	}
}
