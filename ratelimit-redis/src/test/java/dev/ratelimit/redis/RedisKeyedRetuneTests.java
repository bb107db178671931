package dev.ratelimit.redis;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.redis.autoconfigure.RateLimitRedisAutoConfiguration;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
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

	/**
	 * The mode is one per bucket, the template's, and a switch reaches the instances that only use keys as
	 * a retune does: within a second (their keys' calls read the template's record, and the mode with it).
	 * The call that reads it is decided in the mode before it: the interceptor reads the mode first.
	 */
	@Test
	void aModeSwitchOnOneInstanceReachesTheKeysOfTheOtherWithinOneSecond() {
		String prefix = "keyed-mode:";
		// 1 per hour: "N at once" holds however slow the machine
		String[] slow = { "ratelimit.buckets.per-user.rate=1", "ratelimit.buckets.per-user.period=1h" };
		together(List.of(instance(prefix, slow), instance(prefix, slow)), new ArrayList<>(), (contexts) -> {
			KeyedService b = contexts.get(1).getBean(KeyedService.class);
			assertThat(granted(b, "enforced", 4, new AtomicReference<>())).isEqualTo(3);
			endpoint(contexts.get(0)).update("per-user", null, null, "shadow");
			long switched = System.nanoTime();
			sleepUntil(switched + Duration.ofSeconds(1).toNanos());
			granted(b, "reads", 1, new AtomicReference<>()); // reads the template's record, the mode with it
			assertThat(contexts.get(1).getBean(RateLimiterRegistry.class).get("per-user").stats().mode().value())
				.isEqualTo("shadow");
			assertThat(granted(b, "shadowed", 5, new AtomicReference<>())).isEqualTo(5);
			assertThat(granted(b, "enforced", 2, new AtomicReference<>())).isEqualTo(2);
		});
	}

	/**
	 * A retune keeps a key's state (contract: the endpoint changes a bucket "keeping its state"): the time
	 * before it counts at the old settings. 10 per second, limit 100: a key spent down to nothing, then a
	 * second later the template retuned to 1000 per second. Right after the retune the key holds what a
	 * second at 10 per second earned, 10 tokens (not 100: a second at 1000 per second, which is what it held
	 * when a key's hash did not record its settings), and 10 ms later 20.
	 *
	 * <p>Redis's clock cannot be faked, so the bounds are computed from the times measured around the calls:
	 * an upper bound from the longest time each rate can have run, a lower bound from the shortest (less a
	 * token for Redis's and the JVM's clocks). A slow machine only widens them.
	 */
	@Test
	void aRetuneCountsTheTimeBeforeItAtTheOldSettingsForAKey() {
		String prefix = "keyed-exact:";
		instance(prefix, "ratelimit.buckets.per-user.limit=100").run((context) -> {
			KeyedService service = context.getBean(KeyedService.class);
			RateLimitsEndpoint endpoint = endpoint(context);
			// spend alice's bucket until a call is refused: then it holds less than a token
			long[] refused = spendDown(service, "alice");
			sleepUntil(refused[1] + Duration.ofSeconds(1).toNanos());
			long retuneSent = System.nanoTime();
			endpoint.update("per-user", new BigDecimal(1000), null, null);
			long retuneAnswered = System.nanoTime();
			long[] level = new long[2];
			long[] peekSent = new long[2];
			long[] peekAnswered = new long[2];
			for (int i = 0; i < 2; i++) {
				if (i == 1) {
					sleep(10);
				}
				peekSent[i] = System.nanoTime();
				level[i] = endpoint.key("per-user", "alice").available().longValue();
				peekAnswered[i] = System.nanoTime();
			}
			for (int i = 0; i < 2; i++) {
				// at most: under a token at the refusal, 10 per second until the retune, 1000 per second after
				double most = 1 + 10 * seconds(retuneAnswered - refused[0]) + 1000 * seconds(peekAnswered[i] - retuneSent);
				// at least: 10 per second from the refusal's answer to the retune's sending, 1000 per second from
				// the retune's answer to the peek's sending, less a token for the two clocks
				double least = Math.floor(10 * seconds(retuneSent - refused[1]))
						+ Math.floor(1000 * seconds(peekSent[i] - retuneAnswered)) - 1;
				System.out.printf("aRetuneCountsTheTimeBeforeItAtTheOldSettingsForAKey: peek %d: %d tokens, bounds %.2f..%.2f%n",
						i, level[i], Math.min(least, 100), Math.min(most, 100));
				assertThat(level[i]).as("alice's tokens at peek %d (exact: 10 right after the retune, 20 10 ms later)", i)
					.isLessThanOrEqualTo((long) Math.min(Math.floor(most), 100))
					.isGreaterThanOrEqualTo((long) Math.min(least, 100));
			}
		});
	}

	/** Calls until one is refused; returns when the refused call was sent and when it was answered. */
	private static long[] spendDown(KeyedService service, String key) {
		for (int i = 0; i < 100_000; i++) {
			long sent = System.nanoTime();
			try {
				service.quote(key);
			}
			catch (RateLimitExceededException ex) {
				return new long[] { sent, System.nanoTime() };
			}
		}
		throw new AssertionError("no call of key " + key + " was refused");
	}

	private static double seconds(long nanos) {
		return nanos / 1e9;
	}

	/**
	 * The script's {@code switch} mode: stores the bucket mode in the retune record (alone, or beside a
	 * retune's settings, which it leaves as they are), every reply carries it as its twelfth value, and a
	 * call with another configuration drops it with the rest of the record.
	 */
	@Test
	void theScriptKeepsTheModeInTheRetuneRecord() {
		RedisCommands<String, String> admin = redis.admin();
		String template = "script-mode:{b}";
		String[] keys = BucketScript.keys(template);
		// 10 per second, limit 3: A = 1, B = 100000
		List<Object> reply = admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, keys, "1", "100000", "3", "0",
				"0", "0", "switch", "", "60000000", "shadow");
		assertThat(reply).containsExactly(3L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 2L, 0L); // (then: no reset)
		assertThat(admin.hgetall(template + ":retuned")).containsOnly(java.util.Map.entry("mode", "shadow"),
				java.util.Map.entry("cfg", "1:100000:3"));
		assertThat(admin.exists(template)).as("switch writes no state").isZero();
		// a record with a mode alone: the configuration's settings, and the mode
		reply = admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, keys, "1", "100000", "3", "1", "0", "0",
				"acquire", "", "60000000");
		assertThat(reply).containsExactly(1L, 0L, 2L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 2L, 0L);
		// a retune keeps the mode; a switch keeps the retune
		reply = admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, keys, "1", "100000", "3", "0", "0", "0",
				"retune", "", "60000000", "1", "1000000", "2", "1", "1000000000");
		assertThat(reply.get(11)).isEqualTo(2L);
		reply = admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, keys, "1", "100000", "3", "0", "0", "0",
				"switch", "", "60000000", "enforce");
		assertThat(reply.subList(5, 8)).containsExactly(1L, 1000000L, 2L);
		assertThat(reply.get(11)).isEqualTo(1L);
		reply = admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, keys, "1", "100000", "3", "0", "0", "0", "tune",
				"", "60000000");
		assertThat(reply.subList(5, 8)).containsExactly(1L, 1000000L, 2L);
		assertThat(reply.get(11)).isEqualTo(1L);
		// not a mode, or a key's bucket: refused, nothing written
		assertThatThrownBy(() -> admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, keys, "1", "100000", "3", "0",
				"0", "0", "switch", "", "60000000", "loud"))
			.hasMessageContaining("mode switch takes enforce or shadow");
		assertThatThrownBy(() -> admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI,
				BucketScript.keyKeys("script-mode:{b:alice}"), "1", "100000", "3", "0", "0", "0", "switch", "",
				"60000000", "shadow"))
			.hasMessageContaining("mode switch needs the retune key");
		assertThat(admin.hget(template + ":retuned", "mode")).isEqualTo("enforce");
		// another configuration (limit 4): the mode goes with the rest of the record
		reply = admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, keys, "1", "100000", "4", "0", "0", "0",
				"sync", "", "60000000");
		assertThat(reply.subList(5, 12)).containsOnly(0L);
		assertThat(admin.exists(template + ":retuned")).isZero();
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
		assertThat(reply).containsExactly(1L, 0L, 4L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L);
		assertThat(admin.keys("keyed-script:{per-user:*")).containsExactly(key);
		assertThat(admin.pttl(key)).isPositive();
		// it cannot be retuned itself: its template is
		assertThatThrownBy(() -> admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, BucketScript.keyKeys(key), "1",
				"100000", "5", "0", "0", "0", "retune", "", "60000000", "1", "1000000", "2", "1", "1000000000"))
			.hasMessageContaining("mode retune needs the retune key");
		// the template's retune, read for the configuration it was made for (a retune stored without its
		// time, by an earlier version, reads as made at 0)
		reply = admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, BucketScript.keys(template), "1", "100000", "3",
				"0", "0", "0", "tune", "", "60000000");
		assertThat(reply).containsExactly(3L, 0L, 0L, 0L, 0L, 1L, 1000000L, 2L, 1L, 1000000000L, 0L, 0L, 0L);
		assertThat(admin.exists(template)).as("tune writes no state").isZero();
		// and dropped by a read for another configuration
		reply = admin.eval(BucketScript.SOURCE, ScriptOutputType.MULTI, BucketScript.keys(template), "1", "100000", "4",
				"0", "0", "0", "tune", "", "60000000");
		assertThat(reply).containsExactly(3L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L);
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
