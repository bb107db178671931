package dev.ratelimit.core;

import org.jspecify.annotations.Nullable;

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

	/**
	 * What every limiter's blocking {@code acquire} does first, once {@code n} is checked: refuses to start
	 * when the thread is interrupted, and grants a claim of nothing at once (counted as granted).
	 *
	 * @param n the checked claim
	 * @param stats where the limiter counts its calls
	 * @param what how {@code n} is counted, for the message: {@code "tokens"} or {@code "operations"}
	 * @param name the limiter's name, or {@code null}
	 * @return {@code true} when the claim is of nothing and granted
	 * @throws InterruptedException when the thread is interrupted; nothing is claimed
	 */
	static boolean grantedBeforeWaiting(long n, StatsRecorder stats, String what, @Nullable String name)
			throws InterruptedException {
		if (Thread.currentThread().isInterrupted()) {
			throw new InterruptedException("Interrupted before acquiring " + n + " " + what
					+ ((name != null) ? " '" + name + "'" : ""));
		}
		return grantedAtOnce(n, stats);
	}

	/** A claim of nothing: granted at once and counted, whatever the limiter holds. */
	static boolean grantedAtOnce(long n, StatsRecorder stats) {
		if (n == 0) {
			stats.recordGranted(0);
			return true;
		}
		return false;
	}

	/** Counts a call that did not wait as granted or refused, and says which. */
	static boolean counted(boolean granted, StatsRecorder stats) {
		if (granted) {
			stats.recordGranted(0);
		}
		else {
			stats.recordRejected();
		}
		return granted;
	}

	/** {@code n <= 2^50}, the largest claim (contract revision 3). */
	static void atMostMaxCost(long n) {
		if (n > SharedTokenBucket.MAX_COST) {
			throw new InvalidArgumentException("n", n, 0L, SharedTokenBucket.MAX_COST,
					"n must be at most 2^50 (" + SharedTokenBucket.MAX_COST + "), was " + n);
		}
	}
}
