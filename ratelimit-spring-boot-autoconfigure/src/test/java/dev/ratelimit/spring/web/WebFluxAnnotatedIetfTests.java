package dev.ratelimit.spring.web;

import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ReactiveWebApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.reactive.config.EnableWebFlux;

/**
 * A WebFlux application as a user builds it (the whole context, no hand-picked filters), with
 * {@code headers: ietf}: a refused {@code Mono} or {@code Flux} controller method is a 429 with
 * {@code Retry-After} and the IETF fields as the contract words them, on a fake clock.
 */
class WebFluxAnnotatedIetfTests {

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	private final ReactiveWebApplicationContextRunner runner = new ReactiveWebApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(FluxConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withPropertyValues("ratelimit.web.headers=ietf", "ratelimit.buckets.api.rate=1",
				"ratelimit.buckets.api.period=90s", "ratelimit.buckets.api.limit=2", "ratelimit.buckets.api.max-wait=0");

	@Test
	void aRefusedMonoIsA429WithRetryAfterAndTheIetfFields() {
		this.runner.run((context) -> {
			WebTestClient client = WebTestClient.bindToApplicationContext(context).build();
			client.get()
				.uri("/mono")
				.exchange()
				.expectStatus()
				.isOk()
				.expectHeader()
				.valueEquals("RateLimit-Policy", "\"api\";q=2;w=180")
				.expectHeader()
				.valueEquals("RateLimit", "\"api\";r=1;t=90");
			client.get()
				.uri("/flux")
				.exchange()
				.expectStatus()
				.isOk()
				.expectHeader()
				.valueEquals("RateLimit", "\"api\";r=0;t=180");
			client.get()
				.uri("/mono")
				.exchange()
				.expectStatus()
				.isEqualTo(HttpStatus.TOO_MANY_REQUESTS)
				.expectHeader()
				.valueEquals("Retry-After", "90")
				.expectHeader()
				.valueEquals("RateLimit-Policy", "\"api\";q=2;w=180")
				.expectHeader()
				.valueEquals("RateLimit", "\"api\";r=0;t=180")
				.expectHeader()
				.contentTypeCompatibleWith(MediaType.APPLICATION_PROBLEM_JSON)
				.expectBody()
				.jsonPath("$.bucket")
				.isEqualTo("api")
				.jsonPath("$.violated-policies[0]")
				.isEqualTo("api");
			client.get()
				.uri("/flux")
				.exchange()
				.expectStatus()
				.isEqualTo(HttpStatus.TOO_MANY_REQUESTS)
				.expectHeader()
				.valueEquals("Retry-After", "90")
				.expectHeader()
				.valueEquals("RateLimit", "\"api\";r=0;t=180");
		});
	}

	@Configuration(proxyBeanMethods = false)
	@EnableWebFlux
	static class FluxConfiguration {

		@Bean
		Endpoints endpoints() {
			return new Endpoints();
		}
	}

	@RestController
	static class Endpoints {

		@GetMapping("/mono")
		@RateLimited("api")
		public Mono<String> mono() {
			return Mono.just("one");
		}

		@GetMapping("/flux")
		@RateLimited("api")
		public Flux<String> flux() {
			return Flux.just("a", "b");
		}
	}
}
