package dev.ratelimit.redis;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.core.AbstractReservation;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.redis.BucketScript.Mode;
import dev.ratelimit.redis.BucketScript.Reply;
import dev.ratelimit.redis.BucketScript.Settings;
import dev.ratelimit.redis.FailureDetector.Call;
import org.jspecify.annotations.Nullable;

/**
 * A caller's claim. Its phases: {@code ASKING} (a call to Redis is out), then {@code DUE} (Redis
 * granted the tokens, or the policy let the call through, at {@code due}), {@code RELEASES} (a
 * capped bucket with every token in flight: ask again later) or {@code LOCAL} (the fallback's claim
 * decides). Every move happens under the claim's monitor: a poll and a cancel may race.
 */
final class RedisClaim extends AbstractReservation {

	private static final int ASKING = 0;

	private static final int DUE = 1;

	private static final int RELEASES = 2;

	private static final int LOCAL = 3;

	private static final int TUNING = 4;

	private static final long FIRST_RELEASE_ASK_NANOS = TimeUnit.MILLISECONDS.toNanos(25);

	private final RedisTokenBucket bucket;

	private final long budgetNanos;

	private final long startNanos;

	private int phase = ASKING;

	private @Nullable Call call;

	/** The read of the template's settings a key's claim waits for before it asks ({@code TUNING}). */
	private @Nullable CompletableFuture<Boolean> tuning;

	private long due;

	/** Whether Redis holds tokens for this claim (to give back on cancel, to release on close). */
	private boolean claimed;

	/** Whether Redis holds this claim's ticket in the bucket's queue (capped, waiting for releases). */
	private boolean queued;

	private long nextAskNanos;

	private long askIntervalNanos = FIRST_RELEASE_ASK_NANOS;

	private @Nullable Reservation local;

	/** The claim's lease and ticket: {@code <id>#<n>}, unique across instances (capped buckets). */
	private final String id;

	RedisClaim(RedisTokenBucket bucket, long n, Duration maxWait, long budgetNanos, long start) {
		super(bucket.name(), n, maxWait, bucket.clock(), start, bucket.stats(), bucket.waiting());
		this.bucket = bucket;
		this.budgetNanos = budgetNanos;
		this.startNanos = start;
		this.id = bucket.tune().configured().capped() ? bucket.newId(n) : "";
	}

	synchronized void allow(long now) {
		this.phase = DUE;
		this.due = now;
	}

	/**
	 * Sends the acquire; in a back-off, applies the policy at once. A key's bucket whose template
	 * settings are too old first waits for them to be read ({@code TUNING}).
	 */
	synchronized void ask(long now) {
		Settings s = this.bucket.tune().current();
		if (this.bucket.keyBucket()) {
			Settings fresh = this.bucket.tune().forKey(now);
			if (fresh == null && this.bucket.detector().isUp()) {
				this.phase = TUNING;
				this.tuning = this.bucket.tune().read();
				this.tuning.whenComplete((unused, ex) -> wakeUp());
				return;
			}
			s = (fresh != null) ? fresh : s;
		}
		send(s, now);
	}

	private void send(Settings s, long now) {
		long left = Math.max(this.budgetNanos - Math.max(now - this.startNanos, 0), 0);
		Call sent = this.bucket.send(s, Mode.ACQUIRE, tokens(), s.maxWaitMicros(left), this.id);
		if (sent == null) {
			applyPolicy(now);
			return;
		}
		this.call = sent;
		this.phase = ASKING;
		sent.whenDone(this::wakeUp);
	}

	void wakeUp() {
		wake();
	}

	/**
	 * The bucket was reset (contract revision 3): a claim granted with a wait it has not waited out yet had its
	 * tokens taken before the reset, which forgot them, so it claims again from the full bucket (capped: its
	 * lease released first); one waiting for releases asks again at once; one covered already keeps its tokens.
	 */
	void resetNearby() {
		synchronized (this) {
			long now = this.bucket.clock().getAsLong();
			if (this.phase == DUE && this.claimed && this.due - now > 0) {
				this.claimed = false;
				if (this.bucket.tune().configured().capped()) {
					this.bucket.held().decrementAndGet();
					this.bucket.sendUnconditionally(Mode.RELEASE, 0, this.id);
				}
				ask(now);
			}
			else if (this.phase == RELEASES) {
				this.nextAskNanos = now;
				this.askIntervalNanos = FIRST_RELEASE_ASK_NANOS;
			}
		}
		wake();
	}

	void releasedNearby() {
		synchronized (this) {
			this.nextAskNanos = this.bucket.clock().getAsLong();
			this.askIntervalNanos = FIRST_RELEASE_ASK_NANOS;
		}
		wake();
	}

	@Override
	protected synchronized long delayNanos(long now) {
		for (;;) {
			switch (this.phase) {
				case ASKING -> {
					Call asked = this.call;
					if (!asked.isSettled(now)) {
						return AWAITING_ANSWER;
					}
					Reply reply = asked.reply();
					if (reply == null) {
						applyPolicy(now);
					}
					else {
						answered(reply, asked, now);
					}
				}
				case DUE -> {
					return Math.max(this.due - now, 0);
				}
				case RELEASES -> {
					if (now - this.nextAskNanos < 0) {
						return AWAITING_RELEASE;
					}
					this.bucket.releaseWaiters().remove(this);
					ask(now);
				}
				case TUNING -> {
					if (!this.tuning.isDone()) {
						return AWAITING_ANSWER;
					}
					// read, or failed: either way the settings in force now are the best there are
					send(this.bucket.tune().current(), now);
				}
				default -> {
					return localDelay();
				}
			}
		}
	}

