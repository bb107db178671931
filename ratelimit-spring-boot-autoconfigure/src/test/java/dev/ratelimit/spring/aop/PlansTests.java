package dev.ratelimit.spring.aop;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimitPlanResolver;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.actuate.BucketView;
import dev.ratelimit.spring.actuate.RateLimitsEndpoint;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Plans (contract revision 3, "Plans") through {@code @RateLimited(key = ..., plan = ...)} and the
 * {@link RateLimitPlanResolver}, on a fake clock: the "How it is shown". The template gives 10 per
 * second (limit 10), {@code pro} 100 per second (limit 20), {@code slow} 1 per second (limit 3).
 */
class PlansTests {

	private final AtomicLong now = new AtomicLong();

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(ServiceConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withPropertyValues("ratelimit.buckets.api.rate=10", "ratelimit.buckets.api.limit=10",
				"ratelimit.buckets.api.max-wait=0", "ratelimit.buckets.api.plans.pro.rate=100",
				"ratelimit.buckets.api.plans.pro.limit=20", "ratelimit.buckets.api.plans.slow.rate=1",
				"ratelimit.buckets.api.plans.slow.limit=3", "ratelimit.buckets.api.plans.patient.max-wait=1s",
				"ratelimit.buckets.resolved.rate=10", "ratelimit.buckets.resolved.limit=10",
				"ratelimit.buckets.resolved.max-wait=0", "ratelimit.buckets.resolved.plans.pro.limit=20");

	private void advance(Duration duration) {
		this.now.addAndGet(duration.toNanos());
	}

	/** Calls until one is refused; the number granted. */
	private static int burst(Service service, String key, String plan) {
		int granted = 0;
		while (granted < 1000) {
			try {
				service.call(key, plan);
			}
			catch (RateLimitExceededException ex) {
				return granted;
			}
			granted++;
		}
		return granted;
	}

	@Test
	void anUpgradeMidBurstGetsTheNewRateFromThatInstantAndKeepsWhatItHad() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			for (int i = 0; i < 6; i++) {
				service.call("alice", "free");
			}
			// 4 left at free; the upgrade keeps them (not above pro's 20), then pro's rate refills from now
			assertThat(burst(service, "alice", "pro")).isEqualTo(4);
			advance(Duration.ofMillis(100)); // 10 at pro's 100 per second (free would give 1)
			assertThat(burst(service, "alice", "pro")).isEqualTo(10);
			advance(Duration.ofSeconds(1));
			assertThat(burst(service, "alice", "pro")).as("pro's limit").isEqualTo(20);
			RateLimitsEndpoint endpoint = new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
			BucketView view = endpoint.key("api", "alice");
			assertThat(view.plan()).isEqualTo("pro");
			assertThat(view.limit()).isEqualTo(20L);
			assertThat(view.rate()).isEqualByComparingTo("100");
		});
	}

	/** A plan's {@code mode: shadow}: its keys' calls are decided but never held back; the others' are. */
	@Test
	void aPlanInShadowModeNeverHoldsItsKeysBack() {
		this.runner.withPropertyValues("ratelimit.buckets.api.plans.trial.mode=shadow").run((context) -> {
			Service service = context.getBean(Service.class);
			assertThat(burst(service, "t", "trial")).as("trial's calls all run").isEqualTo(1000);
			assertThat(burst(service, "f", "free")).as("the template enforces").isEqualTo(10);
			RateLimitsEndpoint endpoint = new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
			assertThat(endpoint.bucket("api").shadowRejected()).as("trial's calls beyond its limit").isEqualTo(990);
			assertThat(endpoint.bucket("api").mode()).isEqualTo("enforce");
		});
	}

	/**
	 * A plan's {@code capped-release}: a key's bucket made on the plan is capped (its tokens are held until
	 * its calls complete); the template's keys' are not; a key that moves to the plan keeps the bucket it
	 * has (a bucket cannot turn capped with tokens in flight), with the plan's rate and limit.
	 */
	@Test
	void aKeysBucketMadeOnACappedPlanIsCapped() {
		this.runner
			.withPropertyValues("ratelimit.buckets.api.plans.held.capped-release=true",
					"ratelimit.buckets.api.plans.held.limit=4")
			.run((context) -> {
				Service service = context.getBean(Service.class);
				assertThat(burst(service, "h", "held")).isEqualTo(4);
				assertThat(burst(service, "f", "free")).isEqualTo(10);
				RateLimitsEndpoint endpoint = new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
				assertThat(endpoint.key("api", "h").cappedRelease()).isTrue();
				assertThat(endpoint.key("api", "f").cappedRelease()).isFalse();
				advance(Duration.ofSeconds(1));
				assertThat(burst(service, "f", "held")).as("f keeps its bucket, at held's limit").isEqualTo(4);
				assertThat(endpoint.key("api", "f").cappedRelease()).isFalse();
				assertThat(endpoint.key("api", "f").plan()).isEqualTo("held");
			});
	}

	@Test
	void aDowngradeCapsAtOnce() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			service.call("bob", "pro"); // 19 of pro's 20 left
			// slow's limit is 3: the downgrade drops the rest before the call takes its token
			assertThat(burst(service, "bob", "slow")).isEqualTo(3);
			advance(Duration.ofMillis(999));
			assertThat(burst(service, "bob", "slow")).as("slow's 1 per second").isZero();
			advance(Duration.ofMillis(1));
			assertThat(burst(service, "bob", "slow")).isEqualTo(1);
		});
	}

	@Test
	void aRetuneOfOnePlanReachesEveryKeyOnItAndNoOther() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			burst(service, "p1", "pro");
			burst(service, "p2", "pro");
			burst(service, "f1", "free");
			burst(service, "s1", "slow");
			RateLimitsEndpoint endpoint = new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
			BucketView view = endpoint.update("api", new BigDecimal("200"), null, null, "pro");
			assertThat(view.plans().get("pro").rate()).isEqualByComparingTo("200");
			assertThat(view.plans().get("slow").rate()).isEqualByComparingTo("1");
			assertThat(view.rate()).as("the template's").isEqualByComparingTo("10");
			advance(Duration.ofMillis(50));
			// pro at 200 per second from the retune: 10 in 50 ms; free 0 (10 per second), slow 0
			assertThat(burst(service, "p1", "pro")).isEqualTo(10);
			assertThat(burst(service, "p2", "pro")).isEqualTo(10);
			assertThat(burst(service, "f1", "free")).isZero();
			assertThat(burst(service, "s1", "slow")).isZero();
			assertThat(endpoint.key("api", "p1").rate()).isEqualByComparingTo("200");
			assertThat(endpoint.key("api", "f1").rate()).isEqualByComparingTo("10");
			assertThat(endpoint.key("api", "f1").plan()).isNull();
			// a key that comes to pro after the retune gets the retuned settings
			burst(service, "f1", "pro");
			advance(Duration.ofMillis(50));
			assertThat(burst(service, "f1", "pro")).isEqualTo(10);
			assertThatIllegalArgumentException()
				.isThrownBy(() -> context.getBean(RateLimiterRegistry.class).get("api").update("gold", BigDecimal.TEN, null))
				.withMessageContaining("no plan 'gold'")
				.withMessageContaining("pro, slow, patient");
		});
	}

	@Test
	void anUnlistedNullOrEmptyPlanGetsTheTemplate() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			assertThat(burst(service, "u1", "gold")).isEqualTo(10);
			assertThat(burst(service, "u2", null)).isEqualTo(10);
			assertThat(burst(service, "u3", "")).isEqualTo(10);
			RateLimitsEndpoint endpoint = new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
			assertThat(endpoint.key("api", "u1").plan()).isNull();
			assertThat(endpoint.key("api", "u2").plan()).isNull();
			BucketView bucket = endpoint.bucket("api");
			assertThat(bucket.plans()).containsOnlyKeys("pro", "slow", "patient");
			assertThat(bucket.plans().get("pro").limit()).isEqualTo(20L);
			assertThat(bucket.plans().get("patient").rate()).as("the template's rate").isEqualByComparingTo("10");
			assertThat(bucket.plans().get("patient").maxWait()).isEqualTo("PT1S");
			// a key that moves from a plan back to none gets the template at once
			burst(service, "u4", "pro");
			advance(Duration.ofMillis(100));
			assertThat(burst(service, "u4", null)).as("10 at pro's rate, capped at the template's 10").isEqualTo(10);
			advance(Duration.ofMillis(100));
			assertThat(burst(service, "u4", null)).as("the template's 10 per second").isEqualTo(1);
		});
	}

	@Test
	void aPlansMaxWaitAppliesToItsKeysOnly() throws Exception {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			// the template never waits (max-wait 0): its empty key is refused at once
			burst(service, "n", "free");
			assertThatThrownBy(() -> service.call("n", "free")).isInstanceOf(RateLimitExceededException.class);
			// the patient plan waits up to 1s: its key takes its 10, and its next call waits for its token
			for (int i = 0; i < 10; i++) {
				service.call("w", "patient");
			}
			Thread waiter = new Thread(() -> service.call("w", "patient"));
			waiter.setDaemon(true);
			waiter.start();
			RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
			long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
			while (registry.get("api").keyed().find("w").snapshot().waiting() == 0 && System.nanoTime() < deadline) {
				Thread.onSpinWait();
			}
			assertThat(registry.get("api").keyed().find("w").snapshot().waiting()).as("the patient call waits").isOne();
			advance(Duration.ofMillis(100));
			waiter.join(10_000);
			assertThat(waiter.isAlive()).as("the patient key's call was granted").isFalse();
			assertThat(service.granted("w")).isEqualTo(11L);
		});
	}

	@Test
	void aFailingPlanExpressionFailsTheCallNamingTheBucketTheAttributeAndTheExpression() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			assertThatIllegalArgumentException().isThrownBy(() -> service.failing("k"))
				.withMessageContaining("plan '#key.substring(5)'")
				.withMessageContaining("bucket 'api'")
				.withMessageContaining("did not run");
			assertThat(service.granted("k")).isZero();
		});
	}

	@Test
	void theResolverGivesThePlanWhenTheAnnotationDoesNot() {
		this.runner.withBean(RateLimitPlanResolver.class, () -> (bucket, key) -> key.toString().startsWith("pro-") ? "pro" : null)
			.run((context) -> {
				Service service = context.getBean(Service.class);
				assertThat(resolvedBurst(service, "pro-1")).isEqualTo(20);
				assertThat(resolvedBurst(service, "free-1")).isEqualTo(10);
				// the annotation's plan wins over the resolver, and its null does not fall through to it
				assertThat(burst(service, "pro-2", null)).isEqualTo(10);
			});
	}

	private static int resolvedBurst(Service service, String key) {
		int granted = 0;
		while (granted < 1000) {
			try {
				service.resolved(key);
			}
			catch (RateLimitExceededException ex) {
				return granted;
			}
			granted++;
		}
		return granted;
	}

	@Configuration(proxyBeanMethods = false)
	static class ServiceConfiguration {

		@Bean
		Service service() {
			return new Service();
		}
	}

	static class Service {

		private final Map<String, Long> granted = new ConcurrentHashMap<>();

		/** Calls of a key that ran (read through the proxy: a method, not the field). */
		public long granted(String key) {
			return this.granted.getOrDefault(key, 0L);
		}

		@RateLimited(value = "api", key = "#key", plan = "#plan")
		public void call(String key, @Nullable String plan) {
			this.granted.merge(key, 1L, Long::sum);
		}

		@RateLimited(value = "api", key = "#key", plan = "#key.substring(5)")
		public void failing(String key) {
			this.granted.merge(key, 1L, Long::sum);
		}

		@RateLimited(value = "resolved", key = "#key")
		public void resolved(String key) {
		}
	}
}
