package dev.ratelimit.redis;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.actuate.RateLimitsEndpoint;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.sync.RedisCommands;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A retune of a bucket used with a key ({@code @RateLimited(key = ...)}) on {@code backend: redis},
 * through the endpoint of one instance, as the other instances' users see it (contract revision 2:
 * "a retune of the template applies to every key", and on Redis "changes the bucket for every instance
 * within one second ... until the next restart with a different configuration"; "idle buckets cost
 * nothing").
 *
 * <p>The configuration is 10 per second with a limit of 3; the retune is 1 per 100 seconds
 * ({@code rate: 0.01}) with a limit of 1. A full key's bucket then grants exactly one of three quick
 * calls (three under the configuration), and refuses the next with a retry-after near 100 s (about
 * 100 ms under the configuration). The tests never assert that something took long: they wait at
 * least a second where the contract gives a second, so a loaded machine only makes them wait longer.
 */
class RedisKeyedRetuneTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();

	private static final BigDecimal RETUNED_RATE = new BigDecimal("0.01");

	private static ApplicationContextRunner instance(String prefix, String... properties) {
		return new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(DataRedisAutoConfiguration.class, RateLimitAutoConfiguration.class,
					RateLimitRedisAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port(),
					"ratelimit.buckets.per-user.backend=redis", "ratelimit.buckets.per-user.rate=10",
					"ratelimit.buckets.per-user.limit=3", "ratelimit.buckets.per-user.max-wait=0",
					"ratelimit.buckets.per-user.keys.max=2", "ratelimit.buckets.per-user.redis.key-prefix=" + prefix)
			.withPropertyValues(properties)
			.withUserConfiguration(KeyedService.class);
	}

	@Test
	void aRetuneOnOneInstanceReachesEveryKeyOfTheOtherWithinOneSecond() {
		String prefix = "keyed-retune:";
		together(List.of(instance(prefix), instance(prefix)), new ArrayList<>(), (contexts) -> {
			KeyedService a = contexts.get(0).getBean(KeyedService.class);
			KeyedService b = contexts.get(1).getBean(KeyedService.class);
			b.quote("old"); // a key that only the other instance uses
			a.quote("both");
			b.quote("both");
			a.quote("gone"); // a key that only the retuning instance uses: its hash expires, then it comes back
			endpoint(contexts.get(0)).update("per-user", RETUNED_RATE, 1L, null);
			long retuned = System.nanoTime();
			// on the retuning instance at once
			assertRetuned(a, "new-on-a");
			awaitNoKey(prefix + "{per-user:gone}");
			sleepUntil(retuned + Duration.ofSeconds(1).toNanos());
			// on the other instance, a second after the retune: old keys, new keys, a key back after its
			// hash expired, and the overflow bucket of the keys without room
			for (String key : List.of("old", "both", "gone", "new-on-b")) {
				assertRetuned(b, key);
			}
			KeyedBuckets keys = contexts.get(1).getBean(RateLimiterRegistry.class).get("per-user").keyed();
			KeyedBuckets.Entry first = keys.pin("holder-1");
			KeyedBuckets.Entry second = keys.pin("holder-2");
			try {
				long overflowed = keys.overflowCalls();
				assertRetuned(b, "crowded");
				assertThat(keys.overflowCalls()).as("calls on the overflow bucket").isEqualTo(overflowed + 3);
			}
			finally {
				first.unpin();
				second.unpin();
			}
			// an instance started later with the same configuration keeps the retune
			instance(prefix).run((later) -> assertRetuned(later.getBean(KeyedService.class), "new-on-c"));
		});
	}

	@Test
	void afterARetuneIdleKeysLeaveNothingInRedis() {
		String prefix = "keyed-idle:";
		together(List.of(instance(prefix), instance(prefix)), new ArrayList<>(), (contexts) -> {
			KeyedService a = contexts.get(0).getBean(KeyedService.class);
			KeyedService b = contexts.get(1).getBean(KeyedService.class);
			a.quote("alice");
			b.quote("bob");
			a.quote("carol");
			b.quote("carol");
			endpoint(contexts.get(0)).update("per-user", null, 2L, null);
			a.quote("alice");
			b.quote("dave");
			assertThat(redis.admin().keys(prefix + "{per-user:*")).isNotEmpty();
			// every key's bucket is full within 300 ms and its hash expires a second after that: then Redis
			// holds nothing for any key (the retune itself is stored once, for the bucket)
			long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
			while (!redis.admin().keys(prefix + "{per-user:*").isEmpty() && System.nanoTime() < deadline) {
				sleep(50);
			}
			assertThat(redis.admin().keys(prefix + "{per-user:*")).as("keys left for idle users").isEmpty();
			assertThat(redis.admin().keys(prefix + "*")).isSubsetOf(prefix + "{per-user}:retuned", prefix + "{per-user}");
		});
	}

	@Test
	void anInstanceStartedWithAnotherConfigurationDropsTheRetuneOfEveryKey() {
		String prefix = "keyed-restart:";
		// 1 per hour: "N at once" holds however slow the machine
		String[] slow = { "ratelimit.buckets.per-user.rate=1", "ratelimit.buckets.per-user.period=1h" };
		together(List.of(instance(prefix, slow), instance(prefix, slow)), new ArrayList<>(), (contexts) -> {
			KeyedService a = contexts.get(0).getBean(KeyedService.class);
			endpoint(contexts.get(0)).update("per-user", null, 1L, null);
			assertThat(granted(a, "before-restart", 2, new AtomicReference<>())).isEqualTo(1);
			instance(prefix, slow).withPropertyValues("ratelimit.buckets.per-user.limit=4").run((restarted) -> {
				KeyedService c = restarted.getBean(KeyedService.class);
				// the restarted instance's keys have its configuration: 4 at once
				assertThat(granted(c, "after-restart", 5, new AtomicReference<>())).isEqualTo(4);
				long dropped = System.nanoTime();
				sleepUntil(dropped + Duration.ofSeconds(1).toNanos());
				// and the retune is gone for the others too: their configuration again, 3 at once
				KeyedService b = contexts.get(1).getBean(KeyedService.class);
				assertThat(granted(b, "after-restart-on-b", 4, new AtomicReference<>())).isEqualTo(3);
			});
		});
	}

	@Test
	void theScriptOnAKeysBucketUsesTheSettingsItIsGivenAndKeepsNoRetune() {
		RedisCommands<String, String> admin = redis.admin();
		String template = "keyed-script:{per-user}";
		String key = "keyed-script:{per-user:alice}";
		// the template retuned to 1 per second, limit 2 (the configuration: 10 per second, limit 3)
		admin.hset(template + ":retuned", java.util.Map.of("a", "1", "b", "1000000", "limit", "2", "tokens", "1",
				"period", "1000000000", "cfg", "1:100000:3"));
		// a key's bucket, three keys: the settings given are in force (limit 5), no retune is read or written
		List<Object> reply = admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, BucketScript.keyKeys(key), "1",
				"100000", "5", "1", "0", "0", "acquire", "", "60000000");
		assertThat(reply).containsExactly(1L, 0L, 4L, 0L, 0L, 0L, 0L, 0L, 0L, 0L);
		assertThat(admin.keys("keyed-script:{per-user:*")).containsExactly(key);
		assertThat(admin.pttl(key)).isPositive();
		// it cannot be retuned itself: its template is
		assertThatThrownBy(() -> admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, BucketScript.keyKeys(key), "1",
				"100000", "5", "0", "0", "0", "retune", "", "60000000", "1", "1000000", "2", "1", "1000000000"))
			.hasMessageContaining("mode retune needs the retune key");
		// the template's retune, read for the configuration it was made for
		reply = admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, BucketScript.keys(template), "1", "100000", "3",
				"0", "0", "0", "tune", "", "60000000");
		assertThat(reply).containsExactly(3L, 0L, 0L, 0L, 0L, 1L, 1000000L, 2L, 1L, 1000000000L);
		assertThat(admin.exists(template)).as("tune writes no state").isZero();
		// and dropped by a read for another configuration
		reply = admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, BucketScript.keys(template), "1", "100000", "4",
				"0", "0", "0", "tune", "", "60000000");
		assertThat(reply).containsExactly(3L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L);
		assertThat(admin.exists(template + ":retuned")).isZero();
	}

	/** A full key's bucket under the retune: one of three quick calls, and a refusal for ~100 s. */
	private static void assertRetuned(KeyedService service, String key) {
		AtomicReference<RateLimitExceededException> refusal = new AtomicReference<>();
		assertThat(granted(service, key, 3, refusal)).as("calls of key '%s' granted of 3 (limit 1)", key).isEqualTo(1);
		assertThat(refusal.get().getRetryAfter()).as("the retry-after of key '%s' (1 token per 100 s)", key)
			.isGreaterThan(Duration.ofSeconds(50));
	}

	private static int granted(KeyedService service, String key, int calls,
			AtomicReference<RateLimitExceededException> refusal) {
		int granted = 0;
		for (int i = 0; i < calls; i++) {
			try {
				service.quote(key);
				granted++;
			}
			catch (RateLimitExceededException ex) {
				assertThat(ex.getKey()).isEqualTo(key);
				refusal.set(ex);
			}
		}
		return granted;
	}

	private static void awaitNoKey(String key) {
		long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
		while (redis.admin().exists(key) == 1 && System.nanoTime() < deadline) {
			sleep(50);
		}
		assertThat(redis.admin().exists(key)).as("%s expired", key).isZero();
	}

	private static void sleepUntil(long nanos) {
		long left;
		while ((left = nanos - System.nanoTime()) > 0) {
			sleep(Math.max(1, left / 1_000_000));
		}
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

	/** Runs the contexts together (each runner's context stays open while the next starts). */
	private static void together(List<ApplicationContextRunner> runners, List<ConfigurableApplicationContext> open,
			java.util.function.Consumer<List<ConfigurableApplicationContext>> body) {
		if (open.size() == runners.size()) {
			body.accept(open);
			return;
		}
		runners.get(open.size()).run((context) -> {
			assertThat(context).hasNotFailed();
			open.add(context.getSourceApplicationContext());
			together(runners, open, body);
		});
	}

	/** The endpoint's operations, as {@code /actuator/ratelimits} runs them on that instance. */
	private static RateLimitsEndpoint endpoint(ConfigurableApplicationContext context) {
		return new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
	}

	@Configuration(proxyBeanMethods = false)
	static class KeyedService {

		@RateLimited(value = "per-user", key = "#user")
		String quote(String user) {
			return user;
		}
	}
}
