package dev.ratelimit.redis;

import java.time.Duration;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Printing a Redis bucket (a log line, a debugger, an exception message) asks Redis nothing and changes
 * nothing, though a health read of a bucket said down probes Redis. Found by a reviewer: toString() went
 * through the health read, sent a call, waited up to the timeout, and put the bucket back on Redis.
 */
class RedisBucketToStringTests {

	private EmbeddedRedis redis;

	private LettuceConnectionFactory factory;

	@BeforeEach
	void startRedis() {
		this.redis = new EmbeddedRedis();
		this.factory = this.redis.connectionFactory();
	}

	@AfterEach
	void stopRedis() {
		this.factory.destroy();
		try {
			this.redis.stop();
		}
		catch (RuntimeException ex) {
			// already stopped
		}
	}

	@Test
	void toStringDoesNotProbeRedisNorChangeTheBucketsState() throws InterruptedException {
		RedisTokenBucket bucket = RedisTokenBucket.builder().name("review").connectionFactory(this.factory)
			.rate(1, Duration.ofHours(1)).limit(3).timeout(Duration.ofMillis(100))
			.onFailure(RedisTokenBucket.OnFailure.DENY).build();
		this.redis.stop();
		for (int i = 0; i < 20 && bucket.isUp(); i++) {
			bucket.tryAcquire(1);
		}
		assertThat(bucket.isUp()).isFalse();
		this.redis.start();
		long deadline = System.nanoTime() + Duration.ofSeconds(40).toNanos();
		while (bucket.connection().reconnecting() && System.nanoTime() < deadline) {
			Thread.sleep(100);
		}
		assertThat(bucket.connection().reconnecting()).isFalse();
		Thread.sleep(300); // the first back-off (100 ms) is over: a probe is due
		assertThat(bucket.isUp()).isFalse();
		String described = bucket.toString();
		assertThat(described).contains("review");
		// a toString is a read: it must not have sent the probe and put the bucket back on Redis
		assertThat(bucket.isUp()).isFalse();
	}
}
