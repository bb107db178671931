package dev.ratelimit.spring.aop;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimitConfigurationException;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.actuate.BucketView;
import dev.ratelimit.spring.autoconfigure.RateLimitMetricsAutoConfiguration;
import dev.ratelimit.spring.actuate.RateLimitsEndpoint;
import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@code @RateLimited(key = ...)}: one bucket per key, made from the named bucket, on a fake clock.
 */
class KeyedRateLimitedTests {

	private final AtomicLong now = new AtomicLong();

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(ServiceConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withPropertyValues("ratelimit.buckets.api.rate=2", "ratelimit.buckets.api.limit=2",
				"ratelimit.buckets.api.max-wait=0", "ratelimit.buckets.api.keys.max=3",
				"ratelimit.buckets.per-user-capped.rate=1000", "ratelimit.buckets.per-user-capped.limit=1",
				"ratelimit.buckets.per-user-capped.capped-release=true",
				"ratelimit.buckets.per-user-capped.max-wait=0", "ratelimit.buckets.paced.type=hybrid",
				"ratelimit.buckets.paced.rate=2", "ratelimit.buckets.paced.limit=2", "ratelimit.buckets.paced.max-wait=0",
				"ratelimit.buckets.paced.keys.max=1");

	@Test
	void eachKeyHasItsOwnBucketMadeFromTheNamedOne() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			assertThat(service.quote("alice")).isEqualTo("alice");
			assertThat(service.quote("alice")).isEqualTo("alice");
			assertThatThrownBy(() -> service.quote("alice")).isInstanceOfSatisfying(RateLimitExceededException.class,
					(ex) -> {
						assertThat(ex.getBucket()).isEqualTo("api");
						assertThat(ex.getKey()).isEqualTo("alice");
						assertThat(ex.getRetryAfter()).isEqualTo(Duration.ofMillis(500));
					});
			// bob's budget is his own; the named bucket itself is untouched
			assertThat(service.quote("bob")).isEqualTo("bob");
			assertThat(service.quote("bob")).isEqualTo("bob");
			assertThat(context.getBean(RateLimiterRegistry.class).get("api").limiter().snapshot().available())
				.isEqualTo(2);
			assertThat(service.calls()).isEqualTo(4);
			// a number key: the key is the value itself
			assertThat(service.byId(42L)).isEqualTo(42L);
			assertThat(service.byId(42L)).isEqualTo(42L);
			assertThatThrownBy(() -> service.byId(42L)).isInstanceOfSatisfying(RateLimitExceededException.class,
					(ex) -> assertThat(ex.getKey()).isEqualTo("42"));
		});
	}

	@Test
	void aPacerCanBeTheTemplateToo() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			service.paced("alice");
			service.paced("alice");
			assertThatThrownBy(() -> service.paced("alice")).isInstanceOfSatisfying(RateLimitExceededException.class,
					(ex) -> assertThat(ex.getKey()).isEqualTo("alice"));
			// alice's pacer is not full: bob finds no room (keys.max 1) and shares the overflow pacer
			service.paced("bob");
			this.now.addAndGet(Duration.ofSeconds(5).toNanos());
			// alice's pacer is full again after the idle time: it may be dropped to make room for carol
			service.paced("carol");
			RateLimitsEndpoint endpoint = new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
			assertThat(endpoint.key("paced", "carol")).isNotNull();
			assertThat(endpoint.key("paced", "alice")).isNull();
		});
	}

	@Test
	void aNullKeyFailsTheCallNamingTheBucketAndTheExpressionAndTheMethodDoesNotRun() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			assertThatIllegalArgumentException().isThrownBy(() -> service.quote(null))
				.withMessageContaining("'#user'")
				.withMessageContaining("bucket 'api'");
			assertThatIllegalArgumentException().isThrownBy(() -> service.nested(new User(null)))
				.withMessageContaining("'#user.id()'");
			assertThat(service.calls()).isZero();
		});
	}

	@Test
	void cappedReleaseIsPerKey() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			AtomicInteger inside = new AtomicInteger();
			service.whileHeld("alice", () -> {
				// alice's one call in flight: her next is refused, bob's is not
				assertThatThrownBy(() -> service.whileHeld("alice", inside::incrementAndGet))
					.isInstanceOf(RateLimitExceededException.class);
				service.whileHeld("bob", inside::incrementAndGet);
			});
			this.now.addAndGet(Duration.ofSeconds(1).toNanos());
			service.whileHeld("alice", inside::incrementAndGet); // released when the call completed
			assertThat(inside.get()).isEqualTo(2);
		});
	}

	@Test
	void asyncAndReactiveCallsArePerKeyAndTheirRefusalsCarryTheKey() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			assertThat(service.asyncQuote("carol").get()).isEqualTo("carol");
			assertThat(service.asyncQuote("carol").get()).isEqualTo("carol");
			assertThatThrownBy(() -> service.asyncQuote("carol").get()).isInstanceOf(ExecutionException.class)
				.cause()
				.isInstanceOfSatisfying(RateLimitExceededException.class, (ex) -> assertThat(ex.getKey()).isEqualTo("carol"));
			StepVerifier.create(service.monoQuote("dave")).expectNext("dave").verifyComplete();
			StepVerifier.create(service.monoQuote("dave")).expectNext("dave").verifyComplete();
			StepVerifier.create(service.monoQuote("dave"))
				.expectErrorSatisfies((ex) -> assertThat(((RateLimitExceededException) ex).getKey()).isEqualTo("dave"))
				.verify();
		});
	}

	@Test
	void theEndpointCountsKeysAndShowsOneKeysBucketAndARetuneReachesEveryKey() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			RateLimitsEndpoint endpoint = new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
			assertThat(endpoint.bucket("api").keys()).isZero();
			service.quote("alice");
			service.quote("bob");
			assertThat(endpoint.bucket("api").keys()).isEqualTo(2);
			BucketView alice = endpoint.key("api", "alice");
			assertThat(alice.available().longValue()).isEqualTo(1);
			assertThat(alice.keys()).isZero();
			assertThat(endpoint.key("api", "nobody")).isNull();
			endpoint.update("api", null, 5L, null);
			assertThat(endpoint.key("api", "alice").limit().longValue()).isEqualTo(5);
			assertThat(endpoint.key("api", "bob").limit().longValue()).isEqualTo(5);
		});
	}

	@Test
	void beyondKeysMaxNewKeysShareTheOverflowBucketAndTheMetersSaySo() {
		this.runner
			.withConfiguration(AutoConfigurations.of(MetricsAutoConfiguration.class,
					CompositeMeterRegistryAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
					RateLimitMetricsAutoConfiguration.class))
			.run((context) -> {
				Service service = context.getBean(Service.class);
				for (String user : new String[] { "a", "b", "c" }) {
					service.quote(user); // three keys, each with a token spent: none can be dropped
				}
				service.quote("d");
				service.quote("e");
				MeterRegistry meters = context.getBean(MeterRegistry.class);
				assertThat(meters.get("ratelimit.keys.active").tag("bucket", "api").gauge().value()).isEqualTo(3);
				assertThat(meters.get("ratelimit.keys.overflow").tag("bucket", "api").functionCounter().count())
					.isEqualTo(2);
				// d and e shared the overflow bucket (limit 2): a third newcomer is refused
				assertThatThrownBy(() -> service.quote("f")).isInstanceOf(RateLimitExceededException.class);
				// every key's calls count in the bucket's own meters, tagged by bucket only
				assertThat(meters.get("ratelimit.calls").tags("bucket", "api", "outcome", "granted").functionCounter()
					.count()).isEqualTo(5);
				assertThat(meters.find("ratelimit.calls").tagKeys("key").meters()).isEmpty();
				this.now.addAndGet(Duration.ofSeconds(1).toNanos()); // every key's bucket is full again
				service.quote("f");
				assertThat(meters.get("ratelimit.keys.active").tag("bucket", "api").gauge().value()).isLessThanOrEqualTo(3);
			});
	}

	@Test
	void aBucketWithInitialCannotBeUsedWithAKey() {
		this.runner.withPropertyValues("ratelimit.buckets.api.initial=1").run((context) -> {
			assertThat(context).hasFailed();
			Throwable failure = context.getStartupFailure();
			while (failure != null && !(failure instanceof RateLimitConfigurationException)) {
				failure = failure.getCause();
			}
			assertThat(failure).isNotNull()
				.hasMessageContaining("ratelimit.buckets.api.initial")
				.hasMessageContaining("@RateLimited on");
		});
	}

	record User(String id) {
	}

	@Configuration(proxyBeanMethods = false)
	static class ServiceConfiguration {

		@Bean
		Service service() {
			return new Service();
		}
	}

	static class Service {

		final AtomicInteger calls = new AtomicInteger();

		int calls() {
			return this.calls.get();
		}

		@RateLimited(value = "api", key = "#user")
		String quote(String user) {
			this.calls.incrementAndGet();
			return user;
		}

		@RateLimited(value = "paced", key = "#user")
		String paced(String user) {
			return user;
		}

		@RateLimited(value = "api", key = "#id")
		long byId(long id) {
			return id;
		}

		@RateLimited(value = "api", key = "#user.id()")
		String nested(User user) {
			this.calls.incrementAndGet();
			return user.id();
		}

		@RateLimited(value = "per-user-capped", key = "#user")
		void whileHeld(String user, Runnable inside) {
			inside.run();
		}

		@RateLimited(value = "api", key = "#user")
		CompletableFuture<String> asyncQuote(String user) {
			return CompletableFuture.completedFuture(user);
		}

		@RateLimited(value = "api", key = "#user")
		Mono<String> monoQuote(String user) {
			return Mono.just(user);
		}
	}
}
