package dev.ratelimit.core;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.jspecify.annotations.Nullable;

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
 *         .maxBacklog(Duration.ofSeconds(10))
 *         .build();
 * for (Request r : requests) {
 *     pacer.acquire(1, Duration.ofSeconds(1)).close();
 *     send(r);
 * }
 * Duration behind = pacer.behindSchedule();
 * }</pre>
 *
 * <h2>Changing the rate</h2>
 * {@link #updateRate}, {@link #updateBurstRatio} and {@link #updateLimit} first fill under the old
 * settings. The pools keep their <em>operations</em> (the fraction of an operation is rescaled to the
 * new ticks), the backlog keeps its schedule time, and waiters keep their place; the level is then
 * capped at the new size (P1).
 *
 * <p>Memory consistency effects: as for {@link RateLimiter}.
 */
public final class HybridRateLimiter implements RateLimiter {

	/*
	 * Design notes.
	 *
	 * Units: with the rate reduced to num / den operations per nanosecond, a tick is
	 * 1 / num of a nanosecond of schedule, so that a nanosecond is num ticks and an
	 * operation den ticks, both whole. State, all under one private lock:
	 * - the rovers tail (operations claimed) and head (operations made spendable, a whole
	 * count plus headFrac ticks of the next one), 64-bit counters compared only by difference: the
	 * level head - tail is the active pool (its bottom activeMax ticks) plus the
	 * burst pool (the rest), negative while callers wait (their tickets are tails, covered in order when the
	 * head reaches them);
	 * - the waiting pool: behind (schedule time that may still be caught up, in nanoseconds plus
	 * sub-nanosecond ticks) and lost (schedule time beyond maxBacklog, reported but never
	 * caught up);
	 * - holes: claims given back by waiters that others queue behind, as in the rover bucket.
	 *
	 * Invariants, each with the tests that check it:
	 *
	 * P1. The pools never hold more than their sizes: the level is at most
	 * cap = activeMax + burstMax; whatever would lift it higher (time while full, a claim given
	 * back, a smaller limit or rate) goes to the waiting pool. (HybridRateLimiterModelTests;
	 * HybridRateLimiterTests.itsPoolsNeverHoldMoreThanTheirSizeAfterAnIdleHour, .itsPoolsNeverHoldMoreThanTheirSizeAfterACancelledClaim.)
	 *
	 * P2. No time is created or lost: a fill of d ticks of elapsed time puts
	 * min(d, activeMax - level) into the level (paying waiters first) and the rest into the waiting
	 * pool; then moves min(waiting, d * (burstRatio - 1), cap - level) from the waiting pool to
	 * the level (the fraction of a tick carried to the next fill, so catch-up does not depend on how often
	 * callers come). So a greedy caller gets exactly the schedule, and while behind at most
	 * rate * burstRatio. (HybridRateLimiterModelTests; HybridRateLimiterTests
	 * .catchesUpATenthOfTheBacklogPerSecondWithBurstRatioOnePointOne.)
	 *
	 * P3. Nothing saturates: only differences are stored; the elapsed time of one fill is
	 * converted with saturation (a fill longer than the pools fills them and adds the rest to the waiting
	 * pool in nanoseconds, which hold 292 years), so the pacer keeps pacing for as long as a process runs at
	 * any rate from 0.001 per second to 10^9 per second. (HybridRateLimiterTests
	 * .keepsPacingLongAfterItsCountersWouldHaveSaturated, .isExactAtOneOperationPerThousandSeconds.)
	 *
	 * P4. Waiters in order: tickets are covered in order; a waiter that gives up removes its
	 * claim (the tail moves back, or its claim becomes a hole that the callers behind it skip at once);
	 * the waiters behind it, and only they, are woken to look again (a refusal at the claim is the last in
	 * line and wakes nobody; a refund or a retune wakes every waiter, a charge nobody).
	 * (HybridRateLimiterModelTests; the wake-ups: HybridRateLimiterTests.aWaiterThatGivesUpWakesOnlyTheClaimsBehindIt,
	 * .aClaimThatWaitsWithoutAThreadIsToldWhenACallerAheadGivesUp.)
	 *
	 * P5. Time never goes back: a fill for an instant not after the last one does nothing.
	 * (HybridRateLimiterTests.aRateChangeWithAClockThatReadsEarlierCreditsNoTimeTwice; HybridRateLimiterModelTests,
	 * whose clock goes back.)
	 *
	 * P6. A refund and a charge change what the call took, nothing else. Both first fill up to
	 * now (so the time before them is accounted as it was). refund(n) (a granted call
	 * gives operations back: refundIf, or settle to a smaller cost) moves the head up by
	 * n: the callers in line are covered first, in order (holes they reach fold, P4), and what would
	 * lift the pools above their size goes to the waiting pool (P1), as for a claim given back. So no
	 * schedule time is created or lost (P2): the operations granted net of refunds never exceed what the
	 * schedule made. This is exactly the state the pacer would be in had the call not run, when nothing
	 * else ran meanwhile and the burst ratio is 1.0; with a burst ratio above 1.0 the catch-up a lower level
	 * allowed meanwhile stays in the pools (the totals are the same, the split between the burst pool and
	 * the waiting pool may differ from such a history by at most the burst pool's size).
	 * charge(n) (settle to a larger cost) moves the tail by n, into
	 * debt if need be, without waiting or refusal: the tickets of the callers already waiting and the head
	 * do not move, so their waits do not change (nor does any later fill's effect on them: while they
	 * wait the level is negative and every fill goes to the head); callers that come after have tickets
	 * behind the charge and wait for it, in order. Neither is a call: the statistics do not change.
	 * (HybridRateLimiterModelTests).
	 *
	 * P7. A reset (contract revision 3) puts the pacer back as a new one: the active pool full, the burst and
	 * waiting pools empty (the backlog, lost time included, is forgotten), holes dropped; the claims waiting
	 * (not covered) claim again at the end of the line, in ticket order, with new tickets; a claim covered keeps
	 * its operations and costs the new pools nothing (its ticket is at or before resetTail, the tail at the
	 * reset, which the new head covers). A claim at or before resetTail given back after the reset gives
	 * nothing back (the reset forgot it). The statistics are kept. (HybridRateLimiterModelTests, whose reference
	 * resets alike; HybridRateLimiterTests.aResetFillsTheActivePoolForgetsTheBacklogAndWakesTheWaiters.)
	 *
	 * Linearization points: every operation at its critical section (a refund, a charge or a reset too). The lock is
	 * held for a few arithmetic steps and never while a caller waits.
	 *
	 * Access modes: every field under the lock (a SpinLock), but settings, volatile for the argument checks
	 * outside it. Overflow: see P3.
	 */

	private static final long NANOS_PER_MILLI = 1_000_000L;

	/** Ticks beyond this are "more than any pool holds": products saturate here (P3). */
	private static final long HUGE = 1L << 62;

	/** The largest pool, in ticks: sizes beyond it are rejected so that every sum stays exact. */
	static final long MAX_CAP = 1L << 60;

	private static final long[] NO_HOLES = new long[0];

	private static final Pattern SPEC = Pattern
		.compile("\\s*([0-9]+(?:\\.[0-9]+)?)\\s*([kKmMgG]?)\\s*(?:,\\s*([0-9]+(?:\\.[0-9]+)?)\\s*)?");

	private static final String SPEC_FORM = "<rate>[,<burst-ratio>] (operations per second, optional K/M/G suffix;"
			+ " burst ratio >= 1.0), e.g. \"12000\", \"12K,1.1\" or \"0.5\"";

	private final @Nullable String name;

	private final LongSupplier clock;

	private final StatsRecorder stats;

	private final AtomicInteger waitingCallers = new AtomicInteger();

	private final Set<Claim> sleepers = ConcurrentHashMap.newKeySet();

	/** Guards everything below; held for a few arithmetic steps, never while a caller waits. */
	private final SpinLock lock = new SpinLock();

	// ---- guarded by lock -------------------------------------------------------------------------------

	/** Written under the lock; volatile for the argument checks outside it. */
	private volatile Settings settings;

	private long tail;

	private long head;

	/** Ticks of the operation after {@code head}: {@code 0 <= headFrac < den}. */
	private long headFrac;

	/** The waiting pool that may still be caught up: whole nanoseconds ... */
	private long behindNanos;

	/** ... plus ticks, {@code 0 <= behindTicks < num}. */
	private long behindTicks;

	/** Schedule time beyond {@code maxBacklog}: reported, never caught up. */
	private long lostNanos;

	/** The fraction of a burst tick earned by the last fill, in units of {@code 1 / ratioDen} tick. */
	private long burstCarry;

	private long lastFill;

	private long[] holes = NO_HOLES;

	/** P7: the tail at the last reset, meaningful once {@link #wasReset}. */
	private long resetTail;

	private boolean wasReset;

	private HybridRateLimiter(Builder builder) {
		this.name = builder.name;
		this.clock = builder.clock;
		this.stats = builder.stats;
		Settings s = new Settings(builder.rate(), builder.burstRatio, builder.limit,
				maxBacklogNanos(builder.maxBacklog));
		this.settings = s;
		this.lastFill = this.clock.getAsLong();
		addHead(s.activeMax); // starts with the active pool full
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
			throw new InvalidArgumentException("spec", spec, null, null, "Invalid rate spec \"" + spec + "\": expected " + SPEC_FORM);
		}
		BigDecimal rate = Rate.perSecond(m.group(1), m.group(2)).stripTrailingZeros();
		if (rate.signum() <= 0) {
			throw new InvalidArgumentException("spec", spec, null, null,
					"Invalid rate spec \"" + spec + "\": the rate must be > 0; expected " + SPEC_FORM);
		}
		double ratio = (m.group(3) != null) ? Double.parseDouble(m.group(3)) : 1.1;
		if (ratio < 1.0) {
			throw new InvalidArgumentException("spec", spec, null, null,
					"Invalid rate spec \"" + spec + "\": the burst ratio must be >= 1.0; expected " + SPEC_FORM);
		}
		// kept as written: 0.5 per second is 5 per 10 seconds
		int scale = Math.max(rate.scale(), 0);
		BigInteger operations = rate.movePointRight(scale).toBigIntegerExact();
		if (scale > 9 || operations.bitLength() > 62) {
			throw new InvalidArgumentException("spec", spec, null, null,
					"Invalid rate spec \"" + spec + "\": too many digits; expected " + SPEC_FORM);
		}
		Duration period = Duration.ofSeconds(BigInteger.TEN.pow(scale).longValueExact());
		return builder().rate(operations.longValueExact(), period).burstRatio(ratio).build();
	}

	// ---- RateLimiter ----------------------------------------------------------------------------------

	@Override
	public @Nullable String name() {
		return this.name;
	}

	@Override
	public boolean tryAcquire(long n) {
		checkOperations(n);
		if (Amounts.grantedAtOnce(n, this.stats)) {
			return true;
		}
		boolean granted;
		long now = this.clock.getAsLong();
		this.lock.lock();
		try {
			fill(now);
			granted = this.holes.length == 0 && level() >= ticks(n);
			if (granted) {
				this.tail += n;
			}
		}
		finally {
			this.lock.unlock();
		}
		return Amounts.counted(granted, this.stats);
	}

	@Override
	public Permit acquire(long n, Duration maxWait) throws InterruptedException {
		AbstractReservation.budgetNanos(maxWait);
		checkOperations(n);
		if (Amounts.grantedBeforeWaiting(n, this.stats, "operations", this.name)) {
			return Permit.noop();
		}
		Claim claim = claim(n, maxWait);
		return (claim.coveredAtOnce) ? claim.grantNow() : claim.await();
	}

	@Override
	public Reservation reserve(long n, Duration maxWait) {
		return claim(n, maxWait);
	}

	private Claim claim(long n, Duration maxWait) {
		long budget = AbstractReservation.budgetNanos(maxWait);
		checkOperations(n);
		long wait;
		long now = this.clock.getAsLong();
		this.lock.lock();
		try {
			fill(now);
			long now2 = this.lastFill;
			if (n == 0) {
				return new Claim(this.tail, 0, maxWait, now2);
			}
			if (level() - ticks(n) < -(HUGE / 2)) {
				throw new InvalidArgumentException("n", n, 0L, null, "n (" + n + ") would put more than " + (HUGE / 2)
						+ " ticks of operations in line" + of());
			}
			this.tail += n;
			long ticket = this.tail;
			wait = waitNanos(ticket);
			if (wait <= budget) {
				Claim claim = new Claim(ticket, n, maxWait, now2);
				claim.coveredAtOnce = (wait == 0);
				if (!claim.coveredAtOnce) {
					claim.notCoveredWhenMade();
				}
				if (wait > 0) {
					this.sleepers.add(claim);
				}
				return claim;
			}
			giveBackLocked(ticket, n);
		}
		finally {
			this.lock.unlock();
		}
		this.stats.recordRejected();
		throw new RateLimitExceededException(this.name, n, Duration.ofNanos(wait));
	}

	@Override
	public RateLimiterSnapshot snapshot() {
		long now = this.clock.getAsLong();
		this.lock.lock();
		try {
			fill(now);
			Settings s = this.settings;
			long credit = credit(this.tail + 1);
			double level = opsOf(level()) + credit;
			double active = Math.min(Math.max(level, 0), opsOf(s.activeMax));
			double burst = Math.max(level - opsOf(s.activeMax), 0);
			RateLimiterSnapshot.Pools pools = new RateLimiterSnapshot.Pools(active, burst, waitingOperations());
			return new RateLimiterSnapshot(s.rate.tokens(), s.rate.period(), opsOf(s.activeMax), false,
					Math.max(level, 0), Math.max(-level, 0), this.waitingCallers.get(), 0, this.stats.granted(),
					this.stats.rejected(), pools, behindLocked());
		}
		finally {
			this.lock.unlock();
		}
	}

	/**
	 * Gives back {@code n} operations that a granted call took, as if it had not run (P6): the head moves
	 * up by {@code n}, so the callers in line are covered first, at once; what would lift the pools above
	 * their size goes to the waiting pool (P1), as for a claim given back, so no schedule time is created
	 * or lost. Waiters are woken to look again.
	 *
	 * @param n the operations given back, {@code >= 0}; more than the pools hold (a limit lowered since
	 *        the call) is accepted and goes to the waiting pool, saturating at {@code 2^62} ticks
	 * @throws IllegalArgumentException naming {@code n} when it is negative
	 */
	@Override
	public void refund(long n) {
		if (Amounts.nonNegative(n) == 0) {
			return;
		}
		long now = this.clock.getAsLong();
		this.lock.lock();
		try {
			fill(now);
			// the level is at most cap (< 2^60) and the ticks at most 2^62: the sum is exact
			addHead(saturatedProduct(n, this.settings.rate.denominator()));
			foldReached();
			capLevel();
			capBacklog();
		}
		finally {
			this.lock.unlock();
		}
		wakeAll();
	}

	/**
	 * Takes {@code n} more operations now, never waiting and never refused, even into debt (P6): the tail
	 * moves by {@code n}; callers already waiting keep their tickets and their waits, callers that come
	 * after wait for the debt, in order.
	 *
	 * @param n the operations taken, {@code >= 0} (more than the pools hold is accepted: it is owed)
	 * @throws IllegalArgumentException naming {@code n} when it is negative or would put more than
	 *         {@code 2^61} ticks of operations in line (as for a claim); then nothing is taken
	 */
	@Override
	public void charge(long n) {
		if (Amounts.nonNegative(n) == 0) {
			return;
		}
		long now = this.clock.getAsLong();
		this.lock.lock();
		try {
			fill(now);
			if (n > HUGE / 2 / this.settings.rate.denominator() || level() - ticks(n) < -(HUGE / 2)) {
				throw new InvalidArgumentException("n", n, 0L, null, "n (" + n + ") would put more than " + (HUGE / 2)
						+ " ticks of operations in line" + of());
			}
			this.tail += n;
		}
		finally {
			this.lock.unlock();
		}
	}

	/**
	 * Puts the pacer back as a new one (P7): the active pool full, the burst and waiting pools empty, what is
	 * owed forgotten; callers waiting are woken to claim again, in order, from the full pool (a claim covered
	 * already keeps its operations). The statistics are kept.
	 */
	@Override
	public void reset() {
		long now = this.clock.getAsLong();
		this.lock.lock();
		try {
			fill(now);
			long tl = this.tail;
			List<Claim> again = new ArrayList<>();
			for (Claim claim : this.sleepers) {
				if (claim.tokens() != 0 && waitNanos(claim.ticket) != 0) {
					again.add(claim);
				}
			}
			again.sort(Comparator.comparingLong((Claim claim) -> claim.ticket - tl)); // in line order (P4)
			this.holes = NO_HOLES;
			this.head = tl;
			this.headFrac = 0;
			addHead(this.settings.activeMax);
			this.behindNanos = 0;
			this.behindTicks = 0;
			this.lostNanos = 0;
			this.burstCarry = 0;
			this.resetTail = tl;
			this.wasReset = true;
			for (Claim claim : again) {
				this.tail += claim.tokens();
				claim.ticket = this.tail;
			}
		}
		finally {
			this.lock.unlock();
		}
		wakeAll();
	}

	/**
	 * How far callers are behind the schedule: the whole waiting pool as time, as of now, including the
	 * part beyond {@code maxBacklog} that will not be caught up.
	 *
	 * @return the time behind schedule, {@link Duration#ZERO} when on schedule
	 */
	public Duration behindSchedule() {
		long now = this.clock.getAsLong();
		this.lock.lock();
		try {
			fill(now);
			return behindLocked();
		}
		finally {
			this.lock.unlock();
		}
	}

	/**
	 * The burst ratio in force.
	 *
	 * @return the ratio, {@code >= 1.0}
	 */
	public double burstRatio() {
		this.lock.lock();
		try {
			return this.settings.burstRatio;
		}
		finally {
			this.lock.unlock();
		}
	}

	/**
	 * The most operations one call may ask for: what the active and burst pools hold together.
	 *
	 * @return the largest {@code n}
	 */
	public long maxOperations() {
		this.lock.lock();
		try {
			return this.settings.maxOperations();
		}
		finally {
			this.lock.unlock();
		}
	}

	@Override
	public void updateRate(long operations, Duration period) {
		Rate rate = Rate.of(operations, period);
		reconfigure(old -> new Settings(rate, old.burstRatio, old.limit, old.maxBacklog));
	}

	/**
	 * Changes the burst ratio at run time, keeping the pools (see the class notes).
	 *
	 * @param burstRatio the new ratio, {@code >= 1.0}
	 */
	public void updateBurstRatio(double burstRatio) {
		reconfigure(old -> new Settings(old.rate, burstRatio, old.limit, old.maxBacklog));
	}

	@Override
	public void updateLimit(long limit) {
		reconfigure(old -> new Settings(old.rate, old.burstRatio, limit, old.maxBacklog));
	}

	@Override
	public String toString() {
		this.lock.lock();
		try {
			Settings s = this.settings;
			return "HybridRateLimiter" + of() + "[rate=" + s.rate + ", burstRatio=" + s.burstRatio + "]";
		}
		finally {
			this.lock.unlock();
		}
	}

	// ---- internals ------------------------------------------------------------------------------------

	private void reconfigure(java.util.function.UnaryOperator<Settings> change) {
		long now = this.clock.getAsLong();
		this.lock.lock();
		try {
			fill(now);
			Settings old = this.settings;
			Settings s = change.apply(old); // validates
			if (s.rate.denominator() != old.rate.denominator()) {
				this.headFrac = Arithmetic.mulDiv(this.headFrac, s.rate.denominator(), old.rate.denominator());
			}
			if (!s.rate.equals(old.rate)) {
				rescaleBacklog(old.rate, s.rate);
			}
			this.settings = s;
			this.burstCarry = 0;
			capLevel();
			capBacklog();
		}
		finally {
			this.lock.unlock();
		}
		wakeAll();
	}

	/**
	 * A new rate keeps the backlog in operations (a caller 1,000 operations behind stays 1,000
	 * operations behind), so its time scales by {@code old rate / new rate}.
	 */
	private void rescaleBacklog(Rate from, Rate to) {
		BigInteger scale = BigInteger.valueOf(from.numerator()).multiply(BigInteger.valueOf(to.denominator()));
		BigInteger unit = BigInteger.valueOf(from.denominator()).multiply(BigInteger.valueOf(to.numerator()));
		// behind, as ticks of the old rate, is (behindNanos * num + behindTicks) / num nanoseconds
		BigInteger oldNum = BigInteger.valueOf(from.numerator());
		BigInteger behind = BigInteger.valueOf(this.behindNanos).multiply(oldNum).add(BigInteger.valueOf(this.behindTicks));
		// new nanoseconds = old nanoseconds * scale / unit; in new ticks: * to.numerator()
		BigInteger newTicks = behind.multiply(scale).multiply(BigInteger.valueOf(to.numerator()))
			.divide(unit.multiply(oldNum));
		BigInteger[] nsAndTicks = newTicks.divideAndRemainder(BigInteger.valueOf(to.numerator()));
		this.behindNanos = clampToLong(nsAndTicks[0]);
		this.behindTicks = (this.behindNanos == Long.MAX_VALUE) ? 0 : nsAndTicks[1].longValueExact();
		this.lostNanos = clampToLong(BigInteger.valueOf(this.lostNanos).multiply(scale).divide(unit));
	}

	private static long clampToLong(BigInteger value) {
		return (value.bitLength() <= 63) ? value.longValue() : Long.MAX_VALUE;
	}

	/** P2, P3, P5: moves the schedule time up to {@code now} into the pools. */
	private void fill(long now) {
		long elapsed = now - this.lastFill;
		if (elapsed <= 0) {
			return;
		}
		this.lastFill = now;
		Settings s = this.settings;
		long d = saturatedProduct(elapsed, s.rate.numerator());
		long level = effectiveLevel();
		long toActive = Math.max(0, Math.min(d, saturatedDifference(s.activeMax, level)));
		addHead(toActive);
		// the rest of the time goes to the waiting pool: elapsed ns minus toActive ticks
		addBehind(elapsed - toActive / s.rate.numerator(), -(toActive % s.rate.numerator()));
		if (s.ratioNum != s.ratioDen) {
			catchUp(s, d);
		}
		capBacklog();
		if (this.holes.length != 0) {
			foldReached();
		}
	}

	/** P2: moves up to {@code d * (burstRatio - 1)} ticks from the waiting pool to the level. */
	private void catchUp(Settings s, long d) {
		long allowance;
		long extra = s.ratioNum - s.ratioDen;
		long scaled = saturatedProduct(d, extra);
		if (scaled < HUGE && scaled + this.burstCarry >= 0 && scaled + this.burstCarry < HUGE) {
			scaled += this.burstCarry;
			allowance = scaled / s.ratioDen;
			this.burstCarry = scaled % s.ratioDen;
		}
		else {
			allowance = HUGE;
			this.burstCarry = 0;
		}
		long room = Math.max(0, saturatedDifference(s.cap, effectiveLevel()));
		long move = Math.min(Math.min(allowance, room), behindAsTicks(s));
		if (move < allowance) {
			this.burstCarry = 0; // only a fraction of a tick the pools could have taken is carried
		}
		if (move <= 0) {
			return;
		}
		addHead(move);
		addBehind(-(move / s.rate.numerator()), -(move % s.rate.numerator()));
	}

	/** P1: what lifts the level above {@code cap} goes to the waiting pool. */
	private void capLevel() {
		Settings s = this.settings;
		long excess = level() - s.cap;
		if (excess > 0) {
			addHead(-excess);
			addBehind(excess / s.rate.numerator(), excess % s.rate.numerator());
			capBacklog();
		}
	}

	/** Schedule time beyond {@code maxBacklog} is kept for the record only. */
	private void capBacklog() {
		long max = this.settings.maxBacklog;
		if (this.behindNanos > max || (this.behindNanos == max && this.behindTicks > 0)) {
			this.lostNanos = saturatedSum(this.lostNanos, this.behindNanos - max);
			this.behindNanos = max;
			this.behindTicks = 0;
		}
	}

	/** Adds {@code ticks} (possibly negative) to the head, carrying whole operations. */
	private void addHead(long ticks) {
		long den = this.settings.rate.denominator();
		long frac = this.headFrac + (ticks % den);
		long ops = ticks / den;
		if (frac >= den) {
			frac -= den;
			ops++;
		}
		else if (frac < 0) {
			frac += den;
			ops--;
		}
		this.headFrac = frac;
		this.head += ops;
	}

	/** Adds {@code nanos} plus {@code ticks} ({@code |ticks| < num}) to the catch-up part of the waiting pool. */
	private void addBehind(long nanos, long ticks) {
		long num = this.settings.rate.numerator();
		long t = this.behindTicks + ticks;
		long ns = nanos;
		if (t >= num) {
			t -= num;
			ns++;
		}
		else if (t < 0) {
			t += num;
			ns--;
		}
		this.behindTicks = t;
		this.behindNanos = saturatedSum(this.behindNanos, ns);
	}

	/** The catch-up part of the waiting pool in ticks, saturated at {@link #HUGE}. */
	private long behindAsTicks(Settings s) {
		long ticks = saturatedProduct(this.behindNanos, s.rate.numerator());
		return (ticks >= HUGE) ? HUGE : ticks + this.behindTicks;
	}

	/** {@code head - tail} in ticks, saturated at {@code -HUGE} for very long queues. */
	private long level() {
		long ops = this.head - this.tail;
		long den = this.settings.rate.denominator();
		if (ops < -(HUGE / den)) {
			return -HUGE;
		}
		return ops * den + this.headFrac;
	}

	/**
	 * The level net of the claims given back (holes): what the pools hold for the callers that are
	 * really in line. Folding a hole leaves it unchanged, so every pool rule uses it.
	 */
	private long effectiveLevel() {
		long level = level();
		if (this.holes.length == 0 || level <= -HUGE) {
			return level;
		}
		return level + credit(this.tail + 1) * this.settings.rate.denominator();
	}

	private long ticks(long operations) {
		return operations * this.settings.rate.denominator(); // operations <= maxOperations(): no overflow
	}

	private double opsOf(long ticks) {
		return (double) ticks / this.settings.rate.denominator();
	}

	private double waitingOperations() {
		Rate rate = this.settings.rate;
		double nanos = (double) this.behindNanos + (double) this.lostNanos
				+ (double) this.behindTicks / rate.numerator();
		return nanos * rate.numerator() / rate.denominator();
	}

	private Duration behindLocked() {
		return Duration.ofNanos(saturatedSum(this.behindNanos, this.lostNanos));
	}

	/**
	 * Nanoseconds from the last fill until the head covers {@code ticket}: the smallest {@code w} with
	 * {@code w * num + min(behind, floor(w * num * (burstRatio - 1))) >= missing} (P2 is linear in the
	 * time it moves, so this is the wait whatever fills happen meanwhile); 0 when covered.
	 */
	private long waitNanos(long ticket) {
		Settings s = this.settings;
		long effective = ticket - credit(ticket);
		long missingOps = effective - this.head;
		if (missingOps <= 0) {
			return 0;
		}
		long perNano = s.rate.numerator();
		long perOperation = s.rate.denominator();
		if (missingOps < HUGE / perOperation && Math.multiplyHigh(perNano, s.ratioNum) == 0
				&& perNano * s.ratioNum > 0) {
			// the common case in 64 bits, without allocating: the same formula as below
			long missingTicks = missingOps * perOperation - this.headFrac;
			long wait = Arithmetic.mulDivCeil(missingTicks, 1, perNano);
			if (s.ratioNum != s.ratioDen) {
				long atBurst = Arithmetic.mulDivCeil(missingTicks, s.ratioDen, perNano * s.ratioNum);
				long withoutBurst = Arithmetic.mulDivCeil(Math.max(0, missingTicks - behindAsTicks(s)), 1, perNano);
				wait = Math.max(atBurst, withoutBurst);
			}
			return Math.max(1, wait);
		}
		BigInteger missing = BigInteger.valueOf(missingOps).multiply(BigInteger.valueOf(s.rate.denominator()))
			.subtract(BigInteger.valueOf(this.headFrac));
		BigInteger num = BigInteger.valueOf(s.rate.numerator());
		BigInteger withoutBurst = ceilDiv(missing.subtract(BigInteger.valueOf(behindAsTicks(s))).max(BigInteger.ZERO), num);
		BigInteger wait = ceilDiv(missing, num);
		if (s.ratioNum != s.ratioDen) {
			BigInteger atBurst = ceilDiv(missing.multiply(BigInteger.valueOf(s.ratioDen)),
					num.multiply(BigInteger.valueOf(s.ratioNum)));
			wait = atBurst.max(withoutBurst);
		}
		return (wait.bitLength() <= 63) ? Math.max(1, wait.longValue()) : Long.MAX_VALUE;
	}

	private static BigInteger ceilDiv(BigInteger x, BigInteger y) {
		BigInteger[] qr = x.divideAndRemainder(y);
		return (qr[1].signum() > 0) ? qr[0].add(BigInteger.ONE) : qr[0];
	}

	/** P4: gives a claim back; the tail moves back when it is the last, otherwise it becomes a hole. */
	private void giveBackLocked(long ticket, long n) {
		if (this.tail == ticket) {
			this.tail -= n;
			int keep = this.holes.length;
			while (keep > 0 && this.holes[keep - 2] == this.tail) {
				this.tail -= this.holes[keep - 1];
				keep -= 2;
			}
			if (keep != this.holes.length) {
				this.holes = Arrays.copyOf(this.holes, keep);
			}
		}
		else {
			int at = 0;
			while (at < this.holes.length && this.holes[at] - ticket < 0) {
				at += 2;
			}
			long[] next = new long[this.holes.length + 2];
			System.arraycopy(this.holes, 0, next, 0, at);
			next[at] = ticket;
			next[at + 1] = n;
			System.arraycopy(this.holes, at, next, at + 2, this.holes.length - at);
			this.holes = next;
		}
		foldReached();
		capLevel();
		capBacklog();
	}

	/** P4: holes the head reached (every claim ahead covered) give their operations to the level. */
	private void foldReached() {
		int from = 0;
		while (from < this.holes.length && this.holes[from] - this.holes[from + 1] - this.head <= 0) {
			this.head += this.holes[from + 1];
			from += 2;
		}
		if (from != 0) {
			this.holes = Arrays.copyOfRange(this.holes, from, this.holes.length);
			capLevel();
		}
	}

	private long credit(long ticket) {
		long credit = 0;
		for (int i = 0; i < this.holes.length && this.holes[i] - ticket < 0; i += 2) {
			credit += this.holes[i + 1];
		}
		return credit;
	}

	private void wakeAll() {
		Sleepers.wakeAll(this.sleepers);
	}

	/**
	 * P4: a claim given back at {@code ticket} moves up the claims behind it, and only them (its hole
	 * credits later tickets; the claims ahead are covered by the head, which does not move).
	 */
	private void wakeBehind(long ticket) {
		Sleepers.wakeBehind(this.sleepers, ticket, (claim) -> claim.ticket);
	}

	private void checkOperations(long n) {
		Amounts.checked(n);
		long max = this.settings.maxOperations();
		if (n > max) {
			throw new InvalidArgumentException("n", n, 0L, max, "n must be at most " + max + " operations (what the active and"
					+ " burst pools of" + ((this.name != null) ? " '" + this.name + "'" : " the pacer")
					+ " hold together), was " + n);
		}
	}

	private String of() {
		return (this.name != null) ? " '" + this.name + "'" : "";
	}

	private static long maxBacklogNanos(@Nullable Duration maxBacklog) {
		if (maxBacklog == null) {
			return Long.MAX_VALUE;
		}
		if (maxBacklog.isNegative()) {
			throw new InvalidArgumentException("maxBacklog", maxBacklog, Duration.ZERO, null,
					"maxBacklog must be a non-negative duration, was " + maxBacklog);
		}
		return AbstractReservation.saturatedNanos(maxBacklog);
	}

	private static long saturatedProduct(long a, long b) {
		long hi = Math.multiplyHigh(a, b);
		long lo = a * b;
		return (hi != 0 || lo < 0 || lo > HUGE) ? HUGE : lo;
	}

	private static long saturatedDifference(long a, long b) {
		long d = a - b;
		return (b < 0 && d < 0) || d > HUGE ? HUGE : d;
	}

	private static long saturatedSum(long a, long b) {
		long s = a + b;
		return (((a ^ s) & (b ^ s)) < 0) ? ((a < 0) ? Long.MIN_VALUE : Long.MAX_VALUE) : s;
	}

	/** The settings in force: immutable, validated, replaced as a whole. */
	private static final class Settings {

		final Rate rate;

		final double burstRatio;

		/** burstRatio as an exact fraction. */
		final long ratioNum;

		final long ratioDen;

		final @Nullable Long limit;

		final long maxBacklog;

		/** Ticks. */
		final long activeMax;

		final long cap;

		Settings(Rate rate, double burstRatio, @Nullable Long limit, long maxBacklog) {
			if (!(burstRatio >= 1.0) || Double.isInfinite(burstRatio)) {
				throw new InvalidArgumentException("burstRatio", burstRatio, 1.0, null, "burstRatio must be >= 1.0, was " + burstRatio);
			}
			if (limit != null && limit < 1) {
				throw new InvalidArgumentException("limit", limit, 1L, SharedTokenBucket.MAX_COST, "limit must be >= 1 operation, was " + limit);
			}
			if (limit != null && limit > SharedTokenBucket.MAX_COST) {
				throw new InvalidArgumentException("limit", limit, 1L, SharedTokenBucket.MAX_COST,
						"limit must be at most 2^50 (" + SharedTokenBucket.MAX_COST
						+ ") operations, was " + limit);
			}
			this.rate = rate;
			this.burstRatio = burstRatio;
			this.limit = limit;
			this.maxBacklog = maxBacklog;
			BigDecimal exact = new BigDecimal(Double.toString(burstRatio)).stripTrailingZeros();
			BigInteger[] fraction = fraction(exact);
			long den = rate.denominator();
			if (den > MAX_CAP / 2) {
				throw new InvalidArgumentException("rate", rate, null, null, "rate must be at least one operation per "
						+ Duration.ofNanos(MAX_CAP / 2) + " for the pacer, was " + rate);
			}
			BigInteger maxOps = BigInteger.valueOf(MAX_CAP / den);
			BigInteger active;
			if (limit != null) {
				active = BigInteger.valueOf(limit).multiply(BigInteger.valueOf(den));
			}
			else {
				active = BigInteger.valueOf(NANOS_PER_MILLI).multiply(BigInteger.valueOf(rate.numerator()))
					.max(BigInteger.valueOf(2).multiply(BigInteger.valueOf(den)));
			}
			if (active.compareTo(BigInteger.valueOf(MAX_CAP)) > 0) {
				throw new InvalidArgumentException("limit", limit, 1L, maxOps.longValueExact(),
						"limit must be at most " + maxOps + " operations at " + rate
						+ ", was " + ((limit != null) ? limit : "the default"));
			}
			BigInteger capTicks = active.multiply(fraction[0]).divide(fraction[1]);
			if (fraction[0].bitLength() > 62 || fraction[1].bitLength() > 62
					|| capTicks.compareTo(BigInteger.valueOf(MAX_CAP)) > 0) {
				BigInteger largest = new BigDecimal(BigInteger.valueOf(MAX_CAP))
					.divide(new BigDecimal(active), 6, java.math.RoundingMode.FLOOR)
					.toBigInteger();
				throw new InvalidArgumentException("burstRatio", burstRatio, 1.0, largest.doubleValue(),
						"burstRatio must be at most " + largest + " with an active pool of "
						+ active.divide(BigInteger.valueOf(den)) + " operations, was " + burstRatio);
			}
			this.ratioNum = fraction[0].longValueExact();
			this.ratioDen = fraction[1].longValueExact();
			this.activeMax = active.longValueExact();
			this.cap = capTicks.longValueExact();
			if (this.cap < den) {
				throw new InvalidArgumentException("rate", rate, null, null, "the pools of " + rate + " hold less than one operation");
			}
		}

		long maxOperations() {
			return this.cap / this.rate.denominator();
		}

		private static BigInteger[] fraction(BigDecimal value) {
			int scale = Math.max(value.scale(), 0);
			BigInteger num = value.movePointRight(scale).toBigIntegerExact();
			BigInteger den = BigInteger.TEN.pow(scale);
			BigInteger g = num.gcd(den);
			return new BigInteger[] { num.divide(g), den.divide(g) };
		}
	}

	/** A caller's claim: its ticket, polled until covered (P4). */
	private final class Claim extends AbstractReservation {

		/** Written under the lock (a reset moves a waiting claim to the end of the line, P7); read racily by wakeBehind. */
		private volatile long ticket;

		/** Covered when it was made (set under the lock before the claim is published). */
		boolean coveredAtOnce;

		Claim(long ticket, long n, Duration maxWait, long now) {
			super(HybridRateLimiter.this.name, n, maxWait, HybridRateLimiter.this.clock, now,
					HybridRateLimiter.this.stats, HybridRateLimiter.this.waitingCallers);
			this.ticket = ticket;
		}

		@Override
		protected long delayNanos(long nowNanos) {
			if (tokens() == 0) {
				return 0;
			}
			HybridRateLimiter.this.lock.lock();
			try {
				fill(nowNanos);
				return waitNanos(this.ticket);
			}
			finally {
				HybridRateLimiter.this.lock.unlock();
			}
		}

		@Override
		protected void giveBack() {
			long ticket;
			HybridRateLimiter.this.lock.lock();
			try {
				// under the lock: a reset either moved this claim already or sees it still waiting (P7)
				HybridRateLimiter.this.sleepers.remove(this);
				ticket = this.ticket;
				if (tokens() == 0 || HybridRateLimiter.this.wasReset && ticket - HybridRateLimiter.this.resetTail <= 0) {
					return; // nothing claimed, or forgotten by a reset (P7)
				}
				giveBackLocked(ticket, tokens());
			}
			finally {
				HybridRateLimiter.this.lock.unlock();
			}
			wakeBehind(ticket);
		}

		@Override
		protected Permit grantedPermit() {
			HybridRateLimiter.this.sleepers.remove(this);
			return Permit.noop();
		}

		void wakeUp() {
			wake();
		}

		Permit grantNow() {
			return grantAtOnce();
		}
	}

	/**
	 * Builds a {@link HybridRateLimiter}. Only the rate is required; the {@linkplain #limit(long) limit}
	 * is the active pool in operations, by default {@code max(1 ms of operations, 2)}.
	 */
	public static final class Builder extends RateLimiterBuilder<Builder> {

		private double burstRatio = 1.1;

		private @Nullable Duration maxBacklog;

		private Builder() {
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
		 * The most schedule time the pacer catches up after callers fell behind (contract revision 2):
		 * time beyond it still counts in {@link HybridRateLimiter#behindSchedule()} but is never
		 * recovered, so after a long idle period the pacer runs at {@code rate * burstRatio} for at most
		 * {@code maxBacklog / (burstRatio - 1)}. Default: no bound, as in nosqlbench.
		 *
		 * @param maxBacklog the bound, {@code >= 0}, or {@code null} for none
		 * @return this builder
		 */
		public Builder maxBacklog(@Nullable Duration maxBacklog) {
			this.maxBacklog = maxBacklog;
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
