package dev.ratelimit.spring.aop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code settle} on the blocking path with several threads, on a fake clock: a caller already
 * waiting keeps its place when an earlier call settles more than its cost, the callers after it pay
 * the excess, and the settled tokens never exceed limit + rate x time (plus the excess of the calls
 * still running).
 */
class SettleUnderConcurrencyTests {

	private static final Duration PATIENCE = Duration.ofSeconds(30);

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(LlmConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withPropertyValues("ratelimit.buckets.llm.rate=10", "ratelimit.buckets.llm.limit=10",
				"ratelimit.buckets.llm.max-wait=1h");

	private static RateLimiterSnapshot snapshot(ApplicationContext context) {
		return context.getBean("llm", RateLimiter.class).snapshot();
	}

	@Test
	void aWaitingCallerKeepsItsPlaceAndTheCallerAfterItPaysTheExcess() throws Exception {
		this.runner.run((context) -> {
			Llm llm = context.getBean(Llm.class);
			ExecutorService threads = Executors.newFixedThreadPool(3);
			try {
				CountDownLatch finish = new CountDownLatch(1);
				Future<Long> a = threads.submit(() -> llm.complete(10, 30, finish)); // the whole bucket, uses 30
				Awaitility.await().atMost(PATIENCE).until(() -> llm.running() == 1);
				Future<Long> b = threads.submit(() -> llm.complete(5, 5, null));
				Awaitility.await().atMost(PATIENCE).until(() -> snapshot(context).waiting() == 1);
				assertThat(snapshot(context).deficiency()).isEqualTo(5);
				finish.countDown();
				assertThat(a.get(30, TimeUnit.SECONDS)).isEqualTo(30);
				// b still waits for its 5 tokens only; the 20 extra are behind it
				assertThat(snapshot(context).deficiency()).isEqualTo(25);
				Future<Long> c = threads.submit(() -> llm.complete(1, 1, null));
				Awaitility.await().atMost(PATIENCE).until(() -> snapshot(context).waiting() == 2);
				assertThat(snapshot(context).deficiency()).isEqualTo(26);
				this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(500));
				assertThat(b.get(30, TimeUnit.SECONDS)).isEqualTo(5);
				assertThat(c.isDone()).isFalse();
				this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(2000));
				assertThat(snapshot(context).deficiency()).isEqualTo(1);
				assertThat(c.isDone()).isFalse();
				this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(100));
				assertThat(c.get(30, TimeUnit.SECONDS)).isEqualTo(1);
				// 30 + 5 + 1 settled in 2.6 s: exactly limit + rate x 2.6 s
				assertThat(llm.settled()).isEqualTo(36);
			}
			finally {
				threads.shutdownNow();
			}
		});
	}

	@Test
	void settledTokensStayWithinTheBoundWithSeveralThreads() throws Exception {
		this.runner.withPropertyValues("ratelimit.buckets.llm.rate=1000").run((context) -> {
			Llm llm = context.getBean(Llm.class);
			int n = 4;
			ExecutorService threads = Executors.newFixedThreadPool(n);
			AtomicBoolean stop = new AtomicBoolean();
			List<Future<?>> loops = new ArrayList<>();
			try {
				for (int i = 0; i < n; i++) {
					loops.add(threads.submit(() -> {
						while (!stop.get()) {
							llm.complete(1, 3, null);
						}
						return null;
					}));
				}
				long start = this.now.get();
				for (int step = 0; step < 100; step++) {
					Awaitility.await().atMost(PATIENCE).until(() -> snapshot(context).waiting() == n);
					long elapsedMillis = (this.now.get() - start) / 1_000_000;
					// every thread waits: what went out is at most limit + rate x elapsed, plus the excess
					// (2 each) of calls that were granted while the bucket still had a token and went into debt
					assertThat(llm.settled()).isLessThanOrEqualTo(10 + elapsedMillis + 2 * n);
					this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(1));
				}
				long elapsedMillis = (this.now.get() - start) / 1_000_000;
				Awaitility.await().atMost(PATIENCE).until(() -> snapshot(context).waiting() == n);
				System.out.printf("settle x%d threads: %d calls, %d tokens settled in %d ms (limit + rate x t = %d)%n", n,
						llm.calls(), llm.settled(), elapsedMillis, 10 + elapsedMillis);
				assertThat(llm.settled()).isLessThanOrEqualTo(10 + elapsedMillis + 2 * n);
				assertThat(llm.settled()).isGreaterThanOrEqualTo(elapsedMillis - 10);
			}
			finally {
				stop.set(true);
				threads.shutdownNow();
			}
		});
	}

	@Configuration(proxyBeanMethods = false)
	static class LlmConfiguration {

		@Bean
		Llm llmService() {
			return new Llm();
		}
	}

	static class Llm {

		private final AtomicLong running = new AtomicLong();

		private final AtomicLong settled = new AtomicLong();

		private final AtomicLong calls = new AtomicLong();

		public long running() {
			return this.running.get();
		}

		public long settled() {
			return this.settled.get();
		}

		public long calls() {
			return this.calls.get();
		}

		@RateLimited(value = "llm", cost = "#maxTokens", settle = "#result")
		public long complete(long maxTokens, long used, CountDownLatch finish) throws InterruptedException {
			this.running.incrementAndGet();
			this.calls.incrementAndGet();
			if (finish != null) {
				finish.await();
			}
			this.settled.addAndGet(used);
			return used;
		}
	}
}
