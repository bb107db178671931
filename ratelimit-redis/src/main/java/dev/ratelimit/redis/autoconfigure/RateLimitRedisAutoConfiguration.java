package dev.ratelimit.redis.autoconfigure;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.spring.Backend;
import dev.ratelimit.spring.BucketDefinitions;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.UnavailableBucketBackend;
import dev.ratelimit.spring.client.SharedGates;
import io.lettuce.core.resource.Delay;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingClass;
import org.springframework.boot.data.redis.autoconfigure.ClientResourcesBuilderCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
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

		/** The outbound rules' gates of Redis buckets, in Redis beside each bucket (contract revision 3). */
		@Bean
		@ConditionalOnMissingBean(SharedGates.class)
		SharedGates rateLimitRedisGates(RedisBucketBackend backend, ObjectProvider<BucketDefinitions> definitions) {
			return new RedisGates(backend.buckets(), definitions::getObject);
		}
	}

	/**
	 * Lettuce reconnects a lost connection after a delay that doubles up to 30 s by default, so after an
	 * outage of half a minute the application's connections (the buckets' one included) could stay closed
	 * for up to 30 s after Redis answers again, and the buckets on their failure policy with them. The
	 * buckets probe Redis at most 5 s apart; this caps Lettuce's delay at the same 5 s, for the client
	 * resources Spring Boot makes. Ordered first: an application's own customizer, or its own
	 * {@code ClientResources} bean, wins.
	 */
	@Configuration(proxyBeanMethods = false)
	@ConditionalOnClass(name = "org.springframework.boot.data.redis.autoconfigure.ClientResourcesBuilderCustomizer")
	static class LettuceReconnectConfiguration {

		/** The longest wait between two attempts to reconnect. */
		static final Duration MAX_RECONNECT_DELAY = Duration.ofSeconds(5);

		@Bean
		@Order(Ordered.HIGHEST_PRECEDENCE)
		ClientResourcesBuilderCustomizer rateLimitLettuceReconnectDelay() {
			return (builder) -> builder
				.reconnectDelay(Delay.exponential(Duration.ZERO, MAX_RECONNECT_DELAY, 2, TimeUnit.MILLISECONDS));
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
