package dev.ratelimit.spring.aop;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimitConfigurationException;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.test.StepVerifier;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Several {@code @RateLimited} on one method (contract revision 2): all or nothing, one wait for the
 * longest, the longest-waiting refusing bucket named and alone counting the refusal, capped buckets
 * released together, per-key and plain buckets mixed. Time comes from a fake clock.
 */
class SeveralBucketsTests {

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	/** The system clock: for capped buckets, whose tokens come back at their rate after the release. */
	private final ApplicationContextRunner realTime = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(PartnerConfiguration.class)
		.withPropertyValues("ratelimit.buckets.hourly.rate=2", "ratelimit.buckets.hourly.period=1h",
				"ratelimit.buckets.hourly.max-wait=0", "ratelimit.buckets.tenth.rate=10",
				"ratelimit.buckets.tenth.limit=1", "ratelimit.buckets.tenth.max-wait=1s",
				"ratelimit.buckets.fifth.rate=5", "ratelimit.buckets.fifth.limit=1",
				"ratelimit.buckets.fifth.max-wait=1s", "ratelimit.buckets.capped-a.rate=1000000",
				"ratelimit.buckets.capped-a.limit=2", "ratelimit.buckets.capped-a.capped-release=true",
				"ratelimit.buckets.capped-a.max-wait=200ms", "ratelimit.buckets.capped-b.rate=1000000",
				"ratelimit.buckets.capped-b.limit=3", "ratelimit.buckets.capped-b.capped-release=true",
				"ratelimit.buckets.capped-b.max-wait=200ms", "ratelimit.buckets.per-partner.rate=1",
				"ratelimit.buckets.per-partner.period=1h", "ratelimit.buckets.per-partner.max-wait=0",
				"ratelimit.buckets.all-partners.rate=2", "ratelimit.buckets.all-partners.period=1h",
				"ratelimit.buckets.all-partners.max-wait=0");

	private final ApplicationContextRunner runner = this.realTime.withBean(RateLimitClock.class, () -> this.now::get);

	private static RateLimiterSnapshot snapshot(ApplicationContext context, String name) {
		return context.getBean(name, RateLimiter.class).snapshot();
	}

