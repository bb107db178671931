package dev.ratelimit.redis;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.Reservation;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The {@code local} policy's bucket while the bucket asks Redis: a call Redis alone does not answer in
 * time is limited by what this instance's calls already took (Redis's grants are mirrored), so one
 * instance stays within its bound whoever decided, before and after the bucket switches to its policy. Redis is a fake whose replies the tests give (or never give); the local bucket's
 * clock stands still, so no token comes back by time.
 */
class RedisLocalMirrorTests {

	private final FakeScriptRedis redis = new FakeScriptRedis();

	private final ScriptConnection connection = this.redis.connection();

	/** The bucket's clock (its calls' timeouts and the local bucket's time): it moves only when a test moves it. */
	private final AtomicLong localClock = new AtomicLong();

	private static final long TIMEOUT_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

	@AfterEach
	void close() {
		this.connection.close();
	}

	private RedisTokenBucket bucket() {
		return RedisTokenBucket.builder()
			.name("mirrored")
			.rate(10, Duration.ofSeconds(1))
			.limit(3)
			.timeout(Duration.ofMillis(50))
			.clock(this.localClock::get)
			.connection(this.connection)
			.build();
	}

	/** Redis grants the {@code index}-th acquire (counted from 0) when it is sent. */
	private CompletableFuture<Void> grant(int index) {
		return CompletableFuture.runAsync(() -> {
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
			List<CompletableFuture<List<Object>>> calls;
			while ((calls = this.redis.of(BucketScript.Mode.ACQUIRE)).size() <= index) {
				if (System.nanoTime() - deadline > 0) {
					throw new IllegalStateException("acquire " + index + " never sent");
				}
				Thread.onSpinWait();
			}
			calls.get(index).complete(FakeScriptRedis.reply(BucketScript.Reply.GRANTED));
		});
	}

	@Test
	void aCallRedisDoesNotAnswerIsLimitedByWhatRedisGrantedHere() {
		RedisTokenBucket bucket = bucket();
		for (int i = 0; i < 3; i++) {
			CompletableFuture<Void> answer = grant(i);
			assertThat(bucket.tryAcquire(1)).as("call %d, granted by Redis", i).isTrue();
			answer.join();
		}
		// the fourth call gets no answer within the timeout: the bucket has not switched (one slow reply),
		// and the local bucket knows that the limit's 3 tokens were just taken here
		assertThat(bucket.tryAcquire(1)).as("a call Redis does not answer, after 3 of limit 3 granted by Redis")
			.isFalse();
		assertThat(bucket.isUp()).isTrue();
		// a waiting call likewise: refused at once, since no token comes back within its max-wait
		Reservation claim = bucket.reserve(1, Duration.ZERO);
		this.localClock.addAndGet(TIMEOUT_NANOS); // the bucket's clock: the call times out (and the local bucket earns half a token)
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
		boolean refused = false;
		while (!refused && System.nanoTime() - deadline < 0) {
			try {
				claim.poll();
				Thread.onSpinWait();
			}
			catch (RateLimitExceededException ex) {
				refused = true;
			}
		}
		assertThat(refused).as("a reserved call Redis does not answer is refused by the mirror").isTrue();
	}

	/**
	 * The other order: calls Redis answers late are let through by the local bucket, then Redis, which ran
	 * them late, grants them too. Before, those late grants were given back to Redis (as for a call nobody
	 * took), so Redis went on from a full bucket and granted this instance the limit again at once: 3
	 * through the local bucket and 3 more through Redis at the same instant, limit 3.
	 */
	@Test
	void aLateGrantOfACallTheLocalBucketLetThroughStaysInRedis() {
		RedisTokenBucket bucket = bucket();
		for (int i = 0; i < 3; i++) {
			assertThat(bucket.tryAcquire(1)).as("unanswered call %d, let through by the local bucket", i).isTrue();
		}
		for (CompletableFuture<List<Object>> late : this.redis.of(BucketScript.Mode.ACQUIRE)) {
			late.complete(FakeScriptRedis.reply(BucketScript.Reply.GRANTED)); // Redis ran them, late
		}
		assertThat(this.redis.arguments(BucketScript.Mode.REFUND)).as("refunds of the late grants").isEmpty();
		// the reserve path alike: a claim the local bucket let through keeps its late grant in Redis
		bucket.refund(1); // one token back in the local bucket (and a refund to Redis: the caller's own)
		Reservation claim = bucket.reserve(1, Duration.ofSeconds(1));
		this.localClock.addAndGet(TIMEOUT_NANOS); // the bucket's clock: the call times out (and the local bucket earns half a token)
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
		while (claim.poll() != 0 && System.nanoTime() - deadline < 0) {
			Thread.onSpinWait();
		}
		claim.permit().close();
		this.redis.of(BucketScript.Mode.ACQUIRE).get(3).complete(FakeScriptRedis.reply(BucketScript.Reply.GRANTED));
		assertThat(this.redis.arguments(BucketScript.Mode.REFUND)).as("refunds: the caller's own only").hasSize(1);
	}

