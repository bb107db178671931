package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;
import java.time.Duration;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.RegisteredBucket;
import dev.ratelimit.spring.engine.Limit;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

import org.springframework.boot.convert.DurationStyle;
import org.springframework.util.ClassUtils;

/**
 * One {@code @RateLimited} of a method, resolved once: the engine's {@link Limit} (the bucket, the
 * max-wait) and the annotation's expressions, which the interceptor evaluates for each call: the cost,
 * the key, and what is evaluated when the call completes.
 */
final class AnnotatedLimit {

	final Limit limit;

	final CostExpression cost;

	/** The key of a per-key call, or {@code null} for the bucket itself. */
	final @Nullable KeyExpression key;

	/** Where a keyed call's plan comes from, for a bucket with plans; else {@code null} (the key alone). */
	final @Nullable PlanSource plan;

	/** {@code refundIf}, or {@code null}. */
	final @Nullable CompletionExpression refundIf;

	/** {@code settle}, or {@code null}. */
	final @Nullable CompletionExpression settle;

	private AnnotatedLimit(Limit limit, CostExpression cost, @Nullable KeyExpression key, @Nullable PlanSource plan,
			@Nullable CompletionExpression refundIf, @Nullable CompletionExpression settle) {
		this.limit = limit;
		this.cost = cost;
		this.key = key;
		this.plan = plan;
		this.refundIf = refundIf;
		this.settle = settle;
	}

	static AnnotatedLimit of(RateLimited annotation, Method method, Class<?> targetClass, RegisteredBucket bucket) {
		String where = where(method, targetClass);
		CostExpression cost = CostExpression.parse(annotation.cost(), where + " (bucket '" + bucket.name() + "')");
		Duration maxWait = annotation.maxWait().isBlank() ? null : parseMaxWait(annotation.maxWait(), where);
		KeyExpression key = annotation.key().isBlank() ? null : KeyExpression.parse(annotation.key(), method, where);
		PlanSource plan = (key != null) ? PlanSource.of(annotation.plan(), method, where, bucket) : null;
		CompletionExpression refundIf = annotation.refundIf().isBlank() ? null
				: CompletionExpression.parse("refundIf", annotation.refundIf(), where);
		CompletionExpression settle = annotation.settle().isBlank() ? null
				: CompletionExpression.parse("settle", annotation.settle(), where);
		boolean completes = refundIf != null || settle != null;
		Limit limit = (maxWait != null) ? Limit.of(bucket, maxWait, key != null, completes)
				: Limit.of(bucket, key != null, completes);
		return new AnnotatedLimit(limit, cost, key, plan, refundIf, settle);
	}

	static String where(Method method, Class<?> targetClass) {
		return "@RateLimited on " + ClassUtils.getQualifiedMethodName(method, targetClass);
	}

	String bucket() {
		return this.limit.bucket();
	}

	/**
	 * The key of this call, or {@code null} for an unkeyed bucket.
	 *
	 * @throws IllegalArgumentException when the key is {@code null}
	 */
	@Nullable Object key(MethodInvocation invocation) {
		if (this.key == null) {
			return null;
		}
		Object key = this.key.evaluate(invocation, this.limit.bucket());
		return (this.plan != null) ? this.plan.planned(invocation, key, this.limit.bucket()) : key;
	}

	/** {@code settle} gave a cost the bucket could not charge: reported once, the call's cost standing. */
	void unpaid(long real, RuntimeException failure) {
		if (this.settle != null) {
			this.settle.unpaid(real, failure);
		}
	}

	/**
	 * What the call really cost on this bucket, once it completed: nothing when {@code refundIf} holds,
	 * else what {@code settle} says, else its cost.
	 */
	long realCost(long cost, MethodInvocation invocation, @Nullable Object value, @Nullable Throwable exception) {
		if (this.refundIf != null && this.refundIf.test(invocation, value, exception)) {
			return 0;
		}
		if (this.settle != null) {
			long real = this.settle.cost(invocation, value, exception);
			return (real >= 0) ? real : cost;
		}
		return cost;
	}

	/**
	 * The annotation's {@code maxWait}, as {@code max-wait} reads: with a unit. A bare whole number other than 0
	 * is refused, as the property's is: Spring would read {@code maxWait = "5"} as 5 ms, where the writer of a
	 * rate limit more often means seconds.
	 */
	static Duration parseMaxWait(String value, String where) {
		String trimmed = value.trim();
		if (trimmed.matches("[-+]?[0-9]+") && !trimmed.matches("[-+]?0+")) {
			throw new IllegalArgumentException("maxWait '" + value + "' of " + where + " has no unit (a bare number"
					+ " would be read as milliseconds); expected e.g. " + trimmed + "ms or " + trimmed + "s (0 needs none)");
		}
		Duration maxWait;
		try {
			maxWait = DurationStyle.detectAndParse(value.trim());
		}
		catch (RuntimeException ex) {
			throw new IllegalArgumentException("maxWait '" + value + "' of " + where
					+ " is not a duration; expected e.g. 0, 100ms, 2s or PT0.5S", ex);
		}
		if (maxWait.isNegative()) {
			throw new IllegalArgumentException("maxWait '" + value + "' of " + where + " is negative; expected >= 0");
		}
		return maxWait;
	}
}
