package dev.ratelimit.core;

/**
 * A claim on tokens that may not be there yet, for callers that wait without blocking a thread.
 *
 * <p>Obtained from {@link RateLimiter#reserve(long, java.time.Duration)}. The claim already holds its
 * place in the queue; the caller polls it, waiting (on a timer, not a parked thread) for the delay
 * that {@link #poll()} returns, until it returns {@code 0}, then takes the {@link #permit()}. A caller
 * that gives up calls {@link #cancel()}, which gives the tokens back.
 *
 * <pre>{@code
 * void whenReady(Reservation r, Runnable work) {
 *     long delay = r.poll();            // may throw RateLimitExceededException (already cancelled)
 *     if (delay == 0) {
 *         try (Permit p = r.permit()) { work.run(); }
 *     } else {
 *         timer.schedule(() -> whenReady(r, work), delay, TimeUnit.NANOSECONDS);
 *     }
 * }
 * }</pre>
 *
 * <p>Implementations are thread-safe: {@link #cancel()} may race with {@link #poll()} or
 * {@link #permit()} from another thread, and exactly one of them wins.
 */
public interface Reservation {

	/**
	 * Checks whether the tokens are there, moving the time that passed into the limiter.
	 *
	 * @return {@code 0} when the tokens are there (take {@link #permit()}), otherwise the nanoseconds
	 *         to wait before polling again ({@code > 0})
	 * @throws RateLimitExceededException when the tokens can no longer be had within the claim's
	 *         max-wait; the claim is then cancelled and its tokens given back
	 * @throws IllegalStateException when the claim was cancelled or its permit already taken
	 */
	long poll();

	/**
	 * Turns a ready claim into a permit; counted as a granted call, with the time it waited for tokens:
	 * the time since the claim when the limiter did not find its tokens there, {@code 0} when it did
	 * (however late the permit is taken).
	 *
	 * @return the permit
	 * @throws IllegalStateException when the claim is not ready, was cancelled, or its permit was
	 *         already taken
	 */
	Permit permit();

	/**
	 * Gives the claimed tokens back. Does nothing after {@link #permit()} or a previous cancel.
	 *
	 * @return whether this call cancelled the claim
	 */
	boolean cancel();

	/**
	 * Asks to be told when what the claim waits for may have changed earlier than its last
	 * {@link #poll()} said (a caller ahead gave up, tokens were released, the rate changed), so that a
	 * caller polling on a timer can poll again at once instead of waiting out a stale delay. The action
	 * runs on the thread that caused the change and must be quick (schedule a poll, do not poll).
	 *
	 * @param action what to run; replaces an earlier one
	 */
	default void onWake(Runnable action) {
	}

	/**
	 * Whether the limiter has not said yet, as of the last {@link #poll()}, whether the claim is covered: a
	 * remote limiter whose answer has not come (the delay that poll returned is then only when to look
	 * again). A caller that decides over several claims (one refusal names the longest of the refusing
	 * waits) waits for these answers before it decides.
	 *
	 * @return {@code true} while the answer is awaited; {@code false} for a limiter that always knows
	 */
	default boolean awaitingAnswer() {
		return false;
	}
}
