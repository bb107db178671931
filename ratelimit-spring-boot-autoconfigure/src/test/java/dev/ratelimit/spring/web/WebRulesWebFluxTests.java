package dev.ratelimit.spring.web;

import java.net.InetSocketAddress;
import java.security.Principal;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.assertj.AssertableReactiveWebApplicationContext;
import org.springframework.boot.test.context.runner.ReactiveWebApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.test.web.reactive.server.WebTestClient;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.server.WebFilter;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Web rules in WebFlux (contract revision 2, "Web rules"), through the auto-configured
 * {@code WebFilter} and WebTestClient, on a fake clock: no thread waits.
 */
class WebRulesWebFluxTests {

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	private final ReactiveWebApplicationContextRunner runner = new ReactiveWebApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(FeedConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withPropertyValues("ratelimit.buckets.api.rate=1", "ratelimit.buckets.api.period=1h",
				"ratelimit.buckets.api.limit=2", "ratelimit.buckets.api.max-wait=0",
				"ratelimit.buckets.per-client.rate=1", "ratelimit.buckets.per-client.period=1h",
				"ratelimit.buckets.per-client.limit=1", "ratelimit.buckets.per-client.max-wait=0",
				"ratelimit.buckets.paced.rate=10", "ratelimit.buckets.paced.limit=1",
				"ratelimit.buckets.paced.max-wait=1s", "ratelimit.buckets.five.rate=5",
				"ratelimit.buckets.five.limit=5", "ratelimit.buckets.five.max-wait=0",
				"ratelimit.buckets.concurrent.rate=1000000", "ratelimit.buckets.concurrent.limit=1",
				"ratelimit.buckets.concurrent.capped-release=true", "ratelimit.buckets.concurrent.max-wait=0");

	private static WebTestClient client(AssertableReactiveWebApplicationContext context, WebFilter... more) {
		WebTestClient.ControllerSpec spec = WebTestClient.bindToController(context.getBean(FeedController.class));
		for (WebFilter filter : more) {
			spec.webFilter(filter);
		}
		return spec.webFilter(context.getBean(RateLimitWebFilter.class)).build();
	}

	/** Sets the remote address (and the principal) of every request, as a server would. */
	private static WebFilter from(String address, String principal) {
		return (exchange, chain) -> {
			var mutated = exchange.mutate()
				.request(exchange.getRequest().mutate().remoteAddress(new InetSocketAddress(address, 40000)).build());
			if (principal != null) {
				Principal user = () -> principal;
				mutated.principal(Mono.just(user));
			}
			return chain.filter(mutated.build());
		};
	}

	@Test
	void matchingRequestsAreLimitedAndARefusalIsA429WithAProblemDetail() {
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].methods=GET",
				"ratelimit.web.rules[0].bucket=api").run((context) -> {
					WebTestClient client = client(context);
					client.get().uri("/api/feed").exchange().expectStatus().isOk();
					client.get().uri("/api/feed").exchange().expectStatus().isOk();
					client.get()
						.uri("/api/feed")
						.exchange()
						.expectStatus()
						.isEqualTo(429)
						.expectHeader()
						.valueEquals("Retry-After", "3600")
						.expectHeader()
						.contentType("application/problem+json")
						.expectBody()
						.jsonPath("$.bucket")
						.isEqualTo("api");
					client.get().uri("/open").exchange().expectStatus().isOk();
					client.get().uri("/actuator/health").exchange().expectStatus().isOk();
				});
	}

	@Test
	void aRequestThatMustWaitWaitsWithoutBlockingAThread() {
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=paced")
			.run((context) -> {
				WebTestClient client = client(context);
				client.get().uri("/api/feed").exchange().expectStatus().isOk();
				RateLimiter paced = context.getBean("paced", RateLimiter.class);
				var waiting = java.util.concurrent.CompletableFuture.supplyAsync(() -> body(client, "/api/feed"));
				Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> paced.snapshot().waiting() == 1);
				assertThat(waiting).isNotDone();
				this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(100));
				assertThat(waiting.get(5, TimeUnit.SECONDS)).containsExactly("feed");
			});
	}

	@Test
	void ipAndPrincipalKeys() {
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=per-client",
				"ratelimit.web.rules[0].key=ip", "ratelimit.web.rules[1].paths=/me",
				"ratelimit.web.rules[1].bucket=per-client", "ratelimit.web.rules[1].key=principal").run((context) -> {
					client(context, from("192.0.2.1", null)).get().uri("/api/feed").exchange().expectStatus().isOk();
					client(context, from("192.0.2.1", null)).get().uri("/api/feed").exchange().expectStatus().isEqualTo(429);
					client(context, from("192.0.2.2", null)).get().uri("/api/feed").exchange().expectStatus().isOk();
					client(context, from("2001:db8::1", null)).get().uri("/api/feed").exchange().expectStatus().isOk();
					client(context, from("2001:db8::2", null)).get().uri("/api/feed").exchange().expectStatus().isEqualTo(429);
					client(context, from("192.0.2.9", "alice")).get().uri("/me").exchange().expectStatus().isOk();
					client(context, from("192.0.2.9", "alice")).get().uri("/me").exchange().expectStatus().isEqualTo(429);
					client(context, from("192.0.2.9", "bob")).get().uri("/me").exchange().expectStatus().isOk();
				});
	}

	@Test
	void aCappedBucketIsReleasedWhenTheStreamingResponseCompletes() {
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=concurrent")
			.run((context) -> {
				WebTestClient client = client(context);
				FeedController feed = context.getBean(FeedController.class);
				var slow = java.util.concurrent.CompletableFuture.supplyAsync(() -> body(client, "/api/slow"));
				RateLimiter concurrent = context.getBean("concurrent", RateLimiter.class);
				Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> concurrent.snapshot().inFlight() == 1);
				client.get().uri("/api/feed").exchange().expectStatus().isEqualTo(429);
				feed.slowSink().tryEmitNext("done");
				feed.slowSink().tryEmitComplete();
				assertThat(slow.get(5, TimeUnit.SECONDS)).containsExactly("done");
				Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> concurrent.snapshot().inFlight() == 0);
				this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(1));
				client.get().uri("/api/feed").exchange().expectStatus().isOk();
			});
	}

	@Test
	void ietfHeadersWithExactValues() {
		this.runner.withPropertyValues("ratelimit.web.headers=ietf", "ratelimit.web.rules[0].paths=/api/**",
				"ratelimit.web.rules[0].bucket=five").run((context) -> {
					WebTestClient client = client(context);
					client.get()
						.uri("/api/feed")
						.exchange()
						.expectStatus()
						.isOk()
						.expectHeader()
						.valueEquals("RateLimit-Policy", "\"five\";q=5;w=1")
						.expectHeader()
						.valueEquals("RateLimit", "\"five\";r=4;t=1");
					for (int i = 0; i < 4; i++) {
						client.get().uri("/api/feed").exchange().expectStatus().isOk();
					}
					client.get()
						.uri("/api/feed")
						.exchange()
						.expectStatus()
						.isEqualTo(429)
						.expectHeader()
						.valueEquals("RateLimit", "\"five\";r=0;t=1")
						.expectBody()
						.jsonPath("$.violated-policies[0]")
						.isEqualTo("five");
				});
	}

	/** The whole body of a response, read on the calling thread (the exchange blocks until the status). */
	private static java.util.List<String> body(WebTestClient client, String uri) {
		return client.mutate()
			.responseTimeout(Duration.ofSeconds(10))
			.build()
			.get()
			.uri(uri)
			.exchange()
			.returnResult(String.class)
			.getResponseBody()
			.collectList()
			.block(Duration.ofSeconds(10));
	}

	@Test
	void ietfHeadersForAnnotatedControllerMethods() {
		this.runner.withPropertyValues("ratelimit.web.headers=ietf").run((context) -> {
			WebTestClient client = client(context,
					context.getBean(org.springframework.web.filter.reactive.ServerWebExchangeContextFilter.class));
			client.get()
				.uri("/annotated")
				.exchange()
				.expectStatus()
				.isOk()
				.expectHeader()
				.valueEquals("RateLimit-Policy", "\"five\";q=5;w=1")
				.expectHeader()
				.valueEquals("RateLimit", "\"five\";r=4;t=1");
		});
	}

	@Configuration(proxyBeanMethods = false)
	static class FeedConfiguration {

		@Bean
		FeedController feedController() {
			return new FeedController();
		}
	}

	@RestController
	static class FeedController {

		final Sinks.Many<String> slow = Sinks.many().unicast().onBackpressureBuffer();

		@GetMapping({ "/api/feed", "/open", "/me", "/actuator/health" })
		Mono<String> feed() {
			return Mono.just("feed");
		}

		@GetMapping("/annotated")
		@dev.ratelimit.annotation.RateLimited("five")
		public Mono<String> annotated() {
			return Mono.just("annotated");
		}

		public Sinks.Many<String> slowSink() {
			return this.slow;
		}

		@GetMapping("/api/slow")
		reactor.core.publisher.Flux<String> slow() {
			return this.slow.asFlux();
		}
	}
}
