package dev.ratelimit.spring;

import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Issue #30: start-up reported one configuration error per start, so five mistakes took five restarts.
 * Every error of the {@code ratelimit} tree is reported at once: the properties as written (a value
 * that does not convert, a misspelt name, a bad mode), each bucket, and the web rules, each as it
 * would be reported alone.
 */
class EveryConfigurationErrorAtOnceTests {

	private final WebApplicationContextRunner runner = new WebApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class));

	@Test
	void fiveMistakesAreReportedInOneStart() {
		this.runner
			.withPropertyValues("ratelimit.buckets.fine.rate=10", "ratelimit.buckets.a.rate=fast",
					"ratelimit.buckets.b.rate=1", "ratelimit.buckets.b.capped-relase=true",
					"ratelimit.buckets.c.rate=0", "ratelimit.buckets.d.rate=1", "ratelimit.buckets.d.mode=enforcing",
					"ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=nope")
			.run((context) -> {
				assertThat(context).hasFailed();
				RateLimitConfigurationException failure = null;
				for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
					if (t instanceof RateLimitConfigurationException ex) {
						failure = ex;
						break;
					}
				}
				assertThat(failure).isNotNull();
				FailureAnalysis analysis = new RateLimitFailureAnalyzer().analyze(context.getStartupFailure());
				assertThat(analysis).isNotNull();
				assertThat(analysis.getDescription()).contains("ratelimit.buckets.a.rate is 'fast'")
					.contains("ratelimit.buckets.b.capped-relase")
					.contains("ratelimit.buckets.c.rate")
					.contains("ratelimit.buckets.d.mode is 'enforcing'")
					.contains("ratelimit.web.rules[0].bucket")
					.doesNotContain("ratelimit.buckets.fine");
				assertThat(analysis.getAction()).contains("ratelimit.buckets.a.rate")
					.contains("ratelimit.buckets.b.capped-release")
					.contains("ratelimit.buckets.d.mode");
			});
	}

	@Test
	void oneMistakeIsReportedAsBefore() {
		this.runner.withPropertyValues("ratelimit.buckets.c.rate=0").run((context) -> {
			assertThat(context).hasFailed();
			FailureAnalysis analysis = new RateLimitFailureAnalyzer().analyze(context.getStartupFailure());
			assertThat(analysis.getDescription()).startsWith("Bucket 'c': ratelimit.buckets.c.rate");
		});
	}
}
