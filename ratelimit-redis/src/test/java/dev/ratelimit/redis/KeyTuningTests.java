package dev.ratelimit.redis;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.core.Rate;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.redis.BucketScript.Settings;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A key's bucket when the template's settings are stale: its claims wait for a read ({@code TUNING})
 * without losing their place, and a template that Redis does not answer costs the keys' calls one wait.
 * Redis is a fake whose replies the tests give (or never give).
 */
class KeyTuningTests {

	private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

	private final FakeScriptRedis redis = new FakeScriptRedis();

	private final ScriptConnection connection = this.redis.connection();

	@AfterEach
	void close() {
		this.connection.close();
	}


	/**
	 * A capped key's claim queued in Redis (code 2, RELEASES) whose next ask finds the template's
	 * settings stale goes to TUNING; cancelled there, it never sends LEAVE, so its ticket stays at the
	 * head of the key's queue (blocking every other waiter of the key, on every instance) until its
	 * deadline (max-wait + 1 s) passes.
	 */
	@Test
	void aQueuedClaimCancelledWhileTuningLeavesTheQueue() throws Exception {
		// the template's reads look 2 s old to the buckets' clock: every key ask must wait for a read
		TemplateTune tune = new TemplateTune("t", Settings.of(Rate.of(10, Duration.ofSeconds(1)), 3, true,
				Duration.ofMinutes(1), "t"), "ratelimit:{t}", this.connection, TimeUnit.HOURS.toNanos(1),
				() -> System.nanoTime() - 2 * SECOND);
		RedisTokenBucket bucket = FakeScriptRedis.aliceOf(tune, this.connection).cappedRelease(true).build();
		Reservation claim = bucket.reserve(1, Duration.ofSeconds(30));
		// 1. TUNING: answer the read
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(1);
		this.redis.of(BucketScript.Mode.TUNE).get(0).complete(FakeScriptRedis.reply(3));
		claim.poll();
		// 2. the acquire: every token in flight, queued for releases (code 2)
		assertThat(this.redis.of(BucketScript.Mode.ACQUIRE)).hasSize(1);
		this.redis.of(BucketScript.Mode.ACQUIRE).get(0).complete(FakeScriptRedis.reply(2));
		claim.poll();
		// 3. the next ask (after 25 ms) finds the settings stale again: TUNING, with a read out
		Thread.sleep(60);
		claim.poll();
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(2);
		assertThat(this.redis.of(BucketScript.Mode.ACQUIRE)).hasSize(1);
		// 4. the caller gives up: its place in Redis's queue must be given back
		assertThat(claim.cancel()).isTrue();
		assertThat(this.redis.of(BucketScript.Mode.LEAVE)).as("LEAVE sent for a queued claim cancelled in TUNING")
			.hasSize(1);
	}

	/**
	 * A template whose reads Redis never answers: the first key's call waits for the read (at most the
	 * timeout) and goes on with the settings last read; the calls after it wait for no read.
	 */
	@Test
	void aTemplateThatDoesNotAnswerCostsTheKeysOneWaitNotOnePerCall() {
		TemplateTune tune = new TemplateTune("t", Settings.of(Rate.of(10, Duration.ofSeconds(1)), 3, false,
				Duration.ofMinutes(1), "t"), "ratelimit:{t}", this.connection, TimeUnit.MILLISECONDS.toNanos(50),
				System::nanoTime); // never read: the first call must wait for a read
		RedisTokenBucket bucket = FakeScriptRedis.aliceOf(tune, this.connection).build();
		Reservation first = bucket.reserve(1, Duration.ZERO);
		assertThat(this.redis.of(BucketScript.Mode.ACQUIRE)).as("the first claim waits for the read").isEmpty();
		long deadline = System.nanoTime() + 30 * SECOND;
		while (this.redis.of(BucketScript.Mode.ACQUIRE).isEmpty() && System.nanoTime() - deadline < 0) {
			first.poll(); // the read times out after 50 ms: the claim goes on with the settings it has
			Thread.onSpinWait();
		}
		assertThat(this.redis.of(BucketScript.Mode.ACQUIRE)).hasSize(1);
		first.cancel();
		for (int i = 1; i < 3; i++) {
			Reservation claim = bucket.reserve(1, Duration.ZERO);
			assertThat(this.redis.of(BucketScript.Mode.ACQUIRE)).as("claim %d asks at once, waiting for no read", i)
				.hasSize(i + 1);
			claim.cancel();
		}
	}
}
