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
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

import dev.ratelimit.core.InvalidArgumentException;
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
	 *     the hand back when nothing was granted since the previous sweep; a hold longer than half a second is
	 *     swept at the first tick, every half second, after it), when a retune changed the settings the batch
	 *     was taken under (within a second: every tick, at most half a second, reads the retune record when no
	 *     batch call brought it in the last half second, and gives the hand back if it changed), and at close.
	 *     (RedisBatchTests.closeGivesTheUnspentTokensBack, RedisBatchTests.anIdleBatchGoesBackWithinItsHold,
	 *     RedisBatchTests.aRetuneOnAnotherInstanceTakesBackThisInstancesBatchWithinASecond)
	 * B6. The caller's path takes no lock and makes no Redis call while the hand holds tokens or Redis is known
	 *     empty: a grant is a CAS on `hand` (plus a LongAdder for the demand and a clock read for B2); a refill
	 *     is sent from the sweeper's thread when a grant leaves half the batch size or less, so it is there
	 *     before the hand runs out. One batch call is in flight at a time: its slot (`inFlight`) is taken by a
	 *     CAS, and callers that find the hand empty (and Redis not known empty) wait for that call's answer,
	 *     outside the line, and take from what it brought (twice at most; then the one-call path decides).
	 * B7. Only callers that may wait (an acquire with a max-wait) and find the hand empty line up behind one
	 *     fair lock (arrival order within the instance); while any of them waits, the fast path grants nothing
	 *     and a try is refused (a later caller does not overtake them). A reply that took nothing says when the
	 *     next token will be there: until then (at most one `batch-hold`) callers are refused here without
	 *     asking Redis, by two volatile reads (`refuseUntil`, the clock): no lock, no allocation; a waiting
	 *     caller whose max-wait ends before that time (`emptyUntil`) is refused at once.
	 *     (RedisBatchTests.aHammeredBucketRefusesLocallyWithFewCalls,
	 *     RedisBatchTests.aBucketThatRedisSaidIsEmptyRefusesHereUntilTheNextToken)
	 *
	 * Memory: `hand` is an AtomicLong (CAS); `deadline`, `refuseUntil`, `emptyUntil`, `size` are volatile,
	 * written by the thread applying a reply (one at a time: `inFlight`), read racily by callers: a stale
	 * `deadline` is the earlier one (a reply only moves it forward, B2 holds), a stale `refuseUntil` at worst
	 * refuses until a time Redis said or sends one more call.
	 */

	/** What {@link #slow} found. */
	static final int GRANTED = 0;

	static final int REFUSED = 1;

	/** Redis did not answer: the caller applies the bucket's usual path (its failure policy). */
	static final int NO_ANSWER = 2;

	/** How long a hand may go without learning the retune in force (B5: within a second, read included). */
	static final long RETUNE_CHECK_NANOS = 500_000_000L;

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

	/** How often the sweep runs: the hold, at most {@link #RETUNE_CHECK_NANOS}. */
	private final long tickNanos;

	private final long leaseNanos;

	private final long leaseMicros;

	private final long timeoutNanos;

	private final LongSupplier clock;

	/** Batches that hold tokens now, given back when the application closes. */
	private final Set<RedisBatch> holding;

	private final AtomicLong hand = new AtomicLong();

	private volatile long deadline;

	/** Until when callers are refused here without asking Redis (B7): the past when not. */
	private volatile long refuseUntil;

	/** When Redis said, at its last refusal, the next token will be there (a waiting caller's lower bound). */
	private volatile long emptyUntil;

	/** When the last batch call was answered (the retune it brought is current as of then: B5). */
	private volatile long answeredAt;

	/** The tokens a batch call asks for (auto: the demand of the last hold). */
	private volatile long size = 1;

	private final LongAdder demand = new LongAdder();

	/** The demand's sum at the last sweep (sweeper thread only). */
	private long demandSeen;

	/** When the sweep last applied the hold (sweeper thread only). */
	private long holdSwept;

	private final AtomicInteger waiters = new AtomicInteger();

	private final ReentrantLock line = new ReentrantLock(true);

	/** The batch call in flight, or {@code null}: taken by a CAS, one at a time (B6). */
	private final AtomicReference<@Nullable CompletableFuture<Boolean>> inFlight = new AtomicReference<>();

	/** The settings the hand was taken under: a retune gives it back. */
	private volatile @Nullable Settings takenWith;

	private @Nullable ScheduledFuture<?> sweep;

	private volatile boolean closed;

	/** Whether a refill was handed to the sweeper's thread and has not run yet (B6: not on the caller's). */
	private final AtomicBoolean refillAsked = new AtomicBoolean();

	private final Runnable refillTask = () -> {
		this.refillAsked.set(false);
		refill(0);
	};

	RedisBatch(RedisTokenBucket bucket, long fixed, Duration hold, long timeoutNanos, LongSupplier clock,
			Set<RedisBatch> holding) {
		this.bucket = bucket;
		this.fixed = fixed;
		this.holdNanos = hold.toNanos();
		this.tickNanos = Math.min(this.holdNanos, RETUNE_CHECK_NANOS);
		this.timeoutNanos = timeoutNanos;
		// long enough that a live instance always gives its tokens back first (B5), short enough that a dead
		// one's batch comes back soon (B4)
		this.leaseNanos = 3 * this.holdNanos + timeoutNanos;
		this.leaseMicros = TimeUnit.NANOSECONDS.toMicros(this.leaseNanos);
		this.clock = clock;
		this.holding = holding;
		long now = clock.getAsLong();
		this.deadline = now;
		this.refuseUntil = now;
		this.emptyUntil = now;
		this.answeredAt = now;
		if (fixed > 0) {
			this.size = fixed;
		}
	}

	/**
	 * Contract revision 3: the batch of {@code bucket} on this instance, as {@code redis.batch} and
	 * {@code redis.batch-hold} say, or {@code null} for {@code none}.
	 *
	 * @throws IllegalArgumentException naming the bucket and the property for a value that is not accepted
	 */
	static @Nullable RedisBatch of(RedisTokenBucket bucket, RedisTokenBucketBuilder builder, long limit, boolean capped) {
		String batch = builder.batch;
		Duration hold = builder.batchHold;
		long batchSize = parse(batch, limit, bucket.name());
		if (batchSize == 0) {
			return null;
		}
		if (capped) {
			throw new InvalidArgumentException("batch", batch, null, null, "ratelimit.buckets." + bucket.name()
					+ ".redis.batch is not available with capped-release (tokens in flight are released one call at a"
					+ " time): use batch: none");
		}
		if (hold == null || hold.toMillis() < 1) {
			throw new InvalidArgumentException("batchHold", hold, Duration.ofMillis(1), null,
					"ratelimit.buckets." + bucket.name() + ".redis.batch-hold must be at least 1ms, was " + hold);
		}
		return new RedisBatch(bucket, Math.max(batchSize, 0), hold, builder.timeout.toNanos(), builder.clock(),
				builder.batches);
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
		return this.hand.get() == 0 && this.inFlight.get() == null;
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
				if (t - n <= this.size / 2 && this.inFlight.get() == null && now - this.refuseUntil >= 0
						&& this.refillAsked.compareAndSet(false, true)) {
					SWEEPER.execute(this.refillTask); // B6: fetched before the hand runs out, not on this thread
				}
				return true;
			}
		}
	}

	/**
	 * How long callers are refused here without asking Redis (B7), as of {@code now}: 0 when not. Two volatile
	 * reads, no write.
	 */
	long refusedFor(long now) {
		long left = this.refuseUntil - now;
		return (left > 0) ? left : 0;
	}

	/** A view of the bucket with this instance's unspent batch in its {@code available} (contract revision 3). */
	RateLimiterSnapshot withHand(RateLimiterSnapshot view) {
		return new RateLimiterSnapshot(view.rate(), view.period(), view.limit(), view.cappedRelease(),
				view.available() + inHand(), view.deficiency(), view.waiting(), view.inFlight(), view.granted(),
				view.rejected(), view.pools(), view.behindSchedule(), view.untilFull(), view.resetsAt(),
				view.untilReset());
	}

	/**
	 * A {@code tryAcquire} of the bucket, served by this batch when it can be (B6, B7): a CAS on the hand; a
	 * refusal while Redis is known to be empty, or while callers wait in line here; and only when the hand is
	 * empty and Redis may have tokens, a wait for the batch call in flight (started here when there is none),
	 * outside the line.
	 *
	 * @return {@link #GRANTED}, {@link #REFUSED} (Redis said when the next token is there, or callers wait
	 *         for the hand here), or {@link #NO_ANSWER}: ask Redis
	 */
	int tryAcquire(long n) {
		if (take(n)) {
			return GRANTED;
		}
		long now = this.clock.getAsLong();
		if (now - this.refuseUntil < 0 || this.waiters.get() > 0) {
			return REFUSED; // B7: no lock, no allocation, no Redis call
		}
		return awaitBatch(n, now);
	}

	/**
	 * The hand is empty and Redis may have tokens: waits (outside the line) for the batch call in flight, or one
	 * sent for it, and takes {@code n} from what it brought; at most twice, then the bucket's one-call path.
	 */
	private int awaitBatch(long n, long now) {
		for (int round = 0; round < 2; round++) {
			if (!answered(refill(n))) {
				return takeInHand(n) ? GRANTED : NO_ANSWER;
			}
			if (takeInHand(n)) {
				return GRANTED;
			}
			if (refusedFor(this.clock.getAsLong()) > 0) {
				return REFUSED;
			}
		}
		return NO_ANSWER; // what it brought went to other callers: Redis decides, in one call
	}

	/** Waits for a batch call's answer, at most the timeout. */
	private boolean answered(CompletableFuture<Boolean> reply) {
		try {
			return reply.get(this.timeoutNanos, TimeUnit.NANOSECONDS);
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			return false;
		}
		catch (Exception ex) {
			return false;
		}
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
		long budget = AbstractReservation.budgetNanos(maxWait);
		int found = (budget == 0) ? tryAcquire(n) : slow(n, budget);
		if (found == GRANTED) {
			stats.recordGranted((budget == 0) ? 0 : this.clock.getAsLong() - start);
			return Permit.noop();
		}
		if (found == REFUSED) {
			if (Thread.interrupted()) {
				throw new InterruptedException("Interrupted while acquiring " + n + " tokens of '" + this.bucket.name() + "'");
			}
			stats.recordRejected();
			long now = this.clock.getAsLong();
			throw new RateLimitExceededException(this.bucket.name(), n,
					Duration.ofNanos(Math.max(Math.max(this.emptyUntil - now, refusedFor(now)), 1_000)));
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
					// the next token is not there before emptyUntil (Redis said so): a caller that cannot wait
					// that long is refused at once
					if (Math.max(now + refused, this.emptyUntil) - start > budgetNanos) {
						return REFUSED;
					}
					LockSupport.parkNanos(refused);
					if (Thread.currentThread().isInterrupted()) {
						return REFUSED;
					}
					continue;
				}
				if (!answered(refill(n))) {
					return takeInHand(n) ? GRANTED : NO_ANSWER;
				}
				if (Thread.currentThread().isInterrupted()) {
					return REFUSED;
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
	 * Sends a batch call unless one is in flight (B6: one at a time, the slot taken by a CAS): asks for enough to
	 * fill the hand to the batch size (at least {@code atLeast}, at least one), saying what the hand keeps.
	 *
	 * @return completes with whether Redis answered
	 */
	CompletableFuture<Boolean> refill(long atLeast) {
		for (;;) {
			CompletableFuture<Boolean> running = this.inFlight.get();
			if (running != null) {
				return running;
			}
			CompletableFuture<Boolean> mine = new CompletableFuture<>();
			if (this.inFlight.compareAndSet(null, mine)) {
				long want = Math.max(1, Math.max(atLeast, currentSize() - this.hand.get()));
				send(want, 0, mine);
				return mine;
			}
		}
	}

	/** Gives the whole hand back (B5); waits for the answer at most the timeout when {@code wait}. */
	void giveBackAll(boolean wait) {
		CompletableFuture<Boolean> mine = new CompletableFuture<>();
		CompletableFuture<Boolean> before = this.inFlight.get();
		if (before != null || !this.inFlight.compareAndSet(null, mine)) {
			if (!wait) {
				return; // the next sweep
			}
			if (before != null) {
				answered(before); // the next call says what the hand keeps anyway
			}
			if (!this.inFlight.compareAndSet(null, mine)) {
				return;
			}
		}
		long back = this.hand.getAndSet(0);
		if (back == 0) {
			this.inFlight.compareAndSet(mine, null);
			mine.complete(true);
			return;
		}
		send(0, back, mine);
		if (wait) {
			// not answered: the lease runs out in Redis and the tokens count as spent (B4)
			answered(mine);
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

	/** Sends one batch call, {@code done} holding the slot of the call in flight; completes it. */
	private void send(long want, long back, CompletableFuture<Boolean> done) {
		long kept = this.hand.get();
		long sent = this.clock.getAsLong();
		@SuppressWarnings("unchecked")
		CompletableFuture<List<Object>>[] future = new CompletableFuture[1];
		Call call;
		try {
			call = this.bucket.sendBatch(want, back, this.holder + "#" + kept, this.leaseMicros,
					(command) -> future[0] = command);
		}
		catch (RuntimeException ex) {
			call = null;
		}
		if (call == null || future[0] == null) {
			// not sent (the bucket runs on its failure policy): what was to go back stays in hand
			this.hand.addAndGet(back);
			this.inFlight.compareAndSet(done, null);
			done.complete(false);
			return;
		}
		Settings with = this.bucket.tune().current();
		future[0].whenComplete((values, ex) -> apply(values, ex, kept, sent, with, done));
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
				this.answeredAt = this.clock.getAsLong();
				if (reply.taken() > 0) {
					this.hand.addAndGet(reply.taken());
					long drained = drainedNanos(reply);
					if (drained > 0) {
						// B7: it took what was there; once the hand is spent, refused here until the next token
						long now = this.clock.getAsLong();
						this.emptyUntil = now + drained;
						this.refuseUntil = now + Math.min(drained, this.holdNanos);
					}
					else {
						this.refuseUntil = sent; // not refusing (B7): already past for every reader
					}
				}
				else if (reply.code() == Reply.REFUSED) {
					long now = this.clock.getAsLong();
					long wait = TimeUnit.MICROSECONDS.toNanos(reply.waitMicros());
					this.emptyUntil = now + wait;
					this.refuseUntil = now + Math.min(wait, this.holdNanos);
				}
				answered = true;
			}
		}
		finally {
			this.inFlight.compareAndSet(done, null);
			if (this.hand.get() > 0) {
				held();
			}
			done.complete(answered);
		}
	}

	/**
	 * When a batch call took the last whole token there, how long until Redis has the next (the script's wait for
	 * one token, from the level and remainder it answered, at the rate in force), rounded down by a microsecond
	 * and more (never later than Redis would say); 0 when a token is left.
	 */
	private long drainedNanos(Reply reply) {
		if (reply.level() >= 1) {
			return 0;
		}
		Settings s = this.bucket.tune().current();
		double a = (reply.tunedA() > 0) ? reply.tunedA() : s.a();
		double b = (reply.tunedB() > 0) ? reply.tunedB() : s.b();
		double micros = Math.floor(((1.0 - reply.level()) * b - reply.remainder()) / a) - 1;
		return (micros > 0) ? (long) Math.min(micros * 1_000, (double) this.leaseNanos) : 0;
	}

	/** The hand holds tokens: the sweep runs (B5) and a close gives them back. */
	private synchronized void held() {
		if (this.closed) {
			return;
		}
		this.holding.add(this);
		if (this.sweep == null) {
			this.holdSwept = this.clock.getAsLong();
			this.sweep = SWEEPER.scheduleWithFixedDelay(this::sweep, this.tickNanos, this.tickNanos,
					TimeUnit.NANOSECONDS);
		}
	}

	/**
	 * Every tick (the hold, at most {@link #RETUNE_CHECK_NANOS}) while the hand holds tokens: a retune made on
	 * another instance gives the hand back within a second (B5: the retune record is read when no batch call
	 * brought it within the tick); and every {@code batch-hold}, an idle hand goes back and {@code auto} sizes
	 * the next batch to the demand of the hold.
	 */
	private void sweep() {
		if (this.closed) {
			return;
		}
		long now = this.clock.getAsLong();
		if (this.hand.get() > 0 && now - this.answeredAt >= RETUNE_CHECK_NANOS) {
			this.bucket.tune().read().thenRun(this::giveBackWhenRetuned);
		}
		giveBackWhenRetuned();
		if (now - this.holdSwept < this.holdNanos - this.tickNanos / 2) {
			return;
		}
		this.holdSwept = now;
		long total = this.demand.sum();
		long used = total - this.demandSeen;
		this.demandSeen = total;
		if (this.fixed == 0) {
			this.size = Math.max(1, Math.min(used, this.bucket.tune().current().limit() / 2));
		}
		if (used == 0) {
			giveBackAll(false);
		}
		synchronized (this) {
			if (this.hand.get() == 0 && used == 0 && this.inFlight.get() == null && this.sweep != null) {
				this.sweep.cancel(false);
				this.sweep = null;
				this.holding.remove(this);
			}
		}
	}

	/** B5: the hand was taken under settings a retune changed since: it goes back (the next batch takes the new). */
	private void giveBackWhenRetuned() {
		Settings with = this.takenWith;
		if (with != null && this.hand.get() > 0 && !with.equals(this.bucket.tune().current())) {
			giveBackAll(false);
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
