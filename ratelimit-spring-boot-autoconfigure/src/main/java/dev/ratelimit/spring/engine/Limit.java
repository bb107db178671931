package dev.ratelimit.spring.engine;

import java.time.Duration;
import java.util.Set;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.BucketStats;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.PlannedKey;
import dev.ratelimit.spring.RegisteredBucket;
import dev.ratelimit.spring.WaitObserver;
import org.jspecify.annotations.Nullable;

/**
 * One bucket a call takes from, as a front end (the annotation, a web rule, an outbound rule) resolved
 * it once: the bucket or its per-key buckets, the max-wait, and whether the call's completion may give
 * tokens back or take more (a {@link Settlement}). The costs and keys of each call are the front end's:
 * this class never sees an expression or a request.
 */
public final class Limit {

	final String bucket;

	final RateLimiter limiter;

	final BucketStats stats;

	/** Whether the bucket lives in this JVM (a call to it costs no round trip). */
	final boolean local;

	final Duration maxWait;

	/**
	 * Whether {@link #maxWait} is the bucket's own (no front end set one): then a keyed call on a plan
	 * that sets {@code max-wait} waits at most the plan's (contract revision 3, "Plans").
	 */
	private final boolean planWaits;

	/** The bucket's per-key buckets, for a limit whose calls have keys; else {@code null}. */
	private final @Nullable KeyedBuckets keys;

	/**
	 * The plans whose keys' calls are in shadow mode (a plan's {@code mode: shadow}); {@code null} for
	 * none, or for a limit whose calls have no keys.
	 */
	private final @Nullable Set<String> shadowPlans;

	/** Whether a call's completion may settle its tokens (K2: it keeps its key's bucket until then). */
	final boolean completes;

	private Limit(RegisteredBucket bucket, @Nullable Duration maxWait, boolean keyed, boolean completes) {
		this.bucket = bucket.name();
		this.limiter = bucket.limiter();
		this.stats = bucket.stats();
		this.local = "local".equals(bucket.backend());
		this.maxWait = (maxWait != null) ? maxWait : bucket.maxWait();
		this.keys = keyed ? bucket.keyed() : null;
		this.planWaits = maxWait == null && this.keys != null && this.keys.hasPlans();
		this.shadowPlans = (this.keys != null && !bucket.shadowPlans().isEmpty()) ? bucket.shadowPlans() : null;
		this.completes = completes;
	}

	/**
	 * Whether a call with this key is decided in shadow mode: the bucket is in shadow mode, or the key's
	 * plan is (contract revision 3, "Plans").
	 *
	 * @param key the call's key (a {@link PlannedKey} names its plan), or {@code null}
	 * @return {@code true} for shadow mode
	 */
	boolean isShadow(@Nullable Object key) {
		if (this.stats.isShadow()) {
			return true;
		}
		Set<String> shadow = this.shadowPlans;
		return shadow != null && key instanceof PlannedKey planned && planned.plan() != null
				&& shadow.contains(planned.plan());
	}

	/**
	 * A limit on a bucket.
	 *
	 * @param bucket the bucket
	 * @param maxWait the longest a call waits for its tokens
	 * @param keyed whether each call gives a key (then it takes from its key's bucket)
	 * @param completes whether calls are settled when they complete ({@link Limits#complete})
	 * @return the limit
	 */
	public static Limit of(RegisteredBucket bucket, Duration maxWait, boolean keyed, boolean completes) {
		return new Limit(bucket, maxWait, keyed, completes);
	}

	/**
	 * A limit on a bucket whose calls wait at most the bucket's {@code max-wait}, or, for a keyed call on
	 * a plan that sets one, the plan's (contract revision 3, "Plans").
	 *
	 * @param bucket the bucket
	 * @param keyed whether each call gives a key (then it takes from its key's bucket)
	 * @param completes whether calls are settled when they complete ({@link Limits#complete})
	 * @return the limit
	 */
	public static Limit of(RegisteredBucket bucket, boolean keyed, boolean completes) {
		return new Limit(bucket, null, keyed, completes);
	}

	/**
	 * The bucket's name.
	 *
	 * @return the name
	 */
	public String bucket() {
		return this.bucket;
	}

	/**
	 * Whether calls give a key.
	 *
	 * @return whether keyed
	 */
	public boolean keyed() {
		return this.keys != null;
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

	/**
	 * Takes the call's tokens, waiting at most the max-wait: from the bucket, or from its key's bucket
	 * (a call that goes to the overflow bucket is counted).
	 */
	Permit acquire(long tokens, @Nullable Object k) throws InterruptedException {
		if (k == null) {
			return this.limiter.acquire(tokens, this.maxWait);
		}
		return takeKeyed(ACQUIRE, tokens, k, null, null, null, 0, true);
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
		return takeKeyed(ACQUIRE, tokens, k, wait, targets, held, i, count);
	}

	/** How a keyed call takes its tokens from its key's bucket (a constant each: nothing is allocated). */
	@FunctionalInterface
	private interface KeyedTake<T, X extends Exception> {

		T take(RateLimiter target, long tokens, Duration wait, Object key) throws X;
	}

	private static final KeyedTake<Permit, InterruptedException> ACQUIRE = (target, tokens, wait, key) -> target
		.acquire(tokens, wait);

	private static final KeyedTake<Reservation, RuntimeException> RESERVE = (target, tokens, wait,
			key) -> new KeyedReservation(target.reserve(tokens, wait), key, target);

	/**
	 * Takes a keyed call's tokens from its key's bucket (or the overflow bucket), pinned while it takes
	 * them, and kept pinned for the call's completion (K2); a refusal carries the key.
	 */
	private <T, X extends Exception> T takeKeyed(KeyedTake<T, X> take, long tokens, Object k, @Nullable Duration wait,
			@Nullable RateLimiter @Nullable [] targets, KeyedBuckets.@Nullable Entry @Nullable [] held, int i,
			boolean count) throws X {
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
			// null: the limit's max-wait, or the key's plan's (a first try without waiting passes zero itself)
			Duration w = (wait != null) ? wait : this.planWaits ? entry.maxWait(this.maxWait) : this.maxWait;
			T taken = take.take(target, tokens, w, k);
			keep = hold(entry, held, i);
			return taken;
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
		if (held == null || !this.completes) {
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
		return takeKeyed(RESERVE, tokens, k, null, targets, held, i, true);
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
				shadowRefused(ex);
				return null;
			}
			long delay;
			try {
				delay = reservation.poll();
			}
			catch (RateLimitExceededException ex) {
				shadowRefused(ex);
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

	/** A shadow bucket would have refused: counted, and observed (the call does not wait). */
	private void shadowRefused(RateLimitExceededException refusal) {
		this.stats.refusedInShadow();
		this.stats.observer().started(this.bucket).ended(WaitObserver.SHADOW_REJECTED, this.bucket, refusal);
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
}
