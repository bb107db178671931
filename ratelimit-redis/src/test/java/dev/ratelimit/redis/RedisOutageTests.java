package dev.ratelimit.redis;

import java.time.Duration;

import dev.ratelimit.redis.autoconfigure.RateLimitRedisAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What an outage looks like from outside (issue 30): the log names its real cause, every bucket on the
 * connection shows it, a refused request waits for Redis once, and a shutdown logs nothing.
 */
@ExtendWith(OutputCaptureExtension.class)
class RedisOutageTests {

	private final EmbeddedRedis redis = new EmbeddedRedis();

	private final FakeScriptRedis fake = new FakeScriptRedis();

	@AfterEach
	void stopRedis() {
		try {
			this.redis.close();
		}
		catch (RuntimeException ex) {
			// stopped already
		}
	}

	private static boolean within(Duration limit, java.util.function.BooleanSupplier condition)
			throws InterruptedException {
		long deadline = System.nanoTime() + limit.toNanos();
		while (!condition.getAsBoolean()) {
			if (System.nanoTime() - deadline > 0) {
				return false;
			}
			Thread.sleep(20);
		}
		return true;
	}

	/** After Redis was killed, the WARN said "no answer within PT0.1S" where the connection was refused. */
	@Test
	void theWarnNamesAConnectionRefusedAfterRedisIsKilled(CapturedOutput output) throws InterruptedException {
		LettuceConnectionFactory factory = this.redis.connectionFactory(Duration.ofSeconds(30));
		RedisTokenBucket bucket = RedisTokenBucket.builder().name("killed").connectionFactory(factory)
			.rate(1, Duration.ofHours(1)).limit(100).timeout(Duration.ofMillis(100))
			.onFailure(RedisTokenBucket.OnFailure.DENY).build();
		assertThat(bucket.tryAcquire(1)).isTrue();
		this.redis.stop();
		assertThat(within(Duration.ofSeconds(20), () -> {
			bucket.tryAcquire(1);
			return !bucket.isUp();
		})).isTrue();
		String warning = (output.getOut() + output.getErr()).lines()
			.filter((line) -> line.contains("Rate limit bucket 'killed' runs on its on-failure policy"))
			.findFirst()
			.orElseThrow();
		assertThat(warning).containsIgnoringCase("connection refused").doesNotContain("no answer within");
	}

	/**
	 * While Redis was down, a bucket that nobody called since the outage began showed {@code up} (for 40 s in
	 * one run). An outage seen by any bucket on the connection is the outage of each; a health read probes.
	 */
	@Test
	void aBucketNobodyCalledSinceTheOutageBeganIsNotUp() throws InterruptedException {
		RedisBuckets buckets = new RedisBuckets(this.redis.connectionFactory(Duration.ofSeconds(30)));
		try {
			RedisTokenBucket called = buckets.build(RedisTokenBucket.builder().name("called")
				.rate(1, Duration.ofHours(1)).limit(100).timeout(Duration.ofMillis(100)), null, (first) -> {
				});
			RedisTokenBucket quiet = buckets.build(RedisTokenBucket.builder().name("quiet")
				.rate(1, Duration.ofHours(1)).limit(100).timeout(Duration.ofMillis(100)), null, (first) -> {
				});
			assertThat(called.tryAcquire(1)).isTrue();
			assertThat(quiet.tryAcquire(1)).isTrue();
			this.redis.stop();
			assertThat(within(Duration.ofSeconds(20), () -> {
				called.tryAcquire(1);
				return !called.isUp();
			})).isTrue();
			assertThat(quiet.isUp()).as("the quiet bucket's gauge").isFalse();
			assertThat(quiet.health()).as("the quiet bucket's health").startsWith("down: ");
			this.redis.start();
			assertThat(within(Duration.ofSeconds(20), () -> quiet.health().equals("up"))).as("back by a health read")
				.isTrue();
		}
		finally {
			buckets.close();
		}
	}

	/** Each shutdown of an application with Redis buckets logged {@code WARN ... Connection is already closed}. */
	@Test
	void closingAnApplicationWithRedisBucketsLogsNoWarning(CapturedOutput output) {
		new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(DataRedisAutoConfiguration.class, RateLimitAutoConfiguration.class,
					RateLimitRedisAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + this.redis.port(),
					"ratelimit.buckets.closing.backend=redis", "ratelimit.buckets.closing.rate=10",
					"ratelimit.buckets.closing.capped-release=true")
			.run((context) -> {
				assertThat(context).hasNotFailed();
				assertThat(context.getBean("closing", RedisTokenBucket.class).tryAcquire(1)).isTrue();
			});
		assertThat(output.getOut() + output.getErr()).doesNotContain("Connection is already closed");
	}

	/**
	 * With {@code headers: ietf} and Redis down, a refused request took twice the timeout: its call, then the
	 * peek for the headers. A view asked right after a call Redis did not answer asks Redis nothing.
	 */
	@Test
	void aViewAskedRightAfterACallRedisDidNotAnswerDoesNotWaitForRedisAgain() {
		ScriptConnection connection = this.fake.connection();
		try {
			RedisTokenBucket bucket = RedisTokenBucket.builder().name("headers").rate(10, Duration.ofSeconds(1))
				.limit(3).timeout(Duration.ofSeconds(1))
				.onFailure(RedisTokenBucket.OnFailure.DENY).connection(connection).build();
			assertThat(bucket.tryAcquire(1)).as("nothing answers: denied").isFalse();
			assertThat(bucket.snapshot().available()).isZero();
			assertThat(this.fake.of(BucketScript.Mode.PEEK)).as("peeks sent for the view").isEmpty();
		}
		finally {
			connection.close();
		}
	}
}
