package dev.ratelimit.spring.aop;

import java.util.function.Supplier;

import dev.ratelimit.core.Permit;
import dev.ratelimit.spring.engine.GrantObserver;
import dev.ratelimit.spring.engine.ReactivePermits;
import dev.ratelimit.spring.engine.RefusalSignal;

import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

import org.springframework.aop.ProxyMethodInvocation;

/**
 * {@code Mono} and {@code Flux} methods: nothing happens before subscription; on subscription the
 * tokens are reserved, polled on Reactor's parallel scheduler (no thread waits), and the method is
 * invoked once they are there. The tokens are released when the returned publisher completes, fails
 * or is cancelled; a refusal is an error signal. Loaded only when Reactor is on the class path.
 */
final class ReactorInvocations {

	private ReactorInvocations() {
	}

	static Mono<Object> mono(InvocationPlan plan, MethodInvocation invocation, @Nullable GrantObserver observer) {
		Supplier<Publisher<Object>> proceed = proceeding(invocation);
		Mono<Object> limited = plan.completes ? Mono.defer(() -> {
			// the value the Mono completed with, for #result: one holder per subscription, written by onNext
			// and read at completion, which comes after it (the signals are serialized)
			Object[] result = new Object[1];
			return Mono.usingWhen(permit(plan, invocation, observer),
					(permit) -> Mono.from(proceed.get()).doOnNext((value) -> result[0] = value),
					(permit) -> complete(plan, invocation, permit, result[0], null),
					(permit, failure) -> complete(plan, invocation, permit, result[0], failure),
					ReactorInvocations::release);
		}) : Mono.usingWhen(permit(plan, invocation, observer), (permit) -> Mono.from(proceed.get()),
				ReactorInvocations::release, (permit, failure) -> release(permit), ReactorInvocations::release);
		return (plan.fallback == null) ? limited
				: limited.onErrorResume(RefusalSignal.class, (refused) -> Mono.from(fallback(plan, invocation, refused)));
	}

	static Flux<Object> flux(InvocationPlan plan, MethodInvocation invocation, @Nullable GrantObserver observer) {
		Supplier<Publisher<Object>> proceed = proceeding(invocation);
		Flux<Object> limited = Flux.usingWhen(permit(plan, invocation, observer), (permit) -> proceed.get(),
				(permit) -> complete(plan, invocation, permit, null, null),
				(permit, failure) -> complete(plan, invocation, permit, null, failure), ReactorInvocations::release);
		return (plan.fallback == null) ? limited
				: limited.onErrorResume(RefusalSignal.class, (refused) -> fallback(plan, invocation, refused));
	}

	@SuppressWarnings("unchecked")
	private static Publisher<Object> fallback(InvocationPlan plan, MethodInvocation invocation,
			RefusalSignal refused) {
		try {
			Object returned = plan.fallback.invoke(invocation, refused.refusal());
			return (returned != null) ? (Publisher<Object>) returned : Mono.empty();
		}
		catch (Throwable ex) {
			return Mono.error(ex);
		}
	}

	private static Throwable refusal(InvocationPlan plan, RuntimeException ex) {
		return (plan.fallback != null) ? RefusalSignal.of(ex) : ex;
	}

	/** Cancelled: the release only (a cancelled call has no outcome for refundIf or settle to judge). */
	private static Mono<Void> release(Permit permit) {
		return Mono.fromRunnable(permit::close);
	}

	/**
	 * A terminal signal: {@code refundIf} and {@code settle} ({@code #result} is the {@code Mono}'s
	 * value, {@code null} for a {@code Flux}), then the release.
	 */
	private static Mono<Void> complete(InvocationPlan plan, MethodInvocation invocation, Permit permit,
			@Nullable Object result, @Nullable Throwable failure) {
		return Mono.fromRunnable(() -> {
			try {
				plan.completed(permit, invocation, result, failure);
			}
			finally {
				permit.close();
			}
		});
	}

	/**
	 * Runs the rest of the call (the advice inside the rate limiter, then the method) once per subscription:
	 * each from a copy of the invocation as it stands when the rate limiter is entered. The invocation itself
	 * goes through the chain once; after that, proceeding it again would skip the inner advice (a
	 * {@code retry()} running its second attempt outside {@code @Transactional}), and two subscriptions at
	 * once would race on its place in the chain.
	 */
	private static Supplier<Publisher<Object>> proceeding(MethodInvocation invocation) {
		if (!(invocation instanceof ProxyMethodInvocation proxy)) {
			return () -> proceed(invocation);
		}
		MethodInvocation entered = proxy.invocableClone();
		return () -> proceed(((ProxyMethodInvocation) entered).invocableClone());
	}

	@SuppressWarnings("unchecked")
	private static Publisher<Object> proceed(MethodInvocation invocation) {
		try {
			Object returned = invocation.proceed();
			return (returned != null) ? (Publisher<Object>) returned : Mono.empty();
		}
		catch (Throwable ex) {
			return Mono.error(ex);
		}
	}

	/**
	 * The call's permit; with an observer (a controller method under {@code headers: ietf}), the
	 * buckets' levels go to the response found in the subscriber's context once the tokens are there.
	 */
	private static Mono<Permit> permit(InvocationPlan plan, MethodInvocation invocation,
			@Nullable GrantObserver observer) {
		if (observer == null) {
			return permit(plan, invocation);
		}
		return Mono.deferContextual((context) -> {
			Object target = observer.capture(context);
			Mono<Permit> permit = permit(plan, invocation);
			return (target == null) ? permit : permit.map((granted) -> {
				try {
					plan.observeGrant(invocation, observer, target);
				}
				catch (RuntimeException ex) {
					granted.close();
					throw ex;
				}
				return granted;
			});
		});
	}

	private static Mono<Permit> permit(InvocationPlan plan, MethodInvocation invocation) {
		return ReactivePermits.permit(() -> plan.reserve(invocation), (ex) -> refusal(plan, ex));
	}
}
