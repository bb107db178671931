package dev.ratelimit.spring;

import java.util.List;
import java.util.Map;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.env.StandardEnvironment;
import org.springframework.core.env.SystemEnvironmentPropertySource;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The start-up checks of property names and annotation expressions accept what binding and the calls
 * accept: relaxed names (environment variables, camelCase, underscores), enum values written as binding
 * reads them, a class's annotation whose expression copes with methods without the parameter, an
 * interface's annotation naming the interface's parameter. Found by a reviewer: each was rejected by the
 * first version of the checks, and each started before them.
 */
class StartUpChecksAcceptWhatBindingAcceptsTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withPropertyValues("ratelimit.buckets.db.rate=100", "ratelimit.buckets.db.max-wait=0");

	private ApplicationContextRunner withEnvironmentVariables(Map<String, Object> variables) {
		return this.runner.withInitializer((context) -> context.getEnvironment()
			.getPropertySources()
			.addFirst(new SystemEnvironmentPropertySource(
					StandardEnvironment.SYSTEM_ENVIRONMENT_PROPERTY_SOURCE_NAME, variables)));
	}

	/** The canonical environment variable of ratelimit.executor.max-threads (Boot's documented form). */
	@Test
	void anEnvironmentVariableOfADashedPropertyOutsideTheBucketsIsAccepted() {
		withEnvironmentVariables(Map.of("RATELIMIT_EXECUTOR_MAXTHREADS", "4", "RATELIMIT_WEB_EXPOSEKEY", "true"))
			.run((context) -> assertThat(context).hasNotFailed());
	}

	/** Web rules from environment variables, the indexed form of the brief's example. */
	@Test
	void webRulesFromEnvironmentVariablesAreAccepted() {
		withEnvironmentVariables(Map.of("RATELIMIT_WEB_RULES_0_PATHS", "/api/**", "RATELIMIT_WEB_RULES_0_BUCKET", "db"))
			.run((context) -> assertThat(context).hasNotFailed());
	}

	/**
	 * Boot binds enums leniently (RETRY_AFTER from retryAfter, retry after, RetryAfter); the new value check
	 * accepts only the lower-case constant names and retry-after.
	 */
	@Test
	void aLenientlyWrittenHeadersValueIsAccepted() {
		this.runner.withPropertyValues("ratelimit.web.headers=retryAfter")
			.run((context) -> assertThat(context).hasNotFailed());
	}

	/** Pre-existing (the buckets' check, unchanged here): the environment variable of a bucket's max-wait. */
	@Test
	void anEnvironmentVariableOfADashedBucketPropertyIsAccepted() {
		withEnvironmentVariables(Map.of("RATELIMIT_BUCKETS_DB_MAXWAIT", "5ms"))
			.run((context) -> assertThat(context).hasNotFailed());
	}

	/**
	 * Binding resolves placeholders before it converts: an enum value from a placeholder was rejected as
	 * the text {@code ${...}}.
	 */
	@Test
	void placeholdersAreCheckedAsTheValuesTheyResolveTo() {
		this.runner.withPropertyValues("ratelimit.buckets.db.type=${BUCKET_TYPE_NOT_SET:hybrid}",
				"ratelimit.web.headers=${HEADERS_NOT_SET:ietf}", "ratelimit.buckets.db.limit=${LIMIT_NOT_SET:5}")
			.run((context) -> assertThat(context).hasNotFailed());
	}

	/** Binding never reads a value that a source before it overrides; an environment variable wins here. */
	@Test
	void aValueOverriddenByAnEarlierSourceIsNotChecked() {
		withEnvironmentVariables(Map.of("RATELIMIT_BUCKETS_DB_TYPE", "hybrid", "RATELIMIT_WEB_HEADERS", "ietf"))
			.withPropertyValues("ratelimit.buckets.db.type=bursty", "ratelimit.web.headers=loud")
			.run((context) -> assertThat(context).hasNotFailed());
	}

	/** Relaxed binding: camelCase and underscore forms bind to the same properties. */
	@Test
	void camelCaseAndUnderscoreFormsOutsideTheBucketsAreAccepted() {
		this.runner.withPropertyValues("ratelimit.executor.maxThreads=4", "ratelimit.web.expose_key=true",
				"ratelimit.interceptorOrder=5")
			.run((context) -> assertThat(context).hasNotFailed());
	}

	/**
	 * A class-level annotation applies to every public method; a cost that defaults when a method has no
	 * such parameter (elvis) worked for all of them: ping() cost 1.
	 */
	@Test
	void aClassLevelCostThatDefaultsForMethodsWithoutTheParameterIsAccepted() {
		this.runner.withBean(ClassLevel.class).run((context) -> {
			assertThat(context).hasNotFailed();
			assertThat(context.getBean(ClassLevel.class).ping()).isEqualTo("pong");
			assertThat(context.getBean(ClassLevel.class).write(List.of("a"))).isEqualTo(1);
		});
	}

	@RateLimited(value = "db", cost = "#rows?.size() ?: 1")
	static class ClassLevel {

		public int write(List<String> rows) {
			return rows.size();
		}

		public String ping() {
			return "pong";
		}
	}

	/**
	 * Annotated on an interface whose implementation names the parameter differently: the call (a JDK
	 * proxy, the starter's auto-proxy creator's default) evaluates the expression on the interface's method,
	 * where #rows exists; the start-up check also runs on the implementation's method, where it does not.
	 */
	@Test
	void anInterfaceAnnotationNamingTheInterfacesParameterIsAccepted() {
		this.runner.withBean(Writer.class, WriterImpl::new).run((context) -> {
			assertThat(context).hasNotFailed();
			assertThat(context.getBean(Writer.class).write(List.of("a", "b"))).isEqualTo(2);
		});
	}

	interface Writer {

		@RateLimited(value = "db", cost = "#rows.size()")
		int write(List<String> rows);
	}

	static class WriterImpl implements Writer {

		@Override
		public int write(List<String> items) {
			return items.size();
		}
	}
}
