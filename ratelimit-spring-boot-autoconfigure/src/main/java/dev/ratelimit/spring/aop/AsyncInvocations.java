package dev.ratelimit.spring.aop;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.function.UnaryOperator;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.engine.AsyncWaits;
import dev.ratelimit.spring.engine.GrantObserver;
import dev.ratelimit.spring.engine.RateLimitExecutors;

import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

/**
 * {@code CompletionStage} methods: the caller's thread never waits. The tokens are reserved at once
 * and waited for by the engine ({@link AsyncWaits}): when they are there already the method runs on the
 * caller's thread, otherwise on the starter's runner once they are there. The tokens are released when
 * the stage the method returned completes; cancelling the returned future before the method ran gives
 * them back. A refusal fails the future, or is answered by the fallback's stage.
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
		AsyncWaits.await(reservation, executors, result, context, (permit) -> {
			if (observe != null) {
				try {
					observe.run();
				}
				catch (RuntimeException ex) {
					permit.close();
					result.completeExceptionally(ex);
					return;
				}
			}
			run(plan, permit, invocation, result);
		}, (ex) -> refused(plan, invocation, result, ex), () -> invocation.getMethod().getName());
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
