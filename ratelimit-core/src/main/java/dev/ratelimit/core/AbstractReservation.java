package dev.ratelimit.core;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

import org.jspecify.annotations.Nullable;

/**
 * The life of a {@link Reservation}, shared by every limiter: the deadline, the one-way states, the
 * count of callers waiting, the statistics, and the blocking wait built on polling.
 *
 * <p>A limiter subclasses it with what only it knows: how long until its claim is covered
 * ({@link #delayNanos(long)}), how to give the tokens back ({@link #giveBack()}) and what permit a
 * granted claim gets ({@link #grantedPermit()}).
 *
 * <h2>States</h2>
 * {@code PENDING -> READY -> GRANTED}, and {@code PENDING | READY -> CANCELLED}. Every move is one
 * compare-and-set on {@code state}, so a cancel racing a grant has exactly one winner: the tokens are
 * either handed out once or given back once (R1). Tokens once covered stay covered: a limiter never
 * takes back what it made available to an earlier claim, so {@code READY} needs no re-check (R2).
 * A claim counts in {@code waiting} from its creation until it leaves {@code PENDING | READY} (R3).
 * A granted claim records the time from its creation to its permit as its wait when, and only when,
 * it had to wait for tokens: its limiter found it not covered when it was made, or a poll was told to
 * wait for time or for releases. A claim covered when it was made records no wait however late its
 * permit is taken (the caller's own delay is not a wait for tokens), nor does a claim that only waited
 * for a remote limiter's answer that its tokens were there (a round trip is not a wait either) (R4;
 * checked by {@code ReservationWaitTests}, and for Redis by {@code RedisTokenBucketTests}).
 */
public abstract class AbstractReservation implements Reservation {

	/**
	 * What {@link #delayNanos(long)} returns while the claim waits for releases (a capped bucket whose
	 * tokens are all in flight), not for time.
	 */
	protected static final long AWAITING_RELEASE = -1;

	/**
	 * What {@link #delayNanos(long)} returns while the limiter does not know yet (a remote backend has
	 * not answered): the claim is polled again soon, or on {@link #wake()}, and is not refused for its
	 * budget meanwhile (the limiter bounds that wait itself).
	 */
	protected static final long AWAITING_ANSWER = -2;

	/**
	 * The last stretch of a wait that is spun rather than parked, when no more callers wait than there
	 * are processors to spin: parking wakes a thread tens of microseconds late.
	 */
	static final long SPIN_NANOS = 50_000L;

	private static final int SPINNERS = Math.max(1, Runtime.getRuntime().availableProcessors() / 2);

	/** How often a claim that waits for releases looks again: releases carry no wake-up. */
	static final long RELEASE_POLL_NANOS = 1_000_000L;

	private static final int PENDING = 0;

	private static final int READY = 1;

	private static final int GRANTED = 2;

	private static final int CANCELLED = 3;

	private static final VarHandle STATE;

