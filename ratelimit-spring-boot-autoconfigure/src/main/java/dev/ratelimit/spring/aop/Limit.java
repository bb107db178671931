package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;
import java.time.Duration;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.BucketStats;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.RegisteredBucket;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

import org.springframework.boot.convert.DurationStyle;
import org.springframework.util.ClassUtils;

/**
 * One {@code @RateLimited} of a method, resolved once: its bucket (or its per-key buckets), the cost,
 * the max-wait, and what is evaluated when the call completes.
 */
final class Limit {

	final String bucket;

	final RateLimiter limiter;

	final BucketStats stats;

	final CostExpression cost;

	/** Whether the bucket lives in this JVM (a call to it costs no round trip). */
	final boolean local;

	final Duration maxWait;

	/** The key of a per-key call, or {@code null} for the bucket itself. */
	final @Nullable KeyExpression key;

	private final @Nullable KeyedBuckets keys;

	/** A web rule's limit with a key (computed from the request, not by an expression). */
	final boolean keyedByRule;

	/** {@code refundIf}, or {@code null}. */
	final @Nullable CompletionExpression refundIf;

	/** {@code settle}, or {@code null}. */
	final @Nullable CompletionExpression settle;

	private Limit(RegisteredBucket bucket, CostExpression cost, Duration maxWait, @Nullable KeyExpression key,
			boolean keyed, @Nullable CompletionExpression refundIf, @Nullable CompletionExpression settle) {
		this.bucket = bucket.name();
		this.limiter = bucket.limiter();
		this.stats = bucket.stats();
		this.local = "local".equals(bucket.backend());
		this.cost = cost;
		this.maxWait = maxWait;
		this.key = key;
		this.keys = keyed ? bucket.keyed() : null;
		this.keyedByRule = keyed && key == null;
		this.refundIf = refundIf;
		this.settle = settle;
	}

	static Limit of(RateLimited annotation, Method method, Class<?> targetClass, RegisteredBucket bucket) {
		String where = where(method, targetClass);
		CostExpression cost = CostExpression.parse(annotation.cost(), where);
		Duration maxWait = annotation.maxWait().isBlank() ? bucket.maxWait() : parseMaxWait(annotation.maxWait(), where);
		KeyExpression key = annotation.key().isBlank() ? null : KeyExpression.parse(annotation.key(), method, where);
		CompletionExpression refundIf = annotation.refundIf().isBlank() ? null
				: CompletionExpression.parse("refundIf", annotation.refundIf(), where);
		CompletionExpression settle = annotation.settle().isBlank() ? null
				: CompletionExpression.parse("settle", annotation.settle(), where);
		return new Limit(bucket, cost, maxWait, key, key != null, refundIf, settle);
	}

	/**
	 * A web rule's limit: a fixed cost, the bucket's max-wait, and a key the rule computes from the
	 * request (when {@code keyed}).
	 */
	static Limit forRule(RegisteredBucket bucket, long cost, boolean keyed) {
		return new Limit(bucket, CostExpression.constant(cost), bucket.maxWait(), null, keyed, null, null);
	}

	/**
	 * The state of the bucket a call with key {@code k} takes from (the bucket's own without a key): the
	 * key's bucket, or the overflow bucket when the key has none. Makes no bucket for the key.
	 */
	RateLimiterSnapshot snapshot(@Nullable Object k) {
		if (k == null || this.keys == null) {
			return this.limiter.snapshot();
		}
		return this.keys.bucketOf(k).snapshot();
	}

	static String where(Method method, Class<?> targetClass) {
		return "@RateLimited on " + ClassUtils.getQualifiedMethodName(method, targetClass);
	}

	boolean completes() {
		return this.refundIf != null || this.settle != null;
	}

	/**
	 * The key of this call, or {@code null} for an unkeyed bucket.
	 *
	 * @throws IllegalArgumentException when the key is {@code null}
	 */
	@Nullable Object key(MethodInvocation invocation) {
		return (this.key != null) ? this.key.evaluate(invocation, this.bucket) : null;
	}

