package dev.ratelimit.core;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * I6's read order on the lock-free path: the clock, the tail, then the state. A caller whose clock reading
 * stalls while a rate or limit change completes must judge its claim on the state in force after the change.
 * {@code claimOnce} once read the state before the clock (found by an adversarial review): with a slower rate
 * it computed the head at the later time with the old, faster rate, found the bucket full, moved the tail to
 * {@code head - limit + n} beyond the real head, and the re-check under the lock gave back only its {@code n}:
 * the tokens of that jump were lost (I4); with a lower limit it took 40 tokens from a bucket whose limit was
 * already 10 (I1). Deterministic: the race is forced by a clock that blocks one reading of the caller's.
 */
class StaleStateFastClaimTests {

	@Test
	void aClaimThatReadTheStateBeforeASlowerRateLosesNoTokens() throws Exception {
		AtomicLong time = new AtomicLong(0);
		StallingClock clock = new StallingClock(time::get);
		SharedTokenBucket bucket = SharedTokenBucket.builder()
			.rate(1, Duration.ofMillis(1))
			.limit(10)
			.initial(0)
			.clock(clock)
			.build();
		boolean[] granted = new boolean[1];
		Thread stale = clock.stall(() -> granted[0] = bucket.tryAcquire(1));
		bucket.updateRate(Rate.of(1, Duration.ofSeconds(1))); // at 0: head 0, tail 0, 1 token a second from now
		time.set(Duration.ofMillis(20).toNanos()); // old rate: 20 tokens (full); new rate: none
		clock.release(stale);
		assertThat(granted[0]).as("no token at 20 ms at 1 a second").isFalse();
		time.set(Duration.ofMillis(20).toNanos() + Duration.ofSeconds(10).toNanos());
		// at 1 a second from 0, 10 tokens are made by 10.02 s, and nothing was taken: the bucket is full
		assertThat(bucket.snapshot().available()).isEqualTo(10.0);
		assertThat(bucket.tryAcquire(10)).isTrue();
	}

	/**
	 * The same stall before a lower limit: judged against the old limit (50 tokens, not full at 100), a claim
	 * of 40 would be granted from a bucket that holds at most 10 once {@code updateLimit(10)} has returned.
	 */
	@Test
	void aClaimThatReadTheStateBeforeALowerLimitIsNotGrantedMoreThanTheLimit() throws Exception {
		StallingClock clock = new StallingClock(() -> 0L); // standing still
		SharedTokenBucket bucket = SharedTokenBucket.builder()
			.rate(1, Duration.ofDays(1))
			.limit(100)
			.initial(50)
			.clock(clock)
			.build();
		boolean[] granted = new boolean[1];
		Thread stale = clock.stall(() -> granted[0] = bucket.tryAcquire(40));
		bucket.updateLimit(10); // the bucket now holds at most 10
		clock.release(stale);
		assertThat(granted[0]).as("40 tokens granted from a bucket whose limit is 10").isFalse();
	}
}
