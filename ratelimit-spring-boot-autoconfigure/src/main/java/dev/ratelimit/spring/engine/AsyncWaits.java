package dev.ratelimit.spring.engine;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.Reservation;
import org.jspecify.annotations.Nullable;

/**
 * Waits for a claim without a thread, for calls that complete a {@code CompletableFuture}: the claim is
 * polled at once on the caller's thread; when its tokens are there the call goes ahead on that thread,
 * otherwise the starter's timer ({@link RateLimitExecutors#timer()}) polls it and the call goes ahead on
 * the runner ({@link RateLimitExecutors#runner()}) once they are there. The permit is taken on the thread
 * that goes ahead, so a call that never starts (its future cancelled, a runner that refuses it, the
 * application shutting down) still holds only a claim, which is given back whole.
 *
 * <p>The timer is one thread for every waiting call, so it does as little as it can: a claim's wake-ups
 * are coalesced, at most one poll round per claim queued on it at a time ({@link PollRounds}).
 *
 * <p>Max-wait bounds the wait the limiter asks for: a claim is accepted only when its tokens are due
 * within it (else it is refused at once), and it is granted at the first poll that finds them there.
 * A poll that runs late (a timer or a JVM held up, a machine out of CPU) still grants: refusing then
 * would make the caller sleep through its budget and then fail, which the contract rules out, and a
 * later grant never lets more through than the rate. {@code ratelimit.wait} records the real wait, late
 * part included, so a late timer shows there.
 */
public final class AsyncWaits {

	private AsyncWaits() {
	}

	/**
	 * Waits for a claim, then lets the call go ahead.
	 *
	 * @param reservation the call's claim
	 * @param executors the timer that polls and the runner that goes ahead after a wait
	 * @param result the call's future: when it completes first (cancelled), the claim is given back
	 * @param context wraps what goes ahead on the runner (the caller's context)
	 * @param granted the call going ahead with its permit (it closes the permit when the call completes)
	 * @param refused a refusal (or another failure of a poll): the claim kept nothing
	 * @param what names the call, for the failure of a call the application's shutdown ends
	 */
	public static void await(Reservation reservation, RateLimitExecutors executors, CompletableFuture<?> result,
			UnaryOperator<Runnable> context, Consumer<Permit> granted, Consumer<RuntimeException> refused,
			Supplier<String> what) {
		new Waiting(executors, reservation, result, context, granted, refused, what).start();
	}

	/**
	 * One call's claim, polled on the timer until its tokens are there: the rounds of polls (a wake-up
	 * starts a new one, at most one queued at a time) and what ends it at shutdown while it waits.
	 */
	private static final class Waiting {

		/** What a call no longer waiting sets, so that a registration that comes after it undoes itself. */
		private static final Runnable STOPPED_WAITING = () -> {
		};

		private final RateLimitExecutors executors;

		private final Reservation reservation;

		private final CompletableFuture<?> result;

		private final UnaryOperator<Runnable> context;

		private final Consumer<Permit> granted;

		private final Consumer<RuntimeException> refused;

		private final Supplier<String> what;

		private final PollRounds rounds = new PollRounds();

		/**
		 * What ends the call if the application stops while it waits: registered once its first poll finds
		 * it waiting (a call that finds its tokens there costs nothing), held until it stops waiting.
		 */
		private final AtomicReference<@Nullable Runnable> stillWaiting = new AtomicReference<>();

		/** Whether the call's start was given to the runner: once, whatever rounds of polls find it ready. */
		private final AtomicBoolean handedToRunner = new AtomicBoolean();

		Waiting(RateLimitExecutors executors, Reservation reservation, CompletableFuture<?> result,
				UnaryOperator<Runnable> context, Consumer<Permit> granted, Consumer<RuntimeException> refused,
				Supplier<String> what) {
			this.executors = executors;
			this.reservation = reservation;
			this.result = result;
			this.context = context;
			this.granted = granted;
			this.refused = refused;
			this.what = what;
		}

