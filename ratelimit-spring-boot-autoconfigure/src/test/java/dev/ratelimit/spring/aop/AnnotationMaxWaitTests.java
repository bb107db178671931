package dev.ratelimit.spring.aop;

import java.time.Duration;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The annotation's {@code maxWait} takes a unit, as the {@code max-wait} property does. Found by an
 * auditor: {@code maxWait = "5"} started and waited 5 ms (Spring's reading of a bare number), where the
 * property {@code max-wait: 5} fails start-up asking for a unit.
 */
class AnnotationMaxWaitTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withPropertyValues("ratelimit.buckets.db.rate=100");

	@Test
	void aBareNumberFailsStartUpAskingForAUnit() {
		this.runner.withBean(BareNumber.class).run((context) -> {
			assertThat(context).hasFailed();
			assertThat(context.getStartupFailure()).rootCause()
				.hasMessageContaining("maxWait '5' of")
				.hasMessageContaining("BareNumber.write")
				.hasMessageContaining("has no unit")
				.hasMessageContaining("5ms or 5s");
		});
	}

	@Test
	void zeroAndDurationsWithAUnitStart() {
		this.runner.withBean(WithUnits.class).run((context) -> assertThat(context).hasNotFailed());
		assertThat(AnnotatedLimit.parseMaxWait(" 0 ", "m")).isZero();
		assertThat(AnnotatedLimit.parseMaxWait("5s", "m")).isEqualTo(Duration.ofSeconds(5));
		assertThat(AnnotatedLimit.parseMaxWait("PT0.5S", "m")).isEqualTo(Duration.ofMillis(500));
	}

	static class BareNumber {

		@RateLimited(value = "db", maxWait = "5")
		public void write() {
		}
	}

	static class WithUnits {

		@RateLimited(value = "db", maxWait = "0")
		public void none() {
		}

		@RateLimited(value = "db", maxWait = "250ms")
		public void some() {
		}

		@RateLimited(value = "db", maxWait = "PT2S")
		public void more() {
		}
	}
}
