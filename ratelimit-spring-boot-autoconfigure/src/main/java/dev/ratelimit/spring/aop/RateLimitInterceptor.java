package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.engine.GrantObserver;
import dev.ratelimit.spring.engine.RateLimitExecutors;

import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

import org.springframework.aop.support.AopUtils;
import org.springframework.core.MethodClassKey;

/**
 * Takes a {@link RateLimited @RateLimited} method's tokens around each call: waits for them up to the
 * max-wait (or refuses at once when the wait needed is longer), runs the method, and releases the
 * tokens when the call completes (capped release), exactly once, whether it returns or throws.
 *
 * <p>Methods returning {@code CompletionStage}/{@code CompletableFuture}, {@code Mono} or {@code Flux}
 * wait without blocking a thread; their tokens are released when the returned value completes, fails
 * or is cancelled, and a refusal is a failed future or an error signal. Everything about a method
 * (annotation, bucket, parsed cost, max-wait, return kind) is resolved on its first call and cached:
 * the hot path does no reflection, no parsing and no logging.
 */
public final class RateLimitInterceptor implements MethodInterceptor {

	private final Supplier<RateLimiterRegistry> registry;

	private final Supplier<RateLimitExecutors> executors;

	private final Map<MethodClassKey, InvocationPlan> plans = new ConcurrentHashMap<>();

	private final Supplier<@Nullable GrantObserver> observers;

	/** Looked up on the first call; {@code null} (the usual case) costs one read per call. */
	private volatile @Nullable GrantObserver observer;

	private volatile boolean observerResolved;

	/**
	 * Creates the interceptor.
	 *
	 * @param registry where buckets are found, asked for on a method's first call
	 * @param executors the threads of the {@code CompletionStage} path, asked for on its first call
	 */
	public RateLimitInterceptor(Supplier<RateLimiterRegistry> registry, Supplier<RateLimitExecutors> executors) {
		this(registry, executors, () -> null);
	}

	/**
	 * Creates the interceptor.
	 *
	 * @param registry where buckets are found, asked for on a method's first call
	 * @param executors the threads of the {@code CompletionStage} path, asked for on its first call
	 * @param observer told of the levels after a controller method took its tokens, asked for on the first
	 *        call ({@code null} for none)
	 */
	public RateLimitInterceptor(Supplier<RateLimiterRegistry> registry, Supplier<RateLimitExecutors> executors,
			Supplier<@Nullable GrantObserver> observer) {
		this.registry = registry;
		this.executors = executors;
		this.observers = observer;
	}

	private @Nullable GrantObserver observer() {
		if (!this.observerResolved) {
			this.observer = this.observers.get();
			this.observerResolved = true;
		}
		return this.observer;
	}

	@Override
	public Object invoke(MethodInvocation invocation) throws Throwable {
		InvocationPlan plan = plan(invocation);
		if (plan == null) {
			return invocation.proceed();
		}
		GrantObserver observer = plan.controller ? observer() : null;
		return switch (plan.kind) {
			case BLOCKING -> invokeBlocking(plan, invocation, observer);
			case COMPLETION_STAGE -> AsyncInvocations.invoke(plan, invocation, this.executors.get(), observer);
			case MONO -> ReactorInvocations.mono(plan, invocation, observer);
			case FLUX -> ReactorInvocations.flux(plan, invocation, observer);
		};
	}

	private static Object invokeBlocking(InvocationPlan plan, MethodInvocation invocation,
			@Nullable GrantObserver observer) throws Throwable {
		Permit permit;
		try {
			permit = plan.acquire(invocation);
		}
		catch (RateLimitExceededException ex) {
			if (plan.fallback == null) {
				throw ex;
			}
			return plan.fallback.invoke(invocation, ex);
		}
		Object target = (observer != null) ? observer.capture(null) : null;
		if (target != null) {
			try {
				plan.observeGrant(invocation, observer, target);
			}
			catch (RuntimeException ex) {
				permit.close();
				throw ex;
			}
		}
		if (!plan.completes) {
			try {
				return invocation.proceed();
			}
			finally {
				permit.close();
			}
		}
		Object result;
		try {
			result = invocation.proceed();
		}
		catch (Throwable ex) {
			try {
				plan.completed(permit, invocation, null, ex);
			}
			finally {
				permit.close();
			}
			throw ex;
		}
		try {
			plan.completed(permit, invocation, result, null);
		}
		finally {
			permit.close();
		}
		return result;
	}

	private InvocationPlan plan(MethodInvocation invocation) {
		Method method = invocation.getMethod();
		Object target = invocation.getThis();
		Class<?> targetClass = (target != null) ? AopUtils.getTargetClass(target) : method.getDeclaringClass();
		MethodClassKey key = new MethodClassKey(method, targetClass);
		InvocationPlan plan = this.plans.get(key);
		if (plan == null) {
			List<RateLimited> annotations = RateLimitAdvisor.find(method, targetClass);
			if (annotations.isEmpty()) {
				return null;
			}
			RateLimiterRegistry buckets = this.registry.get();
			plan = InvocationPlan.of(annotations, method, targetClass, buckets::get);
			this.plans.putIfAbsent(key, plan);
		}
		return plan;
	}
}
