package dev.ratelimit.core;

import java.time.Duration;

/**
 * Buckets for the striped-mode races: a clock that stands still, eager striping, and each actor on the
 * stripe it names.
 */
final class StripedBuckets {

	/** The stripe the calling actor takes from. */
	private static final ThreadLocal<Integer> STRIPE = ThreadLocal.withInitial(() -> 0);

	private StripedBuckets() {
	}

	/**
	 * A bucket of {@code stripes + extra + 1} tokens, striped after one token was taken: each stripe holds
	 * one token, and {@code extra} more are in the bucket, outside the stripes.
	 */
	static SharedTokenBucket oneTokenPerStripe(long extra) {
		int stripes = Stripes.defaultCount();
		SharedTokenBucket bucket = SharedTokenBucket.builder()
			.rate(1, Duration.ofDays(1))
			.limit(stripes + extra + 1)
			.clock(() -> 0L)
			.build();
		bucket.stripeEagerly(STRIPE::get);
		on(0);
		if (!bucket.tryAcquire(1) || !bucket.isStriped()) {
			throw new IllegalStateException("the bucket did not stripe");
		}
		return bucket;
	}

	/** The calling actor takes from stripe {@code stripe} from now on. */
	static void on(int stripe) {
		STRIPE.set(stripe);
	}
}
