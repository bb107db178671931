package dev.ratelimit.core;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code claimOnce} reads the state, then the clock, then the tail. A caller that read the state, and whose
 * clock reading comes after a rate change completed (here: the clock blocks that one reading until the test has
 * changed the rate to a slower one and moved the clock), computes the head at that later time with the old,
 * faster rate: it finds the bucket full, moves the tail to {@code head - limit + n} (I2, the excess wasted),
 * sees the new state, re-checks under the lock, finds its claim not covered and gives back its {@code n}
 * tokens only: the tail stays where the stale head put it, beyond the real head, and the tokens of that jump
 * are lost (I4). Deterministic: the race is forced by a clock that blocks one reading.
 */
class StaleStateFastClaimTests {

	@Test
	void aClaimThatReadTheStateBeforeASlowerRateLosesNoTokens() throws Exception {
		AtomicLong time = new AtomicLong(0);
		AtomicBoolean armed = new AtomicBoolean();
		CountDownLatch blocked = new CountDownLatch(1);
		CountDownLatch release = new CountDownLatch(1);
		LongSupplier clock = () -> {
			if (Thread.currentThread().getName().equals("stale") && armed.compareAndSet(true, false)) {
				blocked.countDown();
				try {
					release.await(10, TimeUnit.SECONDS);
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
				}
			}
			return time.get();
		};
		SharedTokenBucket bucket = SharedTokenBucket.builder()
			.rate(1, Duration.ofMillis(1))
			.limit(10)
			.initial(0)
			.clock(clock)
			.build();
		boolean[] granted = new boolean[1];
		Thread stale = new Thread(() -> granted[0] = bucket.tryAcquire(1), "stale");
		armed.set(true);
		stale.start();
		assertThat(blocked.await(10, TimeUnit.SECONDS)).isTrue(); // read the state, blocked in its clock reading
		bucket.updateRate(Rate.of(1, Duration.ofSeconds(1))); // at 0: head 0, tail 0, 1 token a second from now
		time.set(Duration.ofMillis(20).toNanos()); // old rate: 20 tokens (full); new rate: none
		release.countDown();
		stale.join(10_000);
		assertThat(granted[0]).as("no token at 20 ms at 1 a second").isFalse();
		time.set(Duration.ofMillis(20).toNanos() + Duration.ofSeconds(10).toNanos());
		// at 1 a second from 0, 10 tokens are made by 10.02 s, and nothing was taken: the bucket is full
		assertThat(bucket.snapshot().available()).isEqualTo(10.0);
		assertThat(bucket.tryAcquire(10)).isTrue();
	}

	/**
	 * The same stale read before a lower limit: the caller judges the level against the old limit (50 tokens,
	 * not full at 100), takes 40 on the lock-free path, sees the new state, and the re-check under the lock asks
	 * only whether its ticket is covered by the head (it is), not whether the bucket, capped at its new limit of
	 * 10 (I1), held 40: a call that began before {@code updateLimit(10)} and read the clock after it returned is
	 * granted 40 tokens from a bucket that holds at most 10.
	 */
	@Test
	void aClaimThatReadTheStateBeforeALowerLimitIsNotGrantedMoreThanTheLimit() throws Exception {
		AtomicBoolean armed = new AtomicBoolean();
		CountDownLatch blocked = new CountDownLatch(1);
		CountDownLatch release = new CountDownLatch(1);
		LongSupplier clock = () -> {
			if (Thread.currentThread().getName().equals("stale") && armed.compareAndSet(true, false)) {
				blocked.countDown();
				try {
					release.await(10, TimeUnit.SECONDS);
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
				}
			}
			return 0L; // standing still
		};
		SharedTokenBucket bucket = SharedTokenBucket.builder()
			.rate(1, Duration.ofDays(1))
			.limit(100)
			.initial(50)
			.clock(clock)
			.build();
		boolean[] granted = new boolean[1];
		Thread stale = new Thread(() -> granted[0] = bucket.tryAcquire(40), "stale");
		armed.set(true);
		stale.start();
		assertThat(blocked.await(10, TimeUnit.SECONDS)).isTrue();
		bucket.updateLimit(10); // the bucket now holds at most 10
		release.countDown();
		stale.join(10_000);
		assertThat(granted[0]).as("40 tokens granted from a bucket whose limit is 10").isFalse();
	}
}
