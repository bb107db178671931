package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.BucketStats;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.RateLimitConfigurationException;
import dev.ratelimit.spring.RegisteredBucket;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

import org.springframework.core.KotlinDetector;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.stereotype.Controller;
import org.springframework.core.MethodParameter;
import org.springframework.util.ClassUtils;

/**
 * Everything the interceptor needs for one method, resolved once: its limits (one per
 * {@code @RateLimited}, in claim order), the fallback and how the method returns.
 *
 * <p>A method with one annotation and no {@code refundIf}/{@code settle} takes the single-bucket path,
 * which costs what a call to the limiter costs. Several annotations, or completion attributes, take
 * the general path: a {@link Call} that claims from every bucket in a fixed order (by bucket name;
 * claims never block, so no order of callers can deadlock), waits once for the longest wait, and
 * gives every claim back when any is refused.
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
	final Limit[] limits;

	/** The one limit of a method with one annotation and no completion attributes; else {@code null}. */
	private final @Nullable Limit single;

	/** Whether any limit has {@code refundIf} or {@code settle}. */
	final boolean completes;

	/**
	 * The general path with local buckets only: a blocking call first tries to take from each without
	 * waiting, which is what almost every call finds.
	 */
	private final boolean optimistic;

	/** Whether any limit takes from per-key buckets (whose claims note the bucket they took from). */
	private final boolean keyed;

	/** What runs instead of a refused call, or {@code null} to let the refusal through. */
	final @Nullable FallbackMethod fallback;

	/** Whether the method is a web controller's (whose responses may carry the buckets' levels). */
	boolean controller;

	private InvocationPlan(Kind kind, Limit[] limits, @Nullable FallbackMethod fallback) {
		this.kind = kind;
		this.limits = limits;
		this.fallback = fallback;
		boolean completes = false;
		for (Limit limit : limits) {
			completes |= limit.completes();
		}
		this.completes = completes;
		this.single = (limits.length == 1 && !completes) ? limits[0] : null;
		boolean local = true;
		for (Limit limit : limits) {
			local &= limit.local;
		}
		this.optimistic = this.single == null && local;
		boolean keyed = false;
		for (Limit limit : limits) {
			keyed |= limit.key != null || limit.keyedByRule;
		}
		this.keyed = keyed;
	}

	/**
	 * The plan of a fixed set of limits, claimed in the order given (a web request's matching rules).
	 */
	static InvocationPlan of(Limit[] limits) {
		return new InvocationPlan(Kind.BLOCKING, limits, null);
	}

	/**
	 * Takes the tokens of a call whose costs and keys are known (a web request), waiting at most the
	 * max-wait.
	 */
	Permit acquire(long[] tokens, @Nullable Object[] keys) throws InterruptedException {
		Limit one = this.single;
		return (one != null) ? acquireOne(one, tokens[0], keys[0]) : acquireAll(tokens, keys);
	}

	/**
	 * Claims the tokens of a call whose costs and keys are known, without waiting.
	 */
	Reservation reserve(long[] tokens, @Nullable Object[] keys) {
		Limit one = this.single;
		return (one != null) ? reserveOne(one, tokens[0], keys[0]) : claim(tokens, keys);
	}

	static InvocationPlan of(List<RateLimited> annotations, Method method, Class<?> targetClass,
			Function<String, RegisteredBucket> buckets) {
		List<Limit> limits = new ArrayList<>();
		FallbackMethod fallback = null;
		for (RateLimited annotation : annotations) {
			limits.add(Limit.of(annotation, method, targetClass, buckets.apply(annotation.value())));
			if (!annotation.fallback().isBlank()) {
				fallback = FallbackMethod.resolve(annotation.fallback().trim(), method, targetClass,
						Limit.where(method, targetClass));
			}
		}
		limits.sort(Comparator.comparing((Limit limit) -> limit.bucket));
		InvocationPlan plan = new InvocationPlan(kindOf(method), limits.toArray(new Limit[0]), fallback);
		plan.controller = AnnotatedElementUtils.hasAnnotation(targetClass, Controller.class);
		return plan;
	}

	/**
	 * Tells the observer the buckets' levels after a call took its tokens (its keys evaluated again).
	 */
	void observeGrant(MethodInvocation invocation, GrantObserver observer, Object target) {
		String[] buckets = new String[this.limits.length];
		RateLimiterSnapshot[] levels = new RateLimiterSnapshot[this.limits.length];
		for (int i = 0; i < buckets.length; i++) {
			buckets[i] = this.limits[i].bucket;
			levels[i] = this.limits[i].snapshot(this.limits[i].key(invocation));
		}
		observer.granted(target, buckets, levels);
	}

	/**
	 * Takes the call's tokens, waiting at most the max-wait.
	 *
	 * @return the permit; a {@link Call} on the general path
	 */
	Permit acquire(MethodInvocation invocation) throws InterruptedException {
		Limit one = this.single;
		if (one != null) {
			return acquireOne(one, one.cost.evaluate(invocation), one.key(invocation));
		}
		int count = this.limits.length;
		long[] tokens = new long[count];
		Object[] keys = new Object[count];
		evaluate(invocation, tokens, keys);
		return acquireAll(tokens, keys);
	}

	/** The single-bucket path: the limiter's own acquire, or the shadow decision. */
	private static Permit acquireOne(Limit one, long tokens, @Nullable Object key) throws InterruptedException {
		if (one.stats.isShadow()) {
			Permit permit = one.shadow(tokens, key, null, null, 0);
			return (permit != null) ? permit : Permit.noop();
		}
		return one.acquire(tokens, key);
	}

	/** The general path: the first try when it may succeed, else claim from every bucket and wait. */
	private Permit acquireAll(long[] tokens, @Nullable Object[] keys) throws InterruptedException {
		if (this.optimistic) {
			Permit permit = takeAtOnce(tokens, keys);
			if (permit != null) {
				return permit;
			}
		}
		return claim(tokens, keys).await();
	}

	/**
	 * The blocking path's first try: takes from every bucket, in order, only what is there now (each
	 * limiter counts its grant). When a bucket has not enough now (or is in shadow mode), gives back what
	 * was taken (a refund, then the release) and takes back its count, as if nothing had happened, and
	 * the caller claims and waits as usual; that bucket's refusal is not counted.
	 *
	 * @return the permit, or {@code null} when the call must claim and wait
	 */
	private @Nullable Permit takeAtOnce(long[] tokens, @Nullable Object[] keys) throws InterruptedException {
		Limit[] limits = this.limits;
		int count = limits.length;
		Permit[] permits = null;
		RateLimiter[] targets = this.keyed ? new RateLimiter[count] : null;
		KeyedBuckets.Entry[] held = (this.keyed && this.completes) ? new KeyedBuckets.Entry[count] : null;
		int taken = 0;
		boolean deferred = BucketStats.defer(true);
		try {
			for (; taken < count; taken++) {
				Limit limit = limits[taken];
				if (limit.stats.isShadow()) {
					break;
				}
				Permit permit;
				try {
					permit = limit.acquire(tokens[taken], keys[taken], Duration.ZERO, targets, held, taken, false);
				}
				catch (RateLimitExceededException ex) {
					break;
				}
				if (permit != Permit.noop()) {
					if (permits == null) {
						permits = new Permit[count];
					}
					permits[taken] = permit;
				}
			}
		}
		finally {
			if (taken < count) {
				giveBack(taken, tokens, keys, targets, permits);
				unpin(held);
			}
			BucketStats.defer(deferred);
		}
		if (taken < count) {
			return null;
		}
		if (targets != null) {
			for (int i = 0; i < count; i++) {
				limits[i].countIfOverflow(targets[i]); // counted once per call, now that it took from them
			}
		}
		if (this.completes) {
			return Call.granted(limits, tokens, keys, targets, held, (permits != null) ? permits : new Permit[count]);
		}
		return (permits != null) ? new Permits(permits) : Permit.noop();
	}

	private void giveBack(int taken, long[] tokens, @Nullable Object[] keys, @Nullable RateLimiter @Nullable [] targets,
			@Nullable Permit[] permits) {
		for (int i = 0; i < taken; i++) {
			this.limits[i].refund(tokens[i], keys[i], (targets != null) ? targets[i] : null,
					(permits != null) ? permits[i] : null);
			if (permits != null && permits[i] != null) {
				permits[i].close();
			}
			this.limits[i].stats.ungrant();
		}
	}

	/** Lets go the keys' buckets a call kept for its completion, when it does not go ahead after all. */
	private static void unpin(KeyedBuckets.@Nullable Entry @Nullable [] held) {
		if (held != null) {
			for (KeyedBuckets.Entry entry : held) {
				if (entry != null) {
					entry.unpin();
				}
			}
		}
	}

	/** The permits of several buckets, released together, once. */
	private static final class Permits implements Permit {

		private final @Nullable Permit[] permits;

		Permits(@Nullable Permit[] permits) {
			this.permits = permits;
		}

		@Override
		public void close() {
			for (Permit permit : this.permits) {
				if (permit != null) {
					permit.close(); // each releases at most once
				}
			}
		}
	}

	private void evaluate(MethodInvocation invocation, long[] tokens, @Nullable Object[] keys) {
		for (int i = 0; i < tokens.length; i++) {
			tokens[i] = this.limits[i].cost.evaluate(invocation);
			keys[i] = this.limits[i].key(invocation);
		}
	}

	/**
	 * Claims the call's tokens without waiting.
	 *
	 * @return the claim; a {@link Call} on the general path, whose permit is the call itself
	 */
	Reservation reserve(MethodInvocation invocation) {
		Limit one = this.single;
		if (one != null) {
			return reserveOne(one, one.cost.evaluate(invocation), one.key(invocation));
		}
		int count = this.limits.length;
		long[] tokens = new long[count];
		Object[] keys = new Object[count];
		evaluate(invocation, tokens, keys);
		return claim(tokens, keys);
	}

	/** The single-bucket claim: the limiter's own, or (shadow mode) a call decided at once. */
	private Reservation reserveOne(Limit one, long tokens, @Nullable Object key) {
		if (one.stats.isShadow()) {
			return claim(new long[] { tokens }, new Object[] { key });
		}
		return one.reserve(tokens, key);
	}

	/**
	 * Evaluates {@code refundIf} and {@code settle} once the call completed, before its permit is
	 * closed: a no-op but for a {@link Call} whose limits have them.
	 */
	void completed(Permit permit, MethodInvocation invocation, @Nullable Object result,
			@Nullable Throwable exception) {
		if (permit instanceof Call call) {
			call.complete(invocation, result, exception);
		}
	}

	/**
	 * Claims from every bucket, or from none: every cost and key is evaluated first (a bad one fails
	 * the call before anything is claimed); then each enforcing bucket is claimed in order, and when
	 * any refuses (at its claim; and, once one did, a claim that was accepted but refuses at a first look:
	 * a capped bucket with max-wait 0 whose tokens are in flight), every claim is given back and the
	 * refusing bucket whose wait was longest is named
	 * and alone counts the call as rejected (when several refuse, the refusal lists them all:
	 * {@link SeveralBucketsExceeded}). Buckets in shadow mode decide last, never refusing.
	 */
	private Call claim(long[] tokens, @Nullable Object[] keys) {
		int count = this.limits.length;
		Call call = new Call(this.limits, tokens, keys);
		Refusals refusals = null;
		RateLimitExceededException[] refused = null;
		boolean deferred = BucketStats.defer(true);
		try {
			for (int i = 0; i < count; i++) {
				Limit limit = this.limits[i];
				if (limit.stats.isShadow()) {
					continue;
				}
				try {
					call.parts[i] = limit.reserve(tokens[i], keys[i], call.targets, call.held, i);
				}
				catch (RateLimitExceededException ex) {
					if (refused == null) {
						refused = new RateLimitExceededException[count];
					}
					refused[i] = ex;
				}
			}
			if (refused != null) {
				// a claim that was accepted but refuses at its first look (a capped bucket with max-wait 0 whose
				// tokens are in flight) refuses the call as well: it is named and listed as at a poll, in claim order
				for (int i = 0; i < count; i++) {
					Reservation part = call.parts[i];
					if (refused[i] == null && part != null) {
						try {
							part.poll();
						}
						catch (RateLimitExceededException refusal) {
							refused[i] = refusal;
						}
					}
				}
				refusals = Refusals.inClaimOrder(this.limits, refused);
				call.cancel();
			}
			else {
				for (int i = 0; i < count; i++) {
					if (call.parts[i] == null) {
						call.shadowed(i, this.limits[i].shadow(tokens[i], keys[i], call.targets, call.held, i));
					}
				}
			}
		}
		catch (RuntimeException ex) {
			call.cancel();
			throw ex;
		}
		finally {
			BucketStats.defer(deferred);
		}
		if (refusals != null) {
			throw refusals.decide();
		}
		return call;
	}

	/**
	 * Checks what can be checked of a method's annotations at start-up: at most one fallback, and each
	 * annotation's attributes.
	 */
	static void checkAnnotations(List<RateLimited> annotations, Method method, Class<?> targetClass, String where) {
		int fallbacks = 0;
		// the variables of a class's annotation are not checked: it applies to methods with other parameters,
		// and its expressions may say what to do without them (#rows?.size() ?: 1)
		List<String> parameters = RateLimitAdvisor.declaredOnMethod(method, targetClass)
				? ExpressionVariables.parameterNames(method, targetClass) : null;
		for (RateLimited annotation : annotations) {
			if (!annotation.fallback().isBlank()) {
				fallbacks++;
				FallbackMethod.resolve(annotation.fallback().trim(), method, targetClass, where);
			}
			checkAnnotation(annotation, parameters, method.getParameterCount(), where);
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

	private static void checkAnnotation(RateLimited annotation, @Nullable List<String> parameters, int positions,
			String where) {
		CostExpression.parse(annotation.cost(), where);
		ExpressionVariables.check("cost", annotation.cost(), parameters, positions, where, Set.of());
		if (!annotation.key().isBlank()) {
			KeyExpression.check(annotation.key(), where);
			ExpressionVariables.check("key", annotation.key(), parameters, positions, where, Set.of());
		}
		if (!annotation.maxWait().isBlank()) {
			Limit.parseMaxWait(annotation.maxWait(), where);
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
