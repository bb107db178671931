package dev.ratelimit.redis;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.redis.autoconfigure.RateLimitRedisAutoConfiguration;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.actuate.BucketView;
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
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Calendar quotas on Redis (contract revision 3, "Calendar quotas": {@code type: quota} with
 * {@code backend: redis}), on a real Redis, configured as a user configures them: instances share one
 * count exactly, a restart of every instance keeps it, the period's end gives the whole allowance again
 * (and a caller whose max-wait reaches the boundary waits for it), keys' quotas with plans.
 */
class RedisQuotaTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();

	private ApplicationContextRunner instance(String prefix, String... properties) {
		return new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(DataRedisAutoConfiguration.class, RateLimitAutoConfiguration.class,
					RateLimitRedisAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port(),
					"ratelimit.buckets.q.type=quota", "ratelimit.buckets.q.backend=redis",
					"ratelimit.buckets.q.redis.key-prefix=" + prefix, "ratelimit.buckets.q.redis.timeout=5s",
					"ratelimit.buckets.q.redis.on-failure=deny")
			.withPropertyValues(properties);
	}

	private static RateLimitsEndpoint endpoint(ConfigurableApplicationContext context) {
		return new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
	}

	@Test
	void twoInstancesShareOneYearsQuotaExactly() {
		String[] quota = { "ratelimit.buckets.q.limit=60", "ratelimit.buckets.q.calendar=year",
				"ratelimit.buckets.q.zone=Europe/Berlin" };
		instance("shared-quota:", quota).run((a) -> instance("shared-quota:", quota).run((b) -> {
			RateLimiter first = a.getBean("q", RateLimiter.class);
			RateLimiter second = b.getBean("q", RateLimiter.class);
			assertThat(first).isInstanceOf(RedisCalendarQuota.class);
			Instant end = first.snapshot().resetsAt();
			AtomicLong granted = new AtomicLong();
			List<Thread> threads = new ArrayList<>();
			for (RateLimiter instance : List.of(first, second)) {
				for (int t = 0; t < 3; t++) {
					Thread thread = new Thread(() -> {
						for (int i = 0; i < 40; i++) {
							if (instance.tryAcquire(1)) {
								granted.incrementAndGet();
							}
						}
					});
					threads.add(thread);
					thread.start();
				}
			}
			join(threads);
			// 240 calls between two boundaries of the same year (the test would have to run over New Year in
			// Berlin to cross one: checked, not assumed)
			assertThat(second.snapshot().resetsAt()).isEqualTo(end);
			assertThat(granted.get()).as("granted across both instances").isEqualTo(60);
			assertThat(first.snapshot().available()).isZero();
			BucketView view = endpoint(b).bucket("q");
			assertThat(view.type()).isEqualTo("quota");
			assertThat(view.backend()).isEqualTo("redis");
			assertThat(view.resetsAt()).isEqualTo(end.toString());
			RateLimitExceededException refusal = catchRefusal(second);
			Duration toBoundary = Duration.between(Instant.now(), end);
			assertThat(refusal.getRetryAfter()).as("the time to the boundary")
				.isBetween(toBoundary.minusSeconds(1), toBoundary.plusSeconds(1));
		}));
	}

	@Test
	void aRestartOfEveryInstanceKeepsTheCount() {
		String[] quota = { "ratelimit.buckets.q.limit=10", "ratelimit.buckets.q.calendar=month" };
		instance("restart-quota:", quota).run((a) -> instance("restart-quota:", quota).run((b) -> {
			for (int i = 0; i < 4; i++) {
				assertThat(a.getBean("q", RateLimiter.class).tryAcquire(1)).isTrue();
				assertThat(b.getBean("q", RateLimiter.class).tryAcquire(1)).isTrue();
			}
		}));
		// both stopped; two new instances on the same Redis
		instance("restart-quota:", quota).run((c) -> instance("restart-quota:", quota).run((d) -> {
			RateLimiter third = c.getBean("q", RateLimiter.class);
			RateLimiter fourth = d.getBean("q", RateLimiter.class);
			assertThat(fourth.snapshot().available()).isEqualTo(2);
			assertThat(third.tryAcquire(1)).isTrue();
			assertThat(fourth.tryAcquire(1)).isTrue();
			assertThat(third.tryAcquire(1)).isFalse();
			assertThat(fourth.tryAcquire(1)).isFalse();
			// the hash lives until the month ends, not longer
			long ttl = redis.admin().pttl("restart-quota:{q}");
			assertThat(ttl).isPositive()
				.isLessThanOrEqualTo(Duration.between(Instant.now(), third.snapshot().resetsAt()).toMillis() + 1000);
		}));
	}

	/**
	 * A minute quota: used up, refused until the boundary; a caller whose max-wait reaches it waits for it
	 * and is served from the new minute's allowance, which is whole again (at most one minute of waiting).
	 */
	@Test
	void theNextPeriodIsFullAgainAndACallerWhoseMaxWaitReachesTheBoundaryWaitsForIt() throws Exception {
		String[] quota = { "ratelimit.buckets.q.limit=3", "ratelimit.buckets.q.calendar=minute" };
		instance("minute-quota:", quota).run((a) -> instance("minute-quota:", quota).run((b) -> {
			RateLimiter first = a.getBean("q", RateLimiter.class);
			RateLimiter second = b.getBean("q", RateLimiter.class);
			int granted = 0;
			Instant boundary = first.snapshot().resetsAt();
			for (int i = 0; i < 5; i++) {
				granted += first.tryAcquire(1) ? 1 : 0;
				granted += second.tryAcquire(1) ? 1 : 0;
			}
			if (!second.snapshot().resetsAt().equals(boundary)) {
				// the calls crossed a minute's boundary: two minutes' allowances at most
				assertThat(granted).isBetween(3, 6);
				boundary = second.snapshot().resetsAt();
				while (first.tryAcquire(1)) {
					// use up the new minute
				}
			}
			else {
				assertThat(granted).isEqualTo(3);
			}
			assertThat(second.tryAcquire(1)).isFalse();
			// waits for the boundary, on the other instance, and is served from the next minute
			try (Permit permit = second.acquire(1, Duration.ofSeconds(61))) {
				assertThat(Instant.now()).isAfterOrEqualTo(boundary.minusMillis(5));
			}
			catch (InterruptedException ex) {
				throw new IllegalStateException(ex);
			}
			// the new minute: three, the one taken by the waiter included
			int next = 0;
			for (int i = 0; i < 4; i++) {
				next += first.tryAcquire(1) ? 1 : 0;
			}
			assertThat(next).isEqualTo(2);
		}));
	}

	/** Keys' quotas on Redis with plans: a key's plan gives its limit, an upgrade applies at once. */
	@Test
	void keysQuotasFollowTheirPlans() {
		instance("plans-quota:", "ratelimit.buckets.q.limit=2", "ratelimit.buckets.q.calendar=month",
				"ratelimit.buckets.q.max-wait=0", "ratelimit.buckets.q.plans.pro.limit=5")
			.withUserConfiguration(Plans.class)
			.run((context) -> {
				assertThat(context).hasNotFailed();
				Api api = context.getBean(Api.class);
				assertThat(calls(api, "k-free", null, 10)).isEqualTo(2);
				assertThat(calls(api, "k-pro", "pro", 10)).isEqualTo(5);
				// k-free upgraded: its quota's limit is pro's, its two calls this month counted
				assertThat(calls(api, "k-free", "pro", 10)).isEqualTo(3);
				assertThat(redis.admin().hget("plans-quota:{q:k-pro}", "u")).isEqualTo("5");
				assertThat(endpoint(context).bucket("q").plans()).containsKey("pro");
			});
	}

	/**
	 * Keys' quotas on Redis past what {@code keys.memory} holds: the store makes room by dropping keys' objects
	 * (their counts stay in Redis), and a key made again counts on. Failed before with a ClassCastException:
	 * the store asked the backend what a key's object owed here as if every key's object were a token bucket.
	 */
	@Test
	void keysQuotasPastTheStoresMemoryAreDroppedAndCountOn() {
		instance("many-quota:", "ratelimit.buckets.q.limit=2", "ratelimit.buckets.q.calendar=month",
				"ratelimit.buckets.q.max-wait=0", "ratelimit.buckets.q.keys.memory=1MB",
				"ratelimit.buckets.q.plans.pro.limit=5")
			.withUserConfiguration(Plans.class)
			.run((context) -> {
				assertThat(context).hasNotFailed();
				Api api = context.getBean(Api.class);
				assertThat(calls(api, "k-0", null, 1)).isEqualTo(1);
				for (int i = 1; i < 4000; i++) {
					assertThat(calls(api, "k-" + i, null, 1)).as("key k-%d's first call", i).isEqualTo(1);
				}
				assertThat(calls(api, "k-0", null, 5)).as("k-0's quota, one of two counted in Redis").isEqualTo(1);
			});
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

	private static RateLimitExceededException catchRefusal(RateLimiter quota) {
		try {
			quota.acquire(1, Duration.ZERO).close();
		}
		catch (RateLimitExceededException ex) {
			return ex;
		}
		catch (InterruptedException ex) {
			throw new IllegalStateException(ex);
		}
		throw new AssertionError("granted");
	}

	private static void join(List<Thread> threads) {
		for (Thread thread : threads) {
			try {
				thread.join();
			}
			catch (InterruptedException ex) {
				throw new IllegalStateException(ex);
			}
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class Plans {

		@Bean
		Api api() {
			return new Api();
		}
	}

	static class Api {

		@RateLimited(value = "q", key = "#key", plan = "#plan")
		public String call(String key, String plan) {
			return "done";
		}
	}
}
