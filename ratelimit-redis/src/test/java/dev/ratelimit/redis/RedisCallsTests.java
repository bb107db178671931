package dev.ratelimit.redis;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ratelimit.core.BackendHealth;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.Reservation;
import io.lettuce.core.api.sync.RedisCommands;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.extension.ExtendWith;

import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * How calls to a real Redis behave when it stalls, answers late, or its clock steps back: the
 * asynchronous calls, the failure detector and the script's arithmetic bounds.
 */
class RedisCallsTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();


	private static RedisCommands<String, String> admin() {
		return redis.admin();
	}

	private static RedisTokenBucketBuilder bucket(String name) {
		LettuceConnectionFactory factory = redis.connectionFactory();
		return RedisTokenBucket.builder().name(name).connectionFactory(factory).timeout(Duration.ofMillis(100));
	}

	private static long level(RedisTokenBucket bucket) {
		return (long) bucket.snapshot().available() - (long) bucket.snapshot().deficiency();
	}

	/** The level in Redis, once a pause of {@code pauseMillis} from {@code pausedAt} is over. */
	private static void awaitLevel(RedisTokenBucket bucket, long expected, long pausedAt, long pauseMillis)
			throws InterruptedException {
		long left = pausedAt + Duration.ofMillis(pauseMillis + 50).toNanos() - System.nanoTime();
		if (left > 0) {
			Thread.sleep(left / 1_000_000 + 1);
		}
		long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
		while (level(bucket) != expected && System.nanoTime() < deadline) {
			Thread.sleep(20);
		}
		assertThat(level(bucket)).isEqualTo(expected);
	}

	@Test
	void aGrantThatComesAfterItsCallTimedOutIsGivenBack() throws InterruptedException {
		RedisTokenBucket bucket = bucket("late-grant").rate(1, Duration.ofHours(1)).limit(5)
			.onFailure(RedisTokenBucket.OnFailure.DENY)
			.build();
		assertThat(bucket.tryAcquire(1)).isTrue();
		long pausedAt = System.nanoTime();
		admin().clientPause(300);
		// the call times out (denied by the policy), but Redis runs it when the pause ends: 2 tokens taken
		// that nobody uses, and given back when the late reply comes
		assertThat(bucket.tryAcquire(2)).isFalse();
		awaitLevel(bucket, 4, pausedAt, 300);
	}

	@Test
	void aClaimGivenUpBeforeRedisAnswersGivesItsGrantBack() throws InterruptedException {
		RedisTokenBucket bucket = bucket("abandoned-claim").rate(1, Duration.ofHours(1)).limit(5).build();
		long start = System.nanoTime();
		admin().clientPause(200);
		Reservation claim = bucket.reserve(3, Duration.ofSeconds(5));
		// reserve does not wait for Redis: a reactive caller's event loop is never blocked
		assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofMillis(150));
		assertThat(claim.cancel()).isTrue();
		awaitLevel(bucket, 5, start, 200);
	}

	@Test
	void aReservationReportsRedisAnswerWhenItComesAndWakesItsCaller() throws InterruptedException {
		RedisTokenBucket bucket = bucket("reserve-async").rate(1, Duration.ofSeconds(1)).limit(1).build();
		Reservation claim = bucket.reserve(1, Duration.ofSeconds(1));
		AtomicBoolean woken = new AtomicBoolean();
		claim.onWake(() -> woken.set(true));
		long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
		long delay;
		while ((delay = claim.poll()) != 0 && System.nanoTime() < deadline) {
			Thread.sleep(Math.max(1, delay / 1_000_000));
		}
		assertThat(delay).isZero();
		claim.permit().close();
		Reservation second = bucket.reserve(1, Duration.ofSeconds(1));
		while ((delay = second.poll()) != 0 && delay <= Duration.ofMillis(1).toNanos()
				&& System.nanoTime() < deadline) {
			Thread.sleep(1);
		}
		// Redis's answer: the next token comes within a second of the last, not at once (how much of it is
		// left depends on how long the answer took)
		assertThat(delay).isGreaterThan(Duration.ofMillis(1).toNanos()).isLessThanOrEqualTo(Duration.ofSeconds(1).toNanos());
		second.cancel();
	}

	@Test
	@ExtendWith(OutputCaptureExtension.class)
	void aStallShorterThanTheTimeoutSwitchesNothing(CapturedOutput output) throws InterruptedException {
		RedisTokenBucket bucket = bucket("stall").rate(1_000_000, Duration.ofSeconds(1)).limit(1_000_000).build();
		AtomicInteger calls = new AtomicInteger();
		AtomicBoolean wentDown = new AtomicBoolean();
		bucket.onCall((outcome, nanos) -> calls.incrementAndGet());
		bucket.tryAcquire(1);
		List<Thread> threads = new ArrayList<>();
		AtomicBoolean stop = new AtomicBoolean();
		for (int i = 0; i < 8; i++) {
			Thread thread = new Thread(() -> {
				while (!stop.get()) {
					bucket.tryAcquire(1);
					if (!bucket.isUp()) {
						wentDown.set(true);
					}
				}
			});
			threads.add(thread);
			thread.start();
		}
		Thread.sleep(100);
		admin().clientPause(150);
		Thread.sleep(400);
		stop.set(true);
		for (Thread thread : threads) {
			thread.join();
		}
		assertThat(calls.get()).isGreaterThan(8);
		assertThat(wentDown).isFalse();
		assertThat(output.getOut() + output.getErr()).doesNotContain("runs on its on-failure policy");
	}

	@Test
	void everyCallIsTimedByOutcome() {
		RedisTokenBucket bucket = bucket("timed").rate(1, Duration.ofHours(1)).limit(2).build();
		List<BackendHealth.Outcome> outcomes = new ArrayList<>();
		bucket.onCall((outcome, nanos) -> {
			assertThat(nanos).isPositive();
			synchronized (outcomes) {
				outcomes.add(outcome);
			}
		});
		bucket.tryAcquire(1);
		admin().clientPause(250);
		bucket.tryAcquire(1);
		synchronized (outcomes) {
			assertThat(outcomes).containsExactly(BackendHealth.Outcome.OK, BackendHealth.Outcome.TIMEOUT);
		}
	}

	@Test
	void aClockThatStepsBackChangesNothing() throws InterruptedException {
		RedisTokenBucket bucket = bucket("clock-back").rate(10, Duration.ofSeconds(1)).limit(10).build();
		// emptied: the 10 it holds, and what it earned meanwhile (on a busy machine the calls take a while)
		long started = System.nanoTime();
		int granted = 0;
		while (bucket.tryAcquire(1)) {
			granted++;
		}
		long earnable = 10 + 10 * (TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started) / 1000 + 1);
		assertThat(granted).isBetween(10, (int) earnable);
		// the last update as Redis read it a minute ahead: what a failover to a server whose clock is a
		// minute behind looks like
		List<String> time = admin().time();
		long nowMicros = Long.parseLong(time.get(0)) * 1_000_000 + Long.parseLong(time.get(1));
		admin().hset(bucket.key(), "t", Long.toString(nowMicros + 60_000_000L));
		assertThat(bucket.tryAcquire(1)).isFalse();
		Thread.sleep(300);
		// the bucket earns from the new reading on: 10/s for at least 0.2 s
		assertThat(bucket.tryAcquire(1)).isTrue();
	}

	@Test
	void aSnapshotWritesNothing() {
		RedisTokenBucket bucket = bucket("read-only").rate(10, Duration.ofSeconds(1)).limit(10).build();
		assertThat(bucket.snapshot().available()).isEqualTo(10);
		assertThat(admin().exists(bucket.key())).isZero();
		assertThat(bucket.tryAcquire(1)).isTrue();
		String before = admin().hget(bucket.key(), "t");
		assertThat(bucket.snapshot().available()).isEqualTo(9);
		assertThat(admin().hget(bucket.key(), "t")).isEqualTo(before);
	}

	@Test
	void aCostTheScriptCannotCountExactlyIsRefusedNamingTheBucket() {
		RedisTokenBucket bucket = bucket("huge-cost").rate(1000, Duration.ofSeconds(1)).limit(10).build();
		assertThatIllegalArgumentException().isThrownBy(() -> bucket.tryAcquire(1L << 62))
			.withMessageContaining("'huge-cost'")
			.withMessageContaining("n must be at most");
		assertThatIllegalArgumentException().isThrownBy(() -> bucket.reserve(1L << 62, Duration.ofDays(365 * 100)))
			.withMessageContaining("'huge-cost'");
		// nothing was taken
		assertThat(bucket.snapshot().available()).isEqualTo(10);
		assertThatThrownBy(() -> bucket.acquire(11, Duration.ZERO)).isInstanceOf(RateLimitExceededException.class);
		assertThat(bucket.snapshot().available()).isEqualTo(10);
	}
}
