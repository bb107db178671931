package dev.ratelimit.redis;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.redis.autoconfigure.RateLimitRedisAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitMetricsAutoConfiguration;
import io.lettuce.core.api.sync.RedisCommands;
import io.micrometer.core.instrument.MeterRegistry;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Redis answering errors (contract revision 3): an error reply is a failure like silence. Seen with
 * {@code maxmemory} and {@code noeviction}: a bucket logged WARN and INFO 1-3 ms apart, over and over, while
 * every call failed, and its health said {@code up}: reads that write nothing still worked, and each one put
 * the bucket back on Redis.
 */
class RedisErrorReplyTests {

	private final EmbeddedRedis redis = new EmbeddedRedis();

	private final ListAppender<ILoggingEvent> log = new ListAppender<>();

	private final Logger logger = (Logger) LoggerFactory.getLogger(RedisTokenBucket.class);

	@BeforeEach
	void captureLog() {
		this.log.start();
		this.logger.addAppender(this.log);
	}

	@AfterEach
	void close() {
		this.logger.detachAppender(this.log);
		this.redis.close();
	}

	private List<ILoggingEvent> said(Level level) {
		return this.log.list.stream()
			.filter((e) -> e.getLevel() == level && e.getFormattedMessage().contains("'full'"))
			.toList();
	}

	@Test
	void outOfMemoryRepliesSwitchTheBucketWhichGoesBackOnlyWhenWritesWorkAgain() throws InterruptedException {
		RedisTokenBucket bucket = RedisTokenBucket.builder().name("full")
			.connectionFactory(this.redis.connectionFactory(Duration.ofSeconds(30))).rate(1, Duration.ofHours(1))
			.limit(1000).timeout(Duration.ofMillis(500)).onFailure(RedisTokenBucket.OnFailure.DENY).build();
		assertThat(bucket.tryAcquire(1)).isTrue();
		RedisCommands<String, String> admin = this.redis.admin();
		admin.configSet("maxmemory-policy", "noeviction");
		admin.configSet("maxmemory", "1mb");
		String value = "x".repeat(64 * 1024);
		for (int i = 0; i < 1000; i++) {
			try {
				admin.set("filler:" + i, value);
			}
			catch (RuntimeException ex) {
				break; // OOM: full
			}
		}
		// every call fails with an error reply: the bucket switches, and says why
		for (int i = 0; i < 20 && bucket.isUp(); i++) {
			assertThat(bucket.tryAcquire(1)).isFalse();
		}
		assertThat(bucket.isUp()).isFalse();
		assertThat(said(Level.WARN)).hasSize(1);
		assertThat(said(Level.WARN).get(0).getFormattedMessage()).contains("OOM");
		// calls, views and health reads for a while (probes included): Redis still refuses every write
		long until = System.nanoTime() + Duration.ofSeconds(1).toNanos();
		while (System.nanoTime() - until < 0) {
			// a health read first: when a probe is due, the read is the probe
			assertThat(bucket.health()).startsWith("down: ");
			bucket.snapshot();
			bucket.tryAcquire(1);
			Thread.sleep(10);
		}
		assertThat(said(Level.INFO)).as("said back while every write fails").isEmpty();
		assertThat(bucket.isUp()).isFalse();
		// room again: back on Redis, said once
		admin.configSet("maxmemory", "0");
		long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
		while (!bucket.health().equals("up") && System.nanoTime() - deadline < 0) {
			Thread.sleep(50);
		}
		assertThat(bucket.isUp()).isTrue();
		assertThat(said(Level.INFO)).hasSize(1);
		assertThat(said(Level.WARN)).hasSize(1);
	}

