package dev.ratelimit.spring;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.function.Function;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.StatsRecorder;

import org.springframework.beans.factory.ListableBeanFactory;

/**
 * The registry of the configured buckets, each with the limiter bean named after it.
 */
public final class DefaultRateLimiterRegistry implements RateLimiterRegistry {

	private final Map<String, ConfiguredBucket> buckets;

	/**
	 * The registry of the auto-configuration: each bucket's limiter is its bean, its statistics made by
	 * the starter's bucket maker.
	 *
	 * @param definitions the checked buckets
	 * @param limiters each bucket's limiter bean, by name
	 * @param beanFactory where the bucket maker is found
	 * @return the registry
	 */
	public static DefaultRateLimiterRegistry of(BucketDefinitions definitions,
			Function<String, dev.ratelimit.core.RateLimiter> limiters, ListableBeanFactory beanFactory) {
		return new DefaultRateLimiterRegistry(definitions, limiters,
				beanFactory.getBeanProvider(BucketMaker.class).getIfAvailable());
	}

	DefaultRateLimiterRegistry(BucketDefinitions definitions, Function<String, dev.ratelimit.core.RateLimiter> limiters) {
		this(definitions, limiters, null);
	}

	DefaultRateLimiterRegistry(BucketDefinitions definitions, Function<String, dev.ratelimit.core.RateLimiter> limiters,
			@org.jspecify.annotations.Nullable BucketMaker maker) {
		Map<String, ConfiguredBucket> map = new LinkedHashMap<>();
		definitions.asMap()
			.forEach((name, definition) -> {
				RateLimiter limiter = limiters.apply(name);
				BucketStats stats = (maker != null) ? maker.stats(definition)
						: new BucketStats(StatsRecorder.disabled(), definitions.mode(name), definitions.allShadow());
				map.put(name, new ConfiguredBucket(definition, limiter, maker, stats, definitions.plans(name),
						definitions.shadowPlans(name)));
			});
		this.buckets = map;
	}

	@Override
	public Set<String> names() {
		return java.util.Collections.unmodifiableSet(this.buckets.keySet());
	}

	@Override
	public Optional<RegisteredBucket> find(String name) {
		return Optional.ofNullable(this.buckets.get(name));
	}

	@Override
	public RegisteredBucket get(String name) {
		ConfiguredBucket bucket = this.buckets.get(name);
		if (bucket == null) {
			RateLimitConfigurationException ex = RateLimitConfigurationException.unknownBucket(name, "this lookup",
					this.buckets.keySet());
			throw new IllegalArgumentException(ex.getDescription(), ex);
		}
		return bucket;
	}
}