	private void answered(Reply reply, Call asked, long now) {
		if (reply.code() == Reply.GRANTED) {
			if (!asked.take()) {
				throw new IllegalStateException("Grant of '" + this.bucket.name() + "' taken twice");
			}
			this.claimed = true;
			this.bucket.mirror(Mode.CHARGE, tokens());
			if (this.bucket.tune().configured().capped()) {
				this.bucket.held().incrementAndGet();
			}
			long wait = TimeUnit.MICROSECONDS.toNanos(reply.waitMicros());
			// counted from the answer (never early), but never past the caller's deadline
			this.due = Math.min(now + wait, this.startNanos + this.budgetNanos);
			this.phase = DUE;
		}
		else if (reply.code() == Reply.AWAITING_RELEASE) {
			this.queued = true;
			this.phase = RELEASES;
			this.nextAskNanos = now + this.askIntervalNanos;
			this.askIntervalNanos = Math.min(this.askIntervalNanos * 2,
					TimeUnit.MILLISECONDS.toNanos(RedisTokenBucket.MAX_RELEASE_ASK_MILLIS));
			this.bucket.subscribeForReleases();
			this.bucket.releaseWaiters().add(this);
		}
		else {
			throw refused(Duration.ofNanos(TimeUnit.MICROSECONDS.toNanos(reply.waitMicros())), null);
		}
	}

	/** Redis did not answer: the bucket's failure policy decides ({@link FailurePolicy#decide}). */
	private void applyPolicy(long now) {
		long left = Math.max(this.budgetNanos - Math.max(now - this.startNanos, 0), 0);
		this.bucket.policy().decide(this, now, left);
	}

	/**
	 * The {@code deny} policy's refusal.
	 *
	 * @return the exception to throw, naming the bucket and why
	 */
	RateLimitExceededException refusedWhileDown() {
		return refused(Duration.ofNanos(this.bucket.detector().remainingBackoffNanos()),
				"Rate limit bucket '" + this.bucket.name() + "' refuses calls while Redis does not answer ("
						+ this.bucket.detector().lastError() + ")");
	}

	/**
	 * The {@code local} policy decides this claim with a claim on its in-memory bucket.
	 *
	 * @param local the in-memory bucket's claim
	 */
	void decideLocally(Reservation local) {
		local.onWake(this::wakeUp);
		this.local = local;
		this.phase = LOCAL;
		if (this.call != null && !this.bucket.tune().configured().capped()) {
			// a late grant while the local bucket decides: kept if it lets the call through,
			// given back if not (grantedPermit, giveBack)
			this.call.holdWhenLate();
		}
	}

	/** @return the tokens claimed */
	long cost() {
		return tokens();
	}

	/** @return the bucket's settings */
	TemplateTune tune() {
		return this.bucket.tune();
	}

	private long localDelay() {
		try {
			return this.local.poll();
		}
		catch (RateLimitExceededException ex) {
			throw refused(ex.getRetryAfter(), null);
		}
	}

	/** Refuses the claim: cancelled (nothing is held), counted, and the exception to throw. */
	RateLimitExceededException refused(Duration retryAfter, @Nullable String message) {
		if (cancel()) {
			this.bucket.stats().recordRejected();
		}
		return (message != null) ? new RateLimitExceededException(this.bucket.name(), tokens(), retryAfter,
				message) : new RateLimitExceededException(this.bucket.name(), tokens(), retryAfter);
	}

	@Override
	protected synchronized void giveBack() {
		this.bucket.releaseWaiters().remove(this);
		this.bucket.claims().remove(this);
		switch (this.phase) {
			case ASKING -> {
				// no call is out when the bucket was in a back-off and the policy refused at once
				if (this.call != null) {
					this.call.discard();
				}
			}
			case DUE -> {
				if (this.claimed) {
					this.claimed = false;
					this.bucket.sendUnconditionally(Mode.REFUND, tokens(), this.id);
					this.bucket.mirror(Mode.REFUND, tokens());
					if (this.bucket.tune().configured().capped()) {
						this.bucket.held().decrementAndGet();
						this.bucket.releasedSomewhere();
					}
				}
			}
			case RELEASES -> this.bucket.sendUnconditionally(Mode.LEAVE, 0, this.id);
			case TUNING -> {
				// a claim queued for releases asks again after a read: its ticket is still in the queue
				if (this.queued) {
					this.bucket.sendUnconditionally(Mode.LEAVE, 0, this.id);
				}
			}
			default -> {
				this.local.cancel();
				if (this.call != null) {
					this.call.discard(); // a late grant held for it goes back (holdWhenLate)
				}
			}
		}
	}

	@Override
	protected synchronized Permit grantedPermit() {
		this.bucket.claims().remove(this);
		if (this.phase == LOCAL && this.call != null && !this.bucket.tune().configured().capped()) {
			// let through by the local bucket after its call timed out: a late grant counts it in Redis
			this.call.keepWhenLate();
		}
		if (this.phase == LOCAL) {
			return this.local.permit();
		}
		if (!this.claimed || !this.bucket.tune().configured().capped()) {
			return Permit.noop();
		}
		String lease = this.id;
		return Permit.once(() -> this.bucket.releaseLease(lease));
	}
}
