package dev.ratelimit.core;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;

/**
 * A lock-free token bucket shared by many threads: seastar's rover bucket, with an exact rate.
 *
 * <p>Callers take tokens by advancing the tail rover; time puts tokens in by advancing the head
 * rover; a caller whose tail passed the head waits, in the order of its ticket, until the head
 * catches up. With <em>capped release</em> a third rover, the ceiling, bounds the head: tokens come
 * back only when the guarded work releases them, so the bucket limits both the rate and the work in
 * flight. No background thread runs: whoever finds the bucket short moves the time that passed into
 * it.
 *
 * <pre>{@code
 * SharedTokenBucket bucket = SharedTokenBucket.builder()
 *         .name("db-writes")
 *         .rate(1000, Duration.ofSeconds(1))
 *         .limit(100)
 *         .build();
 * if (bucket.tryAcquire(1)) {
 *     write();
 * }
 * try (Permit permit = bucket.acquire(5, Duration.ofMillis(50))) {
 *     writeBatch();
 * }
 * }</pre>
 *
 * <h2>Design</h2>
 * State, all in tokens, 64-bit counters that wrap and are compared only by difference:
 * <ul>
 * <li>{@code tail}: tokens claimed so far. {@link #grab} is one {@code getAndAdd}; its result is the
 * caller's ticket.</li>
 * <li>{@code head}: tokens made available so far. A ticket is covered when {@code head - ticket >= 0}.</li>
 * <li>{@code ceil} (capped release only): {@code initial tail + limit + tokens released}.</li>
 * <li>{@code credited}: tokens of time moved into the head so far. The time itself is never stored as
 * an interval: the tokens due at instant {@code t} are {@code due(t) = n0 + floor((t - t0) * rate / period)},
 * computed exactly in 128 bits from the epoch {@code (t0, n0, rate, period)}, so no remainder is ever
 * rounded away, however often or seldom the bucket is replenished.</li>
 * </ul>
 * Invariants:
 * <ul>
 * <li>I1. {@code head - tail <= limit}: the bucket never banks more than its limit. Every move of the
 * head ({@link #replenish}, {@link #refund}) clamps to {@code tail + limit} read before its CAS; the
 * tail only grows, so the clamp holds after it too.</li>
 * <li>I2. Capped release: a ticket is covered only when both the head and the ceiling reached it, so
 * in-flight plus available ({@code min(head, ceil) - tail}) never exceed the limit. The head is not
 * clamped to the ceiling: time is not wasted while work is in flight, and a release makes tokens
 * that time already earned available at once (seastar's clamp loses them, one cause of the
 * throughput collapse that made it drop the mode).</li>
 * <li>I3. {@code credited} only moves forward, by CAS, from {@code c} to {@code due(now)}; the winner
 * alone adds {@code due(now) - c} to the head. Replenishers for the same instant compute the same
 * {@code due}: one wins, the others find nothing left to add. A clock that stands still or goes back
 * yields {@code due <= credited}: nothing happens.</li>
 * <li>I4. A caller that takes tokens from a full bucket first moves {@code credited} to now: time that
 * passed while the bucket was full is wasted, as in any token bucket, and a late replenish cannot add
 * it on top of the tokens just spent. This is the only fast-path clock read, once per fill.</li>
 * <li>I5. The head passes a ticket once and for all: only {@link #updateLimit} lowers it, and never
 * below the tail, so a covered caller stays covered.</li>
 * <li>I7. A caller that will have to wait replenishes before it claims: the time that passed until then
 * fills the bucket at most to its limit without the new claim, and only time after it pays the claim.
 * A replenish for a queue of waiters may add up to {@code limit} plus their whole debt, so a waiter that
 * oversleeps loses no tokens for the rest of the queue.</li>
 * <li>I8. Time refills only tokens spent before the last credit: tokens made by an interval may lift
 * the head at most to {@code line + limit}, where {@code line} is the tail as of the previous credit.
 * A grab cannot tell when it happened (it reads no clock), so a late replenish assumes the worst: that
 * the tokens spent since the last credit were spent just now. This is what keeps the token-bucket
 * bound over every window, also after an idle period that began with the bucket nearly full. To keep
 * that caution from starving callers, a grab that leaves the bucket at or below half its limit reads the
 * clock and replenishes, which moves the line up to the tail; refunds and skipped holes are not time
 * and are capped by I1 only.</li>
 * <li>I9. When a replenish finds the bucket full (I1 or I8 wastes some of its tokens), the epoch restarts
 * at that instant, so the fraction of the next token is wasted too: a full bucket earns nothing.</li>
 * <li>I6. A waiter that gives up removes its claim: the tail moves back when its claim is the last one;
 * otherwise its slot becomes a hole that the head jumps over when it reaches it, so that callers
 * behind it move up and callers ahead of it gain nothing.</li>
 * </ul>
 * Linearization points: a grab at its {@code getAndAdd} on {@code tail}; a successful
 * {@link #tryAcquire} at its CAS on {@code tail}; a replenish at its CAS on {@code head} (after the
 * CAS on {@code credited} that entitles it). Every field is read and written with volatile semantics
 * through {@link VarHandle}s: the rovers publish the work that released tokens to the caller that gets
 * them. Overflow: rovers wrap harmlessly (differences are exact while fewer than 2^63 tokens are
 * outstanding); {@code due} is computed with a 128-bit product, exact for rates from one per hour to
 * 10^9 per second over centuries of uptime.
 *
 * <h2>Capped release and throughput</h2>
 * With capped release, tokens are in flight from grant to release. A call that holds its tokens for a
 * latency {@code d} lets at most {@code limit} tokens be in flight, so the throughput is bounded by
 * {@code min(rate, limit / d)}: size {@code limit >= rate * d} (with head-room for latency spikes),
 * or the bucket runs below its rate whenever the guarded work slows down, which is the point of
 * capped release, but a surprise when {@code limit} is sized for bursts only.
 *
 * <p>Memory consistency effects: actions in a thread prior to releasing tokens ({@link #release},
 * closing a capped {@link Permit}) <i>happen-before</i> actions following a successful acquisition
 * of those tokens in another thread.
 */