	@Test
	void aRefusalByOneBucketLeavesEveryBucketExactlyAsBefore() {
		this.runner.withPropertyValues("ratelimit.buckets.tenth.max-wait=0").run((context) -> {
			Partner partner = context.getBean(Partner.class);
			partner.hourlyAndTenth();
			RateLimiterSnapshot hourly = snapshot(context, "hourly");
			RateLimiterSnapshot tenth = snapshot(context, "tenth");
			// hourly has a token left, tenth has none (100 ms away, max-wait 0): the call takes neither
			assertThatThrownBy(partner::hourlyAndTenth).isInstanceOfSatisfying(RateLimitExceededException.class,
					(ex) -> {
						assertThat(ex.getBucket()).isEqualTo("tenth");
						assertThat(ex.getRetryAfter()).isEqualTo(Duration.ofMillis(100));
					});
			assertThat(snapshot(context, "hourly").available()).isEqualTo(hourly.available()).isEqualTo(1);
			assertThat(snapshot(context, "tenth").available()).isEqualTo(tenth.available()).isZero();
			assertThat(snapshot(context, "tenth").deficiency()).isZero();
			// only the refusing bucket counts the refusal, and the other does not count a grant
			assertThat(snapshot(context, "hourly").rejected()).isZero();
			assertThat(snapshot(context, "hourly").granted()).isEqualTo(1);
			assertThat(snapshot(context, "tenth").rejected()).isEqualTo(1);
			assertThat(partner.calls()).isEqualTo(1);
			// once tenth has its token again, the call takes from both
			this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(100));
			partner.hourlyAndTenth();
			assertThat(snapshot(context, "hourly").available()).isZero();
			assertThat(partner.calls()).isEqualTo(2);
		});
	}

	@Test
	void whenSeveralBucketsRefuseTheOneWithTheLongestWaitIsNamedAndAloneCounts() {
		this.runner.withPropertyValues("ratelimit.buckets.tenth.max-wait=0").run((context) -> {
			Partner partner = context.getBean(Partner.class);
			partner.hourlyAndTenth();
			partner.hourlyOnly();
			// both empty now: hourly's next token is 30 minutes away, tenth's 100 ms
			assertThatThrownBy(partner::hourlyAndTenth).isInstanceOfSatisfying(RateLimitExceededException.class,
					(ex) -> {
						assertThat(ex.getBucket()).isEqualTo("hourly");
						assertThat(ex.getRetryAfter()).isEqualTo(Duration.ofMinutes(30));
					});
			assertThat(snapshot(context, "hourly").rejected()).isEqualTo(1);
			assertThat(snapshot(context, "tenth").rejected()).isZero();
			assertThat(snapshot(context, "tenth").deficiency()).isZero();
			assertThat(snapshot(context, "hourly").deficiency()).isZero();
		});
	}

	@Test
	void waitsOnceForTheLongestOfTheWaits() throws Exception {
		this.runner.run((context) -> {
			Partner partner = context.getBean(Partner.class);
			partner.tenthAndFifth();
			// tenth's next token is 100 ms away, fifth's 200 ms: the call waits for both, at once
			CompletableFuture<Void> second = CompletableFuture.runAsync(partner::tenthAndFifth);
			Awaitility.await().atMost(Duration.ofSeconds(5))
				.until(() -> snapshot(context, "fifth").waiting() == 1 || second.isDone());
			assertThat(snapshot(context, "tenth").waiting()).isEqualTo(1);
			this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(100));
			Awaitility.await().pollDelay(Duration.ofMillis(150)).atMost(Duration.ofSeconds(5)).until(() -> true);
			assertThat(second).isNotDone();
			this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(100));
			second.get(5, TimeUnit.SECONDS);
			assertThat(partner.calls()).isEqualTo(2);
			assertThat(snapshot(context, "tenth").granted()).isEqualTo(2);
			assertThat(snapshot(context, "fifth").granted()).isEqualTo(2);
			// each bucket gave exactly what it had: fifth is empty at 200 ms, tenth has earned its next token
			assertThat(snapshot(context, "tenth").available()).isEqualTo(1);
			assertThat(snapshot(context, "fifth").available()).isZero();
			assertThat(snapshot(context, "tenth").deficiency()).isZero();
		});
	}

	@Test
	void tenThousandFailingCallsLeakNothingFromTwoCappedBuckets() {
		this.realTime.run((context) -> {
			Partner partner = context.getBean(Partner.class);
			for (int i = 0; i < 10_000; i++) {
				assertThatThrownBy(() -> partner.cappedBoth(true)).isInstanceOf(IllegalStateException.class);
			}
			partner.cappedBoth(false);
			for (String name : new String[] { "capped-a", "capped-b" }) {
				RateLimiterSnapshot s = snapshot(context, name);
				assertThat(s.inFlight()).isZero();
				assertThat(s.waiting()).isZero();
				assertThat(s.granted()).isEqualTo(10_001);
			}
		});
	}

	@Test
	void cappedBucketsAreReleasedTogetherWhenAnAsyncCallCompletes() throws Exception {
		this.realTime.run((context) -> {
			Partner partner = context.getBean(Partner.class);
			CompletableFuture<String> first = new CompletableFuture<>();
			CompletableFuture<String> second = new CompletableFuture<>();
			CompletableFuture<String> a = partner.asyncBoth(first);
			CompletableFuture<String> b = partner.asyncBoth(second);
			assertThat(snapshot(context, "capped-a").inFlight()).isEqualTo(2);
			assertThat(snapshot(context, "capped-b").inFlight()).isEqualTo(2);
			// capped-a is full (capped-b is not): the third call takes from neither
			CompletableFuture<String> refused = partner.asyncBoth(CompletableFuture.completedFuture("x"));
			assertThatThrownBy(() -> refused.get(2, TimeUnit.SECONDS))
				.hasCauseInstanceOf(RateLimitExceededException.class);
			assertThat(snapshot(context, "capped-b").inFlight()).isEqualTo(2);
			first.complete("first");
			assertThat(a.get(1, TimeUnit.SECONDS)).isEqualTo("first");
			assertThat(snapshot(context, "capped-a").inFlight()).isEqualTo(1);
			assertThat(snapshot(context, "capped-b").inFlight()).isEqualTo(1);
			second.completeExceptionally(new IllegalStateException("late"));
			assertThatThrownBy(() -> b.get(1, TimeUnit.SECONDS)).hasCauseInstanceOf(IllegalStateException.class);
			assertThat(snapshot(context, "capped-a").inFlight()).isZero();
			assertThat(snapshot(context, "capped-b").inFlight()).isZero();
		});
	}

	@Test
	void monoAndFluxTakeFromEveryBucketOnSubscriptionAndReleaseTogether() {
		this.realTime.run((context) -> {
			Partner partner = context.getBean(Partner.class);
			Mono<String> mono = partner.monoBoth("m");
			assertThat(snapshot(context, "capped-a").inFlight()).isZero();
			StepVerifier.create(mono).expectNext("m").verifyComplete();
			Sinks.Many<Integer> source = Sinks.many().unicast().onBackpressureBuffer();
			StepVerifier.create(partner.fluxBoth(source.asFlux()))
				.then(() -> source.tryEmitNext(1))
				.expectNext(1)
				.then(() -> {
					assertThat(snapshot(context, "capped-a").inFlight()).isEqualTo(1);
					assertThat(snapshot(context, "capped-b").inFlight()).isEqualTo(1);
				})
				.thenCancel()
				.verify(Duration.ofSeconds(2));
			assertThat(snapshot(context, "capped-a").inFlight()).isZero();
			assertThat(snapshot(context, "capped-b").inFlight()).isZero();
			assertThat(snapshot(context, "capped-a").granted()).isEqualTo(2);
		});
	}

	@Test
	void perKeyAndPlainBucketsMix() {
		this.runner.run((context) -> {
			Partner partner = context.getBean(Partner.class);
			partner.quote("acme");
			// acme's own bucket is empty: refused naming it and its key; the total keeps its token
			assertThatThrownBy(() -> partner.quote("acme")).isInstanceOfSatisfying(RateLimitExceededException.class,
					(ex) -> {
						assertThat(ex.getBucket()).isEqualTo("per-partner");
						assertThat(ex.getKey()).isEqualTo("acme");
					});
			assertThat(snapshot(context, "all-partners").available()).isEqualTo(1);
			partner.quote("globex");
			// the total is empty now, though initech has its own token
			assertThatThrownBy(() -> partner.quote("initech")).isInstanceOfSatisfying(
					RateLimitExceededException.class, (ex) -> assertThat(ex.getBucket()).isEqualTo("all-partners"));
			assertThat(partner.calls()).isEqualTo(2);
		});
	}

	@Test
	void twoFallbacksOnOneMethodFailStartUp() {
		this.runner.withUserConfiguration(TwoFallbacksConfiguration.class).run((context) -> {
			assertThat(context).hasFailed();
			Throwable failure = context.getStartupFailure();
			while (failure != null && !(failure instanceof RateLimitConfigurationException)) {
				failure = failure.getCause();
			}
			assertThat(failure).isNotNull().hasMessageContaining("TwoFallbacks.quote").hasMessageContaining("2 of its");
		});
	}

	@Test
	void anUnknownBucketInAnyOfTheAnnotationsFailsStartUp() {
		this.runner.withUserConfiguration(UnknownSecondConfiguration.class).run((context) -> {
			assertThat(context).hasFailed();
			Throwable failure = context.getStartupFailure();
			while (failure != null && !(failure instanceof RateLimitConfigurationException)) {
				failure = failure.getCause();
			}
			assertThat(failure).isNotNull().hasMessageContaining("nowhere").hasMessageContaining("hourly");
		});
	}

	@Configuration(proxyBeanMethods = false)
	static class PartnerConfiguration {

		@Bean
		Partner partner() {
			return new Partner();
		}
	}

	static class Partner {

		private final AtomicInteger calls = new AtomicInteger();

		int calls() {
			return this.calls.get();
		}

		@RateLimited("hourly")
		@RateLimited("tenth")
		public void hourlyAndTenth() {
			this.calls.incrementAndGet();
		}

		@RateLimited("hourly")
		public void hourlyOnly() {
		}

		@RateLimited("tenth")
		@RateLimited("fifth")
		public void tenthAndFifth() {
			this.calls.incrementAndGet();
		}

		@RateLimited("capped-a")
		@RateLimited("capped-b")
		public void cappedBoth(boolean fail) {
			if (fail) {
				throw new IllegalStateException("boom");
			}
		}

		@RateLimited("capped-a")
		@RateLimited("capped-b")
		public CompletableFuture<String> asyncBoth(CompletableFuture<String> work) {
			return work;
		}

		@RateLimited("capped-b")
		@RateLimited("capped-a")
		public Mono<String> monoBoth(String value) {
			return Mono.just(value);
		}

		@RateLimited("capped-a")
		@RateLimited("capped-b")
		public Flux<Integer> fluxBoth(Flux<Integer> source) {
			return source;
		}

		@RateLimited(value = "per-partner", key = "#partner")
		@RateLimited("all-partners")
		public String quote(String partner) {
			this.calls.incrementAndGet();
			return "quote for " + partner;
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class TwoFallbacksConfiguration {

		@Bean
		TwoFallbacks twoFallbacks() {
			return new TwoFallbacks();
		}
	}

	static class TwoFallbacks {

		@RateLimited(value = "hourly", fallback = "cached")
		@RateLimited(value = "tenth", fallback = "cached")
		public String quote(String id) {
			return id;
		}

		String cached(String id) {
			return "cached";
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class UnknownSecondConfiguration {

		@Bean
		UnknownSecond unknownSecond() {
			return new UnknownSecond();
		}
	}

	static class UnknownSecond {

		@RateLimited("hourly")
		@RateLimited("nowhere")
		public void call() {
		}
	}
}
