package dev.ratelimit.redis;

import java.math.BigDecimal;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.redis.autoconfigure.RateLimitRedisAutoConfiguration;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.actuate.RateLimitsEndpoint;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Plans on a keyed Redis token bucket (contract revision 3, "Plans"), on a real Redis, two instances of one
 * application configured as a user configures them: each key's bucket has its plan's settings, an upgrade or a
 * downgrade changes them at once keeping the key's tokens (up to the new limit), a retune of one plan through
 * one instance's endpoint reaches that plan's keys on the other instance and no other key, an unlisted plan
 * gets the template's. Every rate is per hour: no token comes back while a test runs (the first after three
 * minutes), so every count of grants is exact.
 */
class RedisPlansTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();

	private ApplicationContextRunner instance(String prefix) {
		return new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(DataRedisAutoConfiguration.class, RateLimitAutoConfiguration.class,
					RateLimitRedisAutoConfiguration.class))
			.withUserConfiguration(Plans.class)
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port(),
					"ratelimit.buckets.api.backend=redis", "ratelimit.buckets.api.redis.key-prefix=" + prefix,
					// a busy machine's slow reply must not fall to a failure policy: the counts are Redis's
					"ratelimit.buckets.api.redis.timeout=5s", "ratelimit.buckets.api.redis.on-failure=deny",
					"ratelimit.buckets.api.rate=3", "ratelimit.buckets.api.period=1h", "ratelimit.buckets.api.limit=3",
					"ratelimit.buckets.api.max-wait=0", "ratelimit.buckets.api.plans.free.rate=5",
					"ratelimit.buckets.api.plans.free.limit=5", "ratelimit.buckets.api.plans.pro.rate=20",
					"ratelimit.buckets.api.plans.pro.limit=20");
	}

	private static RateLimitsEndpoint endpoint(ConfigurableApplicationContext context) {
		return new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
	}

	@Test
	void eachKeyGetsItsPlansBoundAndAnUnlistedPlanTheTemplates() {
		instance("plans-bounds:").run((a) -> instance("plans-bounds:").run((b) -> {
			assertThat(a).hasNotFailed();
			Api first = a.getBean(Api.class);
			Api second = b.getBean(Api.class);
			assertThat(calls(first, "f", "free", 4) + calls(second, "f", "free", 4)).isEqualTo(5);
			assertThat(calls(first, "p", "pro", 12) + calls(second, "p", "pro", 12)).isEqualTo(20);
			assertThat(calls(first, "g", "gold", 4) + calls(second, "g", "gold", 4)).isEqualTo(3);
			assertThat(calls(first, "n", null, 4) + calls(second, "n", null, 4)).isEqualTo(3);
			// each key's hash is written with its plan's settings (the limit, m)
			assertThat(redis.admin().hget("plans-bounds:{api:f}", "m")).isEqualTo("5");
			assertThat(redis.admin().hget("plans-bounds:{api:p}", "m")).isEqualTo("20");
			assertThat(redis.admin().hget("plans-bounds:{api:g}", "m")).isEqualTo("3");
		}));
	}

	@Test
	void anUpgradeMidBurstKeepsTheKeysTokensAndADowngradeCapsThemAtOnce() {
		instance("plans-change:").run((a) -> instance("plans-change:").run((b) -> {
			Api first = a.getBean(Api.class);
			Api second = b.getBean(Api.class);
			// on free, 3 of its 5 taken; upgraded on the same instance: the 2 it has, at pro's settings from now
			assertThat(calls(first, "u", "free", 3)).isEqualTo(3);
			assertThat(calls(first, "u", "pro", 10)).isEqualTo(2);
			assertThat(redis.admin().hget("plans-change:{api:u}", "m")).isEqualTo("20");
			// and on the other instance, which meets the key on pro first: nothing more
			assertThat(calls(second, "u", "pro", 5)).isZero();
			// upgraded through the other instance: the same, the key's tokens kept
			assertThat(calls(first, "v", "free", 1)).isEqualTo(1);
			assertThat(calls(second, "v", "pro", 10)).isEqualTo(4);
			// on pro, 1 of its 20 taken; downgraded: capped at free's limit at once, on either instance
			assertThat(calls(first, "d", "pro", 1)).isEqualTo(1);
			assertThat(calls(second, "d", "free", 4) + calls(first, "d", "free", 4)).isEqualTo(5);
			assertThat(redis.admin().hget("plans-change:{api:d}", "m")).isEqualTo("5");
			// back to pro: what it has (nothing), not a full pro bucket
			assertThat(calls(first, "d", "pro", 3)).isZero();
		}));
	}

	@Test
	void aRetuneOfOnePlanThroughOneInstanceReachesThatPlansKeysOnTheOtherAndNoOther() throws InterruptedException {
		instance("plans-retune:").run((a) -> instance("plans-retune:").run((b) -> {
			Api first = a.getBean(Api.class);
			Api second = b.getBean(Api.class);
			assertThat(calls(second, "p", "pro", 2)).isEqualTo(2); // 18 left
			assertThat(calls(second, "f", "free", 1)).isEqualTo(1); // 4 left
			assertThat(calls(second, "n", null, 1)).isEqualTo(1); // 2 left
			endpoint(a).update("api", null, 6L, null, "pro");
			// the other instance reads its plans' records within a second (TemplateTune.STALE_MILLIS)
			sleep(TemplateTune.STALE_MILLIS + 200);
			assertThat(calls(second, "p", "pro", 10)).isEqualTo(6);
			assertThat(calls(second, "p2", "pro", 10)).isEqualTo(6);
			assertThat(calls(second, "f", "free", 10)).isEqualTo(4);
			assertThat(calls(second, "f2", "free", 10)).isEqualTo(5);
			assertThat(calls(second, "n", null, 10)).isEqualTo(2);
			assertThat(calls(first, "p3", "pro", 10)).isEqualTo(6);
			// a rate retuned through the other instance keeps the limit retuned before
			endpoint(b).update("api", new BigDecimal("40"), null, null, "pro");
			assertThat(calls(second, "p4", "pro", 10)).isEqualTo(6);
			assertThat(redis.admin().hget("plans-retune:{api:p4}", "m")).isEqualTo("6");
		}));
	}

	private static void sleep(long millis) {
		try {
			Thread.sleep(millis);
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			throw new IllegalStateException(ex);
		}
	}

	private static int calls(Api api, String key, String plan, int times) {
		int granted = 0;
		for (int i = 0; i < times; i++) {
			try {
				api.call(key, plan);
				granted++;
			}
			catch (RateLimitExceededException ex) {
				// refused
			}
		}
		return granted;
	}

	@Configuration(proxyBeanMethods = false)
	static class Plans {

		@Bean
		Api plansApi() {
			return new Api();
		}
	}

	static class Api {

		@RateLimited(value = "api", key = "#key", plan = "#plan")
		public String call(String key, String plan) {
			return "done";
		}
	}
}
