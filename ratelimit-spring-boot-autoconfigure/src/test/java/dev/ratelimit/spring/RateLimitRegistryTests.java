package dev.ratelimit.spring;

import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;

/**
 * Contract revision 3: a bean of type {@link RateLimitRegistry} whose {@code reset(name)} and {@code resetAll()}
 * put the application's buckets back to full, every local type (a plain, a capped, a hybrid and a quota bucket)
 * and its keys; on a clock that stands still, so that nothing comes back but through the reset.
 */
class RateLimitRegistryTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(StandingClocks.class)
		.withPropertyValues("ratelimit.buckets.plain.rate=10", "ratelimit.buckets.plain.limit=10",
				"ratelimit.buckets.capped.rate=10", "ratelimit.buckets.capped.limit=5",
				"ratelimit.buckets.capped.capped-release=true", "ratelimit.buckets.feed.type=hybrid",
				"ratelimit.buckets.feed.rate=10", "ratelimit.buckets.feed.limit=4",
				"ratelimit.buckets.feed.burst-ratio=1.0", "ratelimit.buckets.daily.type=quota",
				"ratelimit.buckets.daily.limit=3", "ratelimit.buckets.daily.calendar=day");

	@Test
	void resetAllFillsEveryBucketAgainAndKeepsTheCounts() throws Exception {
		this.runner.run((context) -> {
			RateLimitRegistry registry = context.getBean(RateLimitRegistry.class);
			RateLimiter plain = context.getBean("plain", RateLimiter.class);
			RateLimiter capped = context.getBean("capped", RateLimiter.class);
			RateLimiter feed = context.getBean("feed", RateLimiter.class);
			RateLimiter daily = context.getBean("daily", RateLimiter.class);
			assertThat(plain.tryAcquire(10)).isTrue();
			Permit inFlight = capped.acquire(2, Duration.ZERO);
			Permit more = capped.acquire(3, Duration.ZERO);
			assertThat(feed.tryAcquire(4)).isTrue();
			assertThat(daily.tryAcquire(3)).isTrue();
			plain.charge(7); // a debt, forgotten by the reset
			assertThat(plain.tryAcquire(1) || capped.tryAcquire(1) || feed.tryAcquire(1) || daily.tryAcquire(1)).isFalse();

			registry.resetAll();

			assertThat(plain.snapshot().available()).isEqualTo(10);
			assertThat(plain.snapshot().deficiency()).isZero();
			assertThat(capped.snapshot().inFlight()).isEqualTo(2 + 3); // the work they guard still runs
			more.close();
			inFlight.close();
			assertThat(capped.snapshot().available()).isEqualTo(5); // never above the limit after releases
			assertThat(feed.snapshot().available()).isEqualTo(4.0);
			assertThat(daily.snapshot().available()).isEqualTo(3);
			assertThat(plain.snapshot().granted()).isEqualTo(1);
			assertThat(plain.snapshot().rejected()).isEqualTo(1);
		});
	}

	@Test
	void resetOfOneBucketWakesItsBlockedCallerToClaimAgainAndLeavesTheOthers() {
		this.runner.run((context) -> {
			RateLimitRegistry registry = context.getBean(RateLimitRegistry.class);
			RateLimiter plain = context.getBean("plain", RateLimiter.class);
			RateLimiter feed = context.getBean("feed", RateLimiter.class);
			assertThat(plain.tryAcquire(10)).isTrue();
			assertThat(feed.tryAcquire(4)).isTrue();
			CompletableFuture<Permit> blocked = CompletableFuture.supplyAsync(() -> {
				try {
					return plain.acquire(6, Duration.ofHours(1));
				}
				catch (InterruptedException ex) {
					throw new IllegalStateException(ex);
				}
			});
			while (plain.snapshot().waiting() == 0) {
				Thread.onSpinWait();
			}

			registry.reset("plain");

			assertThat(blocked.get(10, TimeUnit.SECONDS)).isNotNull(); // woken, claimed again, covered
			assertThat(plain.snapshot().available()).isEqualTo(4);
			assertThat(feed.snapshot().available()).isZero(); // another bucket: untouched
		});
	}

	@Test
	void resetDropsTheKeysOfABucket() {
		this.runner.run((context) -> {
			RegisteredBucket plain = context.getBean(RateLimiterRegistry.class).get("plain");
			for (String key : new String[] { "alice", "bob" }) {
				KeyedBuckets.Entry entry = plain.keyed().pin(key);
				assertThat(entry.limiter().tryAcquire(10)).isTrue();
				entry.unpin();
			}
			assertThat(plain.keys()).isEqualTo(2);

			context.getBean(RateLimitRegistry.class).reset("plain");

			assertThat(plain.keys()).isZero();
			KeyedBuckets.Entry alice = plain.keyed().pin("alice");
			assertThat(alice.limiter().tryAcquire(10)).isTrue(); // a new, full bucket
			alice.unpin();
		});
	}

	@Test
	void anUnknownBucketIsRefusedNamingItAndTheConfiguredOnes() {
		this.runner.run((context) -> assertThatIllegalArgumentException()
			.isThrownBy(() -> context.getBean(RateLimitRegistry.class).reset("nope"))
			.withMessageContaining("nope")
			.withMessageContaining("plain")
			.withMessageContaining("daily"));
	}

	@Configuration(proxyBeanMethods = false)
	static class StandingClocks {

		@Bean
		RateLimitClock standingClock() {
			return () -> 0L;
		}

		@Bean
		InstantSource wallClock() {
			return () -> Instant.parse("2026-06-01T12:00:00Z");
		}
	}
}
