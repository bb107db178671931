package dev.ratelimit.spring.autoconfigure;

import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.actuate.RateLimitsEndpoint;
import dev.ratelimit.spring.actuate.RateLimitsWebEndpointExtension;
import dev.ratelimit.spring.actuate.RetuneFields;

import org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint;
import org.springframework.boot.actuate.endpoint.invoke.OperationInvokerAdvisor;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The {@code ratelimits} actuator endpoint, when the actuator is on the class path and the endpoint is
 * available: not disabled, and exposed over HTTP
 * ({@code management.endpoints.web.exposure.include=ratelimits}) or JMX.
 */
@AutoConfiguration(after = RateLimitAutoConfiguration.class)
@ConditionalOnClass(name = "org.springframework.boot.actuate.autoconfigure.endpoint.condition.ConditionalOnAvailableEndpoint")
public final class RateLimitEndpointAutoConfiguration {

	@Configuration(proxyBeanMethods = false)
	@ConditionalOnBean(RateLimiterRegistry.class)
	@ConditionalOnAvailableEndpoint(RateLimitsEndpoint.class)
	static class EndpointConfiguration {

		@Bean
		@ConditionalOnMissingBean
		RateLimitsEndpoint rateLimitsEndpoint(RateLimiterRegistry registry) {
			return new RateLimitsEndpoint(registry);
		}

		/** A retune with a field the endpoint does not know is a 400 naming it, not a silent partial change. */
		@Bean
		static OperationInvokerAdvisor rateLimitsRetuneFields() {
			return new RetuneFields();
		}

		@Bean
		@ConditionalOnMissingBean
		@ConditionalOnBean(RateLimitsEndpoint.class)
		RateLimitsWebEndpointExtension rateLimitsWebEndpointExtension(RateLimitsEndpoint endpoint) {
			return new RateLimitsWebEndpointExtension(endpoint);
		}
	}
}
