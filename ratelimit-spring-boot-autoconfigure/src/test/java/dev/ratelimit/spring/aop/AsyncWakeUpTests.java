package dev.ratelimit.spring.aop;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.autoconfigure.RateLimitMetricsAutoConfiguration;
import dev.ratelimit.spring.engine.RateLimitExecutors;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The work the starter's one timer thread is given while {@code CompletionStage} calls wait: it must
 * not grow with the events that happen meanwhile, or under load the timer falls behind and every
 * waiting call is granted as late as it is behind. Found with the sample app under overload (wrk,
 * 32 connections on its {@code reports} endpoint: rate 5, limit 5, max-wait 2 s): every refusal woke
 * every waiting call and each wake-up queued a poll, ~15,000 polls a second on the timer for ~1,000
 * refusals; 49 of 91 calls were granted after their max-wait, the last 0.7 s after.
 *
 * <p>Nothing runs on its own: a fake clock, and a timer the test runs ({@link ManualTimer}), so the
 * counts are exact whatever the machine is doing.
 */
class AsyncWakeUpTests {

	private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

	private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);

	private final AtomicLong clock = new AtomicLong(SECOND);

	private final ManualTimer timer = new ManualTimer(this.clock);

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(MetricsAutoConfiguration.class,
				CompositeMeterRegistryAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
				RateLimitAutoConfiguration.class, RateLimitMetricsAutoConfiguration.class))
		.withUserConfiguration(Config.class)
		.withBean(RateLimitClock.class, () -> this.clock::get)
		.withBean(RateLimitExecutors.class, () -> new RateLimitExecutors(this.timer, Runnable::run))
		// the sample's reports bucket
		.withPropertyValues("ratelimit.buckets.reports.rate=5", "ratelimit.buckets.reports.limit=5",
				"ratelimit.buckets.reports.max-wait=2s",
				// 3 calls in flight at most, a token a millisecond
				"ratelimit.buckets.pool.rate=1000", "ratelimit.buckets.pool.limit=3",
				"ratelimit.buckets.pool.capped-release=true", "ratelimit.buckets.pool.max-wait=1s");

	@Test
	void refusalsGiveTheTimerNothingToDoForTheCallsThatWait() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			for (int i = 0; i < 5; i++) {
				assertThat(service.report()).isCompletedWithValue("report");
			}
			List<CompletableFuture<String>> waiting = new ArrayList<>();
			for (int i = 0; i < 10; i++) {
				waiting.add(service.report()); // due at 200 ms, 400 ms, ... 2 s
			}
			assertThat(this.timer.queued()).isEqualTo(10); // one poll each, at its due time
			for (int i = 0; i < 1_000; i++) {
				assertThat(service.report()).isCompletedExceptionally();
			}
			// a refused call is last in line: nobody moved up, nobody has anything to poll
			assertThat(this.timer.queued()).isEqualTo(10);
			this.timer.runUntil(this.clock.get() + 2 * SECOND);
			assertThat(this.timer.ran()).isEqualTo(10);
			for (CompletableFuture<String> call : waiting) {
				assertThat(call).isCompletedWithValue("report");
			}
			// each granted at its due time: 200 ms + 400 ms + ... + 2 s
			Timer wait = context.getBean(MeterRegistry.class).get("ratelimit.wait").tag("bucket", "reports").timer();
			assertThat(wait.count()).isEqualTo(10);
			assertThat((long) wait.totalTime(TimeUnit.NANOSECONDS)).isEqualTo(55 * 200 * MS);
		});
	}

	@Test
	void wakeUpsThatComeWhileAPollIsQueuedAddNoOtherPoll() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			List<CompletableFuture<String>> held = new ArrayList<>();
			for (int i = 0; i < 3; i++) {
				held.add(new CompletableFuture<>());
				assertThat(service.pooled(held.get(i))).isNotDone();
			}
			List<CompletableFuture<String>> waiting = new ArrayList<>();
			for (int i = 0; i < 4; i++) {
				waiting.add(service.pooled(CompletableFuture.completedFuture("pooled")));
			}
			this.timer.runUntil(this.clock.get() + 10 * MS); // waiting for releases, polled every millisecond
			assertThat(waiting).noneMatch(CompletableFuture::isDone);
			int queued = this.timer.queued();
			// three calls complete at once, each releasing its token, each waking every waiting call
			for (CompletableFuture<String> call : held) {
				call.complete("done");
			}
			// one poll round each for the four waiting calls, not one per release
			assertThat(this.timer.queued() - queued).isEqualTo(4);
			// and they go ahead at once, in order: each one that completes releases the next one's token
			this.timer.runUntil(this.clock.get());
			for (CompletableFuture<String> call : waiting) {
				assertThat(call).isCompletedWithValue("pooled");
			}
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

		@RateLimited("reports")
		public CompletableFuture<String> report() {
			return CompletableFuture.completedFuture("report");
		}

		@RateLimited("pool")
		public CompletableFuture<String> pooled(CompletableFuture<String> work) {
			return work;
		}
	}
}