	static {
		try {
			STATE = MethodHandles.lookup().findVarHandle(AbstractReservation.class, "state", int.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	private final @Nullable String limiterName;

	private final long tokens;

	private final LongSupplier clock;

	private final StatsRecorder stats;

	private final AtomicInteger waiting;

	private final long startNanos;

	/** Nanoseconds from {@code startNanos} to the deadline; saturated, never overflows. */
	private final long budgetNanos;

	/** The max-wait was too long for nanoseconds: no limit (the contract). */
	private final boolean unlimited;

	/** The thread parked in {@link #await()}, woken early by {@link #wake()}. */
	private volatile @Nullable Thread sleeper;

	/** What {@link #wake()} runs for a caller that waits without a thread, set by {@link #onWake}. */
	private volatile @Nullable Runnable wakeAction;

	/** Whether the last poll found the limiter's answer not come yet ({@link #AWAITING_ANSWER}). */
	private volatile boolean awaitingAnswer;

	/** Whether the claim had to wait for tokens (R4): set once, never cleared. */
	private volatile boolean waitedForTokens;

	/** Accessed through {@link #STATE}. */
	@SuppressWarnings("unused")
	private volatile int state;

	/**
	 * Opens a claim, counting it as a waiting caller (R3).
	 *
	 * @param limiterName the limiter's name for a refusal, may be {@code null}
	 * @param tokens the tokens claimed
	 * @param maxWait the caller's budget, {@code >= 0}
	 * @param clock the limiter's nanosecond clock
	 * @param startNanos the clock's reading when the claim was made
	 * @param stats where the outcome is recorded
	 * @param waiting the limiter's count of waiting callers
	 */
	protected AbstractReservation(@Nullable String limiterName, long tokens, Duration maxWait, LongSupplier clock,
			long startNanos, StatsRecorder stats, AtomicInteger waiting) {
		this.limiterName = limiterName;
		this.tokens = tokens;
		this.clock = clock;
		this.startNanos = startNanos;
		this.budgetNanos = saturatedNanos(maxWait);
		this.unlimited = tooLongForNanos(maxWait);
		this.stats = stats;
		this.waiting = waiting;
		waiting.incrementAndGet();
	}

	/**
	 * A caller's max-wait in nanoseconds, checked.
	 *
	 * @param maxWait the max-wait
	 * @return its nanoseconds, saturated at {@code Long.MAX_VALUE}
	 * @throws IllegalArgumentException when it is {@code null} or negative
	 */
	public static long budgetNanos(Duration maxWait) {
		if (maxWait == null || maxWait.isNegative()) {
			throw new InvalidArgumentException("maxWait", maxWait, Duration.ZERO, null,
					"maxWait must be a non-negative duration, was " + maxWait);
		}
		return saturatedNanos(maxWait);
	}

	/** Whether a duration is too long for nanoseconds: as a max-wait, no limit. */
	static boolean tooLongForNanos(Duration duration) {
		try {
			duration.toNanos();
			return false;
		}
		catch (ArithmeticException ex) {
			return true;
		}
	}

	/**
	 * Nanoseconds in a duration, saturated at {@link Long#MAX_VALUE} instead of overflowing.
	 *
	 * @param duration a non-negative duration
	 * @return its length in nanoseconds, at most {@code Long.MAX_VALUE}
	 */
	public static long saturatedNanos(Duration duration) {
		try {
			return duration.toNanos();
		}
		catch (ArithmeticException ex) {
			return Long.MAX_VALUE;
		}
	}

	/**
	 * How long until the claim is covered, as of {@code nowNanos}; moves the time that passed into the
	 * limiter.
	 *
	 * @param nowNanos the clock's reading
	 * @return {@code 0} when covered, the nanoseconds still needed ({@code > 0}),
	 *         {@link #AWAITING_RELEASE} or {@link #AWAITING_ANSWER}
	 */
	protected abstract long delayNanos(long nowNanos);

	/**
	 * Gives the claimed tokens back to the limiter; called exactly once, when the claim is cancelled.
	 */
	protected abstract void giveBack();

	/**
	 * The permit of a granted claim; called exactly once.
	 *
	 * @return the permit ({@link Permit#noop()} when nothing is to be released)
	 */
	protected abstract Permit grantedPermit();

	/**
	 * Tells the claim that its limiter did not find it covered when it was made, so that its permit
	 * records the time it waited even when its first {@link #poll()} finds it covered (R4). Called by
	 * the limiter before the claim is published.
	 */
	protected final void notCoveredWhenMade() {
		this.waitedForTokens = true;
	}

	/**
	 * The tokens this claim holds.
	 *
	 * @return the tokens claimed
	 */
	protected final long tokens() {
		return this.tokens;
	}

	/**
	 * {@inheritDoc}
	 *
	 * <p>Max-wait bounds the wait the limiter asks for, not the lateness of the poll: a claim is refused
	 * when its tokens cannot be there within its max-wait (at the claim, or at a poll that finds them
	 * later than that, e.g. releases that did not come); a claim whose tokens are there is granted at the
	 * first poll that sees them, even when that poll itself comes after the deadline (a timer or a thread
	 * that ran late, a JVM pause, a machine out of CPU). Refusing it then would have the caller sleep
	 * through its budget and then fail, which the contract rules out, and a later grant never lets more
	 * through than the rate; the time it waited, late part included, is what its permit records.
	 */
	@Override
	public long poll() {
		int s = (int) STATE.getAcquire(this);
		if (s == READY) {
			return 0;
		}
		if (s != PENDING) {
			throw new IllegalStateException("Reservation already " + ((s == GRANTED) ? "granted" : "cancelled"));
		}
		long now = this.clock.getAsLong();
		long delay = delayNanos(now);
		this.awaitingAnswer = (delay == AWAITING_ANSWER);
		if (delay != 0 && delay != AWAITING_ANSWER && !this.waitedForTokens) {
			this.waitedForTokens = true; // told to wait for time or releases (R4)
		}
		if (delay == 0) {
			STATE.compareAndSet(this, PENDING, READY);
			return pollAgainIfCancelled();
		}
		if (delay == AWAITING_ANSWER) {
			return RELEASE_POLL_NANOS;
		}
		// a max-wait too long for nanoseconds is no limit (the contract: no argument overflows); its budget,
		// saturated and counted down, would refuse a wait (saturated too) that the claim accepted
		long left = this.unlimited ? Long.MAX_VALUE : this.budgetNanos - elapsedSinceStart(now);
		if (delay > 0) {
			if (delay > left) {
				throw refuse(delay);
			}
			return delay;
		}
		if (left <= 0) {
			throw refuseForReleases();
		}
		return Math.min(RELEASE_POLL_NANOS, left);
	}

	private long pollAgainIfCancelled() {
		if ((int) STATE.getAcquire(this) == CANCELLED) {
			throw new IllegalStateException("Reservation already cancelled");
		}
		return 0;
	}

	private long elapsedSinceStart(long now) {
		long elapsed = now - this.startNanos;
		return Math.max(elapsed, 0);
	}

	/**
	 * Refuses a claim that waited its whole budget for tokens in flight to be released, and none came in
	 * time. When they will come is not known (they come back when calls complete): the retry-after is what
	 * it waited, the least the wait would have been (1 ms for a claim that could not wait at all), and the
	 * message says what it waited for (a wait "of 1 ms" read as if the tokens were a millisecond away).
	 */
	private RateLimitExceededException refuseForReleases() {
		return refused(new RateLimitExceededException(this.limiterName, this.tokens,
				Duration.ofNanos(Math.max(this.budgetNanos, RELEASE_POLL_NANOS)),
				RateLimitExceededException.exceeded(this.limiterName, this.tokens) + " waited "
						+ Duration.ofNanos(this.budgetNanos) + " for tokens in flight to be released, and too few came back"));
	}

	private RateLimitExceededException refuse(long neededNanos) {
		return refused(new RateLimitExceededException(this.limiterName, this.tokens, Duration.ofNanos(neededNanos)));
	}

	/** Gives the claim back (counted as rejected once, whoever gives it back first) and returns the refusal. */
	private RateLimitExceededException refused(RateLimitExceededException refusal) {
		if (cancel()) {
			this.stats.recordRejected();
		}
		return refusal;
	}

	@Override
	public Permit permit() {
		if (!STATE.compareAndSet(this, READY, GRANTED)) {
			int s = (int) STATE.getAcquire(this);
			throw new IllegalStateException("Reservation is " + switch (s) {
				case PENDING -> "not ready: poll() until it returns 0";
				case GRANTED -> "already granted";
				default -> "cancelled";
			});
		}
		this.waiting.decrementAndGet();
		this.stats.recordGranted(this.waitedForTokens ? elapsedSinceStart(this.clock.getAsLong()) : 0);
		return grantedPermit();
	}

	/**
	 * Grants a claim that its limiter found covered when it was made: counted as granted without a
	 * wait, as a call that found its tokens there.
	 *
	 * @return the permit
	 * @throws IllegalStateException when the claim was cancelled or granted already
	 */
	protected final Permit grantAtOnce() {
		if (!STATE.compareAndSet(this, PENDING, GRANTED) && !STATE.compareAndSet(this, READY, GRANTED)) {
			throw new IllegalStateException("Reservation already " + (((int) STATE.getAcquire(this) == GRANTED)
					? "granted" : "cancelled"));
		}
		this.waiting.decrementAndGet();
		this.stats.recordGranted(0);
		return grantedPermit();
	}

	@Override
	public boolean cancel() {
		for (;;) {
			int s = (int) STATE.getAcquire(this);
			if (s == GRANTED || s == CANCELLED) {
				return false;
			}
			if (STATE.compareAndSet(this, s, CANCELLED)) {
				this.waiting.decrementAndGet();
				giveBack();
				return true;
			}
		}
	}

	/**
	 * Waits for the claim by parking the thread, then takes its permit: the blocking
	 * {@link RateLimiter#acquire} of every limiter.
	 *
	 * @return the permit
	 * @throws RateLimitExceededException when the claim cannot be covered within its max-wait; the
	 *         tokens are given back
	 * @throws InterruptedException when interrupted; the tokens are given back and the interrupt flag
	 *         stays set
	 */
	public final Permit await() throws InterruptedException {
		this.sleeper = Thread.currentThread();
		try {
			return awaitParked();
		}
		finally {
			this.sleeper = null;
		}
	}

	/**
	 * Tells the claim that what it waits for may have changed (a caller ahead gave up, tokens were
	 * released, the rate changed): a thread parked in {@link #await()} looks again at once, and the
	 * action given to {@link #onWake} runs.
	 */
	protected final void wake() {
		Thread thread = this.sleeper;
		if (thread != null) {
			LockSupport.unpark(thread);
		}
		Runnable action = this.wakeAction;
		if (action != null) {
			action.run();
		}
	}

	@Override
	public void onWake(Runnable action) {
		this.wakeAction = action;
	}

	@Override
	public boolean awaitingAnswer() {
		return this.awaitingAnswer;
	}

	private Permit awaitParked() throws InterruptedException {
		for (;;) {
			if (Thread.currentThread().isInterrupted()) {
				cancel();
				throw new InterruptedException("Interrupted while waiting for " + this.tokens + " tokens"
						+ ((this.limiterName != null) ? " of '" + this.limiterName + "'" : ""));
			}
			long delay = poll();
			if (delay == 0) {
				return permit();
			}
			if (delay > SPIN_NANOS || this.waiting.get() > SPINNERS) {
				// a parked thread wakes tens of microseconds late: wake a little early and spin the rest
				LockSupport.parkNanos(this, (delay > SPIN_NANOS) ? delay - SPIN_NANOS : delay);
			}
			else {
				Thread.onSpinWait();
			}
		}
	}
}
