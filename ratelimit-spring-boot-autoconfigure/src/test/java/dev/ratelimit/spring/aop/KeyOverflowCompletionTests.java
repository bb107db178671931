package dev.ratelimit.spring.aop;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimiterRegistry;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Per-key buckets at {@code keys.max}, with completion attributes and several buckets: what the
 * contract says and the implementation does not do yet (found while writing
 * {@link SeveralBucketsModelTests}). Both are disabled until fixed: {@code Limit.refund} and
 * {@code Limit.charge} pin the key again instead of acting on the bucket the call took from, and
 * {@code KeyedBuckets.pin} counts every pin as an overflow call. Time comes from a fake clock, which
 * the guarded method moves to stand for the time it runs.
 */
class KeyOverflowCompletionTests {

	private final AtomicLong now = new AtomicLong(TimeUnit.SECONDS.toNanos(1));

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(ServiceConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withBean("fakeClock", AtomicLong.class, () -> this.now)
		.withPropertyValues("ratelimit.buckets.per-user.rate=1", "ratelimit.buckets.per-user.limit=2",
				"ratelimit.buckets.per-user.max-wait=0", "ratelimit.buckets.per-user.keys.max=1",
				"ratelimit.buckets.site.rate=1", "ratelimit.buckets.site.limit=1", "ratelimit.buckets.site.max-wait=0");

	/**
	 * "refundIf: when true, the call's tokens are given back as if it had not run": the call took its
	 * tokens from the overflow bucket; while it ran, the one kept key's bucket filled up, so the refund's
	 * new pin drops it and gives the key a (full) bucket of its own, where the refund is lost, and the
	 * overflow bucket keeps the call's tokens.
	 */
	@Test

	void aRefundGoesBackToTheOverflowBucketTheCallTookFrom() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			service.login("x", 1, false, 0); // x keeps the one bucket of its own, not full
			// y finds no room: the overflow bucket (2 -> 0); x is full again when y completes; refunded
			service.login("y", 2, true, TimeUnit.SECONDS.toNanos(1));
			service.login("y", 1, false, 0); // y has a bucket of its own now, not full: no room again
			// z shares the overflow bucket, which has its 2 tokens back (1 without the refund)
			service.login("z", 2, false, 0);
		});
	}

	/** "ratelimit.keys.overflow counts every call that goes to the overflow bucket": once per call. */
	@Test

	void aCallToTheOverflowBucketCountsOnce() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			KeyedBuckets keys = context.getBean(RateLimiterRegistry.class).get("per-user").keyed();
			service.login("x", 1, false, 0); // x keeps the one bucket of its own, not full
			service.site();
			long before = keys.overflowCalls();
			// per-user (overflow, enough tokens) then site (empty): refused
			assertThatThrownBy(() -> service.userAndSite("y")).isInstanceOf(RateLimitExceededException.class);
			assertThat(keys.overflowCalls() - before).isEqualTo(1);
		});
	}

	@Configuration(proxyBeanMethods = false)
	static class ServiceConfiguration {

		@Bean
		Service service(AtomicLong fakeClock) {
			return new Service(fakeClock);
		}
	}

	static class Service {

		private final AtomicLong clock;

		Service(AtomicLong clock) {
			this.clock = clock;
		}

		@RateLimited(value = "per-user", key = "#user", cost = "#n", refundIf = "#ok")
		public void login(String user, long n, boolean ok, long runsFor) {
			this.clock.addAndGet(runsFor);
		}

		@RateLimited("site")
		public void site() {
		}

		@RateLimited(value = "per-user", key = "#user")
		@RateLimited("site")
		public void userAndSite(String user) {
		}
	}
}
