package dev.ratelimit.core;

import java.lang.management.ManagementFactory;
import java.time.Duration;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The try path allocates nothing, in rover mode and in striped mode (S6: folding and striping again reuse
 * the states they publish), counted by the JVM for the calling thread over a million calls after a warm-up
 * (which grows the stripes' logs to their largest). A state made per fold, as before S6, is about 60 bytes,
 * and a single-threaded striped bucket folds once per 2,048 grants: some 30 KB per million calls.
 */
class BucketAllocationTests {

	private static final int WARM_UP = 200_000;

	private static final int CALLS = 1_000_000;

	/** Far below one state per fold (see the class notes), above what reading the counter may cost. */
	private static final long MOST_BYTES = 2_048;

	@Test
	void aPermissiveTryAcquireAllocatesNothing() {
		long[] clock = { 0 };
		SharedTokenBucket bucket = bucket(clock, 1);
		assertThat(allocatedBy(bucket, clock, 1)).as("bytes allocated by %,d calls in rover mode", CALLS)
			.isLessThan(MOST_BYTES);
		assertThat(bucket.isStriped()).isFalse();
	}

	@Test
	void aSaturatedTryAcquireAllocatesNothing() {
		long[] clock = { 0 };
		SharedTokenBucket bucket = bucket(clock, 10); // a token per 10 calls: nine in ten refused
		assertThat(allocatedBy(bucket, clock, 1)).as("bytes allocated by %,d calls, most refused", CALLS)
			.isLessThan(MOST_BYTES);
	}

	@Test
	void aStripedTryAcquireAllocatesNothingThoughItFoldsAndStripesAgain() {
		long[] clock = { 0 };
		SharedTokenBucket bucket = bucket(clock, 1);
		bucket.stripeEagerly(() -> 0);
		long allocated = allocatedBy(bucket, clock, 1);
		assertThat(bucket.isStriped()).as("striped after the calls").isTrue();
		assertThat(allocated).as("bytes allocated by %,d calls in striped mode (about %,d folds)", CALLS,
				CALLS / Stripes.MAX_LOG)
			.isLessThan(MOST_BYTES);
	}

	/** A bucket of a token per {@code nanosPerToken} ns on the clock {@code clock[0]}, a million tokens deep. */
	private static SharedTokenBucket bucket(long[] clock, long nanosPerToken) {
		return SharedTokenBucket.builder()
			.rate(1, Duration.ofNanos(nanosPerToken))
			.limit(1_000_000)
			.clock(() -> clock[0])
			.build();
	}

	/** Bytes this thread allocates while it makes {@link #CALLS} calls, the clock moving {@code step} ns each. */
	private static long allocatedBy(SharedTokenBucket bucket, long[] clock, long step) {
		java.lang.management.ThreadMXBean threads = ManagementFactory.getThreadMXBean();
		assumeTrue(threads instanceof com.sun.management.ThreadMXBean, "the JVM counts allocated bytes");
		com.sun.management.ThreadMXBean counter = (com.sun.management.ThreadMXBean) threads;
		assumeTrue(counter.isThreadAllocatedMemorySupported() && counter.isThreadAllocatedMemoryEnabled(),
				"the JVM counts allocated bytes");
		long granted = calls(bucket, clock, step, WARM_UP);
		long before = counter.getCurrentThreadAllocatedBytes();
		granted += calls(bucket, clock, step, CALLS);
		long after = counter.getCurrentThreadAllocatedBytes();
		assertThat(granted).as("calls granted").isPositive();
		return after - before;
	}

	private static long calls(SharedTokenBucket bucket, long[] clock, long step, int calls) {
		long granted = 0;
		for (int i = 0; i < calls; i++) {
			clock[0] += step;
			if (bucket.tryAcquire(1)) {
				granted++;
			}
		}
		return granted;
	}
}
