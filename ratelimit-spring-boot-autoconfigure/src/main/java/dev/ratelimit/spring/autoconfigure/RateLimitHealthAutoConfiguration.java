package dev.ratelimit.spring.autoconfigure;

import dev.ratelimit.spring.RateLimitProperties;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.actuate.RateLimitsHealthIndicator;

import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.health.autoconfigure.contributor.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.context.annotation.Bean;

/**
 * The {@code ratelimits} health contributor, when Spring Boot's health support is on the class path
 * and {@code management.health.ratelimits.enabled} is not {@code false}.
 */
@AutoConfiguration(after = RateLimitAutoConfiguration.class)
@ConditionalOnClass(HealthIndicator.class)
@ConditionalOnBean(RateLimiterRegistry.class)
@ConditionalOnEnabledHealthIndicator("ratelimits")
public final class RateLimitHealthAutoConfiguration {

	@Bean
	@ConditionalOnMissingBean(name = "ratelimitsHealthIndicator")
	RateLimitsHealthIndicator ratelimitsHealthIndicator(RateLimiterRegistry registry,
			RateLimitProperties properties) {
		return new RateLimitsHealthIndicator(registry, properties.getHealth().getBackendDownStatus());
	}
}
