package dev.ratelimit.spring.aop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

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
import reactor.core.publisher.Sinks;
import reactor.test.StepVerifier;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class RateLimitInterceptorTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(ServiceConfiguration.class)
		.withPropertyValues("ratelimit.buckets.db-writes.rate=10", "ratelimit.buckets.db-writes.period=1h",
				"ratelimit.buckets.db-writes.limit=10", "ratelimit.buckets.paced.rate=1",
				"ratelimit.buckets.hourly.rate=1", "ratelimit.buckets.hourly.period=1h",
				"ratelimit.buckets.hourly.max-wait=10s", "ratelimit.buckets.capped.rate=1000000",
				"ratelimit.buckets.capped.limit=2", "ratelimit.buckets.capped.capped-release=true",
				"ratelimit.buckets.capped.max-wait=200ms", "ratelimit.buckets.class-level.rate=2", "ratelimit.buckets.class-level.period=1h",
				"ratelimit.buckets.class-level.limit=2");

	private static RateLimiterSnapshot snapshot(org.springframework.context.ApplicationContext context, String name) {
		return context.getBean(name, RateLimiter.class).snapshot();
	}

	@Test
	void takesOneTokenPerCallAndRefusesWhenTheBucketIsEmpty() {
		this.runner.withPropertyValues("ratelimit.buckets.db-writes.max-wait=0").run((context) -> {
			Service service = context.getBean(Service.class);
			for (int i = 0; i < 10; i++) {
				service.write();
			}
			assertThatThrownBy(service::write).isInstanceOfSatisfying(RateLimitExceededException.class,
					(ex) -> assertThat(ex.getBucket()).isEqualTo("db-writes"));
			assertThat(service.calls()).isEqualTo(10);
		});
	}

	@Test
	void evaluatesTheCostOverTheParameters() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			assertThat(service.writeAll(List.of("a", "b", "c", "d"))).isEqualTo(4);
			assertThat(snapshot(context, "db-writes").available()).isEqualTo(6);
			service.writeAll(List.of());
			assertThat(snapshot(context, "db-writes").available()).isEqualTo(6);
		});
	}

	@Test
	void refusesAtOnceWhenTheWaitExceedsTheMaxWaitInsteadOfSleepingThroughIt() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			service.hourly();
			long start = System.nanoTime();
			assertThatThrownBy(service::hourly).isInstanceOfSatisfying(RateLimitExceededException.class, (ex) -> {
				assertThat(ex.getRetryAfter()).isGreaterThan(Duration.ofMinutes(59));
				assertThat(ex.getCost()).isEqualTo(1);
			});
			assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(5));
			assertThat(snapshot(context, "hourly").deficiency()).isZero();
			assertThat(snapshot(context, "hourly").rejected()).isEqualTo(1);
		});
	}

	@Test
	void theAnnotationsMaxWaitOverridesTheBuckets() {
		AtomicLong now = new AtomicLong();
		this.runner.withBean(RateLimitClock.class, () -> now::get)
			.withPropertyValues("ratelimit.buckets.paced.rate=10", "ratelimit.buckets.paced.limit=1",
					"ratelimit.buckets.paced.max-wait=0")
			.run((context) -> {
				Service service = context.getBean(Service.class);
				service.paced();
				// the next token is 100 ms away: the bucket's max-wait (0) refuses at once
				assertThatThrownBy(service::paced).isInstanceOfSatisfying(RateLimitExceededException.class,
						(ex) -> assertThat(ex.getRetryAfter()).isEqualTo(Duration.ofMillis(100)));
				// the method whose annotation allows 1 s waits for it
				CompletableFuture<Void> patient = CompletableFuture.runAsync(service::pacedPatient);
				Awaitility.await().atMost(Duration.ofSeconds(5))
					.until(() -> snapshot(context, "paced").waiting() == 1 || patient.isDone());
				assertThat(patient).isNotDone();
				now.addAndGet(TimeUnit.MILLISECONDS.toNanos(100));
				patient.get(5, TimeUnit.SECONDS);
				assertThat(snapshot(context, "paced").granted()).isEqualTo(2);
				assertThat(snapshot(context, "paced").rejected()).isEqualTo(1);
			});
	}

	@Test
	void cappedReleaseGivesTheTokensBackWhenTheCallReturnsOrThrowsAndNeverLeaks() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			for (int i = 0; i < 10_000; i++) {
				assertThatThrownBy(service::failing).isInstanceOf(IllegalStateException.class).hasMessage("boom");
			}
			service.cappedReturn();
			RateLimiterSnapshot after = snapshot(context, "capped");
			assertThat(after.inFlight()).isZero();
			assertThat(after.waiting()).isZero();
			assertThat(after.granted()).isEqualTo(10_001);
		});
	}

	@Test
	void cappedReleaseNeverLetsMoreCallsThanTheLimitRunAtOnce() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			List<Thread> threads = new ArrayList<>();
			for (int i = 0; i < 6; i++) {
				Thread thread = new Thread(() -> {
					for (int j = 0; j < 50; j++) {
						try {
							service.holding();
						}
						catch (RateLimitExceededException ex) {
							// waited 200 ms for a release: allowed under load
						}
					}
				});
				thread.start();
				threads.add(thread);
			}
			for (Thread thread : threads) {
				thread.join();
			}
			assertThat(service.mostAtOnce()).isBetween(1, 2);
			assertThat(snapshot(context, "capped").inFlight()).isZero();
		});
	}

	@Test
	void holdsTheRateAcrossThreads() {
		this.runner.withPropertyValues("ratelimit.buckets.db-writes.rate=400", "ratelimit.buckets.db-writes.period=1s",
				"ratelimit.buckets.db-writes.limit=1",
				"ratelimit.buckets.db-writes.initial=0")
			.run((context) -> {
				Service service = context.getBean(Service.class);
				long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1000);
				long start = System.nanoTime();
				List<Thread> threads = new ArrayList<>();
				for (int i = 0; i < 4; i++) {
					Thread thread = new Thread(() -> {
						while (System.nanoTime() < end) {
							service.write();
						}
					});
					thread.start();
					threads.add(thread);
				}
				for (Thread thread : threads) {
					thread.join();
				}
				double elapsed = (System.nanoTime() - start) / 1e9;
				// never above the rate; the lower bound only shows the waiters are served (a loaded
				// machine may deschedule all four long enough for a full bucket to waste tokens)
				assertThat((double) service.calls()).isLessThanOrEqualTo(400 * elapsed + 1)
					.isGreaterThan(400 * elapsed * 0.5);
			});
	}

	@Test
	void completableFuturesWaitWithoutBlockingTheCallerAndReleaseOnCompletion() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			CompletableFuture<String> first = new CompletableFuture<>();
			CompletableFuture<String> second = new CompletableFuture<>();
			CompletableFuture<String> a = service.async(first);
			CompletableFuture<String> b = service.async(second);
			assertThat(snapshot(context, "capped").inFlight()).isEqualTo(2);
			CompletableFuture<String> third = CompletableFuture.completedFuture("third");
			long start = System.nanoTime();
			CompletableFuture<String> c = service.async(third);
			assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofMillis(100));
			assertThat(c).isNotDone();
			first.complete("first");
			assertThat(a.get(1, TimeUnit.SECONDS)).isEqualTo("first");
			assertThat(c.get(2, TimeUnit.SECONDS)).isEqualTo("third");
			second.completeExceptionally(new IllegalStateException("late"));
			assertThatThrownBy(() -> b.get(1, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
				.hasCauseInstanceOf(IllegalStateException.class);
			assertThat(snapshot(context, "capped").inFlight()).isZero();
		});
	}

	@Test
	void aRefusedCompletableFutureFailsInsteadOfThrowing() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			service.async(new CompletableFuture<>());
			service.async(new CompletableFuture<>());
			CompletableFuture<String> refused = service.async(CompletableFuture.completedFuture("x"));
			assertThatThrownBy(() -> refused.get(2, TimeUnit.SECONDS))
				.hasCauseInstanceOf(RateLimitExceededException.class);
			assertThat(snapshot(context, "capped").waiting()).isZero();
		});
	}

	@Test
	void monoTakesNothingBeforeSubscriptionAndReleasesOnCompletion() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			Mono<String> mono = service.mono("hello");
			assertThat(service.monoCalls()).isZero();
			assertThat(snapshot(context, "capped").available()).isEqualTo(2);
			StepVerifier.create(mono).expectNext("hello").verifyComplete();
			assertThat(service.monoCalls()).isEqualTo(1);
			assertThat(snapshot(context, "capped").inFlight()).isZero();
		});
	}

	@Test
	void fluxReleasesItsTokensWhenCancelled() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			Sinks.Many<Integer> source = Sinks.many().unicast().onBackpressureBuffer();
			StepVerifier.create(service.flux(source.asFlux()))
				.then(() -> source.tryEmitNext(1))
				.expectNext(1)
				.then(() -> assertThat(snapshot(context, "capped").inFlight()).isEqualTo(1))
				.thenCancel()
				.verify(Duration.ofSeconds(2));
			assertThat(snapshot(context, "capped").inFlight()).isZero();
		});
	}

	@Test
	void aMonoCancelledWhileWaitingForTokensGivesThemBackAndNeverRuns() {
		this.runner.withPropertyValues("ratelimit.buckets.capped.max-wait=10s").run((context) -> {
			Service service = context.getBean(Service.class);
			Sinks.Many<Integer> first = Sinks.many().unicast().onBackpressureBuffer();
			Sinks.Many<Integer> second = Sinks.many().unicast().onBackpressureBuffer();
			service.flux(first.asFlux()).subscribe();
			service.flux(second.asFlux()).subscribe();
			assertThat(snapshot(context, "capped").inFlight()).isEqualTo(2);
			Disposable waiting = service.mono("late").subscribe();
			assertThat(snapshot(context, "capped").waiting()).isEqualTo(1);
			waiting.dispose();
			assertThat(snapshot(context, "capped").waiting()).isZero();
			first.tryEmitComplete();
			second.tryEmitComplete();
			RateLimiterSnapshot after = snapshot(context, "capped");
			assertThat(after.inFlight()).isZero();
			assertThat(after.deficiency()).isZero();
			assertThat(service.monoCalls()).isZero();
		});
	}

	@Test
	void aRefusedMonoSignalsAnError() {
		this.runner.withPropertyValues("ratelimit.buckets.capped.max-wait=0").run((context) -> {
			Service service = context.getBean(Service.class);
			Sinks.Many<Integer> hold = Sinks.many().unicast().onBackpressureBuffer();
			service.flux(hold.asFlux()).subscribe();
			service.flux(hold.asFlux().take(0)).subscribe();
			Sinks.Many<Integer> other = Sinks.many().unicast().onBackpressureBuffer();
			service.flux(other.asFlux()).subscribe();
			StepVerifier.create(service.mono("x")).expectError(RateLimitExceededException.class).verify(Duration.ofSeconds(2));
		});
	}

	@Test
	void aClassLevelAnnotationCoversEveryPublicMethodButNotObjects() {
		this.runner.withPropertyValues("ratelimit.buckets.class-level.max-wait=0").run((context) -> {
			ClassLevel bean = context.getBean(ClassLevel.class);
			bean.first();
			bean.second();
			assertThatThrownBy(bean::first).isInstanceOf(RateLimitExceededException.class);
			assertThat(bean.toString()).isEqualTo("class-level");
			assertThat(snapshot(context, "class-level").granted()).isEqualTo(2);
		});
	}

	@Test
	void worksWithoutReactorOnTheClassPath() {
		new ApplicationContextRunner().withClassLoader(new FilteredClassLoader("reactor."))
			.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withUserConfiguration(PlainConfiguration.class)
			.withPropertyValues("ratelimit.buckets.db-writes.rate=1", "ratelimit.buckets.db-writes.limit=1",
					"ratelimit.buckets.db-writes.max-wait=0")
			.run((context) -> {
				assertThat(context).hasNotFailed();
				Writer service = context.getBean(Writer.class);
				service.write();
				assertThatThrownBy(service::write).isInstanceOf(RateLimitExceededException.class);
			});
	}

	@Configuration(proxyBeanMethods = false)
	static class PlainConfiguration {

		@Bean
		Writer plainService() {
			return new PlainService();
		}
	}

	public interface Writer {

		void write();
	}

	static class PlainService implements Writer {

		@Override
		@RateLimited("db-writes")
		public void write() {
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class ServiceConfiguration {

		@Bean
		Service service() {
			return new Service();
		}

		@Bean
		ClassLevel classLevel() {
			return new ClassLevel();
		}
	}

	static class Service {

		final AtomicInteger calls = new AtomicInteger();

		final AtomicInteger monoCalls = new AtomicInteger();

		final AtomicInteger running = new AtomicInteger();

		final AtomicInteger mostAtOnce = new AtomicInteger();

		@RateLimited("db-writes")
		public void write() {
			this.calls.incrementAndGet();
		}

		@RateLimited("paced")
		public void paced() {
		}

		@RateLimited(value = "paced", maxWait = "1s")
		public void pacedPatient() {
		}

		public int calls() {
			return this.calls.get();
		}

		public int monoCalls() {
			return this.monoCalls.get();
		}

		public int mostAtOnce() {
			return this.mostAtOnce.get();
		}

		@RateLimited(value = "db-writes", cost = "#items.size()")
		public int writeAll(List<String> items) {
			return items.size();
		}

		@RateLimited("hourly")
		public void hourly() {
		}

		@RateLimited("capped")
		public void failing() {
			throw new IllegalStateException("boom");
		}

		@RateLimited("capped")
		public void cappedReturn() {
		}

		@RateLimited("capped")
		public void holding() {
			int now = this.running.incrementAndGet();
			this.mostAtOnce.accumulateAndGet(now, Math::max);
			try {
				Thread.sleep(1);
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
			}
			finally {
				this.running.decrementAndGet();
			}
		}

		@RateLimited("capped")
		public CompletableFuture<String> async(CompletableFuture<String> result) {
			return result;
		}

		@RateLimited("capped")
		public Mono<String> mono(String value) {
			this.monoCalls.incrementAndGet();
			return Mono.just(value);
		}

		@RateLimited("capped")
		public Flux<Integer> flux(Flux<Integer> source) {
			return source;
		}
	}

	@RateLimited("class-level")
	static class ClassLevel {

		public void first() {
		}

		public void second() {
		}

		@Override
		public String toString() {
			return "class-level";
		}

		@Override
		public int hashCode() {
			return 42;
		}

		@Override
		public boolean equals(Object obj) {
			return this == obj;
		}
	}
}
