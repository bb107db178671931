package dev.ratelimit.spring;

import java.util.function.Consumer;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.ConfigDataApplicationContextInitializer;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Plans at start-up (contract revision 3, "Plans"): a plan takes every property a key's bucket can change
 * when its plan changes, with the bucket's where it sets none; a property it does not take, a misspelt
 * one, or a bad value fails start-up naming the bucket, the plan, the property and where it was set, every
 * error at once, as the bucket's own properties do.
 */
class PlansConfigurationTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class));

	private static RateLimitConfigurationException failure(AssertableApplicationContext context) {
		assertThat(context).hasFailed();
		for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
			if (t instanceof RateLimitConfigurationException ex) {
				return ex;
			}
		}
		throw new AssertionError("no RateLimitConfigurationException", context.getStartupFailure());
	}

	private void fails(Consumer<RateLimitConfigurationException> check, String... properties) {
		this.runner.withPropertyValues(properties).run((context) -> check.accept(failure(context)));
	}

	private static void failsInAWebApplication(Consumer<RateLimitConfigurationException> check, String... properties) {
		new WebApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withPropertyValues(properties)
			.run((context) -> {
				assertThat(context).hasFailed();
				for (Throwable t = context.getStartupFailure(); t != null; t = t.getCause()) {
					if (t instanceof RateLimitConfigurationException ex) {
						check.accept(ex);
						return;
					}
				}
				throw new AssertionError("no RateLimitConfigurationException", context.getStartupFailure());
			});
	}

	@Test
	void everyPlanErrorIsReportedAtOnceNamingBucketPlanPropertyAndFileAndLine() {
		this.runner.withInitializer(new ConfigDataApplicationContextInitializer())
			.withPropertyValues("spring.config.location=classpath:/plans-errors.yml")
			.run((context) -> {
				RateLimitConfigurationException ex = failure(context);
				assertThat(ex.getErrors()).hasSize(4);
				String description = ex.getDescription();
				assertThat(description)
					.contains("ratelimit.buckets.api.plans.pro.limt (class path resource [plans-errors.yml] - 8:17) is"
							+ " not a bucket property; did you mean 'plans.pro.limit'?")
					.contains("ratelimit.buckets.api.plans.team.initial (class path resource [plans-errors.yml] - 10:20)"
							+ " is not accepted in a plan: a key's bucket starts full")
					.contains("ratelimit.buckets.api.plans.team.backend (class path resource [plans-errors.yml]"
							+ " - 11:20) is not accepted in a plan")
					.contains("ratelimit.buckets.api.plans.team.max-wait is '5' (class path resource [plans-errors.yml]"
							+ " - 12:21)")
					.doesNotContain("buckets.fine");
				assertThat(ex.getAction()).contains("a duration with a unit");
			});
	}

	@Test
	void aValueABucketWouldRefuseIsRefusedInAPlanNamingThePlansProperty() {
		fails((ex) -> assertThat(ex.getDescription())
			.startsWith("Bucket 'api': ratelimit.buckets.api.plans.pro.rate is -5, which is not accepted."),
				"ratelimit.buckets.api.rate=10", "ratelimit.buckets.api.plans.pro.rate=-5");
		fails((ex) -> assertThat(ex.getDescription()).contains("ratelimit.buckets.api.plans.pro.burst-ratio applies to"
				+ " hybrid buckets only"), "ratelimit.buckets.api.rate=10", "ratelimit.buckets.api.plans.pro.burst-ratio=2");
		fails((ex) -> assertThat(ex.getDescription()).contains("ratelimit.buckets.q.plans.pro.rate does not apply to a quota"),
				"ratelimit.buckets.q.type=quota", "ratelimit.buckets.q.limit=100", "ratelimit.buckets.q.calendar=day",
				"ratelimit.buckets.q.plans.pro.rate=5");
		// a key of a Redis token bucket keeps one hash, its leases and its queue whatever its plan
		fails((ex) -> {
			assertThat(ex.getDescription()).contains("Bucket 'api': ratelimit.buckets.api.plans.pro.redis.key-prefix is"
					+ " 'pro:', but a key of a Redis token bucket keeps one hash whatever its plan");
			assertThat(ex.getAction()).contains("Remove ratelimit.buckets.api.plans.pro.redis.key-prefix");
		}, "ratelimit.buckets.api.rate=10", "ratelimit.buckets.api.backend=redis",
				"ratelimit.buckets.api.plans.pro.rate=100", "ratelimit.buckets.api.plans.pro.redis.key-prefix=pro:");
		fails((ex) -> {
			assertThat(ex.getDescription()).contains("Bucket 'api': ratelimit.buckets.api.plans.pro.capped-release is"
					+ " true, but the bucket's is false");
			assertThat(ex.getAction()).contains("Remove ratelimit.buckets.api.plans.pro.capped-release");
		}, "ratelimit.buckets.api.rate=10", "ratelimit.buckets.api.backend=redis",
				"ratelimit.buckets.api.plans.pro.rate=100", "ratelimit.buckets.api.plans.pro.capped-release=true");
		fails((ex) -> assertThat(ex.getDescription()).contains("is of type hybrid and has plans, but no limit"),
				"ratelimit.buckets.p.type=hybrid", "ratelimit.buckets.p.rate=10",
				"ratelimit.buckets.p.plans.pro.rate=100");
	}

	@Test
	void aPlanTakesTheBucketsSettingsItDoesNotSet() {
		this.runner
			.withPropertyValues("ratelimit.buckets.api.rate=10", "ratelimit.buckets.api.limit=15",
					"ratelimit.buckets.api.max-wait=0", "ratelimit.buckets.api.plans.pro.rate=100",
					"ratelimit.buckets.api.plans.pro.max-wait=2s", "ratelimit.buckets.api.plans.big.limit=50",
					"ratelimit.buckets.d.rate=10", "ratelimit.buckets.d.plans.pro.rate=100",
					"ratelimit.buckets.q.type=quota", "ratelimit.buckets.q.limit=100", "ratelimit.buckets.q.calendar=day",
					"ratelimit.buckets.q.plans.pro.limit=1000")
			.run((context) -> {
				assertThat(context).hasNotFailed();
				RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
				BucketDefinition.Shared pro = (BucketDefinition.Shared) registry.get("api").plans().get("pro");
				assertThat(pro.rate()).isEqualByComparingTo("100");
				assertThat(pro.limit()).as("the bucket's limit").isEqualTo(15);
				assertThat(pro.maxWait()).hasSeconds(2);
				BucketDefinition.Shared big = (BucketDefinition.Shared) registry.get("api").plans().get("big");
				assertThat(big.rate()).isEqualByComparingTo("10");
				assertThat(big.limit()).isEqualTo(50);
				assertThat(big.maxWait()).isZero();
				// the bucket sets no limit: the plan's is one period of its own rate
				assertThat(((BucketDefinition.Shared) registry.get("d").plans().get("pro")).limit()).isEqualTo(100);
				assertThat(((BucketDefinition.Quota) registry.get("q").plans().get("pro")).limit()).isEqualTo(1000);
			});
	}

	/**
	 * The contract: a plan accepts every bucket property except type, backend, keys, plans and initial.
	 * Before, a plan refused capped-release, max-backlog, calendar, zone, mode and redis.*.
	 */
	@Test
	void aPlanTakesEveryBucketPropertyButTypeBackendKeysPlansAndInitial() {
		this.runner
			.withPropertyValues("ratelimit.buckets.api.rate=10", "ratelimit.buckets.api.plans.pro.capped-release=true",
					"ratelimit.buckets.api.plans.pro.mode=shadow", "ratelimit.buckets.api.plans.pro.redis.key-prefix=pro:",
					"ratelimit.buckets.api.plans.pro.redis.timeout=2s", "ratelimit.buckets.api.plans.pro.redis.on-failure=deny",
					"ratelimit.buckets.api.plans.pro.redis.lease=30s", "ratelimit.buckets.p.type=hybrid",
					"ratelimit.buckets.p.rate=10", "ratelimit.buckets.p.limit=2", "ratelimit.buckets.p.plans.pro.max-backlog=5s",
					"ratelimit.buckets.q.type=quota", "ratelimit.buckets.q.limit=100", "ratelimit.buckets.q.calendar=day",
					"ratelimit.buckets.q.plans.pro.limit=1000", "ratelimit.buckets.q.plans.pro.calendar=month",
					"ratelimit.buckets.q.plans.pro.zone=Europe/Berlin")
			.run((context) -> {
				assertThat(context).hasNotFailed();
				RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
				BucketDefinition.Shared pro = (BucketDefinition.Shared) registry.get("api").plans().get("pro");
				assertThat(pro.cappedRelease()).isTrue();
				assertThat(pro.redis().getKeyPrefix()).isEqualTo("pro:");
				assertThat(pro.redis().getTimeout()).hasSeconds(2);
				assertThat(pro.redis().getOnFailure()).isEqualTo(OnFailure.DENY);
				assertThat(pro.redis().getLease()).hasSeconds(30);
				assertThat(registry.get("api").shadowPlans()).containsExactly("pro");
				assertThat(((BucketDefinition.Hybrid) registry.get("p").plans().get("pro")).maxBacklog()).hasSeconds(5);
				BucketDefinition.Quota quota = (BucketDefinition.Quota) registry.get("q").plans().get("pro");
				assertThat(quota.calendar()).isEqualTo(dev.ratelimit.core.QuotaCalendar.Unit.MONTH);
				assertThat(quota.zone()).isEqualTo(java.time.ZoneId.of("Europe/Berlin"));
				// the template keeps its own
				assertThat(((BucketDefinition.Quota) ((ConfiguredBucket) registry.get("q")).definition()).calendar())
					.isEqualTo(dev.ratelimit.core.QuotaCalendar.Unit.DAY);
			});
	}

	@Test
	void typeBackendKeysPlansAndInitialInAPlanFailStartUpNamingBucketPlanAndProperty() {
		String[][] refused = { { "type", "hybrid", "every key of a bucket has the bucket's type" },
				{ "backend", "redis", "every key of a bucket lives where the bucket does" },
				{ "keys.max", "5", "the keys of every plan share the bucket's key store" },
				{ "initial", "3", "a key's bucket starts full" },
				{ "redis.batch", "auto", "a key's batch is made with its bucket and stays with it when its plan changes" },
				{ "redis.batch-hold", "50ms", "a key's batch is made with its bucket and stays with it when its plan changes" },
				{ "plans.gold.rate", "5", "a plan has no plans of its own" } };
		for (String[] property : refused) {
			String written = property[0].startsWith("plans.") ? "plans" : property[0];
			fails((ex) -> {
				assertThat(ex.getDescription()).as(property[0])
					.contains("Bucket 'api': ratelimit.buckets.api.plans.pro." + written)
					.contains("is not accepted in a plan: " + property[2]);
				assertThat(ex.getAction()).contains("Remove it from plan 'pro'");
			}, "ratelimit.buckets.api.rate=10", "ratelimit.buckets.api.plans.pro." + property[0] + "=" + property[1]);
		}
	}

	@Test
	void aPlanOnAnAnnotationNeedsAKeyAndABucketWithPlans() {
		this.runner.withUserConfiguration(PlanWithoutKey.class)
			.withPropertyValues("ratelimit.buckets.api.rate=10", "ratelimit.buckets.api.plans.pro.rate=100")
			.run((context) -> assertThat(failure(context).getDescription()).contains("plan '#plan'")
				.contains("has no key"));
		this.runner.withUserConfiguration(PlanWithoutPlans.class)
			.withPropertyValues("ratelimit.buckets.api.rate=10")
			.run((context) -> assertThat(failure(context).getDescription())
				.contains("names a plan ('#plan') for bucket 'api', which has no plans"));
	}

	@Test
	void aWebRulesPlanNeedsAKeyAndABucketWithPlans() {
		failsInAWebApplication((ex) -> assertThat(ex.getDescription()).contains("ratelimit.web.rules[0].plan is 'header:X-Plan', but the"
				+ " rule has no key"), "ratelimit.buckets.api.rate=10", "ratelimit.buckets.api.plans.pro.rate=100",
				"ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=api",
				"ratelimit.web.rules[0].plan=header:X-Plan");
		failsInAWebApplication((ex) -> assertThat(ex.getDescription()).contains("ratelimit.web.rules[0].plan is 'header:X-Plan', but"
				+ " bucket 'api' has no plans"), "ratelimit.buckets.api.rate=10", "ratelimit.web.rules[0].paths=/api/**",
				"ratelimit.web.rules[0].bucket=api", "ratelimit.web.rules[0].key=ip",
				"ratelimit.web.rules[0].plan=header:X-Plan");
		failsInAWebApplication((ex) -> assertThat(ex.getDescription()).contains("ratelimit.web.rules[0].plan"),
				"ratelimit.buckets.api.rate=10", "ratelimit.buckets.api.plans.pro.rate=100",
				"ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=api",
				"ratelimit.web.rules[0].key=ip", "ratelimit.web.rules[0].plan=header:");
	}

	@Configuration(proxyBeanMethods = false)
	static class PlanWithoutKey {

		@Bean
		Service service() {
			return new Service();
		}

		static class Service {

			@RateLimited(value = "api", plan = "#plan")
			public void call(String plan) {
			}
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class PlanWithoutPlans {

		@Bean
		Service service() {
			return new Service();
		}

		static class Service {

			@RateLimited(value = "api", key = "#key", plan = "#plan")
			public void call(String key, String plan) {
			}
		}
	}
}
