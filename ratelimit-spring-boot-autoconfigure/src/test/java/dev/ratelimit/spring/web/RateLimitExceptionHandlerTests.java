package dev.ratelimit.spring.web;

import java.time.Duration;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ReactiveWebApplicationContextRunner;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.test.web.servlet.MockMvc;
import org.springframework.test.web.servlet.setup.MockMvcBuilders;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.reactive.config.EnableWebFlux;
import org.springframework.web.servlet.config.annotation.EnableWebMvc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.get;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.content;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.header;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.jsonPath;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.status;

class RateLimitExceptionHandlerTests {

	private static final String[] BUCKET = { "ratelimit.buckets.api.rate=1", "ratelimit.buckets.api.period=90s",
			"ratelimit.buckets.api.limit=1", "ratelimit.buckets.api.max-wait=0" };

	@Test
	void retryAfterIsWholeSecondsRoundedUpAndAtLeastOne() {
		assertThat(RateLimitExceptionHandler.retryAfterSeconds(Duration.ZERO)).isEqualTo(1);
		assertThat(RateLimitExceptionHandler.retryAfterSeconds(Duration.ofMillis(1))).isEqualTo(1);
		assertThat(RateLimitExceptionHandler.retryAfterSeconds(Duration.ofMillis(1001))).isEqualTo(2);
		assertThat(RateLimitExceptionHandler.retryAfterSeconds(Duration.ofSeconds(3))).isEqualTo(3);
	}

	@Test
	void answersTooManyRequestsInSpringMvc() {
		new WebApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withUserConfiguration(MvcConfiguration.class)
			.withPropertyValues(BUCKET)
			.run((context) -> {
				MockMvc mvc = MockMvcBuilders.webAppContextSetup(context).build();
				mvc.perform(get("/hello")).andExpect(status().isOk());
				mvc.perform(get("/hello"))
					.andExpect(status().isTooManyRequests())
					.andExpect(header().string("Retry-After", "90"))
					.andExpect(content().contentTypeCompatibleWith(MediaType.APPLICATION_PROBLEM_JSON))
					.andExpect(jsonPath("$.status").value(429))
					.andExpect(jsonPath("$.title").value("Too Many Requests"))
					.andExpect(jsonPath("$.bucket").value("api"));
			});
	}

	@Test
	void theProblemDetailCarriesTheKeyOnlyWhenTheApplicationAsksForIt() {
		WebApplicationContextRunner runner = new WebApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withUserConfiguration(MvcConfiguration.class)
			.withPropertyValues(BUCKET);
		runner.run((context) -> {
			MockMvc mvc = MockMvcBuilders.webAppContextSetup(context).build();
			mvc.perform(get("/users/alice")).andExpect(status().isOk());
			mvc.perform(get("/users/alice"))
				.andExpect(status().isTooManyRequests())
				.andExpect(jsonPath("$.bucket").value("api"))
				.andExpect(jsonPath("$.key").doesNotExist());
			mvc.perform(get("/users/bob")).andExpect(status().isOk()); // bob's own bucket
		});
		runner.withPropertyValues("ratelimit.web.expose-key=true").run((context) -> {
			MockMvc mvc = MockMvcBuilders.webAppContextSetup(context).build();
			mvc.perform(get("/users/alice")).andExpect(status().isOk());
			mvc.perform(get("/users/alice"))
				.andExpect(status().isTooManyRequests())
				.andExpect(jsonPath("$.key").value("alice"));
		});
	}

	@Test
	void theApplicationsOwnHandlerWins() {
		new WebApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withUserConfiguration(MvcConfiguration.class, OwnHandler.class)
			.withPropertyValues(BUCKET)
			.run((context) -> {
				MockMvc mvc = MockMvcBuilders.webAppContextSetup(context).build();
				mvc.perform(get("/hello")).andExpect(status().isOk());
				mvc.perform(get("/hello")).andExpect(status().isServiceUnavailable());
			});
	}

	@Test
	void answersTooManyRequestsInWebFlux() {
		new ReactiveWebApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withUserConfiguration(FluxConfiguration.class)
			.withPropertyValues(BUCKET)
			.run((context) -> {
				WebTestClient client = WebTestClient.bindToApplicationContext(context).build();
				client.get().uri("/hello").exchange().expectStatus().isOk();
				client.get()
					.uri("/hello")
					.exchange()
					.expectStatus()
					.isEqualTo(HttpStatus.TOO_MANY_REQUESTS)
					.expectHeader()
					.valueEquals("Retry-After", "90")
					.expectHeader()
					.contentTypeCompatibleWith(MediaType.APPLICATION_PROBLEM_JSON)
					.expectBody()
					.jsonPath("$.bucket")
					.isEqualTo("api");
			});
	}

	@Configuration(proxyBeanMethods = false)
	@EnableWebMvc
	static class MvcConfiguration {

		@Bean
		MvcController mvcController() {
			return new MvcController();
		}
	}

	@RestController
	static class MvcController {

		@GetMapping("/hello")
		@RateLimited("api")
		public String hello() {
			return "hello";
		}

		@GetMapping("/users/{id}")
		@RateLimited(value = "api", key = "#id")
		public String user(@org.springframework.web.bind.annotation.PathVariable String id) {
			return id;
		}
	}

	@RestControllerAdvice
	static class OwnHandler {

		@ExceptionHandler(dev.ratelimit.core.RateLimitExceededException.class)
		ResponseEntity<String> busy() {
			return ResponseEntity.status(HttpStatus.SERVICE_UNAVAILABLE).body("busy");
		}
	}

	@Configuration(proxyBeanMethods = false)
	@EnableWebFlux
	static class FluxConfiguration {

		@Bean
		FluxController fluxController() {
			return new FluxController();
		}
	}

	@RestController
	static class FluxController {

		@GetMapping("/hello")
		@RateLimited("api")
		public Mono<String> hello() {
			return Mono.just("hello");
		}
	}
}
