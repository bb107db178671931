package dev.ratelimit.spring.aop;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

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
 * gives them back.
 */
final class AsyncInvocations {

	private AsyncInvocations() {
	}

	static CompletableFuture<Object> invoke(InvocationPlan plan, MethodInvocation invocation,
			RateLimitExecutors executors) {
		CompletableFuture<Object> result = new CompletableFuture<>();
		Reservation reservation;
		try {
			reservation = plan.reserve(invocation);
		}
		catch (RuntimeException ex) {
			refused(plan, invocation, result, ex);
			return result;
		}
		result.whenComplete((value, failure) -> {
			if (result.isCancelled()) {
				reservation.cancel();
			}
		});
		// a caller ahead that gives up (or a release, a retune) wakes the reservation: poll again at once
		// instead of waiting out a stale delay; polls scheduled before the wake-up then do nothing
		AtomicLong round = new AtomicLong();
		reservation.onWake(() -> {
			long next = round.incrementAndGet();
			executors.timer().execute(() -> poll(plan, executors, reservation, invocation, result, false, round, next));
		});
		poll(plan, executors, reservation, invocation, result, true, round, 0);
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
		complete(stage, result, null);
	}

	/**
	 * Completes the call's future as the returned stage completes, closing the permit first; a
	 * {@code null} stage completes it with {@code null}.
	 */
	private static void complete(@Nullable Object stage, CompletableFuture<Object> result, @Nullable Permit permit) {
		if (stage == null) {
			if (permit != null) {
				permit.close();
			}
			result.complete(null);
			return;
		}
		((CompletionStage<?>) stage).whenComplete((value, failure) -> {
			if (permit != null) {
				permit.close();
			}
			if (failure != null) {
				result.completeExceptionally(
						(failure instanceof CompletionException && failure.getCause() != null) ? failure.getCause()
								: failure);
			}
			else {
				result.complete(value);
			}
		});
	}

	private static void poll(InvocationPlan plan, RateLimitExecutors executors, Reservation reservation,
			MethodInvocation invocation, CompletableFuture<Object> result, boolean callerThread, AtomicLong round,
			long mine) {
		if (round.get() != mine) {
			return; // a wake-up started a newer round of polls
		}
		if (result.isDone()) {
			reservation.cancel();
			return;
		}
		long delay;
		try {
			delay = reservation.poll();
		}
		catch (IllegalStateException ex) {
			return; // granted by another round of polls (a wake-up raced it), or cancelled: handled there
		}
		catch (RuntimeException ex) {
			refused(plan, invocation, result, ex);
			return;
		}
		if (delay > 0) {
			executors.timer()
				.schedule(() -> poll(plan, executors, reservation, invocation, result, false, round, mine), delay,
						TimeUnit.NANOSECONDS);
			return;
		}
		Permit permit;
		try {
			permit = reservation.permit();
		}
		catch (IllegalStateException ex) {
			return; // cancelled meanwhile: the future is done
		}
		if (callerThread) {
			run(permit, invocation, result);
		}
		else {
			try {
				executors.runner().execute(() -> run(permit, invocation, result));
			}
			catch (RuntimeException ex) {
				// the executor refused (the application is shutting down): nothing ran, the tokens go back
				permit.close();
				result.completeExceptionally(ex);
			}
		}
	}

	private static void run(Permit permit, MethodInvocation invocation, CompletableFuture<Object> result) {
		Object returned;
		try {
			returned = invocation.proceed();
		}
		catch (Throwable ex) {
			permit.close();
			result.completeExceptionally(ex);
			return;
		}
		complete(returned, result, permit);
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