		void start() {
			this.result.whenComplete((value, failure) -> {
				stopsWaiting();
				if (this.result.isCancelled()) {
					this.reservation.cancel();
				}
			});
			// a caller ahead that gives up (or a release, a retune) wakes the reservation: poll again at once
			// instead of waiting out a stale delay. While a wake-up's round has not started, later wake-ups add
			// nothing: it polls after them (see the class notes)
			this.reservation.onWake(this::wake);
			if (poll(true, 0)) {
				// the application stops while the call waits: nobody polls its claim any more, so it ends now
				Runnable deregister = this.executors.whenClosed(() -> {
					if (this.reservation.cancel()) {
						this.result.completeExceptionally(new RejectedExecutionException(
								"The application is shutting down: " + this.what.get()
										+ " was waiting for its tokens and did not run"));
					}
				});
				if (!this.stillWaiting.compareAndSet(null, deregister)) {
					deregister.run(); // it stopped waiting meanwhile
				}
			}
		}

		private void wake() {
			this.rounds.wake((task) -> {
				try {
					this.executors.timer().execute(task);
				}
				catch (RejectedExecutionException ex) {
					// the timer has stopped: the application is shutting down, which ends this call
				}
			}, (round) -> poll(false, round));
		}

		/** The call no longer waits for its tokens (granted, refused or done): shutdown need not end it. */
		private void stopsWaiting() {
			Runnable deregister = this.stillWaiting.getAndSet(STOPPED_WAITING);
			if (deregister != null) {
				deregister.run();
			}
		}

		/**
		 * Polls the call's claim: runs the call when its tokens are there, else polls again later.
		 *
		 * @param callerThread whether this is the caller's own first poll (the call then runs on its thread)
		 * @param mine the round of polls this one belongs to
		 * @return whether the claim waits (a later poll is scheduled)
		 */
		private boolean poll(boolean callerThread, long mine) {
			if (!this.rounds.inForce(mine)) {
				return false; // a wake-up started a newer round of polls
			}
			if (this.result.isDone()) {
				this.reservation.cancel();
				return false;
			}
			long delay;
			try {
				delay = this.reservation.poll();
			}
			catch (IllegalStateException ex) {
				return false; // granted by another round of polls (a wake-up raced it), or cancelled: handled there
			}
			catch (RuntimeException ex) {
				this.refused.accept(ex);
				return false;
			}
			if (delay > 0) {
				try {
					this.executors.timer().schedule(() -> {
						poll(false, mine);
					}, delay, TimeUnit.NANOSECONDS);
					return true;
				}
				catch (RejectedExecutionException ex) {
					// the timer has stopped (the application is shutting down): give the tokens back, fail the call
					if (this.reservation.cancel()) {
						this.result.completeExceptionally(ex);
					}
				}
				return false;
			}
			if (callerThread) {
				runGranted();
			}
			else {
				if (!this.handedToRunner.compareAndSet(false, true)) {
					// a wake-up's round found the claim ready again while its start waits on the runner: one
					// start is enough (a second one refused by a full queue must not cancel the first)
					return false;
				}
				stopsWaiting();
				try {
					this.executors.runner().execute(this.context.apply(this::runGranted));
				}
				catch (RuntimeException ex) {
					// the executor refused (the application is shutting down): the call did not start, so its
					// claim is given back whole, the rate's tokens with the rest, as a cancel before it ran
					if (this.reservation.cancel()) {
						this.result.completeExceptionally(ex);
					}
				}
			}
			return false;
		}

		/**
		 * Runs the call whose tokens are there: takes the permit on the thread that runs the call, so that a
		 * call the runner never starts still has its claim, which a cancel or a refusal gives back whole.
		 */
		private void runGranted() {
			Permit permit;
			try {
				permit = this.reservation.permit();
			}
			catch (IllegalStateException ex) {
				return; // cancelled meanwhile: the future is done
			}
			this.granted.accept(permit);
		}
	}
}
