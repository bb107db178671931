package dev.ratelimit.spring.web;

import java.nio.charset.StandardCharsets;
import java.util.Base64;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ReactiveWebApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.security.config.Customizer;
import org.springframework.security.config.annotation.web.reactive.EnableWebFluxSecurity;
import org.springframework.security.config.web.server.ServerHttpSecurity;
import org.springframework.security.core.userdetails.MapReactiveUserDetailsService;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.web.server.SecurityWebFilterChain;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.reactive.config.EnableWebFlux;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code key: principal} behind Spring Security in WebFlux: the application's whole web handler, its
 * filters in their own order, so the rule's filter sees the authenticated principal.
 */
class WebRulesReactiveSecurityTests {

	private final ReactiveWebApplicationContextRunner runner = new ReactiveWebApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(SecuredConfiguration.class)
		.withPropertyValues("ratelimit.buckets.per-user.rate=1", "ratelimit.buckets.per-user.period=1h",
				"ratelimit.buckets.per-user.limit=1", "ratelimit.buckets.per-user.max-wait=0",
				"ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=per-user",
				"ratelimit.web.rules[0].key=principal");

	@Test
	void eachAuthenticatedUserHasABucketOfTheirOwn() {
		this.runner.run((context) -> {
			WebTestClient client = WebTestClient.bindToApplicationContext(context).build();
			client.get().uri("/api/me").header("Authorization", basic("alice")).exchange().expectStatus().isOk();
			client.get().uri("/api/me").header("Authorization", basic("alice")).exchange().expectStatus().isEqualTo(429);
			client.get().uri("/api/me").header("Authorization", basic("bob")).exchange().expectStatus().isOk();
			client.get().uri("/api/me").exchange().expectStatus().isUnauthorized();
			assertThat(context.getBean("per-user", RateLimiter.class).snapshot().rejected()).isEqualTo(1);
		});
	}

	private static String basic(String user) {
		return "Basic " + Base64.getEncoder().encodeToString((user + ":secret").getBytes(StandardCharsets.UTF_8));
	}

	@Configuration(proxyBeanMethods = false)
	@EnableWebFlux
	@EnableWebFluxSecurity
	static class SecuredConfiguration {

		@Bean
		SecurityWebFilterChain api(ServerHttpSecurity http) {
			return http.authorizeExchange((exchanges) -> exchanges.anyExchange().authenticated())
				.httpBasic(Customizer.withDefaults())
				.build();
		}

		@Bean
		MapReactiveUserDetailsService users() {
			return new MapReactiveUserDetailsService(User.withUsername("alice").password("{noop}secret").build(),
					User.withUsername("bob").password("{noop}secret").build());
		}

		@Bean
		Me me() {
			return new Me();
		}
	}

	@RestController
	static class Me {

		@GetMapping("/api/me")
		Mono<String> me(java.security.Principal principal) {
			return Mono.just(principal.getName());
		}
	}
}
