package dev.ratelimit.spring;

import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.core.env.SystemEnvironmentPropertySource;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Contract, "Configuration": "Invalid values (...) fail start-up with a message naming the bucket, the
 * property and the accepted values." A value that binding cannot convert at all (a rate that is not a
 * number, a period with a fractional unit, a max-wait with a space) failed start-up with Boot's own
 * binding message, which says "failed to convert" and never what is accepted; now it fails with the
 * starter's message, for every typed bucket property ({@code keys.max} included, and so for the buckets
 * that are templates of per-key buckets) and every typed property outside the buckets (web rules,
 * executor). What binding converts still starts: each form of a duration Boot takes, spaces around a
 * number, placeholders, environment variables, and a value that a higher source overrides.
 */
class UnconvertibleValuesFailStartUpSayingWhatIsAcceptedTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class));

	private ApplicationContextRunner withEnvironmentVariables(Map<String, Object> variables) {
		return this.runner.withInitializer((context) -> context.getEnvironment()
			.getPropertySources()
			.addFirst(new SystemEnvironmentPropertySource(
					StandardEnvironment.SYSTEM_ENVIRONMENT_PROPERTY_SOURCE_NAME, variables)));
	}

	@ParameterizedTest(name = "{0}={1}")
	@CsvSource(delimiter = '|', value = { "rate|fast|shared|a number > 0",
			"period|1.5s|shared|a positive duration such as 500ms, 2s, 1m or PT0.5S",
			"period|1.5|shared|a positive duration such as 500ms, 2s, 1m or PT0.5S",
			"max-wait|500 ms|shared|a duration >= 0 such as 500ms, 2s, 1m or PT0.5S",
			"limit|lots|shared|a whole number >= 1", "limit|lots|hybrid|a whole number >= 1",
			"initial|half|shared|a whole number from 0 to the limit", "capped-release|maybe|shared|true or false",
			"burst-ratio|fast|hybrid|a number >= 1.0", "max-backlog|10 s|hybrid|a duration >= 0 such as 500ms",
			"redis.timeout|fast|shared|a positive duration such as 500ms",
			"redis.lease|1.5m|shared|a duration of at least 1ms such as 500ms",
			"keys.max|many|shared|a whole number >= 1", "keys.max|99999999999|shared|at most 2147483647" })
	void aValueThatIsNotOfThePropertysKindFailsStartUpSayingWhatIsAccepted(String property, String value,
			String type, String accepted) {
		this.runner
			.withPropertyValues("ratelimit.buckets.b.type=" + type, "ratelimit.buckets.b.rate=10",
					"ratelimit.buckets.b." + property + "=" + value)
			.run((context) -> {
				RateLimitConfigurationException ex = failure(context);
				assertThat(ex.getDescription()).startsWith("Bucket 'b': ratelimit.buckets.b." + property + " is '"
						+ value + "'");
				assertThat(ex.getAction()).as("the accepted values are said")
					.startsWith("Set ratelimit.buckets.b." + property + " to ")
					.contains(accepted);
			});
	}

	/** An environment variable's value: the property as binding reads it, and the variable as the origin. */
	@Test
	void anEnvironmentVariableThatDoesNotConvertIsNamedWithItsOrigin() {
		withEnvironmentVariables(Map.of("RATELIMIT_BUCKETS_B_RATE", "10", "RATELIMIT_BUCKETS_B_MAXWAIT", "500 ms"))
			.run((context) -> {
				RateLimitConfigurationException ex = failure(context);
				assertThat(ex.getDescription()).contains("Bucket 'b'")
					.contains("ratelimit.buckets.b.max-wait is '500 ms'")
					.contains("RATELIMIT_BUCKETS_B_MAXWAIT");
				assertThat(ex.getAction()).contains("a duration >= 0 such as 500ms");
			});
	}

	/**
	 * Issue #30: a bad {@code mode} (and any value of a bucket's enum property: {@code type},
	 * {@code backend}, {@code redis.on-failure}) was reported without where it was set, which every other
	 * error gives.
	 */
	@ParameterizedTest(name = "{0}={1}")
	@CsvSource(delimiter = '|', value = { "MODE|enforcing|mode", "TYPE|sharred|type", "BACKEND|redls|backend" })
	void aBadChoiceOfABucketIsNamedWithWhereItWasSet(String variable, String value, String property) {
		withEnvironmentVariables(Map.of("RATELIMIT_BUCKETS_B_RATE", "10", "RATELIMIT_BUCKETS_B_" + variable, value))
			.run((context) -> assertThat(failure(context).getDescription())
				.contains("ratelimit.buckets.b." + property + " is '" + value + "'")
				.contains("RATELIMIT_BUCKETS_B_" + variable));
	}

	/** camelCase binds to the same property, so it is checked (and named) as that property. */
	@Test
	void aCamelCaseNameThatDoesNotConvertIsNamedAsTheProperty() {
		this.runner.withPropertyValues("ratelimit.buckets.b.rate=10", "ratelimit.buckets.b.burstRatio=quick",
				"ratelimit.buckets.b.type=hybrid")
			.run((context) -> assertThat(failure(context).getAction())
				.isEqualTo("Set ratelimit.buckets.b.burst-ratio to a number >= 1.0, fractions allowed (1.0 never"
						+ " catches up)."));
	}

	/** The typed properties outside the buckets: a web rule's cost, the executor's settings, the order. */
	@ParameterizedTest(name = "{0}={1}")
	@CsvSource(delimiter = '|', value = { "web.rules[0].cost|one|a whole number >= 0",
			"executor.max-threads|four|a whole number >= 0", "executor.virtual-threads|maybe|true or false",
			"executor.propagate-context|maybe|true or false", "web.expose-key|maybe|true or false",
			"interceptor-order|first|a whole number from -2147483648 to 2147483647" })
	void aValueOutsideTheBucketsThatDoesNotConvertFailsStartUpSayingWhatIsAccepted(String property, String value,
			String accepted) {
		this.runner
			.withPropertyValues("ratelimit.buckets.b.rate=10", "ratelimit.web.rules[0].paths=/api/**",
					"ratelimit.web.rules[0].bucket=b", "ratelimit." + property + "=" + value)
			.run((context) -> {
				RateLimitConfigurationException ex = failure(context);
				assertThat(ex.getDescription()).startsWith("ratelimit." + property + " is '" + value + "'");
				assertThat(ex.getAction()).startsWith("Set ratelimit." + property + " to ").contains(accepted);
			});
	}

	/** A placeholder is checked as what it resolves to, which is what binding converts. */
	@Test
	void aPlaceholderThatResolvesToAnUnconvertibleValueFailsStartUpSayingWhatIsAccepted() {
		this.runner.withPropertyValues("ratelimit.buckets.b.rate=10", "ratelimit.buckets.b.period=${PERIOD_NOT_SET:1.5s}")
			.run((context) -> {
				RateLimitConfigurationException ex = failure(context);
				assertThat(ex.getDescription()).startsWith("Bucket 'b': ratelimit.buckets.b.period is '1.5s'");
				assertThat(ex.getAction()).contains("a positive duration such as 500ms, 2s, 1m or PT0.5S");
			});
	}

	/** Every form of a duration Boot converts, numbers with spaces, booleans as Spring reads them. */
	@ParameterizedTest(name = "{0}={1}")
	@CsvSource(delimiter = '|', value = { "period|500ms|shared", "period|PT0.5S|shared", "period|pt1s|shared",
			"period|2s|shared", "period|1m|shared", "period|1h|shared", "period|1d|shared",
			"period|1000000us|shared", "max-wait|0|shared", "max-wait|PT0.5S|shared", "max-wait|100ms|shared",
			"rate|' 10 '|shared", "rate|2.5|shared", "limit|' 7 '|shared", "initial|3|shared",
			"capped-release|true|shared", "capped-release|on|shared", "burst-ratio|1.5|hybrid",
			"burst-ratio|2|hybrid", "max-backlog|10s|hybrid", "redis.timeout|PT0.1S|shared",
			"redis.lease|1m|shared", "keys.max|' 5 '|shared" })
	void aValueThatBindingConvertsStillStarts(String property, String value, String type) {
		this.runner
			.withPropertyValues("ratelimit.buckets.b.type=" + type, "ratelimit.buckets.b.rate=10",
					"ratelimit.buckets.b." + property + "=" + value)
			.run((context) -> assertThat(context).hasNotFailed());
	}

	/** Environment variables (the canonical form Boot documents) and placeholders convert as binding does. */
	@Test
	void environmentVariablesAndPlaceholdersThatConvertStillStart() {
		withEnvironmentVariables(Map.of("RATELIMIT_BUCKETS_B_MAXWAIT", "PT0.5S", "RATELIMIT_BUCKETS_B_KEYS_MAX", "50",
				"RATELIMIT_WEB_RULES_0_COST", "2", "RATE_FROM_ELSEWHERE", "12"))
			.withPropertyValues("ratelimit.buckets.b.rate=${RATE_FROM_ELSEWHERE}",
					"ratelimit.buckets.b.period=${PERIOD_NOT_SET:2s}", "ratelimit.web.rules[0].paths=/api/**",
					"ratelimit.web.rules[0].bucket=b")
			.run((context) -> assertThat(context).hasNotFailed());
	}

	/** Binding never reads a value that a source before it overrides, so neither does the check. */
	@Test
	void aValueOverriddenByAnEarlierSourceIsNotChecked() {
		withEnvironmentVariables(Map.of("RATELIMIT_BUCKETS_B_RATE", "10"))
			.withPropertyValues("ratelimit.buckets.b.rate=fast")
			.run((context) -> assertThat(context).hasNotFailed());
	}

	/**
	 * The starter's exception, found in the start-up failure's causes; Boot's own "Failed to bind" message,
	 * which never says what is accepted, is not among them.
	 */
	private static RateLimitConfigurationException failure(AssertableApplicationContext context) {
		assertThat(context).hasFailed();
		List<String> messages = new ArrayList<>();
		RateLimitConfigurationException found = null;
		for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
			messages.add(String.valueOf(t.getMessage()));
			if (found == null && t instanceof RateLimitConfigurationException ex) {
				found = ex;
			}
		}
		assertThat(String.join(" | ", messages)).doesNotContain("Failed to bind");
		assertThat(found).as("a RateLimitConfigurationException in %s", messages).isNotNull();
		return found;
	}
}
