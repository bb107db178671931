package dev.ratelimit.redis;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.redis.autoconfigure.RateLimitRedisAutoConfiguration;
import dev.ratelimit.spring.RateLimitRegistry;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
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
 * Contract revision 3's reset on {@code backend: redis}, through one of two instances on one real Redis: the
 * bucket is full again for both, a caller of the other instance told to wait claims again from the full bucket,
 * and the keys' buckets of the other instance are full again within a second (as a retune reaches them). The
 * rate is one token per 100 s, so nothing comes back with time while a test runs; the tests never assert that
 * something took long, only wait for what the contract promises.
 */
class RedisResetTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();

	private static ApplicationContextRunner instance(String prefix) {
		return new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(DataRedisAutoConfiguration.class, RateLimitAutoConfiguration.class,
					RateLimitRedisAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port(),
					"ratelimit.buckets.shared.backend=redis", "ratelimit.buckets.shared.rate=0.01",
					"ratelimit.buckets.shared.limit=5", "ratelimit.buckets.shared.redis.key-prefix=" + prefix,
					"ratelimit.buckets.per-user.backend=redis", "ratelimit.buckets.per-user.rate=0.01",
					"ratelimit.buckets.per-user.limit=3", "ratelimit.buckets.per-user.max-wait=0",
					"ratelimit.buckets.per-user.redis.key-prefix=" + prefix)
			.withUserConfiguration(KeyedService.class);
	}

	@Test
	void aResetThroughOneInstanceFillsTheBucketForBothAndTheOthersWaiterClaimsAgain() {
		together(List.of(instance("reset-shared:"), instance("reset-shared:")), new ArrayList<>(), (contexts) -> {
			RateLimiter a = contexts.get(0).getBean("shared", RateLimiter.class);
			RateLimiter b = contexts.get(1).getBean("shared", RateLimiter.class);
			assertThat(a.tryAcquire(5)).isTrue();
			assertThat(b.tryAcquire(1)).isFalse(); // one bucket for both
			Reservation waiter = b.reserve(2, Duration.ofHours(1));
			assertThat(answer(waiter)).isPositive(); // told to wait some 200 s

			contexts.get(0).getBean(RateLimitRegistry.class).reset("shared");

			// woken by the reset's message, it claims again from the full bucket: covered at once
			long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
			while (answer(waiter) != 0) {
				assertThat(System.nanoTime() - deadline).as("the waiter claimed again within 10 s").isNegative();
				sleep(20);
			}
			waiter.permit().close();
			assertThat(b.tryAcquire(3)).isTrue(); // 5 - 2: the waiter's claim came from the full bucket, once
			assertThat(a.tryAcquire(1)).isFalse();
			assertThat(a.snapshot().granted()).isEqualTo(1); // counts are kept
		});
	}

	@Test
	void aResetDropsWhatEveryKeyOwedOnEveryInstance() {
		together(List.of(instance("reset-keys:"), instance("reset-keys:")), new ArrayList<>(), (contexts) -> {
			KeyedService a = contexts.get(0).getBean(KeyedService.class);
			KeyedService b = contexts.get(1).getBean(KeyedService.class);
			for (int i = 0; i < 3; i++) {
				a.quote("alice");
				b.quote("bob"); // a key only the other instance holds
			}
			assertThatThrownBy(() -> a.quote("alice")).isInstanceOf(RateLimitExceededException.class);
			assertThatThrownBy(() -> b.quote("bob")).isInstanceOf(RateLimitExceededException.class);

			contexts.get(0).getBean(RateLimitRegistry.class).reset("per-user");
			long reset = System.nanoTime();

			for (int i = 0; i < 3; i++) {
				a.quote("alice"); // at once on the instance that reset
			}
			assertThatThrownBy(() -> a.quote("alice")).isInstanceOf(RateLimitExceededException.class);
			sleepUntil(reset + Duration.ofSeconds(1).toNanos()); // the other instance reads it within a second
			for (int i = 0; i < 3; i++) {
				b.quote("bob");
			}
			assertThatThrownBy(() -> b.quote("bob")).isInstanceOf(RateLimitExceededException.class);
		});
	}

	/** Polls a claim until Redis has answered it: its delay, 0 when its tokens are there. */
	private static long answer(Reservation claim) {
		long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
		for (;;) {
			long delay = claim.poll();
			if (!claim.awaitingAnswer()) {
				return delay;
			}
			assertThat(System.nanoTime() - deadline).as("Redis answered within 10 s").isNegative();
			sleep(5);
		}
	}

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

	private static void sleepUntil(long nanos) {
		while (System.nanoTime() - nanos < 0) {
			sleep(20);
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
}