	/**
	 * A call Redis does not answer in time whose tokens the local bucket makes it wait for: Redis, running
	 * it late, grants it while it waits, then the local bucket lets it through. Its late grant must stay in
	 * Redis, as for a call let through at once. Found in review: the grant was kept only when the call was
	 * let through before the late reply came; one that came while the call waited locally was given back,
	 * so Redis did not count a call that ran.
	 */
	@Test
	void aLateGrantThatComesWhileTheLocalBucketMakesTheCallWaitStaysInRedis() {
		RedisTokenBucket bucket = bucket();
		for (int i = 0; i < 3; i++) {
			assertThat(bucket.tryAcquire(1)).as("unanswered call %d, let through by the local bucket", i).isTrue();
		}
		Reservation claim = bucket.reserve(1, Duration.ofSeconds(1));
		this.localClock.addAndGet(TIMEOUT_NANOS); // the bucket's clock: the call times out (and the local bucket earns half a token)
		// no answer within the timeout: the local bucket, empty but for the half token earned meanwhile, makes it
		// wait 50 ms (its clock stands still until the test moves it)
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
		while (claim.poll() < TimeUnit.MILLISECONDS.toNanos(50) && System.nanoTime() - deadline < 0) {
			Thread.onSpinWait();
		}
		this.redis.of(BucketScript.Mode.ACQUIRE).get(3).complete(FakeScriptRedis.reply(BucketScript.Reply.GRANTED));
		this.localClock.addAndGet(TimeUnit.MILLISECONDS.toNanos(100));
		assertThat(claim.poll()).as("let through by the local bucket").isZero();
		claim.permit().close();
		assertThat(this.redis.arguments(BucketScript.Mode.REFUND)).as("refunds of the late grant of a call that ran")
			.isEmpty();
	}

	/**
	 * The same call refused by the local bucket after all (its caller gave up while it waited): the late
	 * grant it held in Redis is given back.
	 */
	@Test
	void aLateGrantHeldForACallWaitingLocallyIsGivenBackWhenTheCallGivesUp() {
		RedisTokenBucket bucket = bucket();
		for (int i = 0; i < 3; i++) {
			assertThat(bucket.tryAcquire(1)).isTrue();
		}
		Reservation claim = bucket.reserve(1, Duration.ofSeconds(1));
		this.localClock.addAndGet(TIMEOUT_NANOS); // the bucket's clock: the call times out (and the local bucket earns half a token)
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
		while (claim.poll() < TimeUnit.MILLISECONDS.toNanos(50) && System.nanoTime() - deadline < 0) {
			Thread.onSpinWait();
		}
		this.redis.of(BucketScript.Mode.ACQUIRE).get(3).complete(FakeScriptRedis.reply(BucketScript.Reply.GRANTED));
		assertThat(claim.cancel()).isTrue();
		assertThat(this.redis.arguments(BucketScript.Mode.REFUND)).as("the late grant given back").hasSize(1);
	}

	/** A late grant of a call that was refused (the local bucket had nothing left) is still given back. */
	@Test
	void aLateGrantOfACallTheLocalBucketRefusedIsGivenBack() {
		RedisTokenBucket bucket = bucket();
		for (int i = 0; i < 3; i++) {
			CompletableFuture<Void> answer = grant(i);
			assertThat(bucket.tryAcquire(1)).isTrue();
			answer.join();
		}
		assertThat(bucket.tryAcquire(1)).as("unanswered, the local bucket empty").isFalse();
		this.redis.of(BucketScript.Mode.ACQUIRE).get(3).complete(FakeScriptRedis.reply(BucketScript.Reply.GRANTED));
		assertThat(this.redis.arguments(BucketScript.Mode.REFUND)).as("the late grant given back").hasSize(1);
	}

