package dev.ratelimit.core;

/**
 * The checks of a call's {@code n} that every limiter of the core makes, worded once: a claim, a refund or a
 * charge is {@code 0..2^50} ({@link SharedTokenBucket#MAX_COST}); each limiter adds its own upper bound (its
 * limit, what its pools hold) on top. Each refusal is an {@link InvalidArgumentException} naming {@code n}.
 */
final class Amounts {

	private Amounts() {
	}

	/** Tokens claimed, given back or charged: {@code 0..MAX_COST}. */
	static long checked(long n) {
		nonNegative(n);
		atMostMaxCost(n);
		return n;
	}

	/** {@code n >= 0}. */
	static long nonNegative(long n) {
		if (n < 0) {
			throw new InvalidArgumentException("n", n, 0L, null, "n must be >= 0, was " + n);
		}
		return n;
	}

	/** {@code n <= 2^50}, the largest claim (contract revision 3). */
	static void atMostMaxCost(long n) {
		if (n > SharedTokenBucket.MAX_COST) {
			throw new InvalidArgumentException("n", n, 0L, SharedTokenBucket.MAX_COST,
					"n must be at most 2^50 (" + SharedTokenBucket.MAX_COST + "), was " + n);
		}
	}
}
