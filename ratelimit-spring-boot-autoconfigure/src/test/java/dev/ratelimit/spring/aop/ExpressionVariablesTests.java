package dev.ratelimit.spring.aop;

import java.util.List;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * An annotation's expression that names a variable the call does not have fails start-up naming the
 * method, the attribute and the variables there are. Found by a user: {@code cost = "#row.size()"} on
 * {@code write(List<String> rows)} started, and every call then failed with SpEL's "Attempted to call
 * method size() on null context object", naming neither the method nor the attribute.
 */
class ExpressionVariablesTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withPropertyValues("ratelimit.buckets.db.rate=100", "ratelimit.buckets.db.max-wait=0");

	@Test
	void aCostNamingAVariableThatIsNotAParameterFailsStartUp() {
		this.runner.withBean(MisspeltCost.class).run((context) -> {
			assertThat(context).hasFailed();
			assertThat(context.getStartupFailure()).rootCause()
				.hasMessageContaining("cost '#row.size()' of")
				.hasMessageContaining("MisspeltCost.write")
				.hasMessageContaining("names #row, which the call does not have: its parameters are #rows");
		});
	}

	@Test
	void aSettleNamingAVariableThatIsNeitherAParameterNorTheResultFailsStartUp() {
		this.runner.withBean(MisspeltSettle.class).run((context) -> {
			assertThat(context).hasFailed();
			assertThat(context.getStartupFailure()).rootCause()
				.hasMessageContaining("names #reslt")
				.hasMessageContaining("settle also has #exception and #result");
		});
	}

	@Test
	void parametersByNameAndPositionAndTheResultAreAccepted() {
		this.runner.withBean(Fine.class).run((context) -> {
			assertThat(context).hasNotFailed();
			assertThat(context.getBean(Fine.class).write(List.of("a", "b"), "k")).isEqualTo(2);
		});
	}

	static class MisspeltCost {

		@RateLimited(value = "db", cost = "#row.size()")
		public void write(List<String> rows) {
		}
	}

	static class MisspeltSettle {

		@RateLimited(value = "db", settle = "#reslt")
		public int write(List<String> rows) {
			return rows.size();
		}
	}

	static class Fine {

		@RateLimited(value = "db", cost = "#rows.size() + #p1.length() - #a1.length()", key = "#key + #a0.size()",
				refundIf = "#exception != null", settle = "#result")
		public int write(List<String> rows, String key) {
			return rows.size();
		}
	}
}
