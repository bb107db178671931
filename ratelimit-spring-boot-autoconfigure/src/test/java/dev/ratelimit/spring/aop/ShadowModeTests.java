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
import dev.ratelimit.spring.autoconfigure.RateLimitEndpointAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitMetricsAutoConfiguration;
import dev.ratelimit.spring.actuate.RateLimitsEndpoint;
import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Shadow mode (contract revision 2): the bucket decides as usual but never holds a call back, and its
 * meters count what it would have done. Time comes from a fake clock.
 */
class ShadowModeTests {

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(MetricsAutoConfiguration.class,
				CompositeMeterRegistryAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
				RateLimitAutoConfiguration.class, RateLimitMetricsAutoConfiguration.class,
				RateLimitEndpointAutoConfiguration.class))
		.withUserConfiguration(RolloutConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withPropertyValues("management.endpoints.web.exposure.include=ratelimits",
				"ratelimit.buckets.new-limit.rate=1", "ratelimit.buckets.new-limit.period=1h",
				"ratelimit.buckets.new-limit.max-wait=0", "ratelimit.buckets.new-limit.mode=shadow",
				"ratelimit.buckets.paced.rate=10", "ratelimit.buckets.paced.limit=1",
				"ratelimit.buckets.paced.max-wait=1s", "ratelimit.buckets.paced.mode=shadow",
				"ratelimit.buckets.enforced.rate=1", "ratelimit.buckets.enforced.period=1h",
				"ratelimit.buckets.enforced.max-wait=0");

	private static RateLimiterSnapshot snapshot(ApplicationContext context, String name) {
		return context.getBean(name, RateLimiter.class).snapshot();
	}

	private static double calls(ApplicationContext context, String bucket, String outcome) {
		return context.getBean(MeterRegistry.class)
			.get("ratelimit.calls")
			.tags("bucket", bucket, "outcome", outcome)
			.functionCounter()
			.count();
	}

	@Test
	void neverRefusesAndCountsWhatItWouldHaveRefused() {
		this.runner.run((context) -> {
			Rollout rollout = context.getBean(Rollout.class);
			for (int i = 0; i < 5; i++) {
				rollout.newLimit();
			}
			assertThat(rollout.calls()).isEqualTo(5);
			assertThat(calls(context, "new-limit", "granted")).isEqualTo(1);
			assertThat(calls(context, "new-limit", "shadow-rejected")).isEqualTo(4);
			assertThat(calls(context, "new-limit", "rejected")).isZero();
			// a refused call keeps nothing: the bucket is exactly as an enforcing one would be
			assertThat(snapshot(context, "new-limit").available()).isZero();
			assertThat(snapshot(context, "new-limit").deficiency()).isZero();
		});
	}

	@Test
	void aCallItWouldMakeWaitRunsAtOnceKeepingItsTokensAndTheWaitIsNotTimed() {
		this.runner.run((context) -> {
			Rollout rollout = context.getBean(Rollout.class);
			rollout.paced();
			long start = System.nanoTime();
			rollout.paced(); // would wait 100 ms
			rollout.paced(); // would wait 200 ms
			assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofSeconds(5));
			assertThat(rollout.calls()).isEqualTo(3);
			assertThat(calls(context, "paced", "granted")).isEqualTo(3);
			assertThat(calls(context, "paced", "shadow-rejected")).isZero();
			assertThat(context.getBean(MeterRegistry.class).get("ratelimit.wait").tag("bucket", "paced").timer().count())
				.isZero();
			// the two calls kept their tokens: an enforcing caller now would wait 300 ms
			RateLimiter paced = context.getBean("paced", RateLimiter.class);
			assertThatThrownBy(() -> paced.acquire(1, Duration.ZERO)).isInstanceOfSatisfying(
					RateLimitExceededException.class,
					(ex) -> assertThat(ex.getRetryAfter()).isEqualTo(Duration.ofMillis(300)));
		});
	}

	@Test
	void asyncAndReactiveCallsInShadowModeNeverFail() throws Exception {
		this.runner.run((context) -> {
			Rollout rollout = context.getBean(Rollout.class);
			for (int i = 0; i < 3; i++) {
				assertThat(rollout.async().get(2, TimeUnit.SECONDS)).isEqualTo("async");
				StepVerifier.create(rollout.mono()).expectNext("mono").verifyComplete();
				StepVerifier.create(rollout.flux()).expectNext("a", "b").verifyComplete();
			}
			assertThat(calls(context, "new-limit", "granted")).isEqualTo(1);
			assertThat(calls(context, "new-limit", "shadow-rejected")).isEqualTo(8);
		});
	}

	@Test
	void theEndpointShowsAndSwitchesTheMode() {
		this.runner.run((context) -> {
			Rollout rollout = context.getBean(Rollout.class);
			RateLimitsEndpoint endpoint = context.getBean(RateLimitsEndpoint.class);
			assertThat(endpoint.bucket("new-limit").mode()).isEqualTo("shadow");
			assertThat(endpoint.bucket("enforced").mode()).isEqualTo("enforce");
			rollout.newLimit();
			rollout.newLimit();
			assertThat(endpoint.update("new-limit", null, null, "enforce").mode()).isEqualTo("enforce");
			assertThatThrownBy(rollout::newLimit).isInstanceOf(RateLimitExceededException.class);
			assertThat(calls(context, "new-limit", "rejected")).isEqualTo(1);
			assertThat(calls(context, "new-limit", "shadow-rejected")).isEqualTo(1);
			assertThat(endpoint.update("enforced", null, null, "shadow").mode()).isEqualTo("shadow");
			rollout.enforced();
			rollout.enforced();
			assertThat(calls(context, "enforced", "shadow-rejected")).isEqualTo(1);
			assertThatThrownBy(() -> endpoint.update("enforced", null, null, "off"))
				.isInstanceOf(InvalidEndpointRequestException.class)
				.hasMessageContaining("enforce or shadow");
		});
	}

	@Test
	void ratelimitModeShadowPutsEveryBucketInShadowModeWhateverItsOwnMode() {
		this.runner.withPropertyValues("ratelimit.mode=shadow").run((context) -> {
			Rollout rollout = context.getBean(Rollout.class);
			rollout.enforced();
			rollout.enforced();
			assertThat(rollout.calls()).isEqualTo(2);
			assertThat(calls(context, "enforced", "shadow-rejected")).isEqualTo(1);
			RateLimitsEndpoint endpoint = context.getBean(RateLimitsEndpoint.class);
			assertThat(endpoint.bucket("enforced").mode()).isEqualTo("shadow");
			assertThatThrownBy(() -> endpoint.update("enforced", null, 5L, "enforce"))
				.isInstanceOf(InvalidEndpointRequestException.class)
				.hasMessageContaining("ratelimit.mode is shadow");
			// refused as a whole: the limit did not change either
			assertThat(endpoint.bucket("enforced").limit()).isEqualTo(1L);
		});
	}

	@Test
	void aShadowBucketBesideAnEnforcingOneNeverHoldsTheCallBack() {
		this.runner.run((context) -> {
			Rollout rollout = context.getBean(Rollout.class);
			rollout.both();
			// new-limit (shadow) is empty now; enforced is empty too, and refuses for itself
			assertThatThrownBy(rollout::both).isInstanceOfSatisfying(RateLimitExceededException.class,
					(ex) -> assertThat(ex.getBucket()).isEqualTo("enforced"));
			this.now.addAndGet(TimeUnit.HOURS.toNanos(1));
			rollout.newLimit();
			// enforced has its token again; new-limit would refuse, and lets the call run
			rollout.both();
			assertThat(calls(context, "new-limit", "shadow-rejected")).isEqualTo(1);
			assertThat(calls(context, "enforced", "rejected")).isEqualTo(1);
		});
	}

	@Test
	void anUnknownModeFailsStartUpNamingTheBucketAndTheAcceptedValues() {
		this.runner.withPropertyValues("ratelimit.buckets.enforced.mode=shadw").run((context) -> {
			assertThat(context).hasFailed();
			Throwable failure = context.getStartupFailure();
			while (failure != null && !(failure instanceof RateLimitConfigurationException)) {
				failure = failure.getCause();
			}
			assertThat(failure).isNotNull()
				.hasMessageContaining("enforced")
				.hasMessageContaining("mode")
				.hasMessageContaining("enforce or shadow");
		});
	}

	@Configuration(proxyBeanMethods = false)
	static class RolloutConfiguration {

		@Bean
		Rollout rollout() {
			return new Rollout();
		}
	}

	static class Rollout {

		private final AtomicInteger calls = new AtomicInteger();

		int calls() {
			return this.calls.get();
		}

		@RateLimited("new-limit")
		public void newLimit() {
			this.calls.incrementAndGet();
		}

		@RateLimited("paced")
		public void paced() {
			this.calls.incrementAndGet();
		}

		@RateLimited("enforced")
		public void enforced() {
			this.calls.incrementAndGet();
		}

		@RateLimited("new-limit")
		@RateLimited("enforced")
		public void both() {
			this.calls.incrementAndGet();
		}

		@RateLimited("new-limit")
		public CompletableFuture<String> async() {
			return CompletableFuture.completedFuture("async");
		}

		@RateLimited("new-limit")
		public Mono<String> mono() {
			return Mono.just("mono");
		}

		@RateLimited("new-limit")
		public Flux<String> flux() {
			return Flux.just("a", "b");
		}
	}
}
