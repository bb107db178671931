package dev.ratelimit.spring.aop;

import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.engine.RateLimitExecutors;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * "Only a key's bucket that is full, with nothing in flight and nobody waiting, is ever dropped (it is
 * indistinguishable from a new one), so dropping never changes what callers see" (contract, "Per-key
 * buckets"), for a key whose call is still running with a {@code settle} to come.
 *
 * <p>Found by a reviewer's model test of the async paths (with {@code keys.max: 1}, a call of cost 0 running on a
 * capped template): a key's bucket that has filled up again while the key's call runs counts as idle, so a
 * new key may take its place; when the call then settles for more than its cost, the key has no bucket, and
 * the excess is charged to whatever the key would use now, here the overflow bucket, which new keys share:
 * they pay another key's debt.
 */
class KeyDroppedWhileRunningTests {

	private final AtomicLong clock = new AtomicLong(TimeUnit.SECONDS.toNanos(1));

	private final ManualTimer timer = new ManualTimer(this.clock);

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(AssistantConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.clock::get)
		.withBean(RateLimitExecutors.class, () -> new RateLimitExecutors(this.timer, Runnable::run))
		.withPropertyValues("ratelimit.buckets.llm.rate=10", "ratelimit.buckets.llm.limit=4",
				"ratelimit.buckets.llm.max-wait=0", "ratelimit.buckets.llm.keys.max=1");

	@Test
	void aKeysBucketIsKeptWhileItsCallHasASettleToComeAndTheKeyPaysItsOwnDebt() {
		this.runner.run((context) -> {
			Assistant assistant = context.getBean(Assistant.class);
			KeyedBuckets keys = context.getBean(RateLimiterRegistry.class).get("llm").keyed();
			RateLimiter overflow = keys.bucketOf("nobody");
			assistant.ask("x", 1); // x's bucket: 4 -> 3
			this.clock.addAndGet(TimeUnit.SECONDS.toNanos(1)); // x's bucket is full again; x's call still runs
			assistant.ask("y", 1); // no room: x's bucket is kept for its settle, so y shares the overflow bucket
			assertThat(overflow.snapshot().available()).as("the overflow bucket, y's").isEqualTo(3);
			RateLimiter x = keys.find("x");
			assertThat(x).as("x's bucket, kept").isNotNull();
			assistant.complete("x", 4); // x used 4 of its 1: 3 more are charged, to x's own bucket
			assertThat(x.snapshot().available()).isEqualTo(1);
			assertThat(overflow.snapshot().available()).as("the overflow bucket pays nothing for x").isEqualTo(3);
			// once x's call has completed, its bucket may be dropped again when it is full
			this.clock.addAndGet(TimeUnit.SECONDS.toNanos(10));
			assistant.ask("z", 1);
			assertThat(keys.find("x")).as("x's bucket, dropped for z once idle").isNull();
			assertThat(keys.find("z")).isNotNull();
		});
	}

	/** A call that pays only at completion (cost 0, settle): its key's bucket stays full, and is kept all the same. */
	@Test
	void aKeysBucketIsKeptForACallThatPaysOnlyWhenItCompletes() {
		this.runner.run((context) -> {
			Assistant assistant = context.getBean(Assistant.class);
			KeyedBuckets keys = context.getBean(RateLimiterRegistry.class).get("llm").keyed();
			assistant.ask("x", 0); // x's bucket: full, and idle but for x's call
			assistant.ask("y", 0); // no room: x's bucket is kept, y shares the overflow bucket
			RateLimiter x = keys.find("x");
			assertThat(x).isNotNull();
			assistant.complete("x", 3);
			assertThat(x.snapshot().available()).as("x's bucket paid x's 3").isEqualTo(1);
			assertThat(keys.bucketOf("nobody").snapshot().available()).as("the overflow bucket").isEqualTo(4);
		});
	}

	@Configuration(proxyBeanMethods = false)
	static class AssistantConfiguration {

		@Bean
		Assistant assistant() {
			return new Assistant();
		}
	}

	static class Assistant {

		private final Map<String, CompletableFuture<Integer>> running = new ConcurrentHashMap<>();

		@RateLimited(value = "llm", key = "#user", cost = "#maxTokens", settle = "#result")
		public CompletableFuture<Integer> ask(String user, int maxTokens) {
			CompletableFuture<Integer> answer = new CompletableFuture<>();
			this.running.put(user, answer);
			return answer;
		}

		public void complete(String user, int usedTokens) {
			this.running.remove(user).complete(usedTokens);
		}
	}
}
