package dev.ratelimit.core;

import java.time.Duration;
import java.util.function.IntSupplier;

/**
 * Buckets in striped mode for the jcstress tests of this package (the hooks are package-private): a clock
 * that stands still, every stripe opened with the same budget, and each actor on the stripe it names.
 */
final class StripedBuckets {

	private static final ThreadLocal<int[]> STRIPE = ThreadLocal.withInitial(() -> new int[1]);

	private static final IntSupplier CHOOSER = () -> STRIPE.get()[0];

	/** The number of stripes (machine-dependent: two per processor, a power of two). */
	static final int COUNT = SharedTokenBucket.builder().rate(1, Duration.ofDays(1)).limit(1).clock(() -> 0L).build()
		.stripes();

	private StripedBuckets() {
	}

	/** The calling thread's covered claims use stripe {@code stripe} from now on. */
	static void on(int stripe) {
		STRIPE.get()[0] = stripe;
	}

	/**
	 * A bucket of the given limit whose clock stands still (1 token a day), striped: after it, each stripe
	 * holds {@code perStripe} tokens and nothing is left in the bucket outside them, so it holds exactly
	 * {@code COUNT * perStripe} tokens.
	 */
	static SharedTokenBucket striped(long perStripe, long limit) {
		long tokens = COUNT * perStripe;
		if (limit < tokens + 1) {
			throw new IllegalArgumentException("limit " + limit + " below " + (tokens + 1));
		}
		SharedTokenBucket bucket = SharedTokenBucket.builder()
			.rate(1, Duration.ofDays(1))
			.limit(limit)
			.initial(tokens + 1)
			.clock(() -> 0L)
			.build();
		bucket.stripeEagerly(CHOOSER);
		on(0);
		if (!bucket.tryAcquire(1) || !bucket.isStriped()) {
			throw new IllegalStateException("the bucket did not stripe");
		}
		return bucket;
	}
}
