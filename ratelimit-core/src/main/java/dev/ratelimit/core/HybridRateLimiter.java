package dev.ratelimit.core;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A pacer that holds a schedule: nosqlbench's hybrid rate limiter, exact and without a filler thread.
 *
 * <p>Where the {@link SharedTokenBucket rover bucket} allows bursts, the pacer keeps callers on a
 * schedule of {@code rate} operations per period. Schedule time that passes unclaimed (because callers
 * were slower than the rate) is not lost: it collects in a <em>waiting</em> pool, and while it is not
 * empty callers may catch up at up to {@code rate * burstRatio}. How far callers are behind,
 * {@link #behindSchedule()}, is the figure load generators use to correct latencies for coordinated
 * omission.
 *
 * <pre>{@code
 * HybridRateLimiter pacer = HybridRateLimiter.builder()
 *         .rate(12000, Duration.ofSeconds(1))
 *         .burstRatio(1.1)
 *         .build();
 * for (Request r : requests) {
 *     pacer.acquire(1, Duration.ofSeconds(1)).close();
 *     send(r);
 * }
 * Duration behind = pacer.behindSchedule();
 * }</pre>
 *
 * <h2>Design</h2>
 * Time is counted in <em>ticks</em>: one operation is {@code Q} ticks (fixed when the pacer is built),
 * and time earns ticks at {@code rate * Q / period} per nanosecond, computed exactly from an epoch in
 * 128-bit arithmetic ({@code due(t) = base + floor((t - start) * num / den)}), so no fraction of a
 * nanosecond per operation is ever truncated (nosqlbench truncates {@code 1e9 / rate} to whole
 * nanoseconds: at 7,000,000/s it runs 0.6 % fast). The pools:
 * <ul>
 * <li><em>active</em>: ticks ready to be granted, at most {@code activeMax = max(1 ms, 2 operations)}
 * (or {@code limit} operations);</li>
 * <li><em>burst</em>: ticks recovered from the backlog, on top of the active pool, at most
 * {@code burstMax = activeMax * (burstRatio - 1)};</li>
 * <li><em>waiting</em>: schedule time that passed unclaimed, unbounded.</li>
 * </ul>
 * Active and burst together are one spendable quantity, kept as two rovers like the rover bucket's:
 * {@code tail} (ticks claimed) and {@code head} (ticks made spendable); their difference is the level,
 * the bottom {@code activeMax} of it the active pool, the rest the burst pool. Invariants:
 * <ul>
 * <li>P1. {@code head - tail <= activeMax + burstMax}.</li>
 * <li>P2. Ticks are conserved: every tick of due time goes to the level (paying waiters first) or to
 * the waiting pool, and the burst fill only moves ticks from waiting to the level. So a greedy caller
 * gets exactly the schedule, and catch-up never grants more than the schedule that passed.</li>
 * <li>P3. A fill of {@code d} new ticks first puts up to {@code activeMax - level} of them in the level,
 * the rest in waiting; then it moves {@code min(d, activeMax) / activeMax * burstMax} ticks (exact
 * integer arithmetic) from waiting to the level, within P1. Filling once per active pool's worth of
 * time therefore catches up at {@code burstRatio - 1} times the rate.</li>
 * <li>P5. A caller that takes from a full active pool first fills: the time that passed while the pool
 * was full belongs to the waiting pool, and must not refill the pool it is emptying. It is the only
 * clock read of a grant that finds operations ready, once per fill.</li>
 * <li>P4. Tickets are served in order, as in the rover bucket; a waiter that gives up takes its claim
 * back when it is the last one, and otherwise leaves its time to the waiting pool, so that nobody ahead
 * of it gains and the schedule loses nothing.</li>
 * </ul>
 * Linearization points: a grant at its CAS (or {@code getAndAdd}) on {@code tail}. Fills, rate changes
 * and refunds that touch the waiting pool run under a private lock, held for a few arithmetic steps
 * and never around a wait; the grant path takes no lock, and a {@code tryAcquire} that finds the pools
 * short does not queue for the lock either: when another thread is filling, it leaves the filling to
 * that thread. Every rover is read and written with volatile
 * semantics.
 *
 * <h2>Changing the rate</h2>
 * {@link #updateRate}, {@link #updateBurstRatio} and {@link #updateLimit} first fill under the old
 * settings. The pools keep their <em>operations</em> (a tick stays {@code 1/Q} of an operation), so
 * the backlog is kept as operations behind, and waiters keep their place; each pool is then capped at
 * its new size, the excess of the level going to the waiting pool, where it can still be recovered.
 *
 * <p>Memory consistency effects: as for {@link RateLimiter}.
 */
public final class HybridRateLimiter implements RateLimiter {

	private static final long NANOS_PER_MILLI = 1_000_000L;

	private static final VarHandle TAIL;

	private static final VarHandle HEAD;

	static {
		try {
			MethodHandles.Lookup lookup = MethodHandles.lookup();
			TAIL = lookup.findVarHandle(HybridRateLimiter.class, "tail", long.class);
			HEAD = lookup.findVarHandle(HybridRateLimiter.class, "head", long.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	private static final Pattern SPEC = Pattern
		.compile("\\s*([0-9]+(?:\\.[0-9]+)?)\\s*([kKmMgG]?)\\s*(?:,\\s*([0-9]+(?:\\.[0-9]+)?)\\s*)?");

	private static final String SPEC_FORM = "<rate>[,<burst-ratio>] (operations per second, optional K/M/G suffix;"
			+ " burst ratio >= 1.0), e.g. \"12000\", \"12K,1.1\" or \"0.5\"";

	private final String name;

	private final LongSupplier clock;

	private final StatsRecorder stats;

	/** Ticks per operation. */
	private final long q;

	private final AtomicInteger waitingCallers = new AtomicInteger();

	/** Guards fills, rate changes and refunds to the waiting pool; never held while a caller waits. */
	private final ReentrantLock lock = new ReentrantLock();

	private volatile Settings settings;

	/** Ticks credited from the clock so far; written under {@code lock}. */
	private volatile long credited;

	/** The waiting pool, in ticks; written under {@code lock}, read racily by views. */
	private volatile long waitingPool;

	@SuppressWarnings("unused")
	private volatile long tail;

	@SuppressWarnings("unused")
	private volatile long head;

	private HybridRateLimiter(Builder builder) {
		long periodNanos = Arithmetic.periodNanos(builder.period, "period");
		checkRate(builder.operations);
		checkBurstRatio(builder.burstRatio);
		if (builder.limit != null && builder.limit < 1) {
			throw new IllegalArgumentException("limit must be >= 1 operation, was " + builder.limit);
		}
		this.name = builder.name;
		this.clock = builder.clock;
		this.stats = builder.stats;
		this.q = periodNanos / Arithmetic.gcd(builder.operations, periodNanos);
		long now = this.clock.getAsLong();
		Settings s = new Settings(now, 0, builder.operations, builder.period, periodNanos, builder.burstRatio,
				builder.limit, this.q);
		this.settings = s;
		this.head = s.activeMax;
	}

	/**
	 * Starts a builder.
	 *
	 * @return a new builder
	 */
	public static Builder builder() {
		return new Builder();
	}

	/**
	 * A pacer from nosqlbench's spec form {@code <rate>[,<burst-ratio>]}: operations per second with an
	 * optional {@code K}, {@code M} or {@code G} suffix, and a burst ratio of at least 1.0 (default 1.1).
	 *
	 * @param spec the spec, e.g. {@code "12000,1.1"} or {@code "2.5K"}
	 * @return a new pacer on the system clock
	 * @throws IllegalArgumentException showing the accepted form, for anything else
	 */
	public static HybridRateLimiter parse(String spec) {
		Matcher m = (spec != null) ? SPEC.matcher(spec) : null;
		if (m == null || !m.matches()) {
			throw new IllegalArgumentException("Invalid rate spec \"" + spec + "\": expected " + SPEC_FORM);
		}
		BigDecimal rate = new BigDecimal(m.group(1)).multiply(switch (m.group(2).toUpperCase(Locale.ROOT)) {
			case "K" -> BigDecimal.valueOf(1_000L);
			case "M" -> BigDecimal.valueOf(1_000_000L);
			case "G" -> BigDecimal.valueOf(1_000_000_000L);
			default -> BigDecimal.ONE;
		}).stripTrailingZeros();
		if (rate.signum() <= 0) {
			throw new IllegalArgumentException(
					"Invalid rate spec \"" + spec + "\": the rate must be > 0; expected " + SPEC_FORM);
		}
		double ratio = (m.group(3) != null) ? Double.parseDouble(m.group(3)) : 1.1;
		if (ratio < 1.0) {
			throw new IllegalArgumentException(
					"Invalid rate spec \"" + spec + "\": the burst ratio must be >= 1.0; expected " + SPEC_FORM);
		}
		int scale = Math.max(rate.scale(), 0);
		BigInteger operations = rate.movePointRight(scale).toBigIntegerExact();
		if (scale > 9 || operations.bitLength() > 62) {
			throw new IllegalArgumentException(
					"Invalid rate spec \"" + spec + "\": too many digits; expected " + SPEC_FORM);
		}
		Duration period = Duration.ofSeconds(BigInteger.TEN.pow(scale).longValueExact());
		return builder().rate(operations.longValueExact(), period).burstRatio(ratio).build();
	}

	// ---- RateLimiter ----------------------------------------------------------------------------------

	@Override
	public String name() {
		return this.name;
	}

	@Override
	public boolean tryAcquire(long n) {
		long cost = cost(n);
		if (n == 0) {
			this.stats.recordGranted(0);
			return true;
		}
		boolean filled = false;
		for (;;) {
			long t = (long) TAIL.getVolatile(this);
			long h = (long) HEAD.getVolatile(this);
			if (h - t >= cost) {
				if (!filled && h - t >= this.settings.activeMax) {
					tryFill(this.clock.getAsLong()); // P5
					filled = true;
					continue;
				}
				if (TAIL.compareAndSet(this, t, t + cost)) {
					this.stats.recordGranted(0);
					return true;
				}
			}
			else if (!filled) {
				long now = this.clock.getAsLong();
				if (fillCannotCover(now, cost - (h - t))) {
					// not enough time has passed to cover the call: leave the time for a later fill
					// (fills are linear in the time they move, so a later one moves the same)
					this.stats.recordRejected();
					return false;
				}
				tryFill(now);
				filled = true;
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
		long cost = cost(n);
		if (Thread.currentThread().isInterrupted()) {
			throw new InterruptedException("Interrupted before acquiring " + n + " operations" + of());
		}
		if (n == 0) {
			this.stats.recordGranted(0);
			return Permit.noop();
		}
		long ticket = claim(n, cost, budget);
		if (ticket - (long) HEAD.getVolatile(this) <= 0) {
			this.stats.recordGranted(0);
			return Permit.noop();
		}
		return new Claim(ticket, n, cost, maxWait, this.clock.getAsLong()).await();
	}

	@Override
	public Reservation reserve(long n, Duration maxWait) {
		long budget = AbstractReservation.budgetNanos(maxWait);
		long cost = cost(n);
		long ticket = (n == 0) ? (long) HEAD.getVolatile(this) : claim(n, cost, budget);
		return new Claim(ticket, n, cost, maxWait, this.clock.getAsLong());
	}

	private long claim(long n, long cost, long budget) {
		long level = (long) HEAD.getVolatile(this) - (long) TAIL.getVolatile(this);
		if (level >= this.settings.activeMax || level < cost) {
			fill(this.clock.getAsLong()); // P5, and: time before a claim that must wait does not pay for it
		}
		long ticket = (long) TAIL.getAndAdd(this, cost) + cost;
		if (ticket - (long) HEAD.getVolatile(this) <= 0) {
			return ticket;
		}
		long now = this.clock.getAsLong();
		fill(now);
		long missing = ticket - (long) HEAD.getVolatile(this);
		if (missing <= 0) {
			return ticket;
		}
		long wait = nanosUntil(missing, now);
		if (wait > budget) {
			giveBack(ticket, cost);
			this.stats.recordRejected();
			throw new RateLimitExceededException(this.name, n, Duration.ofNanos(wait));
		}
		return ticket;
	}

	@Override
	public RateLimiterSnapshot snapshot() {
		fill(this.clock.getAsLong());
		Settings s;
		long t;
		long h;
		long w;
		this.lock.lock();
		try {
			s = this.settings;
			t = (long) TAIL.getVolatile(this);
			h = (long) HEAD.getVolatile(this);
			w = this.waitingPool;
		}
		finally {
			this.lock.unlock();
		}
		long level = h - t;
		long active = Math.min(Math.max(level, 0), s.activeMax);
		long burst = Math.max(level - s.activeMax, 0);
		RateLimiterSnapshot.Pools pools = new RateLimiterSnapshot.Pools(ops(active), ops(burst), ops(w));
		return new RateLimiterSnapshot(s.operations, s.period, ops(s.activeMax), false, ops(Math.max(level, 0)),
				ops(Math.max(-level, 0)), this.waitingCallers.get(), 0, this.stats.granted(), this.stats.rejected(),
				pools, Duration.ofNanos(s.nanosOf(w)));
	}

	/**
	 * How far callers are behind the schedule: the waiting pool as time, as of now.
	 *
	 * @return the time behind schedule, {@link Duration#ZERO} when on schedule
	 */
	public Duration behindSchedule() {
		fill(this.clock.getAsLong());
		return Duration.ofNanos(this.settings.nanosOf(this.waitingPool));
	}

	/**
	 * The burst ratio in force.
	 *
	 * @return the ratio, {@code >= 1.0}
	 */
	public double burstRatio() {
		return this.settings.burstRatio;
	}

	@Override
	public void updateRate(long operations, Duration period) {
		long periodNanos = Arithmetic.periodNanos(period, "period");
		checkRate(operations);
		reconfigure((now, old, due) -> new Settings(now, due, operations, period, periodNanos, old.burstRatio,
				old.limit, this.q));
	}

	/**
	 * Changes the burst ratio at run time, keeping the pools (see the class notes).
	 *
	 * @param burstRatio the new ratio, {@code >= 1.0}
	 */
	public void updateBurstRatio(double burstRatio) {
		checkBurstRatio(burstRatio);
		reconfigure((now, old, due) -> new Settings(now, due, old.operations, old.period, old.periodNanos,
				burstRatio, old.limit, this.q));
	}

	@Override
	public void updateLimit(long limit) {
		if (limit < 1) {
			throw new IllegalArgumentException("limit must be >= 1 operation, was " + limit);
		}
		reconfigure((now, old, due) -> new Settings(now, due, old.operations, old.period, old.periodNanos,
				old.burstRatio, limit, this.q));
	}

	@Override
	public String toString() {
		Settings s = this.settings;
		return "HybridRateLimiter" + of() + "[rate=" + s.operations + "/" + s.period + ", burstRatio="
				+ s.burstRatio + "]";
	}

	// ---- internals ------------------------------------------------------------------------------------

	@FunctionalInterface
	private interface Change {

		Settings apply(long now, Settings old, long due);
	}

	private void reconfigure(Change change) {
		long now = this.clock.getAsLong();
		this.lock.lock();
		try {
			fillLocked(now);
			Settings old = this.settings;
			Settings next = change.apply(now, old, this.credited);
			this.settings = next;
			long cap = next.activeMax + next.burstMax;
			for (;;) {
				long h = (long) HEAD.getVolatile(this);
				long excess = h - ((long) TAIL.getVolatile(this) + cap);
				if (excess <= 0) {
					break;
				}
				if (HEAD.compareAndSet(this, h, h - excess)) {
					this.waitingPool = saturatedAdd(this.waitingPool, excess);
					break;
				}
			}
		}
		finally {
			this.lock.unlock();
		}
	}

	/** Moves the schedule time that passed up to {@code now} into the pools (P2, P3). */
	private void fill(long now) {
		this.lock.lock();
		try {
			fillLocked(now);
		}
		finally {
			this.lock.unlock();
		}
	}

	/**
	 * A fill for a caller that will not wait: when another thread is filling, that thread moves the
	 * time in, and this one does not queue behind it.
	 */
	private void tryFill(long now) {
		if (this.lock.tryLock()) {
			try {
				fillLocked(now);
			}
			finally {
				this.lock.unlock();
			}
		}
	}

	private void fillLocked(long now) {
		Settings s = this.settings;
		long due = s.due(now);
		long add = due - this.credited;
		if (add <= 0) {
			return;
		}
		this.credited = due;
		long level = (long) HEAD.getVolatile(this) - (long) TAIL.getVolatile(this);
		long toLevel = Math.min(add, Math.max(s.activeMax - level, 0));
		long waiting = saturatedAdd(this.waitingPool, add - toLevel);
		long burstFill = 0;
		if (s.burstMax > 0 && waiting > 0) {
			long allowed = Arithmetic.mulDiv(Math.min(add, s.activeMax), s.burstMax, s.activeMax);
			long room = s.activeMax + s.burstMax - (level + toLevel);
			burstFill = Math.max(0, Math.min(Math.min(allowed, waiting), room));
			waiting -= burstFill;
		}
		this.waitingPool = waiting;
		HEAD.getAndAdd(this, toLevel + burstFill);
	}

	/**
	 * Whether a fill now would leave the level short of {@code missing} ticks however it is split:
	 * the new time plus the most the burst refill could move from the waiting pool.
	 */
	private boolean fillCannotCover(long now, long missing) {
		Settings s = this.settings;
		long add = s.due(now) - this.credited;
		if (add <= 0) {
			return true;
		}
		long burst = (s.burstMax > 0 && this.waitingPool > 0)
				? Arithmetic.mulDiv(Math.min(add, s.activeMax), s.burstMax, s.activeMax) : 0;
		return add + burst < missing;
	}

	/** P4: gives a claim back without letting anyone ahead of it gain. */
	private void giveBack(long ticket, long cost) {
		if (TAIL.compareAndSet(this, ticket, ticket - cost)) {
			return;
		}
		this.lock.lock();
		try {
			Settings s = this.settings;
			long h = (long) HEAD.getVolatile(this);
			if (ticket - h <= 0) {
				long room = (long) TAIL.getVolatile(this) + s.activeMax + s.burstMax - h;
				long back = Math.max(0, Math.min(cost, room));
				HEAD.getAndAdd(this, back);
				this.waitingPool = saturatedAdd(this.waitingPool, cost - back);
			}
			else {
				this.waitingPool = saturatedAdd(this.waitingPool, cost);
			}
		}
		finally {
			this.lock.unlock();
		}
	}

	private long nanosUntil(long missing, long now) {
		long at = this.settings.instantOf(this.credited + missing);
		return Math.max(at - now, 1);
	}

	private long cost(long n) {
		if (n < 0) {
			throw new IllegalArgumentException("n must be >= 0, was " + n);
		}
		Settings s = this.settings;
		long largest = (s.activeMax + s.burstMax) / this.q;
		if (n > largest) {
			throw new IllegalArgumentException("n must be at most " + largest + " operations for pacer" + of()
					+ " (its active and burst pools hold no more), was " + n);
		}
		return n * this.q;
	}

	private double ops(long ticks) {
		return (double) ticks / this.q;
	}

	private static long saturatedAdd(long a, long b) {
		long r = a + b;
		return (((a ^ r) & (b ^ r)) < 0) ? Long.MAX_VALUE : r;
	}

	private static void checkRate(long operations) {
		if (operations <= 0) {
			throw new IllegalArgumentException("rate must be > 0 operations per period, was " + operations);
		}
	}

	private static void checkBurstRatio(double burstRatio) {
		if (!(burstRatio >= 1.0) || Double.isInfinite(burstRatio)) {
			throw new IllegalArgumentException("burstRatio must be >= 1.0, was " + burstRatio);
		}
	}

	private String of() {
		return (this.name != null) ? " '" + this.name + "'" : "";
	}

	/** The rate, the pool sizes, and the epoch that turns time into ticks. */
	private static final class Settings {

		final long start;

		final long base;

		final long operations;

		final Duration period;

		final long periodNanos;

		final double burstRatio;

		final Long limit;

		/** Ticks per nanosecond = num / den. */
		final long num;

		final long den;

		final long activeMax;

		final long burstMax;

		Settings(long start, long base, long operations, Duration period, long periodNanos, double burstRatio,
				Long limit, long q) {
			this.start = start;
			this.base = base;
			this.operations = operations;
			this.period = period;
			this.periodNanos = periodNanos;
			this.burstRatio = burstRatio;
			this.limit = limit;
			// ticks per ns = operations * q / periodNanos, reduced
			long g1 = Arithmetic.gcd(q, periodNanos);
			long g2 = Arithmetic.gcd(operations, periodNanos / g1);
			try {
				this.num = Math.multiplyExact(operations / g2, q / g1);
			}
			catch (ArithmeticException ex) {
				throw new IllegalArgumentException("rate " + operations + " per " + period
						+ " cannot be expressed exactly in this pacer's units; choose a simpler fraction", ex);
			}
			this.den = periodNanos / g1 / g2;
			long oneMilli = Arithmetic.mulDiv(NANOS_PER_MILLI, this.num, this.den);
			this.activeMax = (limit != null) ? Math.multiplyExact(limit, q) : Math.max(oneMilli, 2 * q);
			this.burstMax = Math.round(this.activeMax * (burstRatio - 1.0));
		}

		long due(long now) {
			long elapsed = now - this.start;
			return (elapsed <= 0) ? this.base : this.base + Arithmetic.mulDiv(elapsed, this.num, this.den);
		}

		long instantOf(long target) {
			long need = target - this.base;
			return (need <= 0) ? this.start : this.start + Arithmetic.mulDivCeil(need, this.den, this.num);
		}

		long nanosOf(long ticks) {
			return Arithmetic.mulDiv(ticks, this.den, this.num);
		}
	}

	/** A waiting caller's claim on the schedule. */
	private final class Claim extends AbstractReservation {

		private final long ticket;

		private final long cost;

		Claim(long ticket, long n, long cost, Duration maxWait, long now) {
			super(HybridRateLimiter.this.name, n, maxWait, HybridRateLimiter.this.clock, now,
					HybridRateLimiter.this.stats, HybridRateLimiter.this.waitingCallers);
			this.ticket = ticket;
			this.cost = cost;
		}

		@Override
		protected long delayNanos(long nowNanos) {
			if (this.ticket - (long) HEAD.getVolatile(HybridRateLimiter.this) <= 0) {
				return 0;
			}
			fill(nowNanos);
			long missing = this.ticket - (long) HEAD.getVolatile(HybridRateLimiter.this);
			return (missing <= 0) ? 0 : nanosUntil(missing, nowNanos);
		}

		@Override
		protected void giveBack() {
			if (this.cost > 0) {
				HybridRateLimiter.this.giveBack(this.ticket, this.cost);
			}
		}

		@Override
		protected Permit grantedPermit() {
			return Permit.noop();
		}
	}

	/**
	 * Builds a {@link HybridRateLimiter}. Only the rate is required.
	 */
	public static final class Builder {

		private String name;

		private long operations;

		private Duration period;

		private double burstRatio = 1.1;

		private Long limit;

		private LongSupplier clock = System::nanoTime;

		private StatsRecorder stats = StatsRecorder.disabled();

		private Builder() {
		}

		/**
		 * Names the pacer; the name is carried by {@link RateLimitExceededException}.
		 *
		 * @param name the name, may be {@code null}
		 * @return this builder
		 */
		public Builder name(String name) {
			this.name = name;
			return this;
		}

		/**
		 * The schedule: {@code operations} per {@code period}, both {@code > 0}.
		 *
		 * @param operations operations per period
		 * @param period the period
		 * @return this builder
		 */
		public Builder rate(long operations, Duration period) {
			this.operations = operations;
			this.period = period;
			return this;
		}

		/**
		 * How fast callers may catch up while behind schedule, as a multiple of the rate; {@code >= 1.0},
		 * default 1.1. With 1.0 lost time is never recovered.
		 *
		 * @param burstRatio the ratio
		 * @return this builder
		 */
		public Builder burstRatio(double burstRatio) {
			this.burstRatio = burstRatio;
			return this;
		}

		/**
		 * The active pool in operations, {@code >= 1}; by default {@code max(1 ms of operations, 2)}.
		 *
		 * @param limit the active pool size
		 * @return this builder
		 */
		public Builder limit(long limit) {
			this.limit = limit;
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
		 * Builds the pacer, its active pool full.
		 *
		 * @return the pacer
		 * @throws IllegalArgumentException naming the argument that is out of range
		 */
		public HybridRateLimiter build() {
			return new HybridRateLimiter(this);
		}
	}
}
