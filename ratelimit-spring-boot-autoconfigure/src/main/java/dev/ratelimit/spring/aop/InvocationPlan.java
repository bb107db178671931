package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.RegisteredBucket;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

import org.springframework.boot.convert.DurationStyle;
import org.springframework.util.ClassUtils;

/**
 * Everything the interceptor needs for one method, resolved once: the limiter, the cost, the max-wait
 * and how the method returns.
 */
final class InvocationPlan {

	private static final boolean REACTOR_PRESENT = ClassUtils.isPresent("reactor.core.publisher.Mono",
			InvocationPlan.class.getClassLoader());

	enum Kind {

		BLOCKING, COMPLETION_STAGE, MONO, FLUX

	}

	final String bucket;

	final RateLimiter limiter;

	final CostExpression cost;

	final Duration maxWait;

	final Kind kind;

	/** The key of a per-key call, or {@code null} for the bucket itself. */
	private final @Nullable KeyExpression key;

	private final @Nullable KeyedBuckets keys;

	/** What runs instead of a refused call, or {@code null} to let the refusal through. */
	final @Nullable FallbackMethod fallback;

	private InvocationPlan(String bucket, RateLimiter limiter, CostExpression cost, Duration maxWait, Kind kind,
			@Nullable KeyExpression key, @Nullable KeyedBuckets keys, @Nullable FallbackMethod fallback) {
		this.bucket = bucket;
		this.limiter = limiter;
		this.cost = cost;
		this.maxWait = maxWait;
		this.kind = kind;
		this.key = key;
		this.keys = keys;
		this.fallback = fallback;
	}

	static InvocationPlan of(RateLimited annotation, Method method, Class<?> targetClass, RegisteredBucket bucket) {
		String where = "@RateLimited on " + ClassUtils.getQualifiedMethodName(method, targetClass);
		CostExpression cost = CostExpression.parse(annotation.cost(), where);
		Duration maxWait = annotation.maxWait().isBlank() ? bucket.maxWait() : parseMaxWait(annotation.maxWait(), where);
		KeyExpression key = annotation.key().isBlank() ? null : KeyExpression.parse(annotation.key(), method, where);
		KeyedBuckets keys = (key != null) ? bucket.keyed() : null;
		FallbackMethod fallback = annotation.fallback().isBlank() ? null
				: FallbackMethod.resolve(annotation.fallback().trim(), method, targetClass, where);
		return new InvocationPlan(bucket.name(), bucket.limiter(), cost, maxWait, kindOf(method.getReturnType()), key,
				keys, fallback);
	}

	/**
	 * Takes the call's tokens, waiting at most the max-wait: from the bucket, or from its key's bucket.
	 */
	Permit acquire(MethodInvocation invocation) throws InterruptedException {
		long tokens = this.cost.evaluate(invocation);
		if (this.key == null) {
			return this.limiter.acquire(tokens, this.maxWait);
		}
		Object k = this.key.evaluate(invocation, this.bucket);
		KeyedBuckets.Entry entry = this.keys.pin(k);
		try {
			return entry.limiter().acquire(tokens, this.maxWait);
		}
		catch (RateLimitExceededException ex) {
			throw KeyedReservation.withKey(ex, k);
		}
		finally {
			entry.unpin();
		}
	}

	/**
	 * Claims the call's tokens without waiting: from the bucket, or from its key's bucket.
	 */
	Reservation reserve(MethodInvocation invocation) {
		long tokens = this.cost.evaluate(invocation);
		if (this.key == null) {
			return this.limiter.reserve(tokens, this.maxWait);
		}
		Object k = this.key.evaluate(invocation, this.bucket);
		KeyedBuckets.Entry entry = this.keys.pin(k);
		try {
			return new KeyedReservation(entry.limiter().reserve(tokens, this.maxWait), k);
		}
		catch (RateLimitExceededException ex) {
			throw KeyedReservation.withKey(ex, k);
		}
		finally {
			entry.unpin();
		}
	}

	/**
	 * Checks what can be checked of an annotation without its bucket: the cost parses, the max-wait is a
	 * non-negative duration.
	 */
	static void checkAnnotation(RateLimited annotation, Method method, Class<?> targetClass, String where) {
		if (!annotation.fallback().isBlank()) {
			FallbackMethod.resolve(annotation.fallback().trim(), method, targetClass, where);
		}
		checkAnnotation(annotation, where);
	}

	static void checkAnnotation(RateLimited annotation, String where) {
		CostExpression.parse(annotation.cost(), where);
		if (!annotation.key().isBlank()) {
			KeyExpression.check(annotation.key(), where);
		}
		if (!annotation.maxWait().isBlank()) {
			parseMaxWait(annotation.maxWait(), where);
		}
	}

	private static Duration parseMaxWait(String value, String where) {
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

	private static Kind kindOf(Class<?> returnType) {
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
