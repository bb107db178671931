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

	/**
	 * Whether the {@code local} policy's claim of a capped bucket has taken its tokens from this instance's
	 * count in flight ({@link FailurePolicy.Flight}), after its local claim was covered.
	 */
	private boolean inFlightHere;

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
			if (this.bucket.tune().configured().capped() && !this.bucket.policy().admit(tokens(), this.bucket.tune())) {
				// this instance holds the limit in flight (calls its local policy let through, which Redis does not
				// count): the grant goes back, and the claim asks again when a call here ends
				this.bucket.sendUnconditionally(Mode.REFUND, tokens(), this.id);
				awaitRelease(now);
				return;
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
			this.bucket.subscribeForReleases();
			awaitRelease(now);
		}
		else {
			throw refused(Duration.ofNanos(TimeUnit.MICROSECONDS.toNanos(reply.waitMicros())), null);
		}
	}

	/** Waits for a release (here or anywhere) before it asks Redis again. */
	private void awaitRelease(long now) {
		this.phase = RELEASES;
		this.nextAskNanos = now + this.askIntervalNanos;
		this.askIntervalNanos = Math.min(this.askIntervalNanos * 2,
				TimeUnit.MILLISECONDS.toNanos(RedisTokenBucket.MAX_RELEASE_ASK_MILLIS));
		this.bucket.releaseWaiters().add(this);
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
		if (this.call != null) {
			// a late grant while the local bucket decides: kept if it lets the call through (capped: until the
			// call ends), given back if not (grantedPermit, giveBack)
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

	/**
	 * The local claim's delay; for a capped bucket, once it is covered, the claim also takes its tokens from
	 * this instance's count in flight, or waits for a call here to end (contract revision 3: the policy
	 * starts with the limit less what this instance holds).
	 */
	private long localDelay() {
		long delay;
		try {
			delay = this.local.poll();
		}
		catch (RateLimitExceededException ex) {
			throw refused(ex.getRetryAfter(), null);
		}
		FailurePolicy.Flight flight = this.bucket.policy().flight();
		if (delay != 0 || flight == null || this.inFlightHere) {
			return delay;
		}
		if (flight.take(tokens(), this.bucket.tune().current().limit())) {
			this.inFlightHere = true;
			this.bucket.releaseWaiters().remove(this);
			return 0;
		}
		this.bucket.releaseWaiters().add(this); // woken when a call here ends
		return AWAITING_RELEASE;
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
						this.bucket.policy().released(tokens());
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
				if (this.inFlightHere) {
					this.inFlightHere = false;
					this.bucket.policy().released(tokens());
					this.bucket.releasedSomewhere();
				}
				if (this.call != null) {
					this.call.discard(); // a late grant held for it goes back (holdWhenLate)
				}
			}
		}
	}

	@Override
	protected synchronized Permit grantedPermit() {
		this.bucket.claims().remove(this);
		Call late = this.call;
		if (this.phase == LOCAL && late != null) {
			// let through by the local bucket after its call timed out: a late grant counts it in Redis (capped:
			// until the call ends)
			late.keepWhenLate();
		}
		boolean capped = this.bucket.tune().configured().capped();
		if (this.phase == LOCAL) {
			Permit local = this.local.permit();
			if (!capped) {
				return local;
			}
			long n = tokens();
			String lease = this.id;
			return Permit.once(() -> {
				local.close();
				this.bucket.releasePolicyGrant(n, late, lease);
			});
		}
		if (!this.claimed || !capped) {
			return Permit.noop();
		}
		String lease = this.id;
		long n = tokens();
		return Permit.once(() -> this.bucket.releaseLease(lease, n));
	}
}
