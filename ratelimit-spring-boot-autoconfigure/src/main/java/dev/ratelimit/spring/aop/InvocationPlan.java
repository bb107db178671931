package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.RateLimitConfigurationException;
import dev.ratelimit.spring.RegisteredBucket;
import dev.ratelimit.spring.engine.GrantObserver;
import dev.ratelimit.spring.engine.Limit;
import dev.ratelimit.spring.engine.Limits;
import dev.ratelimit.spring.engine.Settlement;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

import org.springframework.core.KotlinDetector;
import org.springframework.core.MethodParameter;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.stereotype.Controller;
import org.springframework.util.ClassUtils;

/**
 * Everything the interceptor needs for one method, resolved once: its annotations (one
 * {@link AnnotatedLimit} per {@code @RateLimited}, in claim order: by bucket name), the engine's
 * {@link Limits} over their buckets, the fallback and how the method returns. Each call evaluates the
 * costs and keys here and hands them to the engine; when it completes, {@code refundIf} and
 * {@code settle} are evaluated here and the engine settles.
 */
final class InvocationPlan {

	private static final boolean REACTOR_PRESENT = ClassUtils.isPresent("reactor.core.publisher.Mono",
			InvocationPlan.class.getClassLoader());

	/** What Spring's proxies need to hand a {@code suspend} method to the interceptor as a publisher. */
	private static final boolean COROUTINES_REACTOR_PRESENT = ClassUtils.isPresent("kotlinx.coroutines.reactor.MonoKt",
			InvocationPlan.class.getClassLoader());

	private static final String FLOW = "kotlinx.coroutines.flow.Flow";

	enum Kind {

		BLOCKING, COMPLETION_STAGE, MONO, FLUX

	}

	final Kind kind;

	/** One per annotation, sorted by bucket name: the order every call claims in. */
	private final AnnotatedLimit[] annotated;

	/** The engine's view of the same buckets, in the same order. */
	private final Limits limits;

	/** The one annotation of a method whose calls take the engine's single-bucket path; else {@code null}. */
	private final @Nullable AnnotatedLimit single;

	/** Whether any annotation has {@code refundIf} or {@code settle}. */
	final boolean completes;

	/** What runs instead of a refused call, or {@code null} to let the refusal through. */
	final @Nullable FallbackMethod fallback;

	/** Whether the method is a web controller's (whose responses may carry the buckets' levels). */
	boolean controller;

	private InvocationPlan(Kind kind, AnnotatedLimit[] annotated, @Nullable FallbackMethod fallback) {
		this.kind = kind;
		this.annotated = annotated;
		this.fallback = fallback;
		Limit[] limits = new Limit[annotated.length];
		boolean completes = false;
		for (int i = 0; i < annotated.length; i++) {
			limits[i] = annotated[i].limit;
			completes |= annotated[i].refundIf != null || annotated[i].settle != null;
		}
		this.limits = Limits.of(limits);
		this.completes = completes;
		this.single = this.limits.single() ? annotated[0] : null;
	}

	static InvocationPlan of(List<RateLimited> annotations, Method method, Class<?> targetClass,
			Function<String, RegisteredBucket> buckets) {
		List<AnnotatedLimit> limits = new ArrayList<>();
		FallbackMethod fallback = null;
		for (RateLimited annotation : annotations) {
			limits.add(AnnotatedLimit.of(annotation, method, targetClass, buckets.apply(annotation.value())));
			if (!annotation.fallback().isBlank()) {
				fallback = FallbackMethod.resolve(annotation.fallback().trim(), method, targetClass,
						AnnotatedLimit.where(method, targetClass));
			}
		}
		limits.sort(Comparator.comparing(AnnotatedLimit::bucket));
		InvocationPlan plan = new InvocationPlan(kindOf(method), limits.toArray(new AnnotatedLimit[0]), fallback);
		plan.controller = AnnotatedElementUtils.hasAnnotation(targetClass, Controller.class);
		return plan;
	}

	/**
	 * Tells the observer the buckets' levels after a call took its tokens (its keys evaluated again).
	 */
	void observeGrant(MethodInvocation invocation, GrantObserver observer, Object target) {
		String[] buckets = new String[this.annotated.length];
		RateLimiterSnapshot[] levels = new RateLimiterSnapshot[this.annotated.length];
		for (int i = 0; i < buckets.length; i++) {
			buckets[i] = this.annotated[i].bucket();
			levels[i] = this.limits.snapshot(i, this.annotated[i].key(invocation));
		}
		observer.granted(target, buckets, levels);
	}

