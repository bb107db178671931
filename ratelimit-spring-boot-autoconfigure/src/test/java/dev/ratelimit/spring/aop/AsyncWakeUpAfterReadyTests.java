package dev.ratelimit.spring.aop;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
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
 * A delayed {@code CompletionStage} call whose tokens are there has its start queued on the runner, and its
 * claim stays READY (the permit is taken on the runner's thread). A wake-up in that window (the call ahead
 * gives its claim back) starts a new round of polls, which finds the claim READY again and asks the runner a
 * second time. A runner with a bounded queue that is full refuses that duplicate start, and the refusal
 * cancels the claim whose first start the runner had already accepted: the call fails with "queue full"
 * and never runs. Found in review of 01b1914 (AsyncInvocations.Waiting.poll / runGranted).
 */
class AsyncWakeUpAfterReadyTests {

	private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

	private final AtomicLong clock = new AtomicLong(SECOND);

	private final ManualTimer timer = new ManualTimer(this.clock);

	private final ManualTimer queue = new ManualTimer(this.clock);

	/** The application's executor, one busy thread and room for two queued tasks (queue-capacity: 2). */
	private final Executor runner = (task) -> {
		if (this.queue.queued() >= 2) {
			throw new RejectedExecutionException("queue full");
		}
		this.queue.execute(task);
	};

	private final ApplicationContextRunner contextRunner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(Config.class)
		.withBean(RateLimitClock.class, () -> this.clock::get)
		.withBean(RateLimitExecutors.class, () -> new RateLimitExecutors(this.timer, this.runner))
		.withPropertyValues("ratelimit.buckets.slow.rate=1", "ratelimit.buckets.slow.limit=1",
				"ratelimit.buckets.slow.max-wait=5s");

	@Test
	void aWakeUpWhileTheStartIsQueuedDoesNotCancelTheCall() {
		this.contextRunner.run((context) -> {
			Service service = context.getBean(Service.class);
			assertThat(service.slow("a")).isCompletedWithValue("a"); // the token of the first second
			CompletableFuture<String> ahead = service.slow("ahead"); // its token comes at 2 s
			CompletableFuture<String> call = service.slow("call"); // its token comes at 3 s
			this.timer.runUntil(3 * SECOND); // both are there: the runner has both starts queued
			assertThat(this.queue.queued()).isEqualTo(2);
			ahead.cancel(false); // gives its claim back, which wakes the claims behind it
			this.timer.runUntil(3 * SECOND); // the wake-up's round of polls
			this.queue.runUntil(3 * SECOND); // the runner gets to the queued starts
			assertThat(call).as("the call whose start the runner accepted").isCompletedWithValue("call");
			assertThat(service.runs()).isEqualTo(2);
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

		int runs() {
			return this.runs.get();
		}

		@RateLimited("slow")
		public CompletableFuture<String> slow(String name) {
			this.runs.incrementAndGet();
			return CompletableFuture.completedFuture(name);
		}
	}
}
