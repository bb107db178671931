package dev.ratelimit.spring.aop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Contract, "Per-key buckets" (revision 2): "Only a key's bucket that is full, with nothing in flight and
 * nobody waiting, is ever dropped (it is indistinguishable from a new one), so dropping never changes what
 * callers see." With a pacer as the template, a key's pacer that sat idle has a full active pool but is
 * behind schedule: its burst pool and backlog let the key catch up at rate * burst-ratio, which a new
 * pacer would not. So that pacer is not idle ({@code HybridRateLimiter.isIdle}) and is kept when another
 * key needs room (the other key shares the overflow bucket): what the caller sees does not depend on
 * whether another key came by (keys.max) in between.
 */
class KeyedPacerKeptWhileBehindScheduleTests {

	private final AtomicLong now = new AtomicLong();

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(FeedConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withPropertyValues("ratelimit.buckets.per-client-feed.type=hybrid", "ratelimit.buckets.per-client-feed.rate=10",
				"ratelimit.buckets.per-client-feed.limit=1", "ratelimit.buckets.per-client-feed.burst-ratio=2.0",
				"ratelimit.buckets.per-client-feed.max-wait=0");

	/** What alice gets at t=20 s: two calls at the same instant, after her first at t=0. */
	private List<String> alicesCallsAtTwentySeconds(String keysMax, boolean bobComesBy) {
		List<String> outcomes = new ArrayList<>();
		this.now.set(0);
		this.runner.withPropertyValues("ratelimit.buckets.per-client-feed.keys.max=" + keysMax).run((context) -> {
			Feed feed = context.getBean(Feed.class);
			feed.poll("alice");
			this.now.addAndGet(Duration.ofSeconds(10).toNanos());
			if (bobComesBy) {
				feed.poll("bob");
			}
			this.now.addAndGet(Duration.ofSeconds(10).toNanos());
			for (int i = 0; i < 2; i++) {
				try {
					feed.poll("alice");
					outcomes.add("granted");
				}
				catch (RateLimitExceededException ex) {
					outcomes.add("refused");
				}
			}
		});
		return outcomes;
	}

	@Test
	void droppingAnIdleKeysPacerDoesNotChangeWhatItsCallerSees() {
		List<String> kept = alicesCallsAtTwentySeconds("10", true);
		List<String> dropped = alicesCallsAtTwentySeconds("1", true);
		assertThat(dropped).as("keys.max 1 (alice's pacer dropped for bob's) vs keys.max 10 (kept): " + kept)
			.isEqualTo(kept);
	}

	@Configuration(proxyBeanMethods = false)
	static class FeedConfiguration {

		@Bean
		Feed feed() {
			return new Feed();
		}
	}

	static class Feed {

		@RateLimited(value = "per-client-feed", key = "#client")
		public String poll(String client) {
			return client;
		}
	}
}
