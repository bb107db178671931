package dev.ratelimit.spring.aop;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.UnaryOperator;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.Reservation;

import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

/**
 * {@code CompletionStage} methods: the caller's thread never waits. The tokens are reserved at once;
 * when they are there already the method runs on the caller's thread, otherwise the starter's timer
 * polls the reservation and the method runs on {@link RateLimitExecutors}' runner once they are there. The tokens are released
 * when the stage the method returned completes; cancelling the returned future before the method ran
 * gives them back, and so does a runner that refuses to run it (the permit is taken on the thread that
 * runs the method, so a call that never starts still holds only a claim).
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
final class AsyncInvocations {

	private AsyncInvocations() {
	}

	static CompletableFuture<Object> invoke(InvocationPlan plan, MethodInvocation invocation,
			RateLimitExecutors executors, @Nullable GrantObserver observer) {
		CompletableFuture<Object> result = new CompletableFuture<>();
		UnaryOperator<Runnable> context = executors.captureContext();
		Object target = (observer != null) ? observer.capture(null) : null;
		// the buckets' levels for the response, once the tokens are there and before the method runs
		Runnable observe = (target == null) ? null : () -> plan.observeGrant(invocation, observer, target);
		Reservation reservation;
		try {
			reservation = plan.reserve(invocation);
		}
		catch (RuntimeException ex) {
			refused(plan, invocation, result, ex);
			return result;
		}
		new Waiting(plan, executors, reservation, invocation, result, context, observe).start();
		return result;
	}

	/**
	 * A refusal (or a bad key): the fallback's stage replaces it when there is one, else it fails the
	 * call's future.
	 */
	private static void refused(InvocationPlan plan, MethodInvocation invocation, CompletableFuture<Object> result,
			RuntimeException ex) {
		if (plan.fallback == null || !(ex instanceof RateLimitExceededException refusal)) {
			result.completeExceptionally(ex);
			return;
		}
		Object stage;
		try {
			stage = plan.fallback.invoke(invocation, refusal);
		}
		catch (Throwable failure) {
			result.completeExceptionally(failure);
			return;
		}
		complete(stage, result, null, plan, invocation);
	}

	/**
	 * Completes the call's future as the returned stage completes, evaluating the completion
	 * attributes and closing the permit first; a {@code null} stage completes it with {@code null}.
	 */
	private static void complete(@Nullable Object stage, CompletableFuture<Object> result, @Nullable Permit permit,
			InvocationPlan plan, MethodInvocation invocation) {
		if (stage == null) {
			if (permit != null) {
				finish(plan, permit, invocation, null, null);
			}
			result.complete(null);
			return;
		}
		((CompletionStage<?>) stage).whenComplete((value, failure) -> {
			Throwable cause = (failure instanceof CompletionException && failure.getCause() != null)
					? failure.getCause() : failure;
			if (permit != null) {
				finish(plan, permit, invocation, value, cause);
			}
			if (cause != null) {
				result.completeExceptionally(cause);
			}
			else {
				result.complete(value);
			}
		});
	}

	/** The call completed: {@code refundIf} and {@code settle}, then the release. */
	private static void finish(InvocationPlan plan, Permit permit, MethodInvocation invocation,
			@Nullable Object value, @Nullable Throwable failure) {
		try {
			plan.completed(permit, invocation, value, failure);
		}
		finally {
			permit.close();
		}
	}

	/**
	 * One call's claim, polled on the timer until its tokens are there: the rounds of polls (a wake-up
	 * starts a new one, at most one queued at a time) and what ends it at shutdown while it waits.
	 */
	private static final class Waiting {

		/** What a call no longer waiting sets, so that a registration that comes after it undoes itself. */
		private static final Runnable STOPPED_WAITING = () -> {
		};

		private final InvocationPlan plan;

		private final RateLimitExecutors executors;

		private final Reservation reservation;

		private final MethodInvocation invocation;

		private final CompletableFuture<Object> result;

		private final UnaryOperator<Runnable> context;

		private final @Nullable Runnable observe;

		private final PollRounds rounds = new PollRounds();

		/**
		 * What ends the call if the application stops while it waits: registered once its first poll finds
		 * it waiting (a call that finds its tokens there costs nothing), held until it stops waiting.
		 */
		private final AtomicReference<@Nullable Runnable> stillWaiting = new AtomicReference<>();

		/** Whether the call's start was given to the runner: once, whatever rounds of polls find it ready. */
		private final AtomicBoolean handedToRunner = new AtomicBoolean();

		Waiting(InvocationPlan plan, RateLimitExecutors executors, Reservation reservation,
				MethodInvocation invocation, CompletableFuture<Object> result, UnaryOperator<Runnable> context,
				@Nullable Runnable observe) {
			this.plan = plan;
			this.executors = executors;
			this.reservation = reservation;
			this.invocation = invocation;
			this.result = result;
			this.context = context;
			this.observe = observe;
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
								"The application is shutting down: " + this.invocation.getMethod().getName()
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
				refused(this.plan, this.invocation, this.result, ex);
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
			Runnable observe = this.observe;
			if (observe != null) {
				try {
					observe.run();
				}
				catch (RuntimeException ex) {
					permit.close();
					this.result.completeExceptionally(ex);
					return;
				}
			}
			run(this.plan, permit, this.invocation, this.result);
		}
	}

	private static void run(InvocationPlan plan, Permit permit, MethodInvocation invocation,
			CompletableFuture<Object> result) {
		Object returned;
		try {
			returned = invocation.proceed();
		}
		catch (Throwable ex) {
			finish(plan, permit, invocation, null, ex);
			result.completeExceptionally(ex);
			return;
		}
		complete(returned, result, permit, plan, invocation);
		if (returned == null) {
			return;
		}
		result.whenComplete((value, failure) -> {
			if (result.isCancelled() && returned instanceof CompletableFuture<?> future) {
				future.cancel(false);
			}
		});
	}
}
