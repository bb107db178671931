package dev.ratelimit.spring.actuate;

import dev.ratelimit.spring.BucketStatsFactory;
import dev.ratelimit.spring.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimiterRegistry;
import io.micrometer.core.instrument.MeterRegistry;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/**
 * Micrometer meters for every bucket, on the application's {@link MeterRegistry} (never the global
 * one): present when Micrometer and a registry are there, absent otherwise.
 */
@AutoConfiguration(before = RateLimitAutoConfiguration.class,
		afterName = { "org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration",
				"org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration",
				"org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration" })
@ConditionalOnClass(MeterRegistry.class)
@ConditionalOnBean(MeterRegistry.class)
@ConditionalOnBooleanProperty(name = "ratelimit.enabled", matchIfMissing = true)
public final class RateLimitMetricsAutoConfiguration {

	@Bean
	@ConditionalOnMissingBean
	BucketStatsFactory rateLimitMicrometerStatsFactory(ObjectProvider<MeterRegistry> meters) {
		return new MicrometerBucketStatsFactory(meters::getObject);
	}

	@Bean
	RateLimitMeterBinder rateLimitMeterBinder(ObjectProvider<RateLimiterRegistry> registry) {
		return new RateLimitMeterBinder(new LazyRegistry(registry));
	}

	/** Looks the registry up when meters are bound, after every bucket exists. */
	private record LazyRegistry(ObjectProvider<RateLimiterRegistry> provider) implements RateLimiterRegistry {

		@Override
		public java.util.Set<String> names() {
			RateLimiterRegistry registry = this.provider.getIfAvailable();
			return (registry != null) ? registry.names() : java.util.Set.of();
		}

		@Override
		public java.util.Optional<dev.ratelimit.spring.RegisteredBucket> find(String name) {
			RateLimiterRegistry registry = this.provider.getIfAvailable();
			return (registry != null) ? registry.find(name) : java.util.Optional.empty();
		}

		@Override
		public dev.ratelimit.spring.RegisteredBucket get(String name) {
			return this.provider.getObject().get(name);
		}
	}
}
