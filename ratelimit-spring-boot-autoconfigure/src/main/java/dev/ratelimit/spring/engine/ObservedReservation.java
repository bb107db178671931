package dev.ratelimit.spring.engine;

import java.util.concurrent.CancellationException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.WaitObserver;
import org.jspecify.annotations.Nullable;

/**
 * A claim whose wait is observed ({@code ratelimit.acquire}): the observation starts at the first poll
 * that says the call must wait (or at a refusal, which is observed however soon it comes) and ends once,
 * when the claim is granted, refused or given up (a refusal then). A claim covered at its first poll is
 * never observed: a call granted at once costs nothing more. Made only when an observer is there.
 */
final class ObservedReservation implements Reservation {

	private final Reservation reservation;

	private final WaitObserver observer;

	private final String bucket;

	/** Set by the first poll that says wait; polls come one at a time (a round at a time, or one thread). */
	private volatile WaitObserver.@Nullable Waiting waiting;

	private final AtomicBoolean ended = new AtomicBoolean();

	ObservedReservation(Reservation reservation, WaitObserver observer, String bucket) {
		this.reservation = reservation;
		this.observer = observer;
		this.bucket = bucket;
	}

	/**
	 * Observes a refusal at the claim: an observation that starts and ends at once.
	 *
	 * @param observer the observer
	 * @param bucket the call's bucket(s)
	 * @param refusal the refusal
	 */
	static void refusedAtOnce(WaitObserver observer, String bucket, RateLimitExceededException refusal) {
		observer.started(bucket).ended(WaitObserver.REJECTED, refusal.getBucket(), refusal);
	}

	@Override
	public long poll() {
		long delay;
		try {
			delay = this.reservation.poll();
		}
		catch (RateLimitExceededException ex) {
			end(WaitObserver.REJECTED, ex.getBucket(), ex, true);
			throw ex;
		}
		if (delay > 0 && this.waiting == null) {
			this.waiting = this.observer.started(this.bucket);
		}
		return delay;
	}

	@Override
	public Permit permit() {
		Permit permit = this.reservation.permit();
		end(WaitObserver.GRANTED, null, null, false);
		return permit;
	}

	@Override
	public boolean cancel() {
		boolean cancelled = this.reservation.cancel();
		if (cancelled) {
			end(WaitObserver.REJECTED, null, new CancellationException("The caller gave up waiting"), false);
		}
		return cancelled;
	}

	@Override
	public void onWake(Runnable action) {
		this.reservation.onWake(action);
	}

	@Override
	public boolean awaitingAnswer() {
		return this.reservation.awaitingAnswer();
	}

	/**
	 * Ends the observation once: one that started waiting, or a refusal (observed even when it comes at
	 * the first poll).
	 */
	private void end(String outcome, @Nullable String refusing, @Nullable Throwable failure, boolean refusal) {
		WaitObserver.Waiting waiting = this.waiting;
		if (waiting == null && !refusal) {
			return; // granted or given up at once: nothing waited
		}
		if (!this.ended.compareAndSet(false, true)) {
			return;
		}
		((waiting != null) ? waiting : this.observer.started(this.bucket)).ended(outcome, refusing, failure);
	}

	/**
	 * Parks the calling thread until a claim is covered (woken early when it may have moved up), then
	 * takes its permit: the blocking path of a claim.
	 *
	 * @param reservation the claim
	 * @param what names the claim, for the interrupt's message
	 * @return the permit
	 * @throws RateLimitExceededException when it cannot be covered within its max-wait; nothing is kept
	 * @throws InterruptedException when interrupted; the claim is given back, the flag stays set
	 */
	static Permit await(Reservation reservation, Object what) throws InterruptedException {
		Thread thread = Thread.currentThread();
		reservation.onWake(() -> LockSupport.unpark(thread));
		for (;;) {
			if (thread.isInterrupted()) {
				reservation.cancel();
				throw new InterruptedException("Interrupted while waiting for the tokens of " + what);
			}
			long delay = reservation.poll();
			if (delay == 0) {
				return reservation.permit();
			}
			LockSupport.parkNanos(reservation, delay);
		}
	}
}