	@Test
	void aRefundGivesTheMirrorItsTokensBack() {
		RedisTokenBucket bucket = bucket();
		for (int i = 0; i < 3; i++) {
			CompletableFuture<Void> answer = grant(i);
			assertThat(bucket.tryAcquire(1)).isTrue();
			answer.join();
		}
		bucket.refund(1); // e.g. refundIf: the call did not count
		assertThat(bucket.tryAcquire(1)).as("unanswered, after a refund of one").isTrue();
		assertThat(bucket.tryAcquire(1)).as("unanswered, the refunded token taken").isFalse();
	}

	@Test
	void whenTheBucketSwitchesToItsPolicyTheLocalBucketGoesOnFromWhatThisInstanceTook() {
		RedisTokenBucket bucket = bucket();
		for (int i = 0; i < 3; i++) {
			CompletableFuture<Void> answer = grant(i);
			assertThat(bucket.tryAcquire(1)).isTrue();
			answer.join();
		}
		// no answer at all: the bucket switches after several timeouts in a row; the local bucket, which
		// knows the 3 tokens were taken here, refuses before and after the switch (filling it at the switch
		// would let 3 more through at once, beyond the bound)
		int unanswered = 0;
		while (bucket.isUp() && unanswered < 100) {
			assertThat(bucket.tryAcquire(1)).as("unanswered call %d", unanswered).isFalse();
			unanswered++;
		}
		assertThat(bucket.isUp()).isFalse();
		assertThat(bucket.tryAcquire(1)).as("on the policy, at once").isFalse();
		// a second later the local bucket is full again (limit 3), and limits this instance alone
		this.localClock.addAndGet(TimeUnit.SECONDS.toNanos(1));
		int granted = 0;
		for (int i = 0; i < 5; i++) {
			if (bucket.tryAcquire(1)) {
				granted++;
			}
		}
		assertThat(granted).as("on the policy, a second later").isEqualTo(3);
	}

	private RedisTokenBucket capped() {
		return RedisTokenBucket.builder()
			.name("mirrored-capped")
			.rate(10, Duration.ofSeconds(1))
			.limit(3)
			.cappedRelease(true)
			.timeout(Duration.ofMillis(50))
			.clock(this.localClock::get)
			.connection(this.connection)
			.build();
	}

	/**
	 * A capped {@code tryAcquire} that Redis does not answer and the local policy lets through is released by
	 * {@code release(n)} like any: before, {@code release} threw "holds no lease" (seen under load, where a
	 * call past its timeout is let through by the policy). Its late grant stays in Redis while the call runs
	 * (Redis counts the call that ran), and goes back with the release.
	 */
	@Test
	void aCappedCallTheLocalPolicyLetThroughIsReleasedByReleaseAndItsLateGrantWithIt() {
		RedisTokenBucket bucket = capped();
		for (int i = 0; i < 3; i++) {
			assertThat(bucket.tryAcquire(1)).as("unanswered call %d, let through by the local policy", i).isTrue();
		}
		for (CompletableFuture<List<Object>> late : this.redis.of(BucketScript.Mode.ACQUIRE)) {
			late.complete(FakeScriptRedis.reply(BucketScript.Reply.GRANTED)); // Redis ran them, late
		}
		assertThat(this.redis.arguments(BucketScript.Mode.REFUND)).as("late grants of calls that run").isEmpty();
		this.localClock.addAndGet(TimeUnit.SECONDS.toNanos(1)); // the rate's tokens are back; the 3 calls still run
		assertThat(bucket.tryAcquire(1)).as("3 of limit 3 in flight here").isFalse();
		bucket.release(1);
		assertThat(this.redis.arguments(BucketScript.Mode.RELEASE)).as("the late grant's lease, released").hasSize(1);
		assertThat(bucket.tryAcquire(1)).as("after a release").isTrue();
	}

