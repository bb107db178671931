package dev.ratelimit.redis;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

import dev.ratelimit.core.AbstractReservation;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.redis.BucketScript.Reply;
import dev.ratelimit.redis.BucketScript.Settings;
import dev.ratelimit.redis.FailureDetector.Call;
import org.jspecify.annotations.Nullable;

/**
 * The batch of one {@link RedisTokenBucket} on this instance (contract revision 3, "Batches on Redis",
 * {@code redis.batch}): tokens taken from the Redis bucket several at a time with the script's mode
 * {@code batch}, and granted here without a Redis call per grant.
 */
final class RedisBatch {

	/*
	 * Design notes.
	 *
	 * State. `hand` is the number of tokens of the batch this instance may still grant; `deadline` (the
	 * bucket's clock, nanoseconds) is when the hand stops being grantable: the time the last batch call was
	 * sent plus the batch lease, never later than the lease's deadline in Redis (Redis stamps it with its
	 * TIME when it runs the call, after it was sent). Redis keeps, per holder (`b:<holder>`), the tokens it
	 * believes this instance holds, and in `h` the sum over holders; the bucket refills up to `limit - h`.
	 * Each batch call says how many tokens the holder keeps (`kept`, the hand when the call was sent) and
	 * gives some back (`back`); what Redis held for it beyond them counts as spent (granted here).
	 *
	 * B1. Tokens are taken from Redis before any of them is granted, and held tokens count against the
	 *     limit, so over every window of grants the cluster grants at most limit + rate * w.
	 *     (BucketScriptModelTests.batchesOfSeveralInstancesFollowTheReferenceAndKeepTheBound; on real Redis,
	 *     RedisBatchTests.instancesSharingABatchedBucketGrantAtMostTheBoundOverEveryWindow)
	 * B2. No grant from the hand at or after `deadline`: a batch whose lease ran out in Redis counted as
	 *     spent there, once, so granting it later would count it twice. A reply whose `kept` is below what
	 *     the call said drops the difference from the hand (the lease ran out before the call ran).
	 *     (BucketScriptModelTests.batches..., whose instances follow the same rule; a stale count is drawn
	 *     there too)
	 * B3. Redis never creates tokens for a holder: it keeps at most what it held, takes back at most what it
	 *     held, and never refills above `limit - h` (level + h <= limit after every call).
	 *     (BucketScriptModelTests.batches...: checked after every step)
	 * B4. A crashed instance (no close) loses at most its batch, once: its lease runs out and its tokens count
	 *     as spent from the deadline on. (RedisBatchTests.aKilledInstanceLosesAtMostOneBatchOnce)
	 * B5. Unspent tokens go back to Redis within two `batch-hold`s of the last grant (a sweep every hold gives
	 *     the hand back when nothing was granted since the previous sweep), when a retune changed the
	 *     settings the batch was taken under (at the next sweep), and at close.
	 *     (RedisBatchTests.closeGivesTheUnspentTokensBack, RedisBatchTests.anIdleBatchGoesBackWithinItsHold)
	 * B6. A grant from the hand is a CAS on `hand` (plus a LongAdder for the demand and a clock read for B2):
	 *     no allocation, no lock, no Redis call on the caller's thread. A refill is sent, asynchronously, when
	 *     a grant leaves half the batch size or less; only one batch call is in flight at a time.
	 * B7. Callers that may wait and find the hand empty line up behind one fair lock (arrival order within
	 *     the instance); while any of them waits, the fast path grants nothing (a later caller does not
	 *     overtake them). A reply that took nothing says when the next token will be there: until then (at
	 *     most one `batch-hold`) callers are refused here without asking Redis.
	 *     (RedisBatchTests.aHammeredBucketRefusesLocallyWithFewCalls)
	 *
	 * Memory: `hand` is an AtomicLong (CAS); `deadline`, `refuseUntil`, `size` are volatile, written by the
	 * thread applying a reply (one at a time: `inFlight`), read racily by callers: a stale `deadline` is the
	 * earlier one (a reply only moves it forward, B2 holds), a stale `refuseUntil` at worst sends one more call.
	 */

	/** What {@link #slow} found. */
	static final int GRANTED = 0;

	static final int REFUSED = 1;

	/** Redis did not answer: the caller applies the bucket's usual path (its failure policy). */
	static final int NO_ANSWER = 2;

	private static final ScheduledExecutorService SWEEPER = Executors.newSingleThreadScheduledExecutor((task) -> {
		Thread thread = new Thread(task, "ratelimit-redis-batches");
		thread.setDaemon(true);
		return thread;
	});

	private final RedisTokenBucket bucket;

	/** The holder's id in Redis: one per bucket object, so a restarted instance never claims a dead one's. */
	private final String holder = UUID.randomUUID().toString();

