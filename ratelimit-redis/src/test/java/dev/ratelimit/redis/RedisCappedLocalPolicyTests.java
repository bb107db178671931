package dev.ratelimit.redis;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A capped bucket on its {@code local} policy (contract revision 3): the policy starts with the limit less
 * the tokens this instance holds in flight, and a grant of Redis that would take this instance past its
 * limit (calls the policy let through, which Redis does not count, still run) is given back, so that one
 * instance never has more than {@code limit} calls in flight, whoever let them through.
 */
class RedisCappedLocalPolicyTests {

	private static final int LIMIT = 8;

	private final EmbeddedRedis redis = new EmbeddedRedis();

	@AfterEach
	void stopRedis() {
		this.redis.close();
	}

	/**
	 * Seen before: limit 8, 8 calls in flight, Redis paused for 3 s ({@code CLIENT PAUSE}): 14, then 16
	 * calls ran at once in one instance, the policy's bucket having started full.
	 */
	@Test
	void aCappedBucketNeverHasMoreThanItsLimitInFlightOnOneInstanceAcrossAPause() throws Exception {
		LettuceConnectionFactory factory = this.redis.connectionFactory(Duration.ofSeconds(30));
		try {
			RedisTokenBucket bucket = RedisTokenBucket.builder().name("capped-paused").connectionFactory(factory)
				.rate(1000, Duration.ofSeconds(1)).limit(LIMIT).cappedRelease(true).timeout(Duration.ofMillis(100))
				.onFailure(RedisTokenBucket.OnFailure.LOCAL).build();
			AtomicInteger running = new AtomicInteger();
			AtomicInteger most = new AtomicInteger();
			List<Permit> held = new ArrayList<>();
			for (int i = 0; i < LIMIT; i++) {
				held.add(bucket.acquire(1, Duration.ofSeconds(5))); // by Redis, or by the policy if Redis is slow
				most.accumulateAndGet(running.incrementAndGet(), Math::max);
			}
			this.redis.admin().clientPause(3000);
			long pausedAt = System.nanoTime();
			long end = pausedAt + Duration.ofSeconds(4).toNanos();
			List<Thread> callers = new ArrayList<>();
			for (int t = 0; t < 2 * LIMIT; t++) {
				Thread caller = new Thread(() -> {
					while (System.nanoTime() - end < 0) {
						try (Permit permit = bucket.acquire(1, Duration.ofMillis(200))) {
							most.accumulateAndGet(running.incrementAndGet(), Math::max);
							Thread.sleep(ThreadLocalRandom.current().nextInt(300));
							running.decrementAndGet(); // before the permit's close lets another in
						}
						catch (RateLimitExceededException ex) {
							// refused: try again
						}
						catch (InterruptedException ex) {
							return;
						}
					}
				});
				callers.add(caller);
				caller.start();
			}
			// the calls in flight end during the pause: the policy lets others through, which Redis does not
			// count when it answers again
			Thread.sleep(1000);
			for (Permit permit : held) {
				running.decrementAndGet();
				permit.close();
			}
			for (Thread caller : callers) {
				caller.join();
			}
			assertThat(most.get()).as("calls in flight at once on this instance, limit %d", LIMIT)
				.isLessThanOrEqualTo(LIMIT);
			assertThat(bucket.snapshot().inFlight()).as("in flight once every call ended").isZero();
		}
		finally {
			factory.destroy();
		}
	}
}
