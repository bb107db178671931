package dev.ratelimit.spring.aop;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.autoconfigure.RateLimitMetricsAutoConfiguration;
import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The {@code ratelimit.wait} timer of a bucket in shadow mode, which the contract says "is not recorded".
 * Found by trying the sample app under load: with a clock that moves (as System.nanoTime does), calls
 * that found their tokens there were timed with the microseconds the aspect itself took. Sample app,
 * 16 connections on GET /api/search for 10 s: ratelimit_wait_seconds_count{bucket="search-rollout"} 55
 * (sum 0.53 ms, max 43 us) for a shadow bucket with max-wait 0, where no call can ever wait. And the
 * timer of a bucket on a {@code CompletableFuture} method recorded every granted call, with the
 * microseconds between its claim and its permit, where only calls that waited for tokens are timed.
 */
class WaitTimerTests {

	/** A clock that moves 1 microsecond every time it is read. */
	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(MetricsAutoConfiguration.class,
				CompositeMeterRegistryAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
				RateLimitAutoConfiguration.class, RateLimitMetricsAutoConfiguration.class))
		.withUserConfiguration(Config.class)
		.withBean(RateLimitClock.class, () -> () -> this.now.addAndGet(1_000))
		.withPropertyValues("ratelimit.buckets.rollout.rate=5", "ratelimit.buckets.rollout.limit=5",
				"ratelimit.buckets.rollout.max-wait=0", "ratelimit.buckets.rollout.mode=shadow",
				"ratelimit.buckets.reports.rate=5", "ratelimit.buckets.reports.limit=5",
				"ratelimit.buckets.reports.max-wait=1s");

	private static long timed(ApplicationContext context, String bucket) {
		return context.getBean(MeterRegistry.class).get("ratelimit.wait").tag("bucket", bucket).timer().count();
	}

	@Test
	void aShadowBucketNeverRecordsTheWaitTimer() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			service.search();
			assertThat(timed(context, "rollout")).isZero();
		});
	}

	@Test
	void asynchronousAndReactiveCallsThatFoundTheirTokensThereAreNotTimedAsWaits() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			for (int i = 0; i < 3; i++) {
				assertThat(service.report().join()).isEqualTo("report");
			}
			assertThat(service.reportLater().block(java.time.Duration.ofSeconds(5))).isEqualTo("report");
			MeterRegistry registry = context.getBean(MeterRegistry.class);
			assertThat(registry.get("ratelimit.calls").tag("bucket", "reports").tag("outcome", "granted").functionCounter()
				.count()).isEqualTo(4);
			assertThat(timed(context, "reports")).isZero();
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

		@RateLimited("rollout")
		public String search() {
			return "found";
		}

		@RateLimited("reports")
		public CompletableFuture<String> report() {
			return CompletableFuture.completedFuture("report");
		}

		@RateLimited("reports")
		public reactor.core.publisher.Mono<String> reportLater() {
			return reactor.core.publisher.Mono.just("report");
		}

	}
}