	/** A fixed batch size, or 0 for {@code auto}. */
	private final long fixed;

	private final long holdNanos;

	private final long leaseNanos;

	private final long leaseMicros;

	private final long timeoutNanos;

	private final LongSupplier clock;

	/** Batches that hold tokens now, given back when the application closes. */
	private final Set<RedisBatch> holding;

	private final AtomicLong hand = new AtomicLong();

	private volatile long deadline;

	private volatile long refuseUntil;

	private volatile boolean refusing;

	/** The tokens a batch call asks for (auto: the demand of the last hold). */
	private volatile long size = 1;

	private final LongAdder demand = new LongAdder();

	/** The demand's sum at the last sweep (sweeper thread only). */
	private long demandSeen;

	private final AtomicInteger waiters = new AtomicInteger();

	private final ReentrantLock line = new ReentrantLock(true);

	/** The batch call in flight (guarded by {@code this}). */
	private @Nullable CompletableFuture<Boolean> inFlight;

	/** The settings the hand was taken under: a retune gives it back. */
	private volatile @Nullable Settings takenWith;

	private @Nullable ScheduledFuture<?> sweep;

	private volatile boolean closed;

	/** Whether a refill was handed to the sweeper's thread and has not run yet (B6: not on the caller's). */
	private final java.util.concurrent.atomic.AtomicBoolean refillAsked = new java.util.concurrent.atomic.AtomicBoolean();

	private final Runnable refillTask = () -> {
		this.refillAsked.set(false);
		refill(0);
	};

	RedisBatch(RedisTokenBucket bucket, long fixed, Duration hold, long timeoutNanos, LongSupplier clock,
			Set<RedisBatch> holding) {
		this.bucket = bucket;
		this.fixed = fixed;
		this.holdNanos = hold.toNanos();
		this.timeoutNanos = timeoutNanos;
		// long enough that a live instance always gives its tokens back first (B5), short enough that a dead
		// one's batch comes back soon (B4)
		this.leaseNanos = 3 * this.holdNanos + timeoutNanos;
		this.leaseMicros = TimeUnit.NANOSECONDS.toMicros(this.leaseNanos);
		this.clock = clock;
		this.holding = holding;
		if (fixed > 0) {
			this.size = fixed;
		}
	}

	/**
	 * The batch size as configured: {@code none} (0 returned), {@code auto} ({@code -1}) or a whole number
	 * from 1 to the limit.
	 *
	 * @throws IllegalArgumentException naming the bucket and the property when it is none of them
	 */
	static long parse(@Nullable String batch, long limit, String bucket) {
		if (batch == null || batch.isBlank() || batch.strip().equals("none")) {
			return 0;
		}
		if (batch.strip().equals("auto")) {
			return -1;
		}
		long n;
		try {
			n = Long.parseLong(batch.strip());
		}
		catch (NumberFormatException ex) {
			n = 0;
		}
		if (n < 1 || n > limit) {
			throw new IllegalArgumentException("ratelimit.buckets." + bucket + ".redis.batch must be none, auto or a"
					+ " whole number from 1 to the limit (" + limit + "), was '" + batch + "'");
		}
		return n;
	}

	/** Tokens in hand (for the view's {@code available}). */
	long inHand() {
		return (this.clock.getAsLong() - this.deadline < 0) ? this.hand.get() : 0;
	}

	/** Whether this instance holds nothing of the bucket (a key's bucket may then be dropped). */
	boolean holdsNothing() {
		return this.hand.get() == 0 && this.inFlight == null;
	}

	/** The fast path (B6): {@code n} tokens from the hand, unless callers wait (B7) or the hand ran out. */
	boolean take(long n) {
		return this.waiters.get() == 0 && takeInHand(n);
	}

	private boolean takeInHand(long n) {
		long now = this.clock.getAsLong();
		if (now - this.deadline >= 0) {
			return false; // B2
		}
		for (;;) {
			long t = this.hand.get();
			if (t < n) {
				return false;
			}
			if (this.hand.compareAndSet(t, t - n)) {
				this.demand.add(n);
				if (t - n <= this.size / 2 && this.inFlight == null && !this.refusing
						&& this.refillAsked.compareAndSet(false, true)) {
					SWEEPER.execute(this.refillTask);
				}
				return true;
			}
		}
	}

	/**
	 * How long callers are refused here without asking Redis (B7), as of {@code now}: 0 when not.
	 */
	long refusedFor(long now) {
		long left = this.refuseUntil - now;
		if (!this.refusing || left <= 0) {
			this.refusing = false;
			return 0;
		}
		return left;
	}