	/**
	 * Takes the call's tokens, waiting at most the max-wait: from the bucket, or from its key's bucket
	 * (a call that goes to the overflow bucket is counted).
	 */
	Permit acquire(long tokens, @Nullable Object k) throws InterruptedException {
		return acquire(tokens, k, this.maxWait, null, null, 0, true);
	}

	/**
	 * Takes the call's tokens, waiting at most {@code wait}.
	 *
	 * @param targets where to note the bucket a keyed call took from (for its completion), or {@code null}
	 * @param i the call's place in {@code targets}
	 * @param count whether a call that goes to the overflow bucket is counted now
	 */
	Permit acquire(long tokens, @Nullable Object k, Duration wait, @Nullable RateLimiter @Nullable [] targets,
			KeyedBuckets.@Nullable Entry @Nullable [] held, int i, boolean count) throws InterruptedException {
		if (k == null) {
			return this.limiter.acquire(tokens, wait);
		}
		KeyedBuckets.Entry entry = this.keys.pin(k, false);
		boolean keep = false;
		try {
			RateLimiter target = entry.limiter();
			if (targets != null) {
				targets[i] = target;
			}
			if (count && this.keys.isOverflow(target)) {
				this.keys.countOverflow();
			}
			Permit permit = target.acquire(tokens, wait);
			keep = hold(entry, held, i);
			return permit;
		}
		catch (RateLimitExceededException ex) {
			throw KeyedReservation.withKey(ex, k, entry.limiter());
		}
		finally {
			if (!keep) {
				entry.unpin();
			}
		}
	}

	/**
	 * K2: a call with a completion attribute keeps the pin it took its tokens under until it completes
	 * ({@code held}, unpinned by the call): a key's bucket that fills up again while the call runs would
	 * count as idle and could be dropped for another key, and the call's {@code settle} would then charge
	 * whatever the key uses now (the overflow bucket, which other keys share). Dropping must change nothing
	 * callers see (K1).
	 *
	 * @return whether the pin is kept
	 */
	private boolean hold(KeyedBuckets.Entry entry, KeyedBuckets.@Nullable Entry @Nullable [] held, int i) {
		if (held == null || !completes()) {
			return false;
		}
		held[i] = entry;
		return true;
	}

	/** Counts a call that went to the overflow bucket, when {@code target} is it. */
	void countIfOverflow(@Nullable RateLimiter target) {
		if (target != null && this.keys != null && this.keys.isOverflow(target)) {
			this.keys.countOverflow();
		}
	}

	/**
	 * Claims the call's tokens without waiting: from the bucket, or from its key's bucket (a call that
	 * goes to the overflow bucket is counted).
	 */
	Reservation reserve(long tokens, @Nullable Object k) {
		return reserve(tokens, k, null, null, 0);
	}

	/**
	 * Claims the call's tokens without waiting, noting the bucket a keyed call claims from.
	 */
	Reservation reserve(long tokens, @Nullable Object k, @Nullable RateLimiter @Nullable [] targets,
			KeyedBuckets.@Nullable Entry @Nullable [] held, int i) {
		if (k == null) {
			return this.limiter.reserve(tokens, this.maxWait);
		}
		KeyedBuckets.Entry entry = this.keys.pin(k, false);
		boolean keep = false;
		try {
			RateLimiter target = entry.limiter();
			if (targets != null) {
				targets[i] = target;
			}
			if (this.keys.isOverflow(target)) {
				this.keys.countOverflow();
			}
			Reservation reservation = new KeyedReservation(target.reserve(tokens, this.maxWait), k, target);
			keep = hold(entry, held, i);
			return reservation;
		}
		catch (RateLimitExceededException ex) {
			throw KeyedReservation.withKey(ex, k, entry.limiter());
		}
		finally {
			if (!keep) {
				entry.unpin();
			}
		}
	}

