package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.time.Duration;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.HybridRateLimiter;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.SharedTokenBucket;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.spring.aop.RateLimitAdvisor;
import dev.ratelimit.spring.web.RateLimitExceptionHandler;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.diagnostics.FailureAnalysis;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.Ordered;

import static org.assertj.core.api.Assertions.assertThat;

class RateLimitAutoConfigurationTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class));

	@Test
	void makesABeanPerBucketNamedAfterItAndARegistry() {
		this.runner
			.withPropertyValues("ratelimit.buckets.db-writes.rate=500", "ratelimit.buckets.db-writes.limit=100",
					"ratelimit.buckets.feed.type=hybrid", "ratelimit.buckets.feed.rate=12000")
			.run((context) -> {
				assertThat(context).hasNotFailed();
				assertThat(context.getBean("db-writes")).isInstanceOf(SharedTokenBucket.class);
				assertThat(context.getBean("feed")).isInstanceOf(HybridRateLimiter.class);
				RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
				assertThat(registry.names()).containsExactly("db-writes", "feed");
				RegisteredBucket dbWrites = registry.get("db-writes");
				assertThat(dbWrites.limiter()).isSameAs(context.getBean("db-writes"));
				assertThat(dbWrites.type()).isEqualTo("shared");
				assertThat(dbWrites.backend()).isEqualTo("local");
				assertThat(dbWrites.maxWait()).isEqualTo(Duration.ofSeconds(1));
				assertThat(dbWrites.limiter().snapshot().limit()).isEqualTo(100);
				assertThat(registry.get("feed").limiter().snapshot().limit()).isEqualTo(12.0);
			});
	}

	@Test
	void keepsAFractionalRateExact() {
		this.runner.withPropertyValues("ratelimit.buckets.slow.rate=2.5").run((context) -> {
			RegisteredBucket bucket = context.getBean(RateLimiterRegistry.class).get("slow");
			assertThat(bucket.rate()).isEqualByComparingTo(new BigDecimal("2.5"));
			assertThat(bucket.period()).isEqualTo(Duration.ofSeconds(1));
			// exact: whole tokens per whole nanoseconds, 2.5 per second (1 per 400 ms once reduced)
			assertThat(bucket.limiter().snapshot().rate()).isEqualTo(1);
			assertThat(bucket.limiter().snapshot().period()).isEqualTo(Duration.ofMillis(400));
			assertThat(bucket.limiter().snapshot().limit()).isEqualTo(2);
		});
	}

	@Test
	void defaultsTheLimitToOnePeriodsRateAndAtLeastOne() {
		this.runner.withPropertyValues("ratelimit.buckets.a.rate=500", "ratelimit.buckets.b.rate=0.5")
			.run((context) -> {
				assertThat(context.getBean("a", RateLimiter.class).snapshot().limit()).isEqualTo(500);
				assertThat(context.getBean("b", RateLimiter.class).snapshot().limit()).isEqualTo(1);
			});
	}

	@Test
	void backsOffEntirelyWhenDisabled() {
		this.runner.withPropertyValues("ratelimit.enabled=false", "ratelimit.buckets.db-writes.rate=500")
			.run((context) -> {
				assertThat(context).doesNotHaveBean(RateLimiterRegistry.class);
				assertThat(context).doesNotHaveBean("db-writes");
			});
	}

	@Test
	void backsOffWhenUserDefinesABeanNamedAfterABucket() {
		this.runner.withUserConfiguration(UserBucketConfiguration.class)
			.withPropertyValues("ratelimit.buckets.db-writes.rate=500")
			.run((context) -> {
				RateLimiter mine = context.getBean("db-writes", RateLimiter.class);
				assertThat(mine.name()).isEqualTo("mine");
				assertThat(context.getBean(RateLimiterRegistry.class).get("db-writes").limiter()).isSameAs(mine);
			});
	}

	@Test
	void backsOffWhenUserDefinesRegistryAndStatsFactory() {
		this.runner.withUserConfiguration(UserRegistryConfiguration.class)
			.withPropertyValues("ratelimit.buckets.db-writes.rate=500")
			.run((context) -> {
				assertThat(context.getBean(RateLimiterRegistry.class)).isSameAs(UserRegistryConfiguration.REGISTRY);
				assertThat(context.getBean(BucketStatsFactory.class)).isSameAs(UserRegistryConfiguration.STATS);
			});
	}

	@Test
	void countsCallsOfConfiguredBucketsByDefault() {
		this.runner.withPropertyValues("ratelimit.buckets.db-writes.rate=500").run((context) -> {
			RateLimiter bucket = context.getBean("db-writes", RateLimiter.class);
			bucket.tryAcquire(1);
			assertThat(bucket.snapshot().granted()).isEqualTo(1);
		});
	}

	@ParameterizedTest(name = "{0}={1}")
	@CsvSource(delimiter = '|', value = { "rate|-5|ratelimit.buckets.b.rate is -5|a number > 0",
			"rate|0|ratelimit.buckets.b.rate is 0|a number > 0", "limit|0|ratelimit.buckets.b.limit is 0|>= 1",
			"initial|11|ratelimit.buckets.b.initial is 11|from 0 to the limit (10)",
			"max-wait|-1s|ratelimit.buckets.b.max-wait is PT-1S|a duration >= 0",
			"type|bursty|ratelimit.buckets.b.type is 'bursty'|shared, hybrid or quota",
			"backend|memcached|ratelimit.buckets.b.backend is 'memcached'|local or redis",
			"redis.on-failure|retry|ratelimit.buckets.b.redis.on-failure is 'retry'|allow, deny or local",
			"burst-ratio|1.5|ratelimit.buckets.b.burst-ratio applies to hybrid buckets only|type to hybrid",
			"max-backlog|10s|ratelimit.buckets.b.max-backlog applies to hybrid buckets only|type to hybrid",
			"period|0s|ratelimit.buckets.b.period is PT0S|a positive duration" })
	void failsStartUpNamingTheBucketThePropertyAndTheAcceptedValues(String property, String value,
			String description, String action) {
		this.runner
			.withPropertyValues("ratelimit.buckets.b.rate=10", "ratelimit.buckets.b.limit=10",
					"ratelimit.buckets.b." + property + "=" + value)
			.run((context) -> {
				assertThat(context).hasFailed();
				RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
				assertThat(ex.getDescription()).contains("Bucket 'b'").contains(description);
				assertThat(ex.getAction()).contains(action);
			});
	}

	@ParameterizedTest
	@CsvSource({ "initial, 5, shared", "capped-release, false, shared" })
	void rejectsSharedOnlyPropertiesOnAHybridBucket(String property, String value, String owner) {
		this.runner
			.withPropertyValues("ratelimit.buckets.h.type=hybrid", "ratelimit.buckets.h.rate=100",
					"ratelimit.buckets.h." + property + "=" + value)
			.run((context) -> {
				RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
				assertThat(ex.getDescription()).contains("ratelimit.buckets.h." + property)
					.contains("applies to " + owner + " buckets only");
			});
	}

	@ParameterizedTest(name = "{0}={1}")
	@CsvSource(delimiter = '|', value = {
			"max-backlog|-1s|ratelimit.buckets.h.max-backlog is PT-1S|a duration >= 0",
			"burst-ratio|1e13|ratelimit.buckets.h.burst-ratio is 1.0E13|burstRatio must be at most",
			"limit|0|ratelimit.buckets.h.limit is 0|a whole number >= 1" })
	void saysThePacersRefusalsInTheConfigurationsWords(String property, String value, String description,
			String action) {
		this.runner
			.withPropertyValues("ratelimit.buckets.h.type=hybrid", "ratelimit.buckets.h.rate=100",
					"ratelimit.buckets.h." + property + "=" + value)
			.run((context) -> {
				RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
				assertThat(ex.getDescription()).contains("Bucket 'h'").contains(description);
				assertThat(ex.getAction()).contains(action);
			});
	}

	@Test
	void rejectsABurstRatioBelowOne() {
		this.runner
			.withPropertyValues("ratelimit.buckets.h.type=hybrid", "ratelimit.buckets.h.rate=100",
					"ratelimit.buckets.h.burst-ratio=0.9")
			.run((context) -> assertThat(rootCause(context.getStartupFailure()).getAction())
				.contains("a number >= 1.0"));
	}

	@ParameterizedTest
	@CsvSource(delimiter = '|', value = { "capped-relase|true|capped-release", "max-wiat|500ms|max-wait",
			"limt|5|limit", "redis.timout|100ms|redis.timeout", "burst-raito|1.5|burst-ratio" })
	void failsStartUpOnATypoNamingTheBucketThePropertyAndTheClosestKnownOne(String typo, String value,
			String closest) {
		this.runner
			.withPropertyValues("ratelimit.buckets.b.rate=10", "ratelimit.buckets.b." + typo + "=" + value)
			.run((context) -> {
				assertThat(context).hasFailed();
				RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
				assertThat(ex.getDescription()).contains("Bucket 'b'")
					.contains("ratelimit.buckets.b." + typo)
					.contains("is not a bucket property; did you mean '" + closest + "'?");
				assertThat(ex.getAction()).contains("Rename it to ratelimit.buckets.b." + closest);
			});
	}

	/**
	 * A user who wrote {@code period: 5} was told to write 5ms or 5s, "0 alone is accepted and means
	 * zero"; {@code period: 0} then failed start-up again (a period must be positive).
	 */
	@Test
	void aPeriodWithoutAUnitIsNotToldThatZeroIsAccepted() {
		this.runner.withPropertyValues("ratelimit.buckets.b.rate=10", "ratelimit.buckets.b.period=5").run((context) -> {
			RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
			assertThat(ex.getAction()).contains("5ms or 5s").doesNotContain("0 alone");
		});
		this.runner.withPropertyValues("ratelimit.buckets.b.rate=10", "ratelimit.buckets.b.max-wait=5").run((context) -> {
			RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
			assertThat(ex.getAction()).contains("5ms or 5s").contains("0 alone is accepted");
		});
	}

	@ParameterizedTest
	@CsvSource(delimiter = '|', value = { "max-wait|5|a duration with a unit, e.g. 5ms or 5s",
			"period|2|a duration with a unit, e.g. 2ms or 2s", "limit|2.5|a whole number",
			"initial|1.5|a whole number" })
	void rejectsADurationWithoutAUnitAndAFractionalLimit(String property, String value, String accepted) {
		this.runner.withPropertyValues("ratelimit.buckets.b.rate=10", "ratelimit.buckets.b.limit=10",
				"ratelimit.buckets.b." + property + "=" + value)
			.run((context) -> {
				RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
				// the value quoted as written, then where it was set
				assertThat(ex.getDescription()).contains("ratelimit.buckets.b." + property + " is '" + value + "' (")
					.contains("from property source");
				assertThat(ex.getAction()).contains(accepted);
			});
	}

	@Test
	void acceptsZeroWithoutAUnitAsZero() {
		this.runner.withPropertyValues("ratelimit.buckets.b.rate=10", "ratelimit.buckets.b.max-wait=0")
			.run((context) -> assertThat(context).hasNotFailed());
	}

	@Test
	void aHybridBucketCatchesUpAtMostItsMaxBacklogAfterAnIdleHour() {
		long[] now = { 0 };
		this.runner.withBean(RateLimitClock.class, () -> () -> now[0])
			.withPropertyValues("ratelimit.buckets.h.type=hybrid", "ratelimit.buckets.h.rate=10",
					"ratelimit.buckets.h.limit=1", "ratelimit.buckets.h.burst-ratio=2.0",
					"ratelimit.buckets.h.max-backlog=1s")
			.run((context) -> {
				HybridRateLimiter pacer = context.getBean("h", HybridRateLimiter.class);
				while (pacer.tryAcquire(1)) {
					Thread.onSpinWait(); // drain the active pool
				}
				now[0] += Duration.ofHours(1).toNanos();
				long taken = 0;
				for (int ms = 0; ms < 10_000; ms++) {
					now[0] += Duration.ofMillis(1).toNanos();
					while (pacer.tryAcquire(1)) {
						taken++;
					}
				}
				// 10 s at 10/s, plus at most 1 s of the idle hour (10 operations) and the pools (2)
				assertThat(taken).isBetween(100L, 112L);
				assertThat(pacer.behindSchedule()).isGreaterThan(Duration.ofMinutes(59));
			});
	}

	@Test
	void rejectsAMissingRate() {
		this.runner.withPropertyValues("ratelimit.buckets.b.limit=5")
			.run((context) -> assertThat(rootCause(context.getStartupFailure()).getDescription())
				.contains("ratelimit.buckets.b.rate is not set"));
	}

	@Test
	void failsStartUpWhenAnAnnotationNamesABucketThatDoesNotExistListingTheConfiguredOnes() {
		this.runner.withUserConfiguration(UnknownBucketConfiguration.class)
			.withPropertyValues("ratelimit.buckets.db-writes.rate=10", "ratelimit.buckets.feed.rate=10")
			.run((context) -> {
				RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
				assertThat(ex.getDescription()).contains("No rate limit bucket named 'db-write'")
					.contains("UnknownBucketService.save")
					.contains("the configured buckets are db-writes, feed");
			});
	}

	@Test
	void failsStartUpWhenARedisBucketHasNoRedisBackendSayingWhatIsMissing() {
		this.runner.withPropertyValues("ratelimit.buckets.shared.rate=10", "ratelimit.buckets.shared.backend=redis")
			.run((context) -> {
				RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
				assertThat(ex.getDescription()).contains("backend redis")
					.contains("ratelimit-redis module is not on the class path");
				assertThat(ex.getAction()).contains("Add dev.ratelimit:ratelimit-redis");
			});
	}

	@Test
	void theFailureAnalyzerGivesADescriptionAndAnAction() {
		this.runner.withPropertyValues("ratelimit.buckets.b.rate=-1").run((context) -> {
			FailureAnalysis analysis = new RateLimitFailureAnalyzer().analyze(context.getStartupFailure());
			assertThat(analysis).isNotNull();
			assertThat(analysis.getDescription()).contains("ratelimit.buckets.b.rate is -1");
			assertThat(analysis.getAction()).contains("Set ratelimit.buckets.b.rate to a number > 0");
		});
	}

	@Test
	void answersRefusalsWithTooManyRequestsOnlyInAWebApplication() {
		this.runner.run((context) -> assertThat(context).doesNotHaveBean(RateLimitExceptionHandler.class));
		new WebApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.run((context) -> assertThat(context).hasSingleBean(RateLimitExceptionHandler.class));
	}

	@Test
	void answersNoRefusalsOverHttpWithoutSpringWebOnTheClassPath() {
		this.runner.withClassLoader(new FilteredClassLoader("org.springframework.web", "org.springframework.http"))
			.withPropertyValues("ratelimit.buckets.db-writes.rate=500")
			.run((context) -> {
				assertThat(context).hasNotFailed().hasBean("db-writes");
				assertThat(context).doesNotHaveBean(RateLimitExceptionHandler.class);
			});
	}

	@Test
	void runsTheInterceptorOutsideTransactionsByDefault() {
		this.runner.run((context) -> assertThat(context.getBean(RateLimitAdvisor.class).getOrder())
			.isEqualTo(RateLimitProperties.DEFAULT_INTERCEPTOR_ORDER)
			.isLessThan(Ordered.LOWEST_PRECEDENCE));
	}

	@Test
	void takesTheInterceptorOrderFromTheProperty() {
		this.runner.withPropertyValues("ratelimit.interceptor-order=5")
			.run((context) -> assertThat(context.getBean(RateLimitAdvisor.class).getOrder()).isEqualTo(5));
	}

	private static RateLimitConfigurationException rootCause(Throwable failure) {
		Throwable t = failure;
		while (t != null && !(t instanceof RateLimitConfigurationException)) {
			t = t.getCause();
		}
		assertThat(t).as("a RateLimitConfigurationException in %s", failure).isNotNull();
		return (RateLimitConfigurationException) t;
	}

	/**
	 * A user with a bucket {@code llm} and a service bean of their own named {@code llm} got
	 * "BeanNotOfRequiredTypeException: Bean named 'llm' is expected to be of type RateLimiter but was
	 * actually of type Llm" from the factory method {@code rateLimiterRegistry}: nothing said that the
	 * bucket's name was the clash, nor what to rename.
	 */
	@Test
	void aBeanOfTheApplicationsThatTakesABucketsNameFailsStartUpNamingBoth() {
		this.runner.withPropertyValues("ratelimit.buckets.llm.rate=10")
			.withBean("llm", StringBuilder.class, StringBuilder::new)
			.run((context) -> {
				RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
				assertThat(ex.getDescription()).contains("Bucket 'llm'").contains("java.lang.StringBuilder");
				assertThat(ex.getAction()).contains("Rename the bucket or the bean");
			});
	}

	@Configuration(proxyBeanMethods = false)
	static class UserBucketConfiguration {

		@Bean(name = "db-writes")
		RateLimiter dbWrites() {
			return SharedTokenBucket.builder().name("mine").rate(1, Duration.ofSeconds(1)).build();
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class UserRegistryConfiguration {

		static final RateLimiterRegistry REGISTRY = new DefaultRateLimiterRegistry(
				BucketDefinitions.of(new RateLimitProperties()), (name) -> null);

		static final BucketStatsFactory STATS = (name) -> StatsRecorder.disabled();

		@Bean
		RateLimiterRegistry myRegistry() {
			return REGISTRY;
		}

		@Bean
		BucketStatsFactory myStats() {
			return STATS;
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class UnknownBucketConfiguration {

		@Bean
		UnknownBucketService unknownBucketService() {
			return new UnknownBucketService();
		}
	}

	static class UnknownBucketService {

		@RateLimited("db-write")
		public void save() {
		}
	}
}
