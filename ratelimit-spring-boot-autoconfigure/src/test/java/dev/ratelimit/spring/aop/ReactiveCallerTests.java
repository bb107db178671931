package dev.ratelimit.spring.aop;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A user's view of {@code Mono}/{@code Flux} methods: laziness, re-subscription, a cancelled waiter
 * moving the next caller up at once, refusals as error signals, a {@code Mono} fallback and a null
 * key. Time comes from a fake clock; nothing depends on how fast the machine is.
 */
class ReactiveCallerTests {

	private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(StreamsConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withPropertyValues("ratelimit.buckets.feed.rate=1", "ratelimit.buckets.feed.limit=1",
				"ratelimit.buckets.feed.max-wait=1h", "ratelimit.buckets.quotes.rate=1",
				"ratelimit.buckets.quotes.period=1h", "ratelimit.buckets.quotes.limit=1",
				"ratelimit.buckets.quotes.max-wait=0");

	private static RateLimiterSnapshot snapshot(ApplicationContext context, String name) {
		return context.getBean(name, RateLimiter.class).snapshot();
	}

	@Test
	void aFluxTakesNothingBeforeSubscriptionAndTakesTokensOnEverySubscription() {
		this.runner.withPropertyValues("ratelimit.buckets.feed.limit=8", "ratelimit.buckets.feed.max-wait=0")
			.run((context) -> {
				Streams streams = context.getBean(Streams.class);
				Flux<Integer> items = streams.items(2);
				assertThat(streams.calls()).isZero();
				assertThat(snapshot(context, "feed").available()).isEqualTo(8);
				StepVerifier.create(items).expectNext(1, 2).verifyComplete();
				StepVerifier.create(items).expectNext(1, 2).verifyComplete();
				assertThat(streams.calls()).isEqualTo(2);
				assertThat(snapshot(context, "feed").available()).isZero();
				assertThat(snapshot(context, "feed").granted()).isEqualTo(2);
				StepVerifier.create(items).expectError(RateLimitExceededException.class).verify(Duration.ofSeconds(5));
				assertThat(streams.calls()).isEqualTo(2);
			});
	}

	@Test
	void cancellingAWaitingSubscriptionMovesTheNextCallerUpAtOnce() {
		this.runner.run((context) -> {
			Streams streams = context.getBean(Streams.class);
			StepVerifier.create(streams.one("a")).expectNext("a").verifyComplete(); // the bucket is empty now
			Disposable second = streams.one("b").subscribe();
			AtomicReference<String> third = new AtomicReference<>();
			streams.one("c").subscribe(third::set);
			assertThat(snapshot(context, "feed").waiting()).isEqualTo(2);
			assertThat(snapshot(context, "feed").deficiency()).isEqualTo(2);
			second.dispose();
			// the third caller now waits for one token, not two
			assertThat(snapshot(context, "feed").deficiency()).isEqualTo(1);
			assertThat(snapshot(context, "feed").waiting()).isEqualTo(1);
			this.now.addAndGet(SECOND);
			Awaitility.await().atMost(Duration.ofSeconds(20)).untilAsserted(() -> assertThat(third.get()).isEqualTo("c"));
			assertThat(streams.calls()).isEqualTo(2); // "b" never ran
		});
	}

	@Test
	void aRefusedMonoIsAnErrorSignalOrTheFallbacksValue() {
		this.runner.run((context) -> {
			Streams streams = context.getBean(Streams.class);
			StepVerifier.create(streams.quote("de")).expectNext("live de").verifyComplete();
			StepVerifier.create(streams.quote("de")).expectNext("cached de").verifyComplete();
			StepVerifier.create(streams.strictQuote("fr"))
				.expectErrorSatisfies((ex) -> assertThat(ex).isInstanceOfSatisfying(RateLimitExceededException.class,
						(refusal) -> {
							assertThat(refusal.getBucket()).isEqualTo("quotes");
							assertThat(refusal.getRetryAfter()).isEqualTo(Duration.ofHours(1));
						}))
				.verify(Duration.ofSeconds(5));
			assertThat(snapshot(context, "quotes").rejected()).isEqualTo(2);
			assertThat(streams.calls()).isEqualTo(1);
		});
	}

	@Test
	void aMonoWhoseKeyIsNullFailsNamingTheBucketAndTheExpressionWithoutRunning() {
		this.runner.run((context) -> {
			Streams streams = context.getBean(Streams.class);
			StepVerifier.create(streams.perUser(null))
				.expectErrorSatisfies((ex) -> assertThat(ex).isInstanceOf(IllegalArgumentException.class)
					.hasMessageContaining("feed")
					.hasMessageContaining("#user"))
				.verify(Duration.ofSeconds(5));
			assertThat(streams.calls()).isZero();
		});
	}

	@Configuration(proxyBeanMethods = false)
	static class StreamsConfiguration {

		@Bean
		Streams streams() {
			return new Streams();
		}
	}

	static class Streams {

		private final AtomicInteger calls = new AtomicInteger();

		public int calls() {
			return this.calls.get();
		}

		@RateLimited(value = "feed", cost = "4")
		public Flux<Integer> items(int n) {
			this.calls.incrementAndGet();
			return Flux.range(1, n);
		}

		@RateLimited("feed")
		public Mono<String> one(String value) {
			this.calls.incrementAndGet();
			return Mono.just(value);
		}

		@RateLimited(value = "feed", key = "#user")
		public Mono<String> perUser(String user) {
			this.calls.incrementAndGet();
			return Mono.just("hello " + user);
		}

		@RateLimited(value = "quotes", fallback = "cached")
		public Mono<String> quote(String country) {
			this.calls.incrementAndGet();
			return Mono.just("live " + country);
		}

		@RateLimited("quotes")
		public Mono<String> strictQuote(String country) {
			this.calls.incrementAndGet();
			return Mono.just("live " + country);
		}

		Mono<String> cached(String country) {
			return Mono.just("cached " + country);
		}
	}
}
