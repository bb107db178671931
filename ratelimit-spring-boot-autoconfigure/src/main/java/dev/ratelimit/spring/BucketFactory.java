package dev.ratelimit.spring;

import java.util.List;
import java.util.function.LongSupplier;

import dev.ratelimit.core.HybridRateLimiter;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.SharedTokenBucket;
import dev.ratelimit.core.StatsRecorder;

/**
 * Makes the limiter of a bucket definition: a {@link SharedTokenBucket} or a
 * {@link HybridRateLimiter} in this JVM, or whatever the named {@link BucketBackend} makes.
 */
final class BucketFactory {

	private BucketFactory() {
	}

	static RateLimiter create(BucketDefinition definition, StatsRecorder stats, LongSupplier clock,
			List<BucketBackend> backends) {
		if (!definition.backend().equals("local")) {
			BucketBackend backend = backends.stream()
				.filter((candidate) -> candidate.name().equals(definition.backend()))
				.findFirst()
				.orElseThrow(() -> missingBackend(definition));
			return backend.create(definition, stats);
		}
		if (definition.type().equals("hybrid")) {
			HybridRateLimiter.Builder builder = HybridRateLimiter.builder()
				.name(definition.name())
				.rate(definition.exactRate())
				.burstRatio(definition.burstRatio())
				.maxBacklog(definition.maxBacklog())
				.clock(clock)
				.stats(stats);
			if (definition.limit() != null) {
				builder.limit(definition.limit());
			}
			return builder.build();
		}
		return SharedTokenBucket.builder()
			.name(definition.name())
			.rate(definition.exactRate())
			.limit(definition.limit())
			.initial(definition.initial())
			.cappedRelease(definition.cappedRelease())
			.clock(clock)
			.stats(stats)
			.build();
	}

	private static RateLimitConfigurationException missingBackend(BucketDefinition definition) {
		boolean redisOnClassPath = isPresent("org.springframework.data.redis.connection.RedisConnectionFactory");
		boolean moduleOnClassPath = isPresent("dev.ratelimit.redis.RedisTokenBucket");
		String missing = !moduleOnClassPath ? "the dev.ratelimit:ratelimit-redis module is not on the class path"
				: !redisOnClassPath ? "Spring Data Redis is not on the class path"
						: "no RedisConnectionFactory bean exists";
		return new RateLimitConfigurationException(
				"Bucket '" + definition.name() + "' has backend " + definition.backend() + ", but " + missing + ".",
				"Add dev.ratelimit:ratelimit-redis and spring-boot-starter-data-redis to the application and"
						+ " configure a Redis connection (spring.data.redis.*), or set ratelimit.buckets."
						+ definition.name() + ".backend to local.");
	}

	private static boolean isPresent(String className) {
		try {
			Class.forName(className, false, BucketFactory.class.getClassLoader());
			return true;
		}
		catch (ClassNotFoundException | LinkageError ex) {
			return false;
		}
	}
}
