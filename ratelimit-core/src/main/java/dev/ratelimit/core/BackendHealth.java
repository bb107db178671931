package dev.ratelimit.core;

import java.util.function.Supplier;

/**
 * Implemented by limiters whose state lives outside this JVM (the Redis bucket), so that the meters
 * and the health contributor can show whether their backend answers: {@code ratelimit.backend.up} is
 * 1 while it does, 0 while the bucket applies its failure policy, and {@code ratelimit.backend.calls}
 * times every call by outcome.
 */
public interface BackendHealth {

	/**
	 * Whether the bucket uses its backend (rather than its failure policy).
	 *
	 * @return {@code true} while the backend answers
	 */
	boolean isUp();

	/**
	 * A short description: {@code up}, or {@code down} with the last error.
	 *
	 * @return the health
	 */
	String health();

	/**
	 * Starts a health read without waiting for it: a bucket said down sends its probe now, when one is due.
	 * The read returned waits for that probe (at most the bucket's timeout) and then says the health as
	 * {@link #health()} does. The health contributor starts the read of every bucket before it waits for
	 * any, so that while the backend accepts connections and answers nothing, a health read takes one
	 * timeout, not one per bucket.
	 *
	 * @return the read: {@code get()} says {@code up}, or {@code down} with the last error
	 */
	default Supplier<String> startHealthRead() {
		return this::health;
	}

	/**
	 * Asks to be told of every call to the backend, with its outcome and how long it took.
	 *
	 * @param listener the listener; called on the thread that settles the call, so it must be quick
	 */
	void onCall(CallListener listener);

	/** How a call to the backend ended: the {@code outcome} tag of {@code ratelimit.backend.calls}. */
	enum Outcome {

		/** The backend answered. */
		OK,
		/** No answer within the bucket's timeout. */
		TIMEOUT,
		/** The call failed (not connected, an error reply). */
		ERROR;

		/**
		 * The tag value.
		 *
		 * @return {@code ok}, {@code timeout} or {@code error}
		 */
		public String tag() {
			return name().toLowerCase(java.util.Locale.ROOT);
		}
	}

	/** Told of every call to the backend. */
	@FunctionalInterface
	interface CallListener {

		/**
		 * A call ended.
		 *
		 * @param outcome how
		 * @param nanos how long it took (the timeout, for a call that timed out)
		 */
		void called(Outcome outcome, long nanos);
	}
}