	/**
	 * A server turned into a read-only replica answers reads and refuses every write ({@code READONLY}): the
	 * bucket switches, and a read (a view, a health read) that happens to be its probe must not put it back
	 * while every call fails, or WARN and INFO alternate as fast as calls come.
	 */
	@Test
	void aReadOnlyReplicaSwitchesTheBucketAndReadsDoNotPutItBack() throws InterruptedException {
		RedisTokenBucket bucket = RedisTokenBucket.builder().name("full")
			.connectionFactory(this.redis.connectionFactory(Duration.ofSeconds(30))).rate(1, Duration.ofHours(1))
			.limit(1000).timeout(Duration.ofMillis(500)).onFailure(RedisTokenBucket.OnFailure.DENY).build();
		assertThat(bucket.tryAcquire(1)).isTrue();
		RedisCommands<String, String> admin = this.redis.admin();
		// a master nobody runs: the server serves its (stale) data read-only
		admin.replicaof("127.0.0.1", 1);
		for (int i = 0; i < 20 && bucket.isUp(); i++) {
			assertThat(bucket.tryAcquire(1)).isFalse();
		}
		assertThat(bucket.isUp()).isFalse();
		assertThat(said(Level.WARN).get(0).getFormattedMessage()).contains("READONLY");
		long until = System.nanoTime() + Duration.ofSeconds(1).toNanos();
		while (System.nanoTime() - until < 0) {
			// a health read first: when a probe is due, the read is the probe
			bucket.health();
			bucket.snapshot();
			bucket.tryAcquire(1);
			Thread.sleep(10);
		}
		assertThat(said(Level.INFO)).as("said back while every write fails").isEmpty();
		assertThat(said(Level.WARN)).as("said down").hasSize(1);
		assertThat(bucket.health()).startsWith("down: ");
		admin.replicaofNoOne();
		long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
		while (!bucket.health().equals("up") && System.nanoTime() - deadline < 0) {
			Thread.sleep(50);
		}
		assertThat(bucket.isUp()).isTrue();
		assertThat(said(Level.INFO)).hasSize(1);
	}

	/**
	 * A bucket used with keys, each key called once or twice (a bucket per user or per address): before, each
	 * key's bucket counted only its own failures, so such a bucket never switched, never logged and said
	 * {@code up} through 19,136 failed calls. The detector is the bucket's, keys included (contract revision 3).
	 */
	@Test
	void aKeyedBucketSwitchesOnErrorRepliesAcrossItsKeysSaysSoOnceAndComesBackOnlyWhenWritesWork()
			throws InterruptedException {
		RedisBuckets buckets = new RedisBuckets(this.redis.connectionFactory(Duration.ofSeconds(30)));
		try {
			RedisTokenBucket bucket = buckets.build(keyed(), null, (first) -> {
			});
			List<RedisTokenBucket> keys = new ArrayList<>();
			for (int i = 0; i < 40; i++) {
				keys.add(buckets.build(keyed(), "user-" + i, (first) -> {
				}));
			}
			assertThat(keys.get(0).tryAcquire(1)).isTrue();
			fill(this.redis.admin());
			for (RedisTokenBucket key : keys) {
				assertThat(key.tryAcquire(1)).isFalse(); // each key called once
			}
			assertThat(bucket.isUp()).as("the bucket's gauge").isFalse();
			assertThat(bucket.health()).as("the bucket's health").startsWith("down: ").contains("OOM");
			assertThat(said(Level.WARN)).hasSize(1);
			assertThat(said(Level.WARN).get(0).getFormattedMessage()).contains("OOM");
			// calls of every key and health reads for a while: Redis still refuses every write
			long until = System.nanoTime() + Duration.ofSeconds(1).toNanos();
			while (System.nanoTime() - until < 0) {
				assertThat(bucket.health()).startsWith("down: ");
				for (RedisTokenBucket key : keys) {
					key.tryAcquire(1);
				}
				Thread.sleep(10);
			}
			assertThat(said(Level.INFO)).as("said back while every write fails").isEmpty();
			this.redis.admin().configSet("maxmemory", "0");
			long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
			while (!bucket.health().equals("up") && System.nanoTime() - deadline < 0) {
				for (RedisTokenBucket key : keys) {
					key.tryAcquire(1); // each key's probe, when due, finds Redis back
				}
				Thread.sleep(50);
			}
			assertThat(bucket.isUp()).isTrue();
			assertThat(said(Level.INFO)).hasSize(1);
			assertThat(said(Level.WARN)).hasSize(1);
		}
		finally {
			buckets.close();
		}
	}