	/** A view of the bucket with this instance's unspent batch in its {@code available} (contract revision 3). */
	RateLimiterSnapshot withHand(RateLimiterSnapshot view) {
		return new RateLimiterSnapshot(view.rate(), view.period(), view.limit(), view.cappedRelease(),
				view.available() + inHand(), view.deficiency(), view.waiting(), view.inFlight(), view.granted(),
				view.rejected(), view.pools(), view.behindSchedule(), view.untilFull(), view.resetsAt(),
				view.untilReset());
	}

	/**
	 * A {@code tryAcquire} of the bucket, served by this batch when it can be.
	 *
	 * @return {@link #GRANTED}, {@link #REFUSED} (Redis said when the next token is there), or
	 *         {@link #NO_ANSWER}: ask Redis
	 */
	int tryAcquire(long n) {
		return take(n) ? GRANTED : slow(n, 0);
	}

	/**
	 * An {@code acquire} of the bucket, served by this batch when it can be: waits in arrival order (B7) within
	 * {@code maxWait}, and counts the call.
	 *
	 * @return the permit, or {@code null} when Redis did not answer: the bucket's own path (and its failure
	 *         policy) decides
	 * @throws RateLimitExceededException when Redis said the next token is beyond {@code maxWait}
	 * @throws InterruptedException when interrupted while waiting; nothing is taken
	 */
	@Nullable Permit acquire(long n, Duration maxWait, StatsRecorder stats) throws InterruptedException {
		if (take(n)) {
			stats.recordGranted(0);
			return Permit.noop();
		}
		long start = this.clock.getAsLong();
		int found = slow(n, AbstractReservation.budgetNanos(maxWait));
		if (found == GRANTED) {
			stats.recordGranted(this.clock.getAsLong() - start);
			return Permit.noop();
		}
		if (found == REFUSED) {
			if (Thread.interrupted()) {
				throw new InterruptedException("Interrupted while acquiring " + n + " tokens of '" + this.bucket.name() + "'");
			}
			stats.recordRejected();
			throw new RateLimitExceededException(this.bucket.name(), n,
					Duration.ofNanos(Math.max(refusedFor(this.clock.getAsLong()), 1_000)));
		}
		return null;
	}

	/**
	 * The slow path: {@code n} tokens for a caller that waits at most {@code budgetNanos}, in arrival order
	 * (B7), asking Redis for a batch when the hand is empty.
	 */
	int slow(long n, long budgetNanos) {
		long start = this.clock.getAsLong();
		this.waiters.incrementAndGet();
		this.line.lock();
		try {
			for (;;) {
				if (takeInHand(n)) {
					return GRANTED;
				}
				long now = this.clock.getAsLong();
				long refused = refusedFor(now);
				if (refused > 0) {
					if (now + refused - start > budgetNanos) {
						return REFUSED;
					}
					LockSupport.parkNanos(refused);
					if (Thread.currentThread().isInterrupted()) {
						return REFUSED;
					}
					continue;
				}
				CompletableFuture<Boolean> reply = refill(n);
				Boolean answered;
				try {
					answered = reply.get(this.timeoutNanos, TimeUnit.NANOSECONDS);
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
					return REFUSED;
				}
				catch (Exception ex) {
					answered = false;
				}
				if (!answered) {
					return takeInHand(n) ? GRANTED : NO_ANSWER;
				}
			}
		}
		finally {
			this.line.unlock();
			this.waiters.decrementAndGet();
		}
	}

	/** Gives tokens of a granted call back to the hand (a cancelled reservation, a refund). */
	void giveBackToHand(long n) {
		this.hand.addAndGet(n);
	}

	/**
	 * Sends a batch call unless one is in flight: asks for enough to fill the hand to the batch size (at
	 * least {@code atLeast}, at least one), saying what the hand keeps.
	 *
	 * @return completes with whether Redis answered
	 */
	CompletableFuture<Boolean> refill(long atLeast) {
		synchronized (this) {
			if (this.inFlight != null) {
				return this.inFlight;
			}
			long want = Math.max(1, Math.max(atLeast, currentSize() - this.hand.get()));
			return send(want, 0);
		}
	}

	/** Gives the whole hand back (B5); waits for the answer at most the timeout when {@code wait}. */
	void giveBackAll(boolean wait) {
		CompletableFuture<Boolean> sent;
		synchronized (this) {
			CompletableFuture<Boolean> before = this.inFlight;
			if (before != null) {
				if (!wait) {
					return; // the next sweep
				}
				try {
					before.get(this.timeoutNanos, TimeUnit.NANOSECONDS);
				}
				catch (Exception ex) {
					// the next call says what the hand keeps anyway
				}
				if (this.inFlight != null) {
					return;
				}
			}
			long back = this.hand.getAndSet(0);
			if (back == 0) {
				return;
			}
			sent = send(0, back);
		}
		if (wait) {
			try {
				sent.get(this.timeoutNanos, TimeUnit.NANOSECONDS);
			}
			catch (Exception ex) {
				// not answered: the lease runs out in Redis and the tokens count as spent (B4)
			}
		}
	}

