package dev.ratelimit.redis;

import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The Redis gate of outbound calls on a real Redis and Redis's clock: where it is kept (beside the
 * bucket, with its hash tag), when it expires, and what it does when Redis does not answer.
 */
@ExtendWith(OutputCaptureExtension.class)
class RedisServerGateTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();

	@Test
	void theGateIsKeptBesideTheBucketWithItsHashTag() {
		assertThat(RedisServerGate.key("ratelimit:", "partner-api", null)).isEqualTo("ratelimit:{partner-api}:gate");
		assertThat(RedisServerGate.key("ratelimit:", "partner-api", "api.partner.com"))
			.isEqualTo("ratelimit:{partner-api:api.partner.com}:gate");
	}

	@Test
	void theGateExpiresWhenItsLastPauseOrResetIsOver() {
		try (RedisBuckets buckets = new RedisBuckets(redis.connectionFactory())) {
			RedisServerGate gate = new RedisServerGate(connection(buckets), "ttl:{a}:gate", "a", Duration.ofSeconds(5),
					null, 0);
			gate.pause(Duration.ofMillis(1500).toNanos());
			long ttl = redis.admin().pttl("ttl:{a}:gate");
			assertThat(ttl).as("expires with the pause").isBetween(1L, 1500L);
			long mark = gate.tryPass(0);
			assertThat(mark).as("held back while paused").isEqualTo(-1);
			assertThat(gate.delay(1)).isBetween(1L, Duration.ofMillis(1500).toNanos());
			assertThat(gate.level()).isZero();
			gate.lower(0, 0, Duration.ofSeconds(20).toNanos());
			assertThat(redis.admin().pttl("ttl:{a}:gate")).as("expires with the later reset").isBetween(18_000L, 20_000L);
		}
	}

	@Test
	void aCallThatPassesKeepsTheCountAMinuteForTheAnswersOfCallsStillOut() {
		try (RedisBuckets buckets = new RedisBuckets(redis.connectionFactory())) {
			RedisServerGate gate = buckets.gate("keep:", "b", null, Duration.ofSeconds(5));
			long first = gate.tryPass(2);
			assertThat(gate.tryPass(1)).isEqualTo(first + 1);
			assertThat(redis.admin().pttl("keep:{b}:gate")).isBetween(50_000L, 60_000L);
			assertThat(gate.level()).as("nothing in force").isEqualTo(Long.MAX_VALUE);
			gate.lower(1, first, Duration.ofSeconds(30).toNanos()); // 1 left after the first call: the second took it
			assertThat(gate.level()).isZero();
			assertThat(gate.tryPass(1)).as("held back until the reset").isEqualTo(-1);
		}
	}

	@Test
	void aGateRedisDoesNotAnswerHoldsNothingBackAndSaysSoOnce(CapturedOutput output) throws IOException {
		int port;
		try (ServerSocket socket = new ServerSocket(0)) {
			port = socket.getLocalPort(); // nothing listens once closed
		}
		LettuceConnectionFactory factory = new LettuceConnectionFactory(
				new RedisStandaloneConfiguration("127.0.0.1", port), LettuceClientConfiguration.builder().build());
		factory.afterPropertiesSet();
		factory.start();
		try (RedisBuckets buckets = new RedisBuckets(factory)) {
			RedisServerGate gate = buckets.gate("down:", "c", null, Duration.ofMillis(200));
			gate.pause(Duration.ofSeconds(30).toNanos());
			assertThat(gate.tryPass(1)).as("passes, uncounted").isEqualTo(RedisServerGate.UNCOUNTED);
			assertThat(gate.delay(1)).isZero();
			assertThat(gate.level()).isEqualTo(Long.MAX_VALUE);
			gate.lower(0, RedisServerGate.UNCOUNTED, Duration.ofSeconds(30).toNanos()); // no call: nothing to lower
			gate.unpass(1, 1); // a call passed before Redis went away
			assertThat(gate.failures()).isEqualTo(5);
			assertThat(output.getOut().split("Redis did not answer the outbound gate of bucket 'c'", -1))
				.as("logged once").hasSize(2);
		}
		finally {
			factory.destroy();
		}
	}

	private static ScriptConnection connection(RedisBuckets buckets) {
		return ScriptConnection.of(redis.connectionFactory());
	}
}