	/**
	 * Takes the call's tokens, waiting at most the max-wait: the costs and keys evaluated here (a bad one
	 * fails the call before anything is claimed), the tokens taken by the engine.
	 *
	 * @return the permit
	 */
	Permit acquire(MethodInvocation invocation) throws InterruptedException {
		AnnotatedLimit one = this.single;
		if (one != null) {
			return this.limits.acquire(one.cost.evaluate(invocation), one.key(invocation));
		}
		int count = this.annotated.length;
		long[] tokens = new long[count];
		Object[] keys = new Object[count];
		evaluate(invocation, tokens, keys);
		return this.limits.acquire(tokens, keys);
	}

	/**
	 * Claims the call's tokens without waiting.
	 *
	 * @return the claim, to poll until ready, then turn into a permit, or cancel
	 */
	Reservation reserve(MethodInvocation invocation) {
		AnnotatedLimit one = this.single;
		if (one != null) {
			return this.limits.reserve(one.cost.evaluate(invocation), one.key(invocation));
		}
		int count = this.annotated.length;
		long[] tokens = new long[count];
		Object[] keys = new Object[count];
		evaluate(invocation, tokens, keys);
		return this.limits.reserve(tokens, keys);
	}

	private void evaluate(MethodInvocation invocation, long[] tokens, @Nullable Object[] keys) {
		for (int i = 0; i < tokens.length; i++) {
			tokens[i] = this.annotated[i].cost.evaluate(invocation);
			keys[i] = this.annotated[i].key(invocation);
		}
	}

	/**
	 * Evaluates {@code refundIf} and {@code settle} once the call completed, before its permit is
	 * closed, and settles the call: a no-op for a method without them.
	 */
	void completed(Permit permit, MethodInvocation invocation, @Nullable Object result,
			@Nullable Throwable exception) {
		if (!this.completes) {
			return;
		}
		AnnotatedLimit[] annotated = this.annotated;
		this.limits.complete(permit, new Settlement() {

			@Override
			public long realCost(int i, long cost) {
				return annotated[i].realCost(cost, invocation, result, exception);
			}

			@Override
			public void unpaid(int i, long real, RuntimeException failure) {
				annotated[i].unpaid(real, failure);
			}
		});
	}

	/**
	 * Checks what can be checked of a method's annotations at start-up: at most one fallback, and each
	 * annotation's attributes.
	 */
	static void checkAnnotations(List<RateLimited> annotations, Method method, Class<?> targetClass, String where) {
		int fallbacks = 0;
		// the variables of a class's annotation are not checked: it applies to methods with other parameters,
		// and its expressions may say what to do without them (#rows?.size() ?: 1)
		List<String> names = ExpressionVariables.parameterNames(method, targetClass);
		List<String> parameters = RateLimitAdvisor.declaredOnMethod(method, targetClass) ? names : null;
		for (RateLimited annotation : annotations) {
			if (!annotation.fallback().isBlank()) {
				fallbacks++;
				FallbackMethod.resolve(annotation.fallback().trim(), method, targetClass, where);
			}
			checkAnnotation(annotation, parameters, method.getParameterCount(), where);
			if (names == null) {
				// compiled without -parameters: a name would be null at every call (contract revision 3)
				checkWithoutNames(annotation, method.getParameterCount(), where);
			}
		}
		if (KotlinDetector.isSuspendingFunction(method)) {
			checkSuspendable(method);
		}
		if (fallbacks > 1) {
			throw new RateLimitConfigurationException(where + " sets a fallback on " + fallbacks
					+ " of its @RateLimited annotations: one fallback answers a refusal, whichever bucket refused.",
					"Keep the fallback attribute on one of the annotations.");
		}
	}

