package dev.ratelimit.spring.aop;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.engine.RateLimitExecutors;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The application stops while a {@code CompletableFuture} call waits for its tokens: the starter's
 * timer ends with the context, so the waiting call's future must end too (failed), not stay pending
 * forever with nobody left to poll it.
 */
class ShutdownWhileWaitingTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(ReportsConfiguration.class)
		.withPropertyValues("ratelimit.buckets.reports.rate=1", "ratelimit.buckets.reports.period=1h",
				"ratelimit.buckets.reports.limit=1", "ratelimit.buckets.reports.max-wait=2h");

	@Test
	void aCallWaitingWhenTheContextClosesFailsInsteadOfHangingAndNeverRuns() {
		AtomicReference<CompletableFuture<String>> waiting = new AtomicReference<>();
		AtomicReference<Reports> reports = new AtomicReference<>();
		this.runner.run((context) -> {
			reports.set(context.getBean(Reports.class));
			assertThat(reports.get().render("first").join()).isEqualTo("first");
			waiting.set(reports.get().render("second")); // an hour away
			assertThat(waiting.get()).isNotDone();
		});
		// the context is closed now
		Awaitility.await()
			.atMost(Duration.ofSeconds(10))
			.untilAsserted(() -> assertThat(waiting.get()).isCompletedExceptionally());
		assertThat(reports.get().calls()).isEqualTo(1);
	}

	/**
	 * What ends a waiting call at shutdown is held only while the call waits for its tokens. Found in
	 * review: it was registered for every call, including those that found their tokens there (a
	 * concurrent set's add and remove on the hot path), and held until the call's future completed, so
	 * the calls of a method whose futures never complete (a client that is never answered, say) stayed
	 * held, arguments included, for as long as the application ran.
	 */
	@Test
	void callsThatNoLongerWaitForTokensAreNotHeldUntilShutdown() {
		this.runner.withPropertyValues("ratelimit.buckets.reports.rate=1000000", "ratelimit.buckets.reports.period=1s",
				"ratelimit.buckets.reports.limit=1000").run((context) -> {
					Reports reports = context.getBean(Reports.class);
					for (int i = 0; i < 100; i++) {
						assertThat(reports.never("call " + i)).isNotDone();
					}
					java.lang.reflect.Field onClose = RateLimitExecutors.class.getDeclaredField("onClose");
					onClose.setAccessible(true);
					assertThat((java.util.Set<?>) onClose.get(context.getBean(RateLimitExecutors.class)))
						.as("calls held for shutdown after they got their tokens")
						.isEmpty();
				});
	}

	@Configuration(proxyBeanMethods = false)
	static class ReportsConfiguration {

		@Bean
		Reports reportService() {
			return new Reports();
		}
	}

	static class Reports {

		private final AtomicInteger calls = new AtomicInteger();

		@RateLimited("reports")
		public CompletableFuture<String> render(String name) {
			this.calls.incrementAndGet();
			return CompletableFuture.completedFuture(name);
		}

		@RateLimited("reports")
		public CompletableFuture<String> never(String name) {
			return new CompletableFuture<>(); // never completes
		}

		public int calls() {
			return this.calls.get();
		}
	}
}