	/**
	 * Shadow mode: decides as the bucket would, never holding the call back. A call it would refuse
	 * keeps nothing and counts as {@code shadow-rejected}; a call it would make wait keeps its tokens
	 * (taken without waiting, as a settle does) and counts as {@code granted}.
	 *
	 * @param targets where to note the bucket a keyed call took from, or {@code null}
	 * @param held where a call with a completion attribute keeps its key's pin (K2), or {@code null}
	 * @param i the call's place in {@code targets}
	 * @return the permit (capped release: released when the call completes; a no-op one for tokens
	 *         taken without waiting), or {@code null} when the bucket would have refused and kept nothing
	 */
	@Nullable Permit shadow(long tokens, @Nullable Object k, @Nullable RateLimiter @Nullable [] targets,
			KeyedBuckets.@Nullable Entry @Nullable [] held, int i) {
		RateLimiter[] noted = (targets != null) ? targets : new RateLimiter[1];
		int at = (targets != null) ? i : 0;
		boolean deferred = BucketStats.defer(true);
		try {
			Reservation reservation;
			try {
				reservation = reserve(tokens, k, noted, held, at);
			}
			catch (RateLimitExceededException ex) {
				this.stats.refused();
				return null;
			}
			long delay;
			try {
				delay = reservation.poll();
			}
			catch (RateLimitExceededException ex) {
				this.stats.refused();
				return null;
			}
			if (delay == 0) {
				return reservation.permit(); // counted as granted by the limiter
			}
			reservation.cancel();
			charge(tokens, k, noted[at]);
			this.stats.countGranted(0);
			return Permit.noop();
		}
		finally {
			BucketStats.defer(deferred);
		}
	}

	/**
	 * Gives back tokens a granted call took: to the bucket it took them from, through the call's permit
	 * (capped release: back to the ceiling too, and the permit's close releases only the rest). A key's
	 * bucket that has been dropped since was full: giving back to it would have changed nothing, and
	 * nothing is given to the key's new bucket either.
	 *
	 * @param target the bucket a keyed call took from ({@code null} for an unkeyed one)
	 * @param permit the call's permit from that bucket ({@code null} when it has nothing to release)
	 */
	void refund(long tokens, @Nullable Object k, @Nullable RateLimiter target, @Nullable Permit permit) {
		if (tokens == 0) {
			return;
		}
		if (k == null) {
			refund(this.limiter, tokens, permit);
			return;
		}
		KeyedBuckets.Entry entry = (target != null) ? this.keys.pinIfCurrent(k, target) : this.keys.pin(k, false);
		if (entry == null) {
			return; // dropped since, full: nothing to give back to (K1)
		}
		try {
			refund(entry.limiter(), tokens, permit);
		}
		finally {
			entry.unpin();
		}
	}

	private static void refund(RateLimiter limiter, long tokens, @Nullable Permit permit) {
		// (no permit, or a no-op one: nothing in flight, e.g. a shadow bucket's charge: the rate only)
		limiter.refund(tokens, (permit != null) ? permit : Permit.noop());
	}

	/**
	 * Takes more tokens without waiting, from the bucket the call took from: later callers wait for
	 * them. When a key's bucket has been dropped since, from the key's bucket now (which a new,
	 * identical bucket stands for).
	 *
	 * @param target the bucket a keyed call took from ({@code null} for an unkeyed one)
	 */
	void charge(long tokens, @Nullable Object k, @Nullable RateLimiter target) {
		if (tokens == 0) {
			return;
		}
		if (k == null) {
			this.limiter.charge(tokens);
			return;
		}
		KeyedBuckets.Entry entry = (target != null) ? this.keys.pinIfCurrent(k, target) : null;
		if (entry == null) {
			entry = this.keys.pin(k, false);
		}
		try {
			entry.limiter().charge(tokens);
		}
		finally {
			entry.unpin();
		}
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
