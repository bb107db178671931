package dev.ratelimit.core;

import java.time.Duration;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Striped mode's reservation (S1) and its hold while a caller folds and stripes again (S4), deterministic: a
 * clock that stands still, a bucket that stripes whenever it may ({@code stripeEagerly}), and for S4 a clock
 * reading that blocks the folding caller at the point under test.
 */
class StripedModeTests {

	/**
	 * S1: the stripes' budgets together are at most the tokens there are: however the takes spread over the
	 * stripes, and through folds and stripes again, exactly the bucket's tokens are granted (a reservation of
	 * one token per stripe more would grant {@code COUNT} tokens too many).
	 */
	@Test
	void theStripesShareOutOnlyTheTokensThereAre() {
		int count = Stripes.COUNT;
		long tokens = 3L * count + 2; // not a multiple of the stripes
		SharedTokenBucket bucket = SharedTokenBucket.builder()
			.rate(1, Duration.ofDays(1))
			.limit(tokens)
			.clock(() -> 0L)
			.build();
		int[] next = { 0 };
		bucket.stripeEagerly(() -> next[0]++); // each take on the next stripe
		long granted = 0;
		boolean striped = false;
		for (long i = 0; i < 10 * tokens && bucket.tryAcquire(1); i++) {
			granted++;
			striped |= bucket.isStriped();
		}
		assertThat(striped).as("the bucket striped").isTrue();
		assertThat(granted).as("tokens granted from a bucket of %d", tokens).isEqualTo(tokens);
	}

	/**
	 * S4: a caller that folds and stripes again in one hold of the lock publishes a held state in between, and
	 * a lock-free claim (here a grab) that comes in that moment waits for the lock instead of taking the tail.
	 * The folding caller is stopped at its clock reading just after the fold published the held state; the
	 * grab must then reach the lock and block there (it would end at once on the tail without the hold), and
	 * once both are done the bucket is exact.
	 */
	@Test
	void whileACallerFoldsAndStripesAgainAFastClaimWaitsForIt() throws Exception {
		long limit = 100_000;
		StallingClock clock = new StallingClock(() -> 0L);
		SharedTokenBucket bucket = SharedTokenBucket.builder()
			.rate(1, Duration.ofDays(1))
			.limit(limit)
			.clock(clock)
			.build();
		bucket.stripeEagerly(() -> 0);
		assertThat(bucket.tryAcquire(1)).isTrue();
		assertThat(bucket.isStriped()).isTrue();
		long more = (limit - 1) / bucket.stripes() + 1; // more than a stripe holds: the caller folds
		boolean[] granted = new boolean[1];
		// the first reading at which the bucket is no longer striped: the held state is published
		Thread folder = clock.stall(() -> !bucket.isStriped(), () -> granted[0] = bucket.tryAcquire(more));
		long[] ticket = { Long.MIN_VALUE };
		Thread grabber = new Thread(() -> ticket[0] = bucket.grab(1), "grabber");
		grabber.start();
		assertThat(blockedOrEnded(grabber)).as("the grab during the hold").isEqualTo(Thread.State.BLOCKED);
		clock.release(folder);
		grabber.join(10_000);
		assertThat(grabber.isAlive()).isFalse();
		assertThat(granted[0]).isTrue();
		assertThat(bucket.deficiency(ticket[0])).isZero();
		assertThat(bucket.snapshot().available()).isEqualTo(limit - 1 - more - 1);
	}

	/** Waits (at most 10 s) until {@code thread} blocks on a monitor or ends, and says which. */
	private static Thread.State blockedOrEnded(Thread thread) {
		long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
		Thread.State state = thread.getState();
		while (state != Thread.State.BLOCKED && state != Thread.State.TERMINATED && System.nanoTime() - deadline < 0) {
			Thread.yield();
			state = thread.getState();
		}
		return state;
	}
}