public final class SharedTokenBucket implements RateLimiter {

	private static final VarHandle TAIL;

	private static final VarHandle HEAD;

	private static final VarHandle CEIL;

	private static final VarHandle CREDITED;

	private static final VarHandle LINE;

	private static final VarHandle EPOCH;

	static {
		try {
			MethodHandles.Lookup lookup = MethodHandles.lookup();
			TAIL = lookup.findVarHandle(SharedTokenBucket.class, "tail", long.class);
			HEAD = lookup.findVarHandle(SharedTokenBucket.class, "head", long.class);
			CEIL = lookup.findVarHandle(SharedTokenBucket.class, "ceil", long.class);
			CREDITED = lookup.findVarHandle(SharedTokenBucket.class, "credited", long.class);
			LINE = lookup.findVarHandle(SharedTokenBucket.class, "line", long.class);
			EPOCH = lookup.findVarHandle(SharedTokenBucket.class, "epoch", Epoch.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	private final String name;

	private final LongSupplier clock;

	private final boolean cappedRelease;

	private final long threshold;

	private final StatsRecorder stats;

	private final AtomicInteger waiting = new AtomicInteger();

	/** Slots of callers that gave up behind others: start position to length (I6). */
	private final ConcurrentSkipListMap<Long, Long> holes = new ConcurrentSkipListMap<>();

	private volatile long limit;

	private volatile Epoch epoch;

	@SuppressWarnings("unused")
	private volatile long tail;

	@SuppressWarnings("unused")
	private volatile long head;

	@SuppressWarnings("unused")
	private volatile long ceil;

	@SuppressWarnings("unused")
	private volatile long credited;

	/** The tail as of the last credit: time may refill only tokens spent before it (I8). */
	@SuppressWarnings("unused")
	private volatile long line;

	private SharedTokenBucket(Builder builder) {
		long periodNanos = Arithmetic.periodNanos(builder.period, "period");
		if (builder.tokens <= 0) {
			throw new IllegalArgumentException("rate must be > 0 tokens per period, was " + builder.tokens);
		}
		long lim = (builder.limit != null) ? builder.limit : builder.tokens;
		if (lim < 1) {
			throw new IllegalArgumentException("limit must be >= 1, was " + lim);
		}
		long init = (builder.initial != null) ? builder.initial : lim;
		if (init < 0 || init > lim) {
			throw new IllegalArgumentException("initial must be between 0 and limit (" + lim + "), was " + init);
		}
		if (builder.threshold < 1 || builder.threshold > lim) {
			throw new IllegalArgumentException(
					"threshold must be between 1 and limit (" + lim + "), was " + builder.threshold);
		}
		this.name = builder.name;
		this.clock = builder.clock;
		this.cappedRelease = builder.cappedRelease;
		this.threshold = builder.threshold;
		this.stats = builder.stats;
		this.limit = lim;
		this.tail = 0;
		this.head = init;
		this.ceil = lim;
		this.credited = 0;
		this.epoch = new Epoch(this.clock.getAsLong(), 0, builder.tokens, builder.period, periodNanos);
	}

	/**
	 * Starts a builder.
	 *
	 * @return a new builder
	 */
	public static Builder builder() {
		return new Builder();
	}

	// ---- the rover API --------------------------------------------------------------------------------

	/**
	 * Claims {@code n} tokens: never blocks, never fails. The caller goes ahead when
	 * {@link #deficiency(long)} of the returned ticket is {@code 0}.
	 *
	 * @param n the tokens to claim, {@code >= 0} (capped release: {@code <= limit})
	 * @return the ticket: the tail after this claim
	 * @throws IllegalArgumentException when {@code n} is negative, or above the limit with capped release
	 */
	public long grab(long n) {
		checkCost(n);
		syncIfFull();
		long ticket = (long) TAIL.getAndAdd(this, n) + n;
		if ((long) HEAD.getVolatile(this) - ticket <= (this.limit >> 1)) {
			replenish(this.clock.getAsLong()); // I8: keep the line close behind the tail
		}
		return ticket;
	}

	/**
	 * Tokens claimed up to {@code ticket} that are not there yet.
	 *
	 * @param ticket a ticket from {@link #grab(long)}
	 * @return {@code 0} when the ticket is covered (go ahead), otherwise the tokens missing
	 */
	public long deficiency(long ticket) {
		long missing = ticket - covered();
		return Math.max(missing, 0);
	}

	/** The rover up to which tickets are covered: the head, and with capped release also the ceiling (I2). */
	private long covered() {
		long h = (long) HEAD.getVolatile(this);
		if (this.cappedRelease) {
			long c = (long) CEIL.getVolatile(this);
			return (c - h < 0) ? c : h;
		}
		return h;
	}

	/**
	 * Moves the time accumulated up to {@code nowNanos} into the bucket (I1, I3): at most up to the limit;
	 * less than the threshold's worth waits for later.
	 *
	 * @param nowNanos the clock's reading
	 */
	public void replenish(long nowNanos) {
		long tailNow = (long) TAIL.getVolatile(this);
		Epoch e = this.epoch;
		long due = e.due(nowNanos);
		for (;;) {
			long c = (long) CREDITED.getVolatile(this);
			long add = due - c;
			if (add < 0) {
				return;
			}
			if (add == 0) {
				// no whole token since the last credit: what was spent so far was spent before the next
				// token, which may therefore refill it (I8)
				raiseLine(tailNow);
				return;
			}
			if (add < this.threshold && !isFull()) {
				return;
			}
			if (CREDITED.compareAndSet(this, c, due)) {
				if (addTimeTokens(add, (long) LINE.getVolatile(this)) < add) {
					dropFraction(e, nowNanos);
				}
				raiseLine(tailNow);
				return;
			}
		}
	}

	private void raiseLine(long tailNow) {
		for (;;) {
			long l = (long) LINE.getVolatile(this);
			if (tailNow - l <= 0 || LINE.compareAndSet(this, l, tailNow)) {
				return;
			}
		}
	}

	/**
	 * Adds tokens made by time under I1 and I8, then skips the holes the head reached (I6).
	 *
	 * @return the tokens added
	 */
	private long addTimeTokens(long add, long lineThen) {
		long step;
		for (;;) {
			long h = (long) HEAD.getVolatile(this);
			long t = (long) TAIL.getVolatile(this);
			long lim = this.limit;
			long cap = (lineThen - t < 0) ? lineThen + lim : t + lim;
			step = Math.min(add, cap - h);
			if (step <= 0 || HEAD.compareAndSet(this, h, h + step)) {
				break;
			}
		}
		if (!this.holes.isEmpty()) {
			skipHoles();
		}
		return Math.max(step, 0);
	}

	/**
	 * I9: a full bucket wastes time, the fraction of the next token included: the epoch restarts now,
	 * so the next token takes a whole interval (a token bucket that is full earns nothing, not even a
	 * part of a token). Without it a window starting at a full bucket could see up to one token more
	 * than {@code limit + rate * w}.
	 */
	private void dropFraction(Epoch e, long now) {
		if (now - e.start > 0) {
			EPOCH.compareAndSet(this, e, e.restartedAt(now));
		}
	}

	/**
	 * Capped release: lets {@code n} tokens be replenished again, typically when the work they guarded
	 * completes. Without capped release it does nothing.
	 *
	 * @param n the tokens released, {@code >= 0}
	 */
	public void release(long n) {
		checkNonNegative(n);
		if (this.cappedRelease && n > 0) {
			CEIL.getAndAdd(this, n);
		}
	}

	/**
	 * Gives {@code n} grabbed tokens back, never lifting the bucket above its limit; with capped release
	 * they also go back to the ceiling. Use it for tokens whose ticket was covered; a waiter that gives
	 * up uses {@link #refund(long, long)} so that callers ahead of it gain nothing.
	 *
	 * @param n the tokens given back, {@code >= 0}
	 */
	public void refund(long n) {
		checkNonNegative(n);
		if (n == 0) {
			return;
		}
		if (this.cappedRelease) {
			CEIL.getAndAdd(this, n);
		}
		advanceHead(n);
	}

	/**
	 * Gives back the claim of {@code n} tokens ending at {@code ticket}, by position (I6): when it is the
	 * last claim the tail moves back; when others claimed after it, its slot is skipped once the head
	 * reaches it; when it is already covered the tokens return as with {@link #refund(long)}.
	 *
	 * @param ticket the ticket {@link #grab(long)} returned for the claim
	 * @param n the tokens of that claim
	 */
	public void refund(long ticket, long n) {
		checkNonNegative(n);
		if (n == 0) {
			return;
		}
		long start = ticket - n;
		if (TAIL.compareAndSet(this, ticket, start)) {
			return;
		}
		if (start - covered() <= 0) {
			refund(n);
			return;
		}
		if (this.cappedRelease) {
			CEIL.getAndAdd(this, n);
		}
		this.holes.merge(start, n, Long::sum);
		// the head may have reached the slot meanwhile
		advanceHead(0);
	}

	/**
	 * Nanoseconds until {@code missing} more tokens accumulate at the current rate, as of now.
	 *
	 * @param missing tokens still needed, {@code >= 0}
	 * @return the wait, {@code > 0} for {@code missing > 0}, {@code 0} for none
	 */
	public long durationFor(long missing) {
		checkNonNegative(missing);
		return (missing == 0) ? 0 : nanosUntil(missing, this.clock.getAsLong());
	}

	private long nanosUntil(long missing, long now) {
		Epoch e = this.epoch;
		long need = Math.max(missing, this.threshold);
		long target = (long) CREDITED.getVolatile(this) + need;
		long at = e.instantOf(target);
		long wait = at - now;
		return Math.max(wait, 1);
	}

	/**
	 * Changes the rate; the time that passed is first replenished under the old rate.
	 *
	 * @param tokens tokens per {@code period}, {@code > 0}
	 * @param period the period, {@code > 0}
	 */
	@Override
	public synchronized void updateRate(long tokens, Duration period) {
		long periodNanos = Arithmetic.periodNanos(period, "period");
		if (tokens <= 0) {
			throw new IllegalArgumentException("rate must be > 0 tokens per period, was " + tokens);
		}
		long now = this.clock.getAsLong();
		replenish(now);
		Epoch old = this.epoch;
		long start = Math.max(old.due(now), (long) CREDITED.getVolatile(this));
		this.epoch = new Epoch(now, start, tokens, period, periodNanos);
	}

	/**
	 * Changes the limit. With capped release the ceiling moves by the difference; a bucket holding more
	 * than the new limit drops the excess (callers already covered stay covered).
	 *
	 * @param newLimit the new limit, {@code >= 1} and at least the threshold
	 */
	@Override
	public synchronized void updateLimit(long newLimit) {
		if (newLimit < 1 || newLimit < this.threshold) {
			throw new IllegalArgumentException("limit must be >= " + Math.max(1, this.threshold) + ", was " + newLimit);
		}
		long old = this.limit;
		this.limit = newLimit;
		if (this.cappedRelease) {
			CEIL.getAndAdd(this, newLimit - old);
		}
		for (;;) {
			long h = (long) HEAD.getVolatile(this);
			long cap = (long) TAIL.getVolatile(this) + newLimit;
			if (h - cap <= 0 || HEAD.compareAndSet(this, h, cap)) {
				return;
			}
		}
	}

	// ---- RateLimiter ----------------------------------------------------------------------------------

	@Override
	public String name() {
		return this.name;
	}

	@Override
	public boolean tryAcquire(long n) {
		checkCost(n);
		if (n == 0) {
			this.stats.recordGranted(0);
			return true;
		}
		boolean clockRead = false;
		for (;;) {
			long t = (long) TAIL.getVolatile(this);
			long h = (long) HEAD.getVolatile(this);
			long available = (this.cappedRelease ? covered() : h) - t;
			if (available >= n) {
				if (!clockRead && h - t >= this.limit) {
					replenish(this.clock.getAsLong()); // I4
					clockRead = true;
				}
				if (TAIL.compareAndSet(this, t, t + n)) {
					if (h - (t + n) <= (this.limit >> 1)) {
						replenish(this.clock.getAsLong()); // I8: keep the line close behind the tail
					}
					this.stats.recordGranted(0);
					return true;
				}
			}
			else if (!clockRead) {
				replenish(this.clock.getAsLong());
				clockRead = true;
			}
			else {
				this.stats.recordRejected();
				return false;
			}
		}
	}

	@Override
	public Permit acquire(long n, Duration maxWait) throws InterruptedException {
		long budget = AbstractReservation.budgetNanos(maxWait);
		checkCost(n);
		if (Thread.currentThread().isInterrupted()) {
			throw new InterruptedException("Interrupted before acquiring " + n + " tokens" + of());
		}
		if (n == 0) {
			this.stats.recordGranted(0);
			return Permit.noop();
		}
		long ticket = claim(n, budget);
		if (deficiency(ticket) == 0) {
			this.stats.recordGranted(0);
			return permitFor(n);
		}
		return new Claim(ticket, n, maxWait, this.clock.getAsLong()).await();
	}

	@Override
	public Reservation reserve(long n, Duration maxWait) {
		long budget = AbstractReservation.budgetNanos(maxWait);
		checkCost(n);
		long ticket = (n == 0) ? (long) HEAD.getVolatile(this) : claim(n, budget);
		return new Claim(ticket, n, maxWait, this.clock.getAsLong());
	}

	/**
	 * Grabs {@code n} tokens for a caller that accepts to wait {@code budget} nanoseconds, or refuses at
	 * once, keeping nothing, when the time-based wait is longer.
	 */
	private long claim(long n, long budget) {
		long now = 0;
		boolean clockRead = false;
		if (covered() - (long) TAIL.getVolatile(this) < n) {
			// I7: bring the bucket up to date before queueing, so time that passed before this claim is
			// capped at the limit without it (a claim joining a queue cannot be paid with idle time)
			now = this.clock.getAsLong();
			replenish(now);
			clockRead = true;
		}
		long ticket = grab(n);
		long missing = deficiency(ticket);
		if (missing == 0) {
			return ticket;
		}
		if (!clockRead) {
			now = this.clock.getAsLong();
			replenish(now);
			missing = deficiency(ticket);
			if (missing == 0) {
				return ticket;
			}
		}
		if (this.cappedRelease && ticket - (long) CEIL.getVolatile(this) > 0) {
			return ticket; // waits for releases, up to its budget
		}
		long wait = nanosUntil(missing, now);
		if (wait > budget) {
			refund(ticket, n);
			this.stats.recordRejected();
			throw new RateLimitExceededException(this.name, n, Duration.ofNanos(wait));
		}
		return ticket;
	}

	@Override
	public RateLimiterSnapshot snapshot() {
		replenish(this.clock.getAsLong());
		long t;
		long h;
		long c;
		do {
			t = (long) TAIL.getVolatile(this);
			h = (long) HEAD.getVolatile(this);
			c = (long) CEIL.getVolatile(this);
		}
		while (t != (long) TAIL.getVolatile(this));
		long lim = this.limit;
		long cover = (this.cappedRelease && c - h < 0) ? c : h;
		long granted = (cover - t < 0) ? cover : t;
		long inFlight = this.cappedRelease ? Math.max(0, granted + lim - c) : 0;
		Epoch e = this.epoch;
		return new RateLimiterSnapshot(e.tokens, e.period, lim, this.cappedRelease, Math.max(cover - t, 0),
				Math.max(t - cover, 0), this.waiting.get(), inFlight, this.stats.granted(), this.stats.rejected(), null,
				Duration.ZERO);
	}

	/**
	 * Whether tokens return only when released.
	 *
	 * @return {@code true} with capped release
	 */
	public boolean isCappedRelease() {
		return this.cappedRelease;
	}

	/**
	 * The most tokens the bucket banks.
	 *
	 * @return the limit
	 */
	public long limit() {
		return this.limit;
	}

	// ---- internals ------------------------------------------------------------------------------------

	private boolean isFull() {
		return (long) HEAD.getVolatile(this) - (long) TAIL.getVolatile(this) >= this.limit;
	}

	/** I4: a grab from a full bucket first wastes the time that passed while it was full. */
	private void syncIfFull() {
		if (isFull()) {
			replenish(this.clock.getAsLong());
		}
	}

	/** Adds up to {@code add} tokens to the head under I1 and I2, then skips the holes it reached (I6). */
	private void advanceHead(long add) {
		for (;;) {
			long h = (long) HEAD.getVolatile(this);
			long t = (long) TAIL.getVolatile(this);
			long room = t + this.limit - h;
			long step = Math.min(add, room);
			if (step <= 0 || HEAD.compareAndSet(this, h, h + step)) {
				break;
			}
		}
		if (!this.holes.isEmpty()) {
			skipHoles();
		}
	}

	private void skipHoles() {
		for (;;) {
			Map.Entry<Long, Long> first = this.holes.firstEntry();
			if (first == null) {
				return;
			}
			long h = (long) HEAD.getVolatile(this);
			if (first.getKey() - h > 0) {
				return;
			}
			if (this.holes.remove(first.getKey(), first.getValue())) {
				HEAD.getAndAdd(this, first.getValue());
			}
		}
	}

	private Permit permitFor(long n) {
		return this.cappedRelease ? Permit.once(() -> release(n)) : Permit.noop();
	}

	private void checkCost(long n) {
		checkNonNegative(n);
		if (this.cappedRelease && n > this.limit) {
			throw new IllegalArgumentException("n must be at most the limit (" + this.limit + ") of capped bucket"
					+ of() + ", was " + n + ": it could never be granted");
		}
	}

	private void checkNonNegative(long n) {
		if (n < 0) {
			throw new IllegalArgumentException("n must be >= 0, was " + n);
		}
	}

	private String of() {
		return (this.name != null) ? " '" + this.name + "'" : "";
	}

	@Override
	public String toString() {
		return "SharedTokenBucket" + of() + "[rate=" + this.epoch.tokens + "/" + this.epoch.period + ", limit="
				+ this.limit + (this.cappedRelease ? ", capped release" : "") + "]";
	}

	/** The rate in force since {@code start}: {@code due(t) = base + floor((t - start) * num / den)}. */
	private static final class Epoch {

		final long start;

		final long base;

		final long tokens;

		final Duration period;

		/** tokens / period-nanos, reduced by their gcd. */
		final long num;

		final long den;

		Epoch(long start, long base, long tokens, Duration period, long periodNanos) {
			long g = Arithmetic.gcd(tokens, periodNanos);
			this.start = start;
			this.base = base;
			this.tokens = tokens;
			this.period = period;
			this.num = tokens / g;
			this.den = periodNanos / g;
		}

		long due(long now) {
			long elapsed = now - this.start;
			return (elapsed <= 0) ? this.base : this.base + Arithmetic.mulDiv(elapsed, this.num, this.den);
		}

		/** The same rate from {@code now}, with what is due by then as the base: the fraction is dropped. */
		Epoch restartedAt(long now) {
			return new Epoch(now, due(now), this.tokens, this.period, this.num, this.den);
		}

		private Epoch(long start, long base, long tokens, Duration period, long num, long den) {
			this.start = start;
			this.base = base;
			this.tokens = tokens;
			this.period = period;
			this.num = num;
			this.den = den;
		}

		/** The first instant at which {@code due} reaches {@code target}. */
		long instantOf(long target) {
			long need = target - this.base;
			return (need <= 0) ? this.start : this.start + Arithmetic.mulDivCeil(need, this.den, this.num);
		}
	}

	/** A caller's claim: its ticket, polled until covered (I5), given back by position (I6). */
	private final class Claim extends AbstractReservation {

		private final long ticket;

		Claim(long ticket, long n, Duration maxWait, long now) {
			super(SharedTokenBucket.this.name, n, maxWait, SharedTokenBucket.this.clock, now,
					SharedTokenBucket.this.stats, SharedTokenBucket.this.waiting);
			this.ticket = ticket;
		}

		@Override
		protected long delayNanos(long nowNanos) {
			if (deficiency(this.ticket) == 0) {
				return 0;
			}
			replenish(nowNanos);
			long missing = deficiency(this.ticket);
			if (missing == 0) {
				return 0;
			}
			if (SharedTokenBucket.this.cappedRelease && this.ticket - (long) CEIL.getVolatile(SharedTokenBucket.this) > 0) {
				return AWAITING_RELEASE;
			}
			return nanosUntil(missing, nowNanos);
		}

		@Override
		protected void giveBack() {
			refund(this.ticket, tokens());
		}

		@Override
		protected Permit grantedPermit() {
			return (tokens() == 0) ? Permit.noop() : permitFor(tokens());
		}
	}

	/**
	 * Builds a {@link SharedTokenBucket}. Only the rate is required.
	 */
	public static final class Builder {

		private String name;

		private long tokens;

		private Duration period;

		private Long limit;

		private Long initial;

		private boolean cappedRelease;

		private long threshold = 1;

		private LongSupplier clock = System::nanoTime;

		private StatsRecorder stats = StatsRecorder.disabled();

		private Builder() {
		}

		/**
		 * Names the bucket; the name is carried by {@link RateLimitExceededException}.
		 *
		 * @param name the name, may be {@code null}
		 * @return this builder
		 */
		public Builder name(String name) {
			this.name = name;
			return this;
		}

		/**
		 * The rate: {@code tokens} per {@code period}, both {@code > 0}.
		 *
		 * @param tokens tokens per period
		 * @param period the period
		 * @return this builder
		 */
		public Builder rate(long tokens, Duration period) {
			this.tokens = tokens;
			this.period = period;
			return this;
		}

		/**
		 * The most tokens banked, {@code >= 1}; by default one period's tokens.
		 *
		 * @param limit the limit
		 * @return this builder
		 */
		public Builder limit(long limit) {
			this.limit = limit;
			return this;
		}

		/**
		 * Tokens available at start, {@code 0..limit}; by default the limit (a full bucket).
		 *
		 * @param initial the initial tokens
		 * @return this builder
		 */
		public Builder initial(long initial) {
			this.initial = initial;
			return this;
		}

		/**
		 * Whether tokens return only when released (the head may not pass the ceiling).
		 *
		 * @param cappedRelease {@code true} for capped release
		 * @return this builder
		 */
		public Builder cappedRelease(boolean cappedRelease) {
			this.cappedRelease = cappedRelease;
			return this;
		}

		/**
		 * The smallest number of tokens a replenish adds, {@code 1..limit}; time worth fewer tokens is
		 * kept for later. Default 1.
		 *
		 * @param threshold the replenish quantum
		 * @return this builder
		 */
		public Builder threshold(long threshold) {
			this.threshold = threshold;
			return this;
		}

		/**
		 * The nanosecond clock; default {@code System::nanoTime}.
		 *
		 * @param nanoClock the clock
		 * @return this builder
		 */
		public Builder clock(LongSupplier nanoClock) {
			if (nanoClock == null) {
				throw new IllegalArgumentException("clock must not be null");
			}
			this.clock = nanoClock;
			return this;
		}

		/**
		 * Where granted and refused calls are counted; default {@link StatsRecorder#disabled()}.
		 *
		 * @param stats the recorder
		 * @return this builder
		 */
		public Builder stats(StatsRecorder stats) {
			if (stats == null) {
				throw new IllegalArgumentException("stats must not be null");
			}
			this.stats = stats;
			return this;
		}

		/**
		 * Builds the bucket.
		 *
		 * @return the bucket
		 * @throws IllegalArgumentException naming the argument that is out of range
		 */
		public SharedTokenBucket build() {
			return new SharedTokenBucket(this);
		}
	}
}
