package dev.ratelimit.core;

import java.time.Duration;

import org.jspecify.annotations.Nullable;

/**
 * A source of permits at a bounded rate: what the limiters in this package, the
 * {@link SharedTokenBucket rover bucket}, the {@link HybridRateLimiter pacer} and the
 * {@link CalendarQuota calendar quota}, offer their callers.
 *
 * <p>Typical use, with the tokens given back when the guarded work completes (which matters only for
 * a bucket with capped release; for the others the permit is a no-op):
 *
 * <pre>{@code
 * try (Permit permit = limiter.acquire(1, Duration.ofMillis(100))) {
 *     writeRow(row);
 * } catch (RateLimitExceededException e) {
 *     // the wait would have been e.getRetryAfter(), more than 100 ms: nothing was taken
 * }
 * }</pre>
 *
 * <p>A caller that does not go ahead never keeps tokens: {@link #acquire} gives them back when it
 * refuses, gives up or is interrupted, and {@link Reservation#cancel()} does the same for callers that
 * wait without blocking a thread. Callers that wait are served in the order in which they asked.
 *
 * <p>Memory consistency effects: actions in a thread before it releases a permit (closes a
 * {@link Permit} of a bucket with capped release) <i>happen-before</i> actions that follow a
 * successful acquisition, in another thread, of the tokens that release made available.
 */
public interface RateLimiter {

	/**
	 * The name given to the builder, carried by {@link RateLimitExceededException#getBucket()}.
	 *
	 * @return the name, or {@code null} for an unnamed limiter
	 */
	@Nullable String name();

	/**
	 * Takes {@code n} tokens if they are there now, without waiting; otherwise takes nothing.
	 *
	 * @param n tokens (for the pacer: operations) to take, {@code >= 0}
	 * @return whether the tokens were taken
	 * @throws IllegalArgumentException if {@code n} is negative or can never be granted
	 */
	boolean tryAcquire(long n);

	/**
	 * Takes one token if it is there now. Same as {@code tryAcquire(1)}.
	 *
	 * @return whether the token was taken
	 */
	default boolean tryAcquire() {
		return tryAcquire(1);
	}

	/**
	 * Takes {@code n} tokens, waiting for them at most {@code maxWait}.
	 *
	 * <p>When the time-based wait needed is longer than {@code maxWait}, throws at once (never sleeps
	 * through the budget and then fails). When the wait depends on releases (a capped bucket whose
	 * tokens are all in flight) it waits up to {@code maxWait} for them and then throws. {@code n == 0}
	 * is granted at once. Waiting parks the thread (friendly to virtual threads).
	 *
	 * @param n tokens (for the pacer: operations) to take, {@code >= 0}
	 * @param maxWait the longest the caller accepts to wait; {@link Duration#ZERO} for no wait at all
	 * @return the permit; close it when the guarded work is done
	 * @throws RateLimitExceededException when the tokens cannot be had within {@code maxWait}; no
	 *         token is kept
	 * @throws InterruptedException when the thread is interrupted while waiting; no token is kept and
	 *         the interrupt flag stays set
	 * @throws IllegalArgumentException if {@code n} is negative or can never be granted, or
	 *         {@code maxWait} is negative
	 */
	Permit acquire(long n, Duration maxWait) throws InterruptedException;

	/**
	 * Claims {@code n} tokens for a caller that waits without blocking a thread (a
	 * {@code CompletableFuture} or a reactive pipeline): the claim takes its place in the queue now,
	 * and the caller polls it until the tokens are there.
	 *
	 * @param n tokens (for the pacer: operations) to take, {@code >= 0}
	 * @param maxWait the longest the caller accepts to wait
	 * @return the claim, to be polled until ready, then turned into a permit, or cancelled
	 * @throws RateLimitExceededException at once when the time-based wait needed is longer than
	 *         {@code maxWait}; nothing is kept
	 * @throws IllegalArgumentException as for {@link #acquire(long, Duration)}
	 */
	Reservation reserve(long n, Duration maxWait);

	/**
	 * Gives back {@code n} tokens that a granted call took, as if it had not taken them: they are
	 * available again at once, first to callers already waiting (who move up in order), never lifting
	 * the limiter above its limit. This is what a call that turns out not to count ({@code refundIf}) or
	 * to cost less than it asked for ({@code settle}) does with what it took, after it was granted.
	 *
	 * <p>With capped release the tokens also leave the flight: they are no longer the call's, so the
	 * bucket may hand them out again at once (a caller that gave up never shrinks the bucket), and the
	 * caller then holds {@code n} fewer: one that releases its tokens itself releases what it took less
	 * what it refunded. A caller that holds a {@link Permit} refunds through it with
	 * {@link #refund(long, Permit)}, and the permit's close then releases only the rest, so a refund
	 * followed by the close never gives the tokens back twice. A waiter that gives up does not refund:
	 * {@link Reservation#cancel()} and {@link #acquire} give its claim back themselves.
	 *
	 * <p>{@code n == 0} does nothing. A refund is not a call: the statistics do not change.
	 *
	 * @param n tokens (for the pacer: operations) given back, {@code >= 0}, at most what the call took
	 *        (more is accepted within the limiter's range and only fills it up to its limit)
	 * @throws IllegalArgumentException naming {@code n} when it is out of range
	 */
	void refund(long n);

