package dev.ratelimit.spring.engine;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.BucketStats;
import dev.ratelimit.spring.KeyedBuckets;
import org.jspecify.annotations.Nullable;

/**
 * One call on the general path (several buckets, shadow buckets among several, or completion
 * attributes): its claim on every bucket, then its permit.
 *
 * <p>As a {@link Reservation} it is covered when every claim is (so the call waits once, for the longest
 * of the claims' waits), and a claim that is refused while waiting (a capped bucket whose releases did not
 * come within its max-wait) cancels the others. {@link #poll()} asks to be polled again at the soonest of
 * the claims' next looks, not the longest: a claim that waits for releases must look again by its own
 * deadline, however long another claim of the call still waits for time. A bucket whose claim found
 * its tokens there records no wait in {@code ratelimit.wait}, though the call waited for another: a
 * bucket's timer shows the calls that waited for its own tokens. As a {@link Permit}, closing it closes
 * every bucket's permit (capped buckets are released together).
 * {@link #complete} settles it once, when the call completed.
 *
 * <p>Buckets in shadow mode were decided when the call was claimed (they never hold it back); their
 * tokens go back with the others when the call is cancelled or refused, and their counts are taken
 * back (a call that is not let through counts neither as granted nor as shadow-rejected).
 */
final class Call implements Reservation, Permit {

	private static final int PENDING = 0;

	private static final int GRANTED = 1;

	private static final int CANCELLED = 2;

	private final Limit[] limits;

	private final long[] tokens;

	private final @Nullable Object[] keys;

	/** The claims of enforcing buckets; {@code null} for a bucket in shadow mode. */
	final @Nullable Reservation[] parts;

	/** The permits: taken when granted (shadow buckets: when claimed). */
	private final @Nullable Permit[] permits;

	/** Shadow buckets only: whether the bucket kept the call's tokens (it did unless it would have refused). */
	private final boolean[] kept;

	/** Shadow buckets only: whether the bucket decided (and counted) for the call. */
	private final boolean[] decided;

	/** The bucket each keyed claim took from (its key's, or the overflow bucket): where a refund goes. */
	final @Nullable RateLimiter[] targets;

	/** The keys' buckets kept while the call runs, for its completion (K2: {@code Limit.hold}). */
	final KeyedBuckets.@Nullable Entry[] held;

	private final AtomicInteger state = new AtomicInteger(PENDING);

	private final AtomicBoolean completed = new AtomicBoolean();

	private final AtomicBoolean closed = new AtomicBoolean();

	Call(Limit[] limits, long[] tokens, @Nullable Object[] keys) {
		this(limits, tokens, keys, new RateLimiter[limits.length], new KeyedBuckets.Entry[limits.length],
				new Permit[limits.length]);
	}

	private Call(Limit[] limits, long[] tokens, @Nullable Object[] keys, @Nullable RateLimiter @Nullable [] targets,
			KeyedBuckets.@Nullable Entry @Nullable [] held, @Nullable Permit[] permits) {
		this.limits = limits;
		this.tokens = tokens;
		this.keys = keys;
		this.parts = new Reservation[limits.length];
		this.permits = permits;
		this.kept = new boolean[limits.length];
		this.decided = new boolean[limits.length];
		this.refusedAt = new RateLimitExceededException[limits.length];
		this.targets = (targets != null) ? targets : new RateLimiter[limits.length];
		this.held = (held != null) ? held : new KeyedBuckets.Entry[limits.length];
	}

	/** Lets the keys' buckets kept for the completion go (once: from close, or from cancel). */
	void unholdKeys() {
		for (int i = 0; i < this.held.length; i++) {
			KeyedBuckets.Entry entry = this.held[i];
			if (entry != null) {
				this.held[i] = null;
				entry.unpin();
			}
		}
	}

	/**
	 * A call that took every bucket's tokens at once (the blocking path's first try): granted, its
	 * permits those of the buckets ({@code null} where there is nothing to release).
	 */
	static Call granted(Limit[] limits, long[] tokens, @Nullable Object[] keys, @Nullable RateLimiter @Nullable [] targets,
			KeyedBuckets.@Nullable Entry @Nullable [] held, @Nullable Permit[] permits) {
		Call call = new Call(limits, tokens, keys, targets, held, permits);
		java.util.Arrays.fill(call.kept, true);
		call.state.set(GRANTED);
		return call;
	}

	/** Records a shadow bucket's decision: its permit, or {@code null} when it kept nothing. */
	void shadowed(int i, @Nullable Permit permit) {
		this.permits[i] = permit;
		this.kept[i] = permit != null;
		this.decided[i] = true;
	}

	/**
	 * Refusals by remote buckets (Redis) found at a poll while another remote claim's answer had not come:
	 * decided when every answer is in, so that the refusal names the longest of the refusing waits (the
	 * answer that comes last may refuse with a longer one). Meanwhile only the claims awaiting an answer are
	 * polled; the others are polled once more when the call is decided. A refusal by a bucket in this JVM
	 * (a capped bucket past its max-wait) is decided at once, as is one found at the claim.
	 */
	private boolean holding;

	/** The refusal of each claim refused at an earlier poll (its tokens went back), while the call's is held. */
	private final @Nullable RateLimitExceededException[] refusedAt;

	/** How soon a call holding a refusal looks again when no claim said when (the answer wakes it). */
	private static final long ANSWER_POLL_NANOS = 1_000_000L;