	private long currentSize() {
		if (this.fixed > 0) {
			return this.fixed;
		}
		// auto: what this instance's callers took in the last hold, and in this one so far
		long limit = this.bucket.tune().current().limit();
		long recent = Math.max(this.size, this.demand.sum() - this.demandSeen);
		return Math.max(1, Math.min(recent, limit / 2));
	}

	/** Sends one batch call (guarded by {@code this}). */
	private CompletableFuture<Boolean> send(long want, long back) {
		long kept = this.hand.get();
		long sent = this.clock.getAsLong();
		CompletableFuture<Boolean> done = new CompletableFuture<>();
		@SuppressWarnings("unchecked")
		CompletableFuture<List<Object>>[] future = new CompletableFuture[1];
		Call call = this.bucket.sendBatch(want, back, this.holder + "#" + kept, this.leaseMicros,
				(command) -> future[0] = command);
		if (call == null || future[0] == null) {
			// not sent (the bucket runs on its failure policy): what was to go back stays in hand
			this.hand.addAndGet(back);
			done.complete(false);
			return done;
		}
		this.inFlight = done;
		Settings with = this.bucket.tune().current();
		future[0].whenComplete((values, ex) -> apply(values, ex, kept, sent, with, done));
		return done;
	}

	private void apply(@Nullable List<Object> values, @Nullable Throwable ex, long kept, long sent, Settings with,
			CompletableFuture<Boolean> done) {
		boolean answered = false;
		try {
			if (ex == null && values != null && values.size() == 15) {
				Reply reply = Reply.of(values);
				long dropped = kept - reply.kept();
				while (dropped > 0) {
					// B2: the lease ran out before the call ran; those tokens counted as spent in Redis
					long t = this.hand.get();
					long next = Math.max(0, t - dropped);
					if (this.hand.compareAndSet(t, next)) {
						break;
					}
				}
				if (reply.taken() > 0 || reply.kept() > 0) {
					this.deadline = sent + this.leaseNanos;
					this.takenWith = with;
				}
				if (reply.taken() > 0) {
					this.hand.addAndGet(reply.taken());
					this.refusing = false;
				}
				else if (reply.code() == Reply.REFUSED) {
					long now = this.clock.getAsLong();
					this.refuseUntil = now + Math.min(TimeUnit.MICROSECONDS.toNanos(reply.waitMicros()), this.holdNanos);
					this.refusing = true;
				}
				answered = true;
			}
		}
		finally {
			synchronized (this) {
				this.inFlight = null;
			}
			if (this.hand.get() > 0) {
				held();
			}
			done.complete(answered);
		}
	}

	/** The hand holds tokens: the sweep runs (B5) and a close gives them back. */
	private synchronized void held() {
		if (this.closed) {
			return;
		}
		this.holding.add(this);
		if (this.sweep == null) {
			this.sweep = SWEEPER.scheduleWithFixedDelay(this::sweep, this.holdNanos, this.holdNanos,
					TimeUnit.NANOSECONDS);
		}
	}

	/** Every {@code batch-hold} while the hand holds tokens (B5). */
	private void sweep() {
		long total = this.demand.sum();
		long used = total - this.demandSeen;
		this.demandSeen = total;
		if (this.fixed == 0) {
			this.size = Math.max(1, Math.min(used, this.bucket.tune().current().limit() / 2));
		}
		Settings with = this.takenWith;
		if (used == 0 || (with != null && !with.equals(this.bucket.tune().current()))) {
			giveBackAll(false);
		}
		synchronized (this) {
			if (this.hand.get() == 0 && used == 0 && this.inFlight == null && this.sweep != null) {
				this.sweep.cancel(false);
				this.sweep = null;
				this.holding.remove(this);
			}
		}
	}

	/** Gives the hand back and stops (B5): the application closes. */
	void close() {
		this.closed = true;
		synchronized (this) {
			if (this.sweep != null) {
				this.sweep.cancel(false);
				this.sweep = null;
			}
		}
		giveBackAll(true);
		this.holding.remove(this);
	}

	/**
	 * What an instance that dies does (for tests of B4): stops, and gives nothing back; the hand is lost here,
	 * and its lease runs out in Redis.
	 */
	void crash() {
		this.closed = true;
		synchronized (this) {
			if (this.sweep != null) {
				this.sweep.cancel(false);
				this.sweep = null;
			}
		}
		this.hand.set(0);
		this.holding.remove(this);
	}

	/** A retune made here: the hand goes back at once (B5). */
	void retuned() {
		giveBackAll(false);
	}

	@Override
	public String toString() {
		return "batch of " + this.hand.get() + " (size " + this.size + ")";
	}
}