	/**
	 * Gives back {@code n} tokens that the call holding {@code permit} took, as {@link #refund(long)} does;
	 * with capped release the tokens leave the flight through the permit: its close releases {@code n}
	 * fewer, and once it is closed (the tokens are released already), or when the permit holds none of
	 * the limiter's tokens ({@link Permit#noop()}, for tokens taken by {@link #charge}), the refund acts on
	 * the rate only. For a limiter without capped release this is {@link #refund(long)}.
	 *
	 * @param n tokens (for the pacer: operations) given back, {@code >= 0}
	 * @param permit the permit of the call the tokens were granted to
	 * @throws IllegalArgumentException naming {@code n} when it is out of range
	 */
	default void refund(long n, Permit permit) {
		refund(n);
	}

	/**
	 * Takes {@code n} more tokens now, never waiting and never refused, even into debt: what a call
	 * that turns out to cost more than it asked for ({@code settle}) owes on top. Callers already
	 * waiting keep their place and their wait; the callers that come after wait for the debt, in order.
	 * A full limiter first wastes its excess, as any take does, so a charge on a full limiter behaves as
	 * a take of {@code n}.
	 *
	 * <p>With capped release this acts on the rate only: nothing more is in flight, and nothing is to be
	 * released for it (the call's permit releases what it was granted).
	 *
	 * <p>{@code n == 0} does nothing. A charge is not a call: the statistics do not change.
	 *
	 * @param n tokens (for the pacer: operations) taken, {@code >= 0}
	 * @throws IllegalArgumentException naming {@code n} when it is out of range, or when it would put
	 *         more in line than the limiter counts exactly (then nothing is taken)
	 */
	void charge(long n);

	/**
	 * A consistent view of the limiter as of now; reading it moves the time that passed into the
	 * limiter, as any call does.
	 *
	 * @return the view
	 */
	RateLimiterSnapshot snapshot();

	/**
	 * Whether the limiter is as a new one would be: full, with nothing in flight, nobody waiting and
	 * nothing owed. Such a limiter can be dropped and made again without any caller seeing the
	 * difference (per-key buckets rely on it).
	 *
	 * @return {@code true} when indistinguishable from a new, full limiter
	 */
	default boolean isIdle() {
		RateLimiterSnapshot s = snapshot();
		return s.available() >= s.limit() && s.deficiency() == 0 && s.waiting() == 0 && s.inFlight() == 0;
	}

	/**
	 * Puts the limiter back to full, as an operator or a test between cases asks (contract revision 3,
	 * {@code DELETE /actuator/ratelimits/{name}}): the tokens of a new limiter are there again (a quota's
	 * count for its period back to zero), what is owed (charges, the debt of callers waiting, a pacer's
	 * backlog) is forgotten, and the callers waiting are woken to claim again from the full limiter, in the
	 * order in which they asked; a claim already covered when the reset comes keeps its tokens. The
	 * counts of granted and rejected calls are kept. Tokens in flight (capped release) stay in flight: the
	 * work they guard still runs, and their release gives them back, never lifting the limiter above its
	 * limit. A claim made before the reset that is given back after it gives nothing back to the rate (the
	 * reset forgot it); a refund of a call granted before the reset is a refund as any other.
	 *
	 * <p>The default throws: a limiter that does not implement it says so rather than pretend.
	 *
	 * @throws UnsupportedOperationException when the limiter cannot be reset
	 */
	default void reset() {
		throw new UnsupportedOperationException(getClass().getName() + (name() != null ? " '" + name() + "'" : "")
				+ " cannot be reset");
	}

	/**
	 * Changes the rate at run time. Time that passed up to now is accounted for under the old rate
	 * first; callers already waiting keep their place.
	 *
	 * @param tokens tokens (for the pacer: operations) per {@code period}, {@code > 0}
	 * @param period the period, {@code > 0}
	 * @throws IllegalArgumentException naming the argument when it is out of range; always for a
	 *         {@link CalendarQuota}, which has no rate
	 */
	void updateRate(long tokens, Duration period);

	/**
	 * Changes the limit at run time (the most tokens banked; for the pacer, its active pool in
	 * operations).
	 *
	 * @param limit the new limit, {@code >= 1}
	 * @throws IllegalArgumentException naming the argument when it is out of range
	 */
	void updateLimit(long limit);
}