	@Override
	public synchronized long poll() {
		if (this.state.get() == CANCELLED) {
			throw new IllegalStateException("Reservation already cancelled");
		}
		boolean holding = this.holding;
		long soonest = 0;
		boolean refused = holding;
		boolean localRefused = false;
		boolean unanswered = false;
		// refusals found here (a Redis answer, a capped wait for releases past its max-wait) are decided
		// as at the claim: every part is asked, the longest wait is named and alone counted
		boolean deferred = BucketStats.defer(true);
		try {
			for (int i = 0; i < this.parts.length; i++) {
				if (holding && this.limits[i].local) {
					continue;
				}
				long delay = pollPart(i);
				if (delay == REFUSED) {
					refused = true;
					localRefused |= this.limits[i].local;
					continue;
				}
				if (delay > 0 && (soonest == 0 || delay < soonest)) {
					soonest = delay;
				}
				unanswered |= this.parts[i] != null && this.parts[i].awaitingAnswer();
			}
			if (refused && !unanswered && holding) {
				// every answer is in: the buckets in this JVM are asked once more before the call is decided
				for (int i = 0; i < this.parts.length; i++) {
					if (this.limits[i].local) {
						pollPart(i);
					}
				}
			}
		}
		finally {
			BucketStats.defer(deferred);
		}
		if (refused && unanswered && !localRefused) {
			this.holding = true;
			return (soonest == 0) ? ANSWER_POLL_NANOS : soonest;
		}
		if (refused) {
			this.holding = false;
			Refusals refusals = Refusals.inClaimOrder(this.limits, this.refusedAt);
			cancel(); // the refused claims gave their tokens back already; the others do now
			throw refusals.decide();
		}
		return soonest;
	}

	/** What {@link #pollPart} returns for a claim that refused (now or at an earlier poll). */
	private static final long REFUSED = -1;

	/**
	 * Polls claim {@code i} unless it is a shadow bucket's or refused already: its delay ({@code 0} for
	 * none to poll), or {@link #REFUSED}, its refusal kept in {@link #refusedAt}.
	 */
	private long pollPart(int i) {
		Reservation part = this.parts[i];
		if (part == null) {
			return 0;
		}
		if (this.refusedAt[i] != null) {
			return REFUSED;
		}
		try {
			return part.poll();
		}
		catch (RateLimitExceededException ex) {
			this.refusedAt[i] = ex;
			return REFUSED;
		}
	}

	@Override
	public Permit permit() {
		if (!this.state.compareAndSet(PENDING, GRANTED)) {
			throw new IllegalStateException("Reservation already " + ((this.state.get() == GRANTED) ? "granted" : "cancelled"));
		}
		for (int i = 0; i < this.parts.length; i++) {
			Reservation part = this.parts[i];
			if (part != null) {
				this.permits[i] = part.permit();
			}
		}
		return this;
	}

	@Override
	public boolean cancel() {
		if (!this.state.compareAndSet(PENDING, CANCELLED)) {
			return false;
		}
		for (Reservation part : this.parts) {
			if (part != null) {
				part.cancel();
			}
		}
		for (int i = 0; i < this.limits.length; i++) {
			if (this.kept[i]) {
				this.limits[i].refund(this.tokens[i], this.keys[i], this.targets[i], this.permits[i]);
				this.permits[i].close();
			}
			if (this.decided[i]) {
				// the call was not let through after all: a shadow bucket counts nothing for it
				if (this.kept[i]) {
					this.limits[i].stats.ungrant();
				}
				else {
					this.limits[i].stats.unrefuse();
				}
			}
		}
		unholdKeys();
		return true;
	}

	@Override
	public void onWake(Runnable action) {
		for (Reservation part : this.parts) {
			if (part != null) {
				part.onWake(action);
			}
		}
	}

	/**
	 * Parks the calling thread until every claim is covered (woken early when one may have moved up),
	 * then takes the permits: the blocking path.
	 *
	 * @return this call, as its permit
	 * @throws RateLimitExceededException when a claim cannot be covered within its max-wait; every claim
	 *         is given back
	 * @throws InterruptedException when interrupted; every claim is given back, the flag stays set
	 */
	Permit await() throws InterruptedException {
		return ObservedReservation.await(this, this);
	}

	/** Closes every bucket's permit, once. */
	@Override
	public void close() {
		if (!this.closed.compareAndSet(false, true)) {
			return;
		}
		for (Permit permit : this.permits) {
			if (permit != null) {
				permit.close();
			}
		}
		unholdKeys(); // after the completion (refundIf, settle), which comes before the close
	}

	/**
	 * The call completed: each bucket that settles keeps what the settlement says the call really cost,
	 * the difference given back or taken. Once; a bucket that kept nothing (a shadow bucket that would
	 * have refused) is left alone.
	 */
	void complete(Settlement settlement) {
		if (this.state.get() != GRANTED || !this.completed.compareAndSet(false, true)) {
			return;
		}
		for (int i = 0; i < this.limits.length; i++) {
			Limit limit = this.limits[i];
			if (!limit.completes || (this.parts[i] == null && !this.kept[i])) {
				continue;
			}
			long real = settlement.realCost(i, this.tokens[i]);
			if (real < this.tokens[i]) {
				limit.refund(this.tokens[i] - real, this.keys[i], this.targets[i], this.permits[i]);
			}
			else if (real > this.tokens[i]) {
				try {
					limit.charge(real - this.tokens[i], this.keys[i], this.targets[i]);
				}
				catch (RuntimeException ex) {
					settlement.unpaid(i, real, ex); // nothing was taken: the cost stands, the call's outcome too
				}
			}
		}
	}

	@Override
	public String toString() {
		StringBuilder buckets = new StringBuilder();
		for (int i = 0; i < this.limits.length; i++) {
			buckets.append((i > 0) ? ", " : "").append('\'').append(this.limits[i].bucket).append("' (")
				.append(this.tokens[i]).append(')');
		}
		return "buckets " + buckets;
	}
}