	/**
	 * A {@code suspend} method can be limited only when Spring's proxy turns it into a publisher: with
	 * Reactor and kotlinx-coroutines-reactor on the class path (as in every WebFlux application with
	 * coroutines). Without them, fail start-up rather than release the tokens before the coroutine ran.
	 */
	static void checkSuspendable(Method method) {
		if (!REACTOR_PRESENT || !COROUTINES_REACTOR_PRESENT) {
			throw new RateLimitConfigurationException("@RateLimited on " + method.getDeclaringClass().getName() + "."
					+ method.getName() + " is on a Kotlin suspend method, which needs Reactor and"
					+ " kotlinx-coroutines-reactor on the class path to be limited without blocking a thread.",
					"Add org.jetbrains.kotlinx:kotlinx-coroutines-reactor (and io.projectreactor:reactor-core) to the"
							+ " application.");
		}
	}

	private static void checkWithoutNames(RateLimited annotation, int positions, String where) {
		ExpressionVariables.checkWithoutNames("cost", annotation.cost(), positions, where, Set.of());
		if (!annotation.key().isBlank()) {
			ExpressionVariables.checkWithoutNames("key", annotation.key(), positions, where, Set.of());
		}
		if (!annotation.plan().isBlank()) {
			ExpressionVariables.checkWithoutNames("plan", annotation.plan(), positions, where, Set.of());
		}
		if (!annotation.refundIf().isBlank()) {
			ExpressionVariables.checkWithoutNames("refundIf", annotation.refundIf(), positions, where,
					ExpressionVariables.COMPLETION);
		}
		if (!annotation.settle().isBlank()) {
			ExpressionVariables.checkWithoutNames("settle", annotation.settle(), positions, where,
					ExpressionVariables.COMPLETION);
		}
	}

	private static void checkAnnotation(RateLimited annotation, @Nullable List<String> parameters, int positions,
			String where) {
		CostExpression.parse(annotation.cost(), where);
		ExpressionVariables.check("cost", annotation.cost(), parameters, positions, where, Set.of());
		if (!annotation.key().isBlank()) {
			KeyExpression.check(annotation.key(), where);
			ExpressionVariables.check("key", annotation.key(), parameters, positions, where, Set.of());
		}
		if (!annotation.plan().isBlank()) {
			if (annotation.key().isBlank()) {
				throw new IllegalArgumentException("plan '" + annotation.plan() + "' of " + where + " has no key: a plan"
						+ " is a key's, so the annotation needs a key too (key = \"#apiKey\")");
			}
			PlanSource.check(annotation.plan(), where);
			ExpressionVariables.check("plan", annotation.plan(), parameters, positions, where, Set.of());
		}
		if (!annotation.maxWait().isBlank()) {
			AnnotatedLimit.parseMaxWait(annotation.maxWait(), where);
		}
		if (!annotation.refundIf().isBlank()) {
			CompletionExpression.parse("refundIf", annotation.refundIf(), where);
			ExpressionVariables.check("refundIf", annotation.refundIf(), parameters, positions, where,
					ExpressionVariables.COMPLETION);
		}
		if (!annotation.settle().isBlank()) {
			CompletionExpression.parse("settle", annotation.settle(), where);
			ExpressionVariables.check("settle", annotation.settle(), parameters, positions, where,
					ExpressionVariables.COMPLETION);
		}
	}

	/**
	 * How a method returns. A Kotlin {@code suspend} method is a {@code Mono} (a {@code Flux} when it
	 * returns a {@code Flow}): Spring's proxy hands the interceptor chain a publisher for it and awaits
	 * the publisher the chain returns, so the coroutine is limited without blocking a thread and its
	 * capped tokens are released when it completes.
	 */
	private static Kind kindOf(Method method) {
		if (KotlinDetector.isSuspendingFunction(method)) {
			checkSuspendable(method);
			return FLOW.equals(new MethodParameter(method, -1).getParameterType().getName()) ? Kind.FLUX : Kind.MONO;
		}
		Class<?> returnType = method.getReturnType();
		if (CompletionStage.class.isAssignableFrom(returnType) && returnType.isAssignableFrom(CompletableFuture.class)) {
			return Kind.COMPLETION_STAGE;
		}
		if (REACTOR_PRESENT) {
			if (returnType == reactor.core.publisher.Mono.class) {
				return Kind.MONO;
			}
			if (returnType == reactor.core.publisher.Flux.class) {
				return Kind.FLUX;
			}
		}
		return Kind.BLOCKING;
	}
}