	/**
	 * The local policy of a capped bucket starts with the limit less what this instance holds in flight
	 * (contract revision 3): before, it started full (its bucket counted the rate only), and an instance that
	 * held the limit through Redis let the limit more through while Redis did not answer.
	 */
	@Test
	void aCappedBucketsLocalPolicyStartsWithTheLimitLessWhatThisInstanceHoldsInFlight() {
		RedisTokenBucket bucket = capped();
		for (int i = 0; i < 3; i++) {
			CompletableFuture<Void> answer = grant(i);
			assertThat(bucket.tryAcquire(1)).as("call %d, granted by Redis", i).isTrue();
			answer.join();
		}
		this.localClock.addAndGet(TimeUnit.SECONDS.toNanos(1)); // the rate's tokens are back; the 3 calls still run
		assertThat(bucket.tryAcquire(1)).as("unanswered, with 3 of limit 3 in flight here").isFalse();
		Reservation claim = bucket.reserve(1, Duration.ZERO);
		this.localClock.addAndGet(TIMEOUT_NANOS);
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
		boolean refused = false;
		while (!refused && System.nanoTime() - deadline < 0) {
			try {
				claim.poll();
				Thread.onSpinWait();
			}
			catch (RateLimitExceededException ex) {
				refused = true;
			}
		}
		assertThat(refused).as("a reserved call, unanswered, with 3 of limit 3 in flight here").isTrue();
		bucket.release(1);
		assertThat(bucket.tryAcquire(1)).as("unanswered, after a release").isTrue();
		assertThat(bucket.snapshot().inFlight()).as("the policy's view: in flight here").isEqualTo(3.0);
	}

	/**
	 * Redis answering again while calls the local policy let through still run (Redis does not count them):
	 * a grant that would take this instance past its limit is given back, and the call is refused.
	 */
	@Test
	void aGrantOfRedisThatWouldTakeThisInstancePastItsLimitIsGivenBack() {
		RedisTokenBucket bucket = capped();
		for (int i = 0; i < 3; i++) {
			assertThat(bucket.tryAcquire(1)).as("unanswered call %d, let through by the local policy", i).isTrue();
		}
		CompletableFuture<Void> answer = grant(3);
		assertThat(bucket.tryAcquire(1)).as("granted by Redis, with 3 of limit 3 in flight here").isFalse();
		answer.join();
		assertThat(this.redis.arguments(BucketScript.Mode.REFUND)).as("Redis's grant, given back").hasSize(1);
	}

	private RedisTokenBucket keyBucket(String key) {
		return RedisTokenBucket.builder()
			.name("mirrored")
			.rate(10, Duration.ofSeconds(1))
			.limit(3)
			.timeout(Duration.ofMillis(50))
			.clock(this.localClock::get)
			.connection(this.connection)
			.perKey(key)
			.build();
	}

	/**
	 * A key's bucket whose mirror owes tokens is not idle (contract revision 3, "per-key buckets under
	 * attack": no key gets more than its bucket allows, also across a drop): the per-key store drops an idle
	 * object at once, and the object made again for the key starts with a full mirror, so that, were it
	 * idle, a sprayer that pushes the key's object out would give the key its limit again here while Redis
	 * does not answer. Found in review: {@code isIdle()} looked at waiters and capped tokens only.
	 */
	@Test
	void aKeysBucketWhoseMirrorOwesTokensIsNotIdleAndOwesThemWhenMadeAgain() {
		RedisTokenBucket bucket = keyBucket("alice");
		for (int i = 0; i < 3; i++) {
			CompletableFuture<Void> answer = grant(i);
			assertThat(bucket.tryAcquire(1)).isTrue();
			answer.join();
		}
		assertThat(bucket.isIdle()).as("the mirror owes the 3 tokens Redis granted here").isFalse();
		assertThat(bucket.untilLocalFull()).as("full again at 10 per second").isEqualTo(TimeUnit.MILLISECONDS.toNanos(300));
		// forgotten, and made again owing what the mirror owed: the store charges the mirror only, never Redis
		RedisTokenBucket again = keyBucket("alice");
		again.oweLocally(3);
		assertThat(this.redis.of(BucketScript.Mode.ACQUIRE)).as("nothing sent to Redis for the debt").hasSize(3);
		assertThat(again.tryAcquire(1)).as("unanswered: the mirror made again has nothing either").isFalse();
		this.localClock.addAndGet(TimeUnit.MILLISECONDS.toNanos(300));
		assertThat(bucket.untilLocalFull()).isZero();
		assertThat(bucket.isIdle()).as("full again: dropping it loses nothing").isTrue();
	}
}
