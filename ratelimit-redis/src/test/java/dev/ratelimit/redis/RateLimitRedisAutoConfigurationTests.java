package dev.ratelimit.redis;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.Map;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.redis.autoconfigure.RateLimitRedisAutoConfiguration;
import dev.ratelimit.spring.KeyedBuckets;

import dev.ratelimit.spring.RateLimitConfigurationException;
import dev.ratelimit.spring.RateLimiterRegistry;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import dev.ratelimit.spring.BucketMode;
import dev.ratelimit.spring.autoconfigure.RateLimitHealthAutoConfiguration;
import dev.ratelimit.spring.actuate.RateLimitsEndpoint;
import dev.ratelimit.spring.actuate.RateLimitsWebEndpointExtension;
import dev.ratelimit.spring.autoconfigure.RateLimitMetricsAutoConfiguration;


import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.Delay;
import io.micrometer.core.instrument.MeterRegistry;

import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.boot.data.redis.autoconfigure.ClientResourcesBuilderCustomizer;
import org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;

import static org.assertj.core.api.Assertions.assertThat;

class RateLimitRedisAutoConfigurationTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(DataRedisAutoConfiguration.class, RateLimitAutoConfiguration.class,
				RateLimitRedisAutoConfiguration.class))
		// 100 per hour: no token comes back between two calls, however busy the machine
		.withPropertyValues("ratelimit.buckets.orders.rate=100", "ratelimit.buckets.orders.period=1h",
				"ratelimit.buckets.orders.limit=10",
				"ratelimit.buckets.orders.backend=redis", "ratelimit.buckets.orders.redis.key-prefix=shop:",
				"ratelimit.buckets.orders.redis.on-failure=deny", "ratelimit.buckets.local.rate=5");

	/**
	 * Found stopping a Redis for 20 s under load: Lettuce's reconnect delay (doubling up to 30 s by default)
	 * kept the connection closed 15 s after Redis answered again, and the buckets on their policy 18 s. The
	 * client resources Spring Boot makes now wait at most 5 s between attempts (the buckets' own longest
	 * back-off); an application's customizer still wins.
	 */
	@Test
	void lettuceReconnectsAtMostFiveSecondsApartUnlessTheApplicationSaysOtherwise() {
		this.runner.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port())
			.run((context) -> {
				Delay delay = context.getBean(ClientResources.class).reconnectDelay();
				assertThat(delay.createDelay(1)).isLessThan(Duration.ofMillis(10));
				assertThat(delay.createDelay(20)).isEqualTo(Duration.ofSeconds(5));
				assertThat(delay.createDelay(100)).isEqualTo(Duration.ofSeconds(5));
			});
		this.runner.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port())
			.withBean(ClientResourcesBuilderCustomizer.class,
					() -> (builder) -> builder.reconnectDelay(Delay.constant(Duration.ofSeconds(1))))
			.run((context) -> assertThat(context.getBean(ClientResources.class).reconnectDelay().createDelay(20))
				.isEqualTo(Duration.ofSeconds(1)));
	}

	@Test
	void makesRedisBucketsForBucketsThatSaySoAndLocalOnesForTheRest() {
		this.runner.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port())
			.run((context) -> {
				assertThat(context).hasNotFailed();
				RateLimiter orders = context.getBean("orders", RateLimiter.class);
				assertThat(orders).isInstanceOf(RedisTokenBucket.class);
				assertThat(((RedisTokenBucket) orders).key()).isEqualTo("shop:{orders}");
				assertThat(orders.tryAcquire(10)).isTrue();
				assertThat(orders.tryAcquire(1)).isFalse();
				RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
				assertThat(registry.get("orders").backend()).isEqualTo("redis");
				assertThat(registry.get("local").backend()).isEqualTo("local");
			});
	}

	@Test
	void showsWhetherRedisAnswersInTheMeters() {
		this.runner
			.withConfiguration(AutoConfigurations.of(MetricsAutoConfiguration.class,
					CompositeMeterRegistryAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
					RateLimitMetricsAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port(),
					"ratelimit.buckets.orders.redis.key-prefix=meters:") // a full bucket of its own
			.run((context) -> {
				MeterRegistry meters = context.getBean(MeterRegistry.class);
				context.getBean("orders", RateLimiter.class).tryAcquire(1);
				assertThat(meters.get("ratelimit.backend.up").tags("bucket", "orders", "backend", "redis").gauge().value())
					.isEqualTo(1.0);
				assertThat(meters.find("ratelimit.backend.up").tag("bucket", "local").gauge()).isNull();
				// one call to Redis so far (the gauge above reads no level); reading the levels is a call too
				assertThat(meters.get("ratelimit.backend.calls")
					.tags("bucket", "orders", "backend", "redis", "outcome", "ok")
					.timer()
					.count()).isEqualTo(1);
				assertThat(meters.get("ratelimit.backend.calls").tags("bucket", "orders", "outcome", "timeout").timer()
					.count()).isZero();
				assertThat(meters.find("ratelimit.backend.calls").tag("bucket", "local").timer()).isNull();
				assertThat(meters.get("ratelimit.calls").tags("bucket", "orders", "outcome", "granted").functionCounter()
					.count()).isEqualTo(1.0);
			});
	}

	/**
	 * A bucket used with keys while Redis does not answer: every key's bucket finds it out, but the
	 * bucket says so once (not once per key), shows it in its gauge, and times the keys' calls in its
	 * meter; when Redis answers again, once more at INFO.
	 */
	@Test
	@ExtendWith(OutputCaptureExtension.class)
	void keysOfABucketWhoseRedisDoesNotAnswerSayItOnceAndShowItInTheMeters(CapturedOutput output) {
		int port = unusedPort();
		this.runner
			.withConfiguration(AutoConfigurations.of(MetricsAutoConfiguration.class,
					CompositeMeterRegistryAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
					RateLimitMetricsAutoConfiguration.class, RateLimitHealthAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + port,
					"ratelimit.buckets.orders.redis.timeout=50ms")
			.run((context) -> {
				assertThat(context).hasNotFailed();
				MeterRegistry meters = context.getBean(MeterRegistry.class);
				KeyedBuckets keys = context.getBean(RateLimiterRegistry.class).get("orders").keyed();
				for (int k = 0; k < 10; k++) {
					for (int i = 0; i < 2 * FailureDetector.FAILURES_TO_TRIP; i++) {
						KeyedBuckets.Entry entry = keys.pin("user-" + k);
						try {
							entry.limiter().tryAcquire(1);
						}
						finally {
							entry.unpin();
						}
					}
				}
				String warning = "Rate limit bucket 'orders' runs on its on-failure policy";
				assertThat(output.getAll().split(java.util.regex.Pattern.quote(warning), -1).length - 1)
					.as("WARN lines for 10 keys of one bucket").isEqualTo(1);
				assertThat(meters.get("ratelimit.backend.up").tags("bucket", "orders").gauge().value()).isZero();
				double failed = meters.get("ratelimit.backend.calls").tags("bucket", "orders", "outcome", "error")
					.timer().count()
						+ meters.get("ratelimit.backend.calls").tags("bucket", "orders", "outcome", "timeout").timer()
							.count();
				assertThat(failed).as("the keys' failed calls, timed").isGreaterThanOrEqualTo(10);
				assertThat(context.getBean("ratelimitsHealthIndicator", HealthIndicator.class).health().getDetails()
					.get("orders")).asString().startsWith("down");
			});
	}

	@Test
	void reportsEachRedisBucketInTheHealthContributor() {
		this.runner.withConfiguration(AutoConfigurations.of(RateLimitHealthAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port())
			.run((context) -> {
				Health health = context.getBean("ratelimitsHealthIndicator", HealthIndicator.class).health();
				assertThat(health.getStatus()).isEqualTo(Status.UP);
				assertThat(health.getDetails()).containsExactly(Map.entry("orders", "up"));
			});
	}

	@Test
	void aBucketOnItsPolicyMakesTheHealthContributorReportTheConfiguredStatus() {
		this.runner.withConfiguration(AutoConfigurations.of(RateLimitHealthAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + unusedPort(),
					"ratelimit.health.backend-down-status=OUT_OF_SERVICE")
			.run((context) -> {
				// the application starts while Redis is down
				assertThat(context).hasNotFailed();
				RateLimiter orders = context.getBean("orders", RateLimiter.class);
				for (int i = 0; i < 5; i++) {
					assertThat(orders.tryAcquire(1)).isFalse(); // on-failure: deny
				}
				Health health = context.getBean("ratelimitsHealthIndicator", HealthIndicator.class).health();
				assertThat(health.getStatus()).isEqualTo(Status.OUT_OF_SERVICE);
				assertThat((String) health.getDetails().get("orders")).startsWith("down: ")
					.contains("Not connected to Redis at 127.0.0.1");
			});
	}

	/**
	 * Found by a reviewer: the health contributor asked the buckets said down one after another, so while
	 * Redis accepted connections and answered nothing, a health read (a load balancer's, every few seconds)
	 * took the number of Redis buckets times their timeout. The buckets are asked together: one timeout.
	 */
	@Test
	void aHealthReadWhileRedisAnswersNothingTakesOneTimeoutNotOnePerBucket() throws Exception {
		try (EmbeddedRedis stalled = new EmbeddedRedis()) {
			this.runner.withConfiguration(AutoConfigurations.of(RateLimitHealthAutoConfiguration.class))
				.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + stalled.port())
				.withPropertyValues(redisBucketWithATimeoutOfOneSecond("a"))
				.withPropertyValues(redisBucketWithATimeoutOfOneSecond("b"))
				.withPropertyValues(redisBucketWithATimeoutOfOneSecond("c"))
				.run((context) -> {
					HealthIndicator indicator = context.getBean("ratelimitsHealthIndicator", HealthIndicator.class);
					assertThat(indicator.health().getDetails()).containsEntry("a", "up").containsEntry("c", "up");
					stalled.admin().clientPause(60_000); // connections stay open, nothing is answered
					Thread[] callers = new Thread[3];
					for (int i = 0; i < callers.length; i++) {
						RedisTokenBucket bucket = context.getBean(String.valueOf((char) ('a' + i)), RedisTokenBucket.class);
						callers[i] = new Thread(() -> {
							while (bucket.isUp()) {
								bucket.tryAcquire(1); // each waits its timeout: four in a row trip the bucket
							}
						});
						callers[i].start();
					}
					for (Thread caller : callers) {
						caller.join(Duration.ofSeconds(60).toMillis());
						assertThat(caller.isAlive()).isFalse();
					}
					Thread.sleep(300); // the first back-off (100 ms) is over: a probe of each bucket is due

					long start = System.nanoTime();
					Health health = indicator.health();
					Duration took = Duration.ofNanos(System.nanoTime() - start);

					assertThat(health.getDetails()).hasEntrySatisfying("a", (d) -> assertThat((String) d).startsWith("down: "))
						.hasEntrySatisfying("b", (d) -> assertThat((String) d).startsWith("down: "))
						.hasEntrySatisfying("c", (d) -> assertThat((String) d).startsWith("down: "));
					// each probe waits its whole second for an answer that does not come: one after another
					// they would take 3 s at the least
					assertThat(took).isLessThan(Duration.ofSeconds(2));
				});
		}
	}

	private static String[] redisBucketWithATimeoutOfOneSecond(String name) {
		String bucket = "ratelimit.buckets." + name;
		return new String[] { bucket + ".rate=100", bucket + ".period=1h", bucket + ".backend=redis",
				bucket + ".redis.key-prefix=stalled:", bucket + ".redis.timeout=1s", bucket + ".redis.on-failure=deny" };
	}

	@Test
	void aRedisOutageLeavesTheApplicationUpByDefault() {
		this.runner.withConfiguration(AutoConfigurations.of(RateLimitHealthAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + unusedPort())
			.run((context) -> {
				RateLimiter orders = context.getBean("orders", RateLimiter.class);
				for (int i = 0; i < 5; i++) {
					orders.tryAcquire(1);
				}
				assertThat(((RedisTokenBucket) orders).isUp()).isFalse();
				assertThat(context.getBean("ratelimitsHealthIndicator", HealthIndicator.class).health().getStatus())
					.isEqualTo(Status.UP);
			});
	}

	/**
	 * Found by a user: a retune through the endpoint while Redis was down answered a bare 500 (the reason was
	 * in the server's log only). It answers 503 with the reason, and nothing changes.
	 */
	@Test
	void aRetuneWhileRedisDoesNotAnswerIs503WithTheReason() {
		this.runner.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + unusedPort())
			.run((context) -> {
				RateLimitsWebEndpointExtension endpoint = new RateLimitsWebEndpointExtension(
						new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class)));
				WebEndpointResponse<Object> retune = endpoint.update("orders", 5, null, null);
				assertThat(retune.getStatus()).isEqualTo(503);
				assertThat(((Map<?, ?>) retune.getBody()).get("message")).asString()
					.contains("Rate limit bucket 'orders' cannot be retuned while Redis does not answer");
				WebEndpointResponse<Object> mode = endpoint.update("orders", null, null, "shadow");
				assertThat(mode.getStatus()).isEqualTo(503);
				assertThat(((Map<?, ?>) mode.getBody()).get("message")).asString()
					.contains("cannot be switched to shadow mode while Redis does not answer");
				assertThat(context.getBean(RateLimiterRegistry.class).get("orders").stats().mode()).isEqualTo(BucketMode.ENFORCE);
			});
	}

	private static int unusedPort() {
		try (ServerSocket socket = new ServerSocket(0)) {
			return socket.getLocalPort();
		}
		catch (IOException ex) {
			throw new UncheckedIOException(ex);
		}
	}

	@ParameterizedTest(name = "{0}={1}")
	@CsvSource(delimiter = '|', value = { "redis.timeout|0s|ratelimit.buckets.orders.redis.timeout is PT0S|a positive duration",
			"redis.lease|0s|ratelimit.buckets.orders.redis.lease is PT0S|at least 1ms",
			"limit|0|ratelimit.buckets.orders.limit is 0|a whole number >= 1" })
	void failsStartUpNamingTheRedisPropertyTheBucketRefuses(String property, String value, String description,
			String action) {
		this.runner
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port(),
					"ratelimit.buckets.orders." + property + "=" + value)
			.run((context) -> {
				Throwable failure = context.getStartupFailure();
				while (failure != null && !(failure instanceof RateLimitConfigurationException)) {
					failure = failure.getCause();
				}
				assertThat(failure).isNotNull();
				RateLimitConfigurationException ex = (RateLimitConfigurationException) failure;
				assertThat(ex.getDescription()).contains("Bucket 'orders'").contains(description);
				assertThat(ex.getAction()).contains(action);
			});
	}

	/**
	 * Contract revision 3, batches: {@code redis.batch} makes the bucket take its tokens several at a time; the
	 * meters show the few Redis calls, and the view's {@code available} counts the instance's batch.
	 */
	@Test
	void aBatchedBucketGrantsFromItsBatchWithFewRedisCallsAndCountsItInTheView() {
		this.runner
			.withConfiguration(AutoConfigurations.of(MetricsAutoConfiguration.class,
					CompositeMeterRegistryAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
					RateLimitMetricsAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port(),
					"ratelimit.buckets.orders.redis.key-prefix=batched:", "ratelimit.buckets.orders.redis.batch=5",
					"ratelimit.buckets.orders.redis.timeout=2s")
			.run((context) -> {
				assertThat(context).hasNotFailed();
				MeterRegistry meters = context.getBean(MeterRegistry.class);
				RateLimiter orders = context.getBean("orders", RateLimiter.class);
				for (int i = 0; i < 5; i++) {
					assertThat(orders.tryAcquire(1)).isTrue();
				}
				assertThat(meters.get("ratelimit.calls").tags("bucket", "orders", "outcome", "granted").functionCounter()
					.count()).isEqualTo(5.0);
				// the batch of 5, and refills sent in the background when half of it is spent: fewer calls than grants
				assertThat(meters.get("ratelimit.backend.calls").tags("bucket", "orders", "outcome", "ok").timer()
					.count()).isBetween(1L, 3L);
				// 10 - 5 granted, wherever they are: in Redis or in this instance's batch
				assertThat(orders.snapshot().available()).isEqualTo(5.0);
			});
	}

	@Test
	void aBatchOnALocalBucketOrAboveTheLimitFailsStartUpNamingTheProperty() {
		this.runner.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port(),
				"ratelimit.buckets.local.redis.batch=auto")
			.run((context) -> assertThat(context).getFailure()
				.hasMessageContaining("ratelimit.buckets.local.redis.batch")
				.hasMessageContaining("none on a local bucket"));
		this.runner.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port(),
				"ratelimit.buckets.orders.redis.batch=11")
			.run((context) -> assertThat(context).getFailure()
				.hasMessageContaining("ratelimit.buckets.orders.redis.batch")
				.hasMessageContaining("none | auto | a whole number from 1 to the limit (10)"));
	}

	@Test
	void failsStartUpSayingWhatIsMissingWithoutAConnectionFactory() {
		new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class, RateLimitRedisAutoConfiguration.class))
			.withPropertyValues("ratelimit.buckets.orders.rate=100", "ratelimit.buckets.orders.backend=redis")
			.run((context) -> {
				Throwable failure = context.getStartupFailure();
				while (failure != null && !(failure instanceof RateLimitConfigurationException)) {
					failure = failure.getCause();
				}
				assertThat(failure).isNotNull().hasMessageContaining("no RedisConnectionFactory bean exists");
			});
	}
}
