package dev.ratelimit.spring.web;

import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import org.junit.jupiter.api.Test;

import org.springframework.boot.actuate.autoconfigure.endpoint.EndpointAutoConfiguration;
import org.springframework.boot.actuate.autoconfigure.endpoint.web.WebEndpointAutoConfiguration;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.health.autoconfigure.actuate.endpoint.HealthEndpointAutoConfiguration;
import org.springframework.boot.health.autoconfigure.contributor.HealthContributorAutoConfiguration;
import org.springframework.boot.health.autoconfigure.registry.HealthContributorRegistryAutoConfiguration;
import org.springframework.boot.test.context.runner.ReactiveWebApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * Contract, "Web rules" (revision 2): "Actuator paths are never limited by rules", in WebFlux, with the
 * actuator at the root ({@code management.endpoints.web.base-path: /}). Found by an auditor: the filter took
 * the base path as written ("/"), trimmed it to "" and then exempted nothing. The exposed endpoints' paths
 * come from the actuator's own mapping now. A controller at /health stands in for the actuator's handler, as
 * in WebRulesWebFluxTests; the mapping is the actuator's.
 */
class ActuatorAtTheRootReactiveTests {

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	@Test
	void inWebFluxTheActuatorServedAtTheRootIsNeverLimitedByARuleForEveryPath() {
		new ReactiveWebApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(EndpointAutoConfiguration.class, WebEndpointAutoConfiguration.class,
					HealthContributorAutoConfiguration.class, HealthContributorRegistryAutoConfiguration.class,
					HealthEndpointAutoConfiguration.class, RateLimitAutoConfiguration.class))
			.withUserConfiguration(RootActuatorStandIn.class)
			.withBean(RateLimitClock.class, () -> this.now::get)
			.withPropertyValues("management.endpoints.web.base-path=/", "management.endpoints.web.exposure.include=health",
					"ratelimit.buckets.api.rate=1",
					"ratelimit.buckets.api.period=1h", "ratelimit.buckets.api.limit=1", "ratelimit.buckets.api.max-wait=0",
					"ratelimit.web.rules[0].paths=/**", "ratelimit.web.rules[0].bucket=api")
			.run((context) -> {
				WebTestClient client = WebTestClient.bindToController(context.getBean(HealthStandIn.class))
					.webFilter(context.getBean(RateLimitWebFilter.class))
					.build();
				for (int i = 0; i < 3; i++) {
					client.get().uri("/health").exchange().expectStatus().isOk();
				}
				// the application's own paths stay limited: one call an hour
				client.get().uri("/healthy").exchange().expectStatus().isOk();
				client.get().uri("/healthy").exchange().expectStatus().isEqualTo(429);
			});
	}

	@Configuration(proxyBeanMethods = false)
	static class RootActuatorStandIn {

		@Bean
		HealthStandIn healthStandIn() {
			return new HealthStandIn();
		}
	}

	@RestController
	static class HealthStandIn {

		@GetMapping("/health")
		String health() {
			return "UP";
		}

		@GetMapping("/healthy")
		String healthy() {
			return "not the actuator";
		}
	}
}
