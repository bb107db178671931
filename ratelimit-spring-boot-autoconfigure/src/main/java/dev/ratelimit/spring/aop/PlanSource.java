package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;

import dev.ratelimit.spring.PlannedKey;
import dev.ratelimit.spring.RateLimitPlanResolver;
import dev.ratelimit.spring.RegisteredBucket;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.expression.Expression;
import org.springframework.expression.ExpressionParser;
import org.springframework.expression.TypedValue;
import org.springframework.expression.spel.standard.SpelExpressionParser;

/**
 * Where the plan of an annotated call on a bucket with plans comes from (contract revision 3, "Plans"):
 * the annotation's {@code plan}, a SpEL expression over the method's parameters evaluated with the key
 * (a bare parameter, {@code #plan}, is read from the arguments directly), or, when the annotation has
 * none, the application's {@link RateLimitPlanResolver}. The first that is configured decides: the
 * expression's {@code null} is "no plan" and the resolver is not asked then. Resolved once per method.
 */
final class PlanSource {

	private static final ExpressionParser PARSER = new SpelExpressionParser();

	private static final ParameterNameDiscoverer NAMES = new DefaultParameterNameDiscoverer();

	private final @Nullable String source;

	private final String where;

	/** The parameter read for a bare {@code #name}, or -1. */
	private final int index;

	private final @Nullable Expression expression;

	private final @Nullable RateLimitPlanResolver resolver;

	private PlanSource(@Nullable String source, String where, int index, @Nullable Expression expression,
			@Nullable RateLimitPlanResolver resolver) {
		this.source = source;
		this.where = where;
		this.index = index;
		this.expression = expression;
		this.resolver = resolver;
	}

	/**
	 * The plan source of one keyed annotation.
	 *
	 * @param plan the annotation's {@code plan}, possibly empty
	 * @param method the method
	 * @param where the annotation, for messages
	 * @param bucket the bucket
	 * @return the source, or {@code null} when the bucket has no plans, or neither the annotation nor a
	 *         resolver gives one (every key then has the bucket's own settings)
	 */
	static @Nullable PlanSource of(String plan, Method method, String where, RegisteredBucket bucket) {
		if (bucket.plans().isEmpty()) {
			return null;
		}
		String trimmed = plan.trim();
		if (trimmed.isEmpty()) {
			RateLimitPlanResolver resolver = bucket.planResolver();
			return (resolver != null) ? new PlanSource(null, where, -1, null, resolver) : null;
		}
		if (trimmed.matches("#[A-Za-z_$][A-Za-z0-9_$]*")) {
			int index = KeyExpression.parameterIndex(trimmed.substring(1), method);
			if (index >= 0) {
				return new PlanSource(plan, where, index, null, null);
			}
		}
		return new PlanSource(plan, where, -1, parse(plan, where), null);
	}

	/**
	 * Checks at start-up that a plan expression parses.
	 *
	 * @param plan the annotation's {@code plan}
	 * @param where the annotation
	 * @throws IllegalArgumentException when it does not parse
	 */
	static void check(String plan, String where) {
		parse(plan, where);
	}

	private static Expression parse(String plan, String where) {
		try {
			return PARSER.parseExpression(plan.trim());
		}
		catch (RuntimeException ex) {
			throw new IllegalArgumentException("plan '" + plan + "' of " + where + " is not a valid SpEL expression: "
					+ ex.getMessage(), ex);
		}
	}

	/**
	 * The key of one call with its plan.
	 *
	 * @param invocation the call
	 * @param key the call's key
	 * @param bucket the bucket, for messages
	 * @return the key and its plan
	 * @throws IllegalArgumentException when the expression or the resolver fails, naming the bucket, the
	 *         attribute and the expression (or the resolver)
	 */
	PlannedKey planned(MethodInvocation invocation, Object key, String bucket) {
		return PlannedKey.of(key, plan(invocation, key, bucket));
	}

	private @Nullable String plan(MethodInvocation invocation, Object key, String bucket) {
		if (this.resolver != null) {
			try {
				return this.resolver.plan(bucket, key);
			}
			catch (RuntimeException ex) {
				throw new IllegalArgumentException("The plan of bucket '" + bucket + "' failed for this call of "
						+ this.where + ": the RateLimitPlanResolver (" + this.resolver.getClass().getName() + ") threw "
						+ ex + "; the method did not run", ex);
			}
		}
		Object value;
		try {
			value = (this.expression == null) ? invocation.getArguments()[this.index]
					: this.expression.getValue(new MethodBasedEvaluationContext(TypedValue.NULL, invocation.getMethod(),
							invocation.getArguments(), NAMES));
		}
		catch (RuntimeException ex) {
			throw new IllegalArgumentException("The plan '" + this.source + "' of bucket '" + bucket + "' failed for"
					+ " this call of " + this.where + ": " + ex.getMessage() + "; the method did not run", ex);
		}
		return (value != null) ? value.toString() : null;
	}

}
