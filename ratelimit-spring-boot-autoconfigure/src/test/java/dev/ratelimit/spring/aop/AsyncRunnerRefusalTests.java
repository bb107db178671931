package dev.ratelimit.spring.aop;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.engine.RateLimitExecutors;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A {@code CompletionStage} call whose tokens came while it waited, and that did not start after all: the
 * runner refused it (the application's executor shutting down), or its caller cancelled it before the runner
 * got to it. It never ran, so its claim goes back whole, the rate's tokens with the rest. Found by a
 * reviewer: the permit was taken on the timer before the runner was asked, so a refused call gave back its
 * capped tokens but not the rate's, and a call cancelled in that window ran anyway.
 */
class AsyncRunnerRefusalTests {

	private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

	private final AtomicLong clock = new AtomicLong(SECOND);

	private final ManualTimer timer = new ManualTimer(this.clock);

	private final AtomicBoolean refusing = new AtomicBoolean();

	private final ManualTimer queue = new ManualTimer(this.clock);

	/** The application's executor: refuses while {@code refusing}, else queues for the test to run. */
	private final Executor runner = (task) -> {
		if (this.refusing.get()) {
			throw new RejectedExecutionException("shutting down");
		}
		this.queue.execute(task);
	};

	private final ApplicationContextRunner contextRunner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(Config.class)
		.withBean(RateLimitClock.class, () -> this.clock::get)
		.withBean(RateLimitExecutors.class, () -> new RateLimitExecutors(this.timer, this.runner))
		// a token a second, one at most; the capped one also holds its token while its call runs
		.withPropertyValues("ratelimit.buckets.slow.rate=1", "ratelimit.buckets.slow.limit=1",
				"ratelimit.buckets.slow.max-wait=5s", "ratelimit.buckets.held.rate=1", "ratelimit.buckets.held.limit=1",
				"ratelimit.buckets.held.capped-release=true", "ratelimit.buckets.held.max-wait=5s");

	@Test
	void aCallTheRunnerRefusesGivesItsTokensBack() {
		this.contextRunner.run((context) -> {
			Service service = context.getBean(Service.class);
			RateLimiter slow = context.getBean("slow", RateLimiter.class);
			assertThat(service.slow()).isCompletedWithValue("ran"); // the token of the first second
			CompletableFuture<String> waiting = service.slow(); // its token comes at 2 s
			this.refusing.set(true);
			this.timer.runUntil(2 * SECOND);
			assertThat(waiting).isCompletedExceptionally();
			assertThat(service.runs()).isEqualTo(1);
			// the token that came at 2 s was not used: it is there
			assertThat(slow.tryAcquire(1)).isTrue();
		});
	}

	@Test
	void aCappedCallTheRunnerRefusesGivesBackItsRateAndItsPlaceInFlight() {
		this.contextRunner.run((context) -> {
			Service service = context.getBean(Service.class);
			RateLimiter held = context.getBean("held", RateLimiter.class);
			CompletableFuture<String> work = new CompletableFuture<>();
			assertThat(service.held(work)).isNotDone(); // in flight until work completes
			CompletableFuture<String> waiting = service.held(CompletableFuture.completedFuture("ran"));
			this.refusing.set(true);
			work.complete("done"); // its release, and the token of the next second, let the waiting call go
			this.timer.runUntil(2 * SECOND);
			assertThat(waiting).isCompletedExceptionally();
			assertThat(held.snapshot().inFlight()).isZero();
			assertThat(held.tryAcquire(1)).isTrue();
		});
	}

	@Test
	void aCallCancelledBeforeTheRunnerStartsItDoesNotRunAndGivesItsTokensBack() {
		this.contextRunner.run((context) -> {
			Service service = context.getBean(Service.class);
			RateLimiter slow = context.getBean("slow", RateLimiter.class);
			assertThat(service.slow()).isCompletedWithValue("ran");
			CompletableFuture<String> waiting = service.slow();
			this.timer.runUntil(2 * SECOND); // its tokens are there: the runner has its start queued
			assertThat(waiting).isNotDone();
			waiting.cancel(false);
			this.queue.runUntil(2 * SECOND);
			assertThat(service.runs()).isEqualTo(1);
			assertThat(slow.tryAcquire(1)).isTrue();
		});
	}

	@Configuration(proxyBeanMethods = false)
	static class Config {

		@Bean
		Service service() {
			return new Service();
		}
	}

	static class Service {

		private final AtomicInteger runs = new AtomicInteger();

		public int runs() {
			return this.runs.get();
		}

		@RateLimited("slow")
		public CompletableFuture<String> slow() {
			this.runs.incrementAndGet();
			return CompletableFuture.completedFuture("ran");
		}

		@RateLimited("held")
		public CompletableFuture<String> held(CompletableFuture<String> work) {
			return work;
		}
	}
}
