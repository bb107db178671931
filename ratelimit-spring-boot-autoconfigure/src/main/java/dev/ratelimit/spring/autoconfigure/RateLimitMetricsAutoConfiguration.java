package dev.ratelimit.spring.autoconfigure;

import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.actuate.RateLimitMeterBinder;
import io.micrometer.core.instrument.MeterRegistry;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.context.annotation.Bean;

/**
 * Micrometer meters for every bucket, on the application's {@link MeterRegistry} (never the global
 * one): present when Micrometer and a registry are there, absent otherwise. Ordered after the buckets,
 * so the binder reads the registry of buckets directly.
 */
@AutoConfiguration(after = RateLimitAutoConfiguration.class,
		afterName = { "org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration",
				"org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration",
				"org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration" })
@ConditionalOnClass(MeterRegistry.class)
@ConditionalOnBean({ MeterRegistry.class, RateLimiterRegistry.class })
@ConditionalOnBooleanProperty(name = "ratelimit.enabled", matchIfMissing = true)
public final class RateLimitMetricsAutoConfiguration {

	@Bean
	RateLimitMeterBinder rateLimitMeterBinder(RateLimiterRegistry registry) {
		return new RateLimitMeterBinder(registry);
	}
}
