package dev.ratelimit.redis;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.BackendHealth;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.redis.autoconfigure.RateLimitRedisAutoConfiguration;

import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.actuate.RateLimitsEndpoint;
import dev.ratelimit.spring.engine.SeveralBucketsExceeded;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.extension.ExtendWith;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Several application contexts (instances of one application) sharing Redis buckets, configured as a
 * user configures them.
 */
class RedisApplicationsTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();


	private ApplicationContextRunner instance(String bucket, String... properties) {
		return new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(DataRedisAutoConfiguration.class, RateLimitAutoConfiguration.class,
					RateLimitRedisAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port(),
					"ratelimit.buckets." + bucket + ".backend=redis")
			.withPropertyValues(properties);
	}

	/** Runs the contexts together (each runner's context stays open while the next starts). */
	private static void together(List<ApplicationContextRunner> runners, List<ConfigurableApplicationContext> open,
			Runnable body) {
		if (open.size() == runners.size()) {
			body.run();
			return;
		}
		runners.get(open.size()).run((context) -> {
			assertThat(context).hasNotFailed();
			open.add(context.getSourceApplicationContext());
			together(runners, open, body);
		});
	}

	@Test
	void threeInstancesHammeringOneBucketStayWithinRateTimesElapsedPlusLimit() {
		List<ApplicationContextRunner> runners = new ArrayList<>();
		for (int i = 0; i < 3; i++) {
			runners.add(instance("shared", "ratelimit.buckets.shared.rate=200", "ratelimit.buckets.shared.limit=20"));
		}
		List<ConfigurableApplicationContext> contexts = new ArrayList<>();
		together(runners, contexts, () -> {
			AtomicLong granted = new AtomicLong();
			// a call Redis does not answer within the timeout is decided by its instance's local bucket (the
			// policy, local, which mirrors that instance's grants only): on a busy machine each such call may
			// add one grant to the bound of the three together
			AtomicLong unanswered = new AtomicLong();
			long start = System.nanoTime();
			long end = start + Duration.ofSeconds(1).toNanos();
			List<Thread> threads = new ArrayList<>();
			for (ConfigurableApplicationContext context : contexts) {
				RedisTokenBucket bucket = context.getBean("shared", RedisTokenBucket.class);
				bucket.onCall((outcome, nanos) -> {
					if (outcome != BackendHealth.Outcome.OK) {
						unanswered.incrementAndGet();
					}
				});
				for (int t = 0; t < 4; t++) {
					Thread thread = new Thread(() -> {
						while (System.nanoTime() < end) {
							if (bucket.tryAcquire(1)) {
								granted.incrementAndGet();
							}
						}
					});
					threads.add(thread);
					thread.start();
				}
			}
			join(threads);
			double elapsed = (System.nanoTime() - start) / 1e9;
			assertThat(granted.get()).as("granted, %d calls unanswered", unanswered.get())
				.isLessThanOrEqualTo((long) Math.floor(200 * elapsed + 20) + unanswered.get());
			assertThat(granted.get()).isPositive();
		});
	}

	@Test
	void aRetuneThroughOneInstancesEndpointIsSeenByTheOthersWithinOneSecond() {
		List<ApplicationContextRunner> runners = new ArrayList<>();
		for (int i = 0; i < 3; i++) {
			runners.add(instance("tuned", "ratelimit.buckets.tuned.rate=100", "ratelimit.buckets.tuned.period=1h",
					"ratelimit.buckets.tuned.limit=50"));
		}
		List<ConfigurableApplicationContext> contexts = new ArrayList<>();
		together(runners, contexts, () -> {
			endpoint(contexts.get(0)).update("tuned", null, 3L, null);
			long deadline = System.nanoTime() + Duration.ofSeconds(1).toNanos();
			for (ConfigurableApplicationContext context : contexts.subList(1, 3)) {
				// one call is all an instance needs to take the retune on
				RateLimiter bucket = context.getBean("tuned", RateLimiter.class);
				assertThat(bucket.snapshot().limit()).isEqualTo(3.0);
				assertThat(endpoint(context).bucket("tuned").limit().doubleValue()).isEqualTo(3.0);
			}
			assertThat(System.nanoTime()).isLessThan(deadline);
			int granted = 0;
			for (ConfigurableApplicationContext context : contexts) {
				RateLimiter bucket = context.getBean("tuned", RateLimiter.class);
				for (int i = 0; i < 3; i++) {
					if (bucket.tryAcquire(1)) {
						granted++;
					}
				}
			}
			assertThat(granted).isEqualTo(3);
			endpoint(contexts.get(1)).update("tuned", new BigDecimal("200"), null, null);
			assertThat(contexts.get(2).getBean("tuned", RateLimiter.class).snapshot().rate()).isEqualTo(200);
			assertThat(endpoint(contexts.get(2)).bucket("tuned").rate())
				.isEqualByComparingTo("200");
		});
	}

	/**
	 * Two sample instances on one Redis: {"mode": "shadow"} posted to one instance's endpoint was never
	 * seen by the other (still "enforce" after 3 s, still answering 429), and a later
	 * {"mode": "enforce", "rate": 2, "limit": 2} on the other left the first in shadow mode while its rate
	 * and limit followed. The contract's one-second promise covers every retune the endpoint takes,
	 * the mode included; the mode is not among the settings kept in Redis.
	 */
	@Test
	void aModeSwitchThroughOneInstancesEndpointIsSeenByTheOtherWithinOneSecond() {
		List<ApplicationContextRunner> runners = new ArrayList<>();
		for (int i = 0; i < 2; i++) {
			runners.add(moded());
		}
		List<ConfigurableApplicationContext> contexts = new ArrayList<>();
		together(runners, contexts, () -> {
			ModedService a = contexts.get(0).getBean(ModedService.class);
			ModedService b = contexts.get(1).getBean(ModedService.class);
			b.call(); // the only token: B's calls are refused while it enforces
			assertThatThrownBy(b::call).isInstanceOf(RateLimitExceededException.class);
			endpoint(contexts.get(0)).update("moded", null, null, "shadow");
			awaitMode(contexts.get(1), "shadow");
			// shadow mode on B: its calls run, though the bucket has nothing for them
			for (int i = 0; i < 3; i++) {
				assertThat(b.call()).isEqualTo("done");
			}
			// {"mode": "enforce", "rate": 2, "limit": 2} on B: the rate, the limit and the mode reach A
			endpoint(contexts.get(1)).update("moded", new BigDecimal("2"), 2L, "enforce");
			awaitMode(contexts.get(0), "enforce");
			assertThat(endpoint(contexts.get(0)).bucket("moded").limit().longValue()).isEqualTo(2);
			assertThat(endpoint(contexts.get(0)).bucket("moded").rate()).isEqualByComparingTo("2");
			// 2 per hour, limit 2: A refuses within three calls
			assertThatThrownBy(() -> {
				for (int i = 0; i < 3; i++) {
					a.call();
				}
			}).isInstanceOf(RateLimitExceededException.class);
		});
	}

	/**
	 * A mode switched through an endpoint lives with the retune: an instance started later with the same
	 * configuration takes it on with its first call; one started with another configuration drops it, for
	 * every instance (as a retune of the rate or the limit).
	 */
	@Test
	void aSwitchedModeOutlivesARestartWithTheSameConfigurationAndNotWithAnother() {
		moded("ratelimit.buckets.moded.redis.key-prefix=moded-restart:").run((first) -> {
			assertThat(first).hasNotFailed();
			endpoint(first).update("moded", null, null, "shadow");
			assertThat(endpoint(first).bucket("moded").mode()).isEqualTo("shadow");
			// the same configuration, started after the switch: shadow
			moded("ratelimit.buckets.moded.redis.key-prefix=moded-restart:").run((same) -> {
				assertThat(same).hasNotFailed();
				assertThat(endpoint(same).bucket("moded").mode()).isEqualTo("shadow");
				ModedService service = same.getBean(ModedService.class);
				for (int i = 0; i < 3; i++) {
					assertThat(service.call()).isEqualTo("done"); // limit 1: enforced, the second is refused
				}
			});
			assertThat(redis.admin().hget("moded-restart:{moded}:retuned", "mode")).isEqualTo("shadow");
			// another configuration (limit 2): its first call drops the switch, for the first instance too
			moded("ratelimit.buckets.moded.redis.key-prefix=moded-restart:", "ratelimit.buckets.moded.limit=2")
				.run((other) -> {
					assertThat(other).hasNotFailed();
					other.getBean("moded", RateLimiter.class).tryAcquire(1); // a call that writes (a view only reads)
					assertThat(endpoint(other).bucket("moded").mode()).isEqualTo("enforce");
					assertThat(redis.admin().exists("moded-restart:{moded}:retuned")).isZero();
					awaitMode(first, "enforce");
				});
		});
	}

	/** Two instances' worth of a bucket of 1 per hour, limit 1, refusing at once, and a service using it. */
	private ApplicationContextRunner moded(String... properties) {
		return instance("moded", "ratelimit.buckets.moded.rate=1", "ratelimit.buckets.moded.period=1h",
				"ratelimit.buckets.moded.limit=1", "ratelimit.buckets.moded.max-wait=0")
			.withPropertyValues(properties)
			.withUserConfiguration(ModedService.class);
	}

	/**
	 * Polls (a call on the bucket, then the endpoint's view) until the instance shows {@code mode}, for up
	 * to 5 s however busy the machine. The first call answered by Redis after the switch carries it (Redis
	 * answers in order, and every reply says the mode in force): when no call timed out, the first poll
	 * must see it, which is what keeps the contract's second whatever the load.
	 */
	private static void awaitMode(ConfigurableApplicationContext context, String mode) {
		RedisTokenBucket bucket = context.getBean("moded", RedisTokenBucket.class);
		AtomicLong unanswered = new AtomicLong();
		bucket.onCall((outcome, nanos) -> {
			if (outcome != BackendHealth.Outcome.OK) {
				unanswered.incrementAndGet();
			}
		});
		long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
		int polls = 0;
		String seen = null;
		while (System.nanoTime() < deadline) {
			polls++;
			bucket.tryAcquire(1);
			seen = context.getBean(RateLimiterRegistry.class).get("moded").stats().mode().value();
			if (mode.equals(seen)) {
				break;
			}
			sleep(50);
		}
		assertThat(seen).isEqualTo(mode);
		if (unanswered.get() == 0) {
			assertThat(polls).as("polls until the mode was seen (each call answered)").isEqualTo(1);
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class ModedService {

		@RateLimited("moded")
		String call() {
			return "done";
		}
	}

	@Test
	@ExtendWith(OutputCaptureExtension.class)
	void aColdStartUnderLoadIsLoadNotAnOutage(CapturedOutput output) {
		instance("cold", "ratelimit.buckets.cold.rate=100", "ratelimit.buckets.cold.limit=10",
				"ratelimit.buckets.cold.redis.key-prefix=cold-start:")
			.run((context) -> {
				// the first calls of a new instance, at once and from many threads
				RedisTokenBucket bucket = context.getBean("cold", RedisTokenBucket.class);
				// a call Redis does not answer within the timeout takes the policy (local) for itself, without
				// switching the bucket: on a machine this busy each such call may add one grant to the bound
				AtomicLong unanswered = new AtomicLong();
				bucket.onCall((outcome, nanos) -> {
					if (outcome != BackendHealth.Outcome.OK) {
						unanswered.incrementAndGet();
					}
				});
				AtomicLong granted = new AtomicLong();
				AtomicBoolean wentDown = new AtomicBoolean();
				long start = System.nanoTime();
				long end = start + Duration.ofMillis(700).toNanos();
				List<Thread> threads = new ArrayList<>();
				for (int t = 0; t < 32; t++) {
					Thread thread = new Thread(() -> {
						while (System.nanoTime() < end) {
							if (bucket.tryAcquire(1)) {
								granted.incrementAndGet();
							}
							if (!bucket.isUp()) {
								wentDown.set(true);
							}
						}
					});
					threads.add(thread);
					thread.start();
				}
				join(threads);
				double elapsed = (System.nanoTime() - start) / 1e9;
				assertThat(granted.get()).as("granted, %d calls unanswered", unanswered.get())
					.isLessThanOrEqualTo((long) Math.floor(100 * elapsed + 10) + unanswered.get());
				assertThat(wentDown).isFalse();
				assertThat(output.getOut() + output.getErr()).doesNotContain("runs on its on-failure policy");
			});
	}

	@Test
	void twoInstancesShareEachKeysBudgetAndAKeysHashExpiresWhenFull() throws InterruptedException {
		List<ApplicationContextRunner> runners = new ArrayList<>();
		for (int i = 0; i < 2; i++) {
			runners.add(instance("per-user", "ratelimit.buckets.per-user.rate=10", "ratelimit.buckets.per-user.limit=3",
					"ratelimit.buckets.per-user.max-wait=0", "ratelimit.buckets.per-user.redis.key-prefix=keyed:")
				.withUserConfiguration(KeyedService.class));
		}
		List<ConfigurableApplicationContext> contexts = new ArrayList<>();
		together(runners, contexts, () -> {
			KeyedService first = contexts.get(0).getBean(KeyedService.class);
			KeyedService second = contexts.get(1).getBean(KeyedService.class);
			int alice = 0;
			for (int i = 0; i < 4; i++) {
				for (KeyedService service : List.of(first, second)) {
					try {
						service.quote("alice");
						alice++;
					}
					catch (RateLimitExceededException ex) {
						assertThat(ex.getKey()).isEqualTo("alice");
					}
				}
			}
			// one budget for alice across both instances: 3 at once, and 10 per second after
			assertThat(alice).isBetween(3, 4);
			assertThat(redis.admin().exists("keyed:{per-user:alice}")).isEqualTo(1);
			second.quote("bob"); // bob's own hash
			assertThat(redis.admin().exists("keyed:{per-user:bob}")).isEqualTo(1);
			// full again within 300 ms: the hash expires a second after that, and idle keys cost Redis nothing
			long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
			while (redis.admin().exists("keyed:{per-user:alice}") == 1 && System.nanoTime() < deadline) {
				sleep(50);
			}
			assertThat(redis.admin().exists("keyed:{per-user:alice}")).isZero();
		});
	}

	/**
	 * Redis refuses only when it answers (after the claim): two Redis buckets refusing one call still name
	 * the one whose wait was longest, count the refusal on it alone, and list both as refusing.
	 */
	@Test
	void twoRedisBucketsRefusingOneCallNameTheLongestWaitAndListBoth() {
		instance("alpha", "ratelimit.buckets.alpha.rate=1", "ratelimit.buckets.alpha.limit=1",
				"ratelimit.buckets.alpha.max-wait=0", "ratelimit.buckets.omega.backend=redis",
				"ratelimit.buckets.omega.rate=1", "ratelimit.buckets.omega.period=1h", "ratelimit.buckets.omega.limit=1",
				"ratelimit.buckets.omega.max-wait=0", "ratelimit.buckets.alpha.redis.key-prefix=several:",
				"ratelimit.buckets.omega.redis.key-prefix=several:")
			.withUserConfiguration(TwoBucketService.class)
			.run((context) -> {
				TwoBucketService service = context.getBean(TwoBucketService.class);
				service.call(); // takes the only token of each
				assertThatThrownBy(service::call).isInstanceOfSatisfying(SeveralBucketsExceeded.class, (ex) -> {
					assertThat(ex.getBucket()).isEqualTo("omega"); // an hour's wait, against alpha's second
					assertThat(ex.getRetryAfter()).isGreaterThan(Duration.ofMinutes(30));
					assertThat(ex.getRefusingBuckets()).containsExactly("alpha", "omega");
				});
				RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
				assertThat(registry.get("omega").stats().rejected()).isEqualTo(1);
				assertThat(registry.get("alpha").stats().rejected()).isZero();
			});
	}

	@Configuration(proxyBeanMethods = false)
	static class TwoBucketService {

		@RateLimited("alpha")
		@RateLimited("omega")
		String call() {
			return "done";
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

	@Configuration(proxyBeanMethods = false)
	static class KeyedService {

		@RateLimited(value = "per-user", key = "#user")
		String quote(String user) {
			return user;
		}
	}

	/** The endpoint's operations, as {@code /actuator/ratelimits} runs them on that instance. */
	private static RateLimitsEndpoint endpoint(ConfigurableApplicationContext context) {
		return new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
	}

	private static void join(List<Thread> threads) {
		for (Thread thread : threads) {
			try {
				thread.join();
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
				throw new IllegalStateException(ex);
			}
		}
	}
}