	/**
	 * What an operator sees of an error-replying Redis is the meters, not {@code isUp()}: in an application,
	 * every error reply is timed as {@code ratelimit.backend.calls} with {@code outcome=error} (none as
	 * {@code ok}), the {@code ratelimit.backend.up} gauge reads 0 while writes fail and 1 again once they work.
	 */
	@Test
	void errorRepliesShowInTheMetersOfAnApplication() {
		new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(DataRedisAutoConfiguration.class, RateLimitAutoConfiguration.class,
					RateLimitRedisAutoConfiguration.class, MetricsAutoConfiguration.class,
					CompositeMeterRegistryAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
					RateLimitMetricsAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + this.redis.port(),
					"ratelimit.buckets.full.backend=redis", "ratelimit.buckets.full.rate=1",
					"ratelimit.buckets.full.period=1h", "ratelimit.buckets.full.limit=1000",
					"ratelimit.buckets.full.redis.timeout=500ms", "ratelimit.buckets.full.redis.on-failure=deny")
			.run((context) -> {
				assertThat(context).hasNotFailed();
				MeterRegistry meters = context.getBean(MeterRegistry.class);
				RateLimiter bucket = context.getBean("full", RateLimiter.class);
				assertThat(bucket.tryAcquire(1)).isTrue();
				assertThat(up(meters)).isEqualTo(1.0);
				double okBefore = calls(meters, "ok");
				fill(this.redis.admin());
				for (int i = 0; i < 3 * FailureDetector.FAILURES_TO_TRIP; i++) {
					assertThat(bucket.tryAcquire(1)).as("deny while every write fails").isFalse();
				}
				assertThat(up(meters)).as("ratelimit.backend.up while Redis answers OOM").isZero();
				assertThat(calls(meters, "error")).as("error replies timed with outcome=error")
					.isGreaterThanOrEqualTo(FailureDetector.FAILURES_TO_TRIP);
				assertThat(calls(meters, "ok")).as("no error reply counted as ok").isEqualTo(okBefore);
				this.redis.admin().configSet("maxmemory", "0");
				long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
				while (up(meters) == 0 && System.nanoTime() - deadline < 0) {
					bucket.tryAcquire(1); // the probe, when due, finds the writes working
					Thread.sleep(50);
				}
				assertThat(up(meters)).as("ratelimit.backend.up once writes work").isEqualTo(1.0);
			});
	}

	private static double up(MeterRegistry meters) {
		return meters.get("ratelimit.backend.up").tags("bucket", "full", "backend", "redis").gauge().value();
	}

	private static double calls(MeterRegistry meters, String outcome) {
		var timer = meters.find("ratelimit.backend.calls").tags("bucket", "full", "outcome", outcome).timer();
		return timer == null ? 0 : timer.count();
	}

	private static RedisTokenBucketBuilder keyed() {
		return RedisTokenBucket.builder().name("full").rate(1, Duration.ofHours(1)).limit(1000)
			.timeout(Duration.ofMillis(500)).onFailure(RedisTokenBucket.OnFailure.DENY);
	}

	/** Fills Redis up to a {@code maxmemory} of 1 MB with {@code noeviction}: every write is refused (OOM). */
	private static void fill(RedisCommands<String, String> admin) {
		admin.configSet("maxmemory-policy", "noeviction");
		admin.configSet("maxmemory", "1mb");
		String value = "x".repeat(64 * 1024);
		for (int i = 0; i < 1000; i++) {
			try {
				admin.set("filler:" + i, value);
			}
			catch (RuntimeException ex) {
				break; // OOM: full
			}
		}
	}
}
