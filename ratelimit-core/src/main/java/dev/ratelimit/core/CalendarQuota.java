package dev.ratelimit.core;

import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayDeque;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;

import org.jspecify.annotations.Nullable;

/**
 * A fixed allowance per calendar period: "100,000 calls per month", "1,000 per day, reset at midnight
 * in Berlin". All of {@code limit} is there at the start of each period of its {@link QuotaCalendar}
 * and nothing is carried over: tokens not taken by the end of a period are gone, and between boundaries
 * nothing comes back with time (a quota has no rate).
 *
 * <pre>{@code
 * CalendarQuota daily = CalendarQuota.builder()
 *         .name("partner-daily")
 *         .limit(1000)
 *         .calendar(QuotaCalendar.Unit.DAY)
 *         .zone(ZoneId.of("Europe/Berlin"))
 *         .build();
 * try (Permit permit = daily.acquire(1, Duration.ZERO)) {
 *     callPartner();
 * } catch (RateLimitExceededException e) {
 *     // e.getRetryAfter(): the time until midnight in Berlin
 * }
 * }</pre>
 *
 * <p>A call that does not fit waits for the next boundary if its max-wait reaches it, and is otherwise
 * refused with the time until that boundary as its retry-after. Callers that wait are served in the
 * order in which they asked, at the boundary, from the new period's allowance. The calendar follows the
 * wall clock, an {@link InstantSource} ({@link InstantSource#system()} by default, a fake one in tests);
 * a wall clock that is set back never opens a period a second time.
 *
 * <p>Memory consistency effects: as for {@link RateLimiter}.
 */
public final class CalendarQuota implements RateLimiter {

	/*
	 * Design
	 *
	 * State, all under one small lock (a SpinLock, as the pacer's):
	 *  - period: the highest period of the calendar seen so far (number, start and end boundary, in
	 *    epoch seconds: boundaries are whole seconds, so an instant is at or past a boundary exactly
	 *    when its epoch second is);
	 *  - used: the tokens of the period's allowance taken (granted, charged, less refunds); at most
	 *    limit through grants, more only through charges (a debt);
	 *  - queue: the callers waiting, in order: claims (Claim, not covered yet) and charges that came
	 *    while callers waited (Charge, paid when they reach the head); queuedCharges sums the latter;
	 *  - limit: volatile, written under the lock, read outside it for argument checks only.
	 * A claim covered (given its tokens) records the period it was covered in (coveredIn); it leaves
	 * the queue then.
	 *
	 * Invariants:
	 *  Q1. A period never grants more than its allowance: a grant (tryAcquire, a claim covered) never
	 *      lifts used above limit, so the tokens granted while a period is the current one are at most
	 *      limit plus what refunds gave back in it. (CalendarQuotaModelTests: every grant and the total
	 *      per period against the reference; CalendarQuotaTests: 1,000 per day between two midnights of
	 *      23 and of 25 hours, a month quota in February of a leap year; CalendarQuotaConcurrencyTests:
	 *      racing callers get exactly the limit of each day.)
	 *  Q2. Full at every boundary, nothing carried over: moving from period k to period k' sets used to
	 *      max(0, used - limit * (k' - k)): unused tokens are gone, and a debt is paid by one allowance
	 *      per calendar period that began (an empty period, whose local times a zone skipped, counts: it
	 *      is a calendar period). (CalendarQuotaModelTests.)
	 *  Q3. Time never opens a period twice: the period moves only forward, to the period of an instant
	 *      at or past its end; a wall clock that steps back leaves the quota in the highest period seen
	 *      (its allowance is not given again, and waits are counted to that period's end from the clock's
	 *      instant). (CalendarQuotaModelTests: clock steps back; CalendarQuotaTests.)
	 *  Q4. Waiters in order: the queue is served from its head, and a head that does not fit blocks
	 *      the callers behind it; tryAcquire and new claims never pass a non-empty queue. After every
	 *      operation under the lock the head of the queue is a claim that does not fit (serveQueue runs
	 *      wherever room may have appeared: a boundary, a refund, a claim given back, a higher limit).
	 *      (CalendarQuotaModelTests: readiness of every claim at every step.)
	 *  Q5. A caller that does not go ahead keeps nothing: a claim given back leaves the queue, and the
	 *      callers behind it move up at once; a claim already covered gives its tokens back to its
	 *      period if that period is still the current one (after it, they were gone with the period
	 *      anyway). (CalendarQuotaModelTests: cancels of waiting and covered claims.)
	 *  Q6. The wait is exact: the wait of a claim (and the retry-after of a refusal) is the time from
	 *      the clock's instant to the boundary at which the queue, served in order as in Q2 and Q4 with
	 *      nobody else taking or giving back, covers it, to the nanosecond of the wall clock; "never"
	 *      (Long.MAX_VALUE nanoseconds) beyond 400 years. (CalendarQuotaModelTests: every wait and
	 *      retry-after equals the reference's.)
	 *  Q7. A charge keeps the waiters' waits: with callers waiting it joins the queue behind them and is
	 *      paid (into debt if need be) when it reaches the head. (CalendarQuotaModelTests.)
	 *
	 *  Q8. A reset (contract revision 3) makes the period's count zero again and forgets what is owed: used = 0,
	 *      the charges in line dropped; the claims waiting keep their order and are served at once from the
	 *      full allowance (Q4). Tokens covered before the reset are gone with it, as with a boundary: a claim
	 *      covered before it and given back after it gives nothing back (resets counts the resets, and a
	 *      claim remembers the count it was covered under). Counts of granted and rejected calls are kept.
	 *      (CalendarQuotaModelTests, whose reference resets alike; CalendarQuotaTests
	 *      .aResetGivesTheWholeAllowanceAgainAndServesTheWaiters.)
	 *
	 * Linearization point of every operation: its critical section. The clock is read before the lock;
	 * a caller whose reading is older than the current period's start (another caller saw the boundary
	 * first) is counted in the current period, as a clock stepping back is (Q3), so it never reopens a
	 * period.
	 *
	 * Why a lock and not CAS: at a boundary used, the period and the queue change together, and the
	 * queue (waiters served in order, across periods) is more than one word can hold. The section is a
	 * few comparisons and additions; boundaries are computed with java.time only when a period ends (once
	 * per period, not per call) and for callers that wait. The lock is never held while a caller waits.
	 *
	 * Arithmetic: limit <= 2^50 (as the other limiters' largest claim); used + queuedCharges <= 2^62
	 * (a charge beyond it is refused), so used plus one claim never overflows. A debt is paid down as
	 * max(0, used - limit * m) with the product computed only when it is below used.
	 */

	/** The largest limit, as the largest claim of the other limiters: 2^50 tokens. */
	public static final long MAX_LIMIT = SharedTokenBucket.MAX_COST;

	/** The most a quota may owe in all (used plus queued charges): sums stay exact. */
	static final long MAX_OWED = 1L << 62;

	/** What the simulation of the periods ahead returns for a boundary more than 400 years away. */
	private static final long NEVER = Long.MAX_VALUE;

	private static final long NANOS_PER_SECOND = 1_000_000_000L;

	/** A claim's {@code coveredIn} while it is in the queue. */
	private static final long NOT_COVERED = Long.MIN_VALUE;

	private final @Nullable String name;

	private final QuotaCalendar calendar;

	private final InstantSource clock;

	private final StatsRecorder stats;

	/** The epoch second the reservations' nanosecond clock counts from (the quota's creation). */
	private final long originSecond;

	private final LongSupplier nanoClock = this::nanoTime;

	private final AtomicInteger waitingCallers = new AtomicInteger();

	private final Set<Claim> sleepers = ConcurrentHashMap.newKeySet();

	/** Guards everything below; held for a few arithmetic steps, never while a caller waits. */
	private final SpinLock lock = new SpinLock();

	// ---- guarded by lock -------------------------------------------------------------------------------

	/** Written under the lock; volatile for the argument checks outside it. */
	private volatile long limit;

	private QuotaCalendar.Period period;

	private long used;

	/** Claims and charges in line, in order (Q4, Q7). */
	private final ArrayDeque<Object> queue = new ArrayDeque<>();

	private long queuedCharges;

	/** Q8: the resets so far. */
	private long resets;

	private CalendarQuota(Builder builder) {
		if (builder.unit == null && builder.calendar == null) {
			throw new InvalidArgumentException("calendar", null, null, null,
					"calendar must be set: one of " + QuotaCalendar.Unit.names());
		}
		this.calendar = (builder.calendar != null) ? builder.calendar : QuotaCalendar.of(builder.unit, builder.zone);
		this.limit = checkedLimit(builder.limit);
		this.name = builder.name;
		this.clock = builder.clock;
		this.stats = builder.stats;
		long now = nowSecond();
		this.originSecond = now;
		this.period = this.calendar.periodOfSecond(now);
	}

	/**
	 * Starts a builder.
	 *
	 * @return a new builder
	 */
	public static Builder builder() {
		return new Builder();
	}

	// ---- RateLimiter ----------------------------------------------------------------------------------

	@Override
	public @Nullable String name() {
		return this.name;
	}

	@Override
	public boolean tryAcquire(long n) {
		checkCost(n);
		if (Amounts.grantedAtOnce(n, this.stats)) {
			return true;
		}
		long second = nowSecond();
		boolean granted;
		this.lock.lock();
		try {
			advance(second);
			granted = this.queue.isEmpty() && n <= this.limit - this.used; // Q1, Q4
			if (granted) {
				this.used += n;
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
		checkCost(n);
		if (Amounts.grantedBeforeWaiting(n, this.stats, "tokens", this.name)) {
			return Permit.noop();
		}
		Claim claim = claim(n, maxWait);
		return claim.coveredAtOnce ? claim.grantAtOnce() : claim.await();
	}

	@Override
	public Reservation reserve(long n, Duration maxWait) {
		return claim(n, maxWait);
	}

	private Claim claim(long n, Duration maxWait) {
		long budget = AbstractReservation.budgetNanos(maxWait);
		checkCost(n);
		long nowNanos = nanoTime();
		if (n == 0) {
			Claim claim = new Claim(0, maxWait, nowNanos);
			claim.coveredAtOnce = true;
			return claim;
		}
		long second = secondOf(nowNanos);
		long wait;
		this.lock.lock();
		try {
			advance(second);
			if (this.queue.isEmpty() && n <= this.limit - this.used) {
				this.used += n;
				Claim claim = new Claim(n, maxWait, nowNanos);
				claim.coveredIn = this.period.index();
				claim.coveredAfterResets = this.resets;
				claim.coveredAtOnce = true;
				return claim;
			}
			wait = nanosUntil(boundaryWhen(this.queue.size(), n), nowNanos); // Q6, as the last in line
			if (wait <= budget) {
				Claim claim = new Claim(n, maxWait, nowNanos);
				claim.notCoveredWhenMade();
				this.queue.addLast(claim);
				this.sleepers.add(claim);
				return claim;
			}
		}
		finally {
			this.lock.unlock();
		}
		this.stats.recordRejected();
		throw new RateLimitExceededException(this.name, n, Duration.ofNanos(wait));
	}

	/**
	 * Gives back {@code n} tokens that a granted call took: they are available again at once in the
	 * current period, first to callers already waiting (who move up in order), never lifting the quota
	 * above its limit. Tokens taken in a period that has ended are gone with it: a refund after a
	 * boundary finds a full quota and changes nothing (nor does it pay a debt carried over, except as
	 * the tokens it gives back to the current period).
	 *
	 * @param n the tokens given back, {@code >= 0}
	 * @throws IllegalArgumentException naming {@code n} when it is negative
	 */
	@Override
	public void refund(long n) {
		if (Amounts.nonNegative(n) == 0) {
			return;
		}
		long second = nowSecond();
		this.lock.lock();
		try {
			advance(second);
			this.used = Math.max(0, this.used - n);
			serveQueue();
		}
		finally {
			this.lock.unlock();
		}
		wakeAll();
	}

	/**
	 * Takes {@code n} more tokens now, never waiting and never refused, even into debt (Q7): with nobody
	 * waiting from the current period's allowance; with callers waiting, behind them, paid when they
	 * have been served (so their waits do not change). A debt is paid by the allowances of the periods
	 * that follow, one limit per period.
	 *
	 * @param n the tokens taken, {@code >= 0}
	 * @throws IllegalArgumentException naming {@code n} when it is negative or would make the quota owe
	 *         more than 2^62 tokens in all; then nothing is taken
	 */
	@Override
	public void charge(long n) {
		if (Amounts.nonNegative(n) == 0) {
			return;
		}
		long second = nowSecond();
		this.lock.lock();
		try {
			advance(second);
			if (n > MAX_OWED - this.used - this.queuedCharges) {
				throw new InvalidArgumentException("n", n, 0L, MAX_OWED - this.used - this.queuedCharges, "n (" + n + ") would make" + ((this.name != null) ? " '" + this.name
						+ "'" : " the quota") + " owe more than " + MAX_OWED + " tokens");
			}
			if (this.queue.isEmpty()) {
				this.used += n;
			}
			else {
				this.queue.addLast(new Charge(n));
				this.queuedCharges += n;
			}
		}
		finally {
			this.lock.unlock();
		}
	}

	/**
	 * {@inheritDoc}
	 *
	 * <p>For a quota: {@code rate} is its limit and {@code period} the length of the running calendar
	 * period (a day of 23 hours is {@code PT23H}); {@code available} the tokens left in it (0 while
	 * callers wait); {@code deficiency} what the callers in line claim plus what the quota owes;
	 * {@code untilFull} the time until the boundary from which the whole limit is there again (zero when it
	 * is now); {@code resetsAt} the next boundary, the end of the running period, and {@code untilReset} the
	 * time until it (with a wall clock set back, counted from the clock's instant to the end of the highest
	 * period seen).
	 */
	@Override
	public RateLimiterSnapshot snapshot() {
		long nowNanos = nanoTime();
		this.lock.lock();
		try {
			advance(secondOf(nowNanos));
			long limit = this.limit;
			long claimed = 0;
			for (Object entry : this.queue) {
				if (entry instanceof Claim claim) {
					claimed += claim.tokens();
				}
			}
			long available = this.queue.isEmpty() ? Math.max(0, limit - this.used) : 0;
			long owed = claimed + this.queuedCharges + Math.max(0, this.used - limit);
			long untilFull = (this.queue.isEmpty() && this.used == 0) ? 0
					: nanosUntil(boundaryWhen(-1, 0), nowNanos);
			long untilReset = nanosUntil(this.period.endSecond, nowNanos);
			return new RateLimiterSnapshot(limit, this.period.length(), limit, false, available, owed,
					this.waitingCallers.get(), 0, this.stats.granted(), this.stats.rejected(), null, Duration.ZERO,
					Duration.ofNanos(untilFull), this.period.end(), Duration.ofNanos(untilReset));
		}
		finally {
			this.lock.unlock();
		}
	}

	/**
	 * Makes the running period's count zero again (Q8): the whole limit is there, what is owed (a debt, charges
	 * waiting in line) is forgotten, and the callers waiting are served at once, in order, from the full
	 * allowance; tokens covered before the reset are gone with it (given back after it, they give nothing). The
	 * period and its boundary do not change; the statistics are kept.
	 */
	@Override
	public void reset() {
		long second = nowSecond();
		this.lock.lock();
		try {
			advance(second);
			this.resets++;
			this.used = 0;
			this.queue.removeIf((entry) -> entry instanceof Charge);
			this.queuedCharges = 0;
			serveQueue();
		}
		finally {
			this.lock.unlock();
		}
		wakeAll();
	}

	/**
	 * Always refused: a quota has no rate. Its allowance is its limit per calendar period; change it
	 * with {@link #updateLimit(long)}.
	 *
	 * @throws IllegalArgumentException always, saying so
	 */
	@Override
	public void updateRate(long tokens, Duration period) {
		throw new InvalidArgumentException("rate", tokens, null, null, ((this.name != null) ? "'" + this.name + "'" : "This")
				+ " is a calendar quota: it has no rate (its allowance is its limit, " + this.limit + " per "
				+ this.calendar.unit() + "); change the limit instead");
	}

	/**
	 * Changes the allowance per period at run time, from now on: the tokens already taken in the
	 * current period stay taken (a lower limit may leave none), callers already waiting keep their place
	 * and are served at once when the higher limit makes room.
	 *
	 * @param limit the new allowance per period, {@code 1..2^50}
	 * @throws IllegalArgumentException naming the argument when it is out of range
	 */
	@Override
	public void updateLimit(long limit) {
		checkedLimit(limit);
		long second = nowSecond();
		this.lock.lock();
		try {
			advance(second);
			this.limit = limit;
			serveQueue();
		}
		finally {
			this.lock.unlock();
		}
		wakeAll();
	}

	/**
	 * The allowance per period.
	 *
	 * @return the limit
	 */
	public long limit() {
		return this.limit;
	}

	/**
	 * The calendar whose periods the quota follows.
	 *
	 * @return the calendar
	 */
	public QuotaCalendar calendar() {
		return this.calendar;
	}

	/**
	 * The running period as of now: its {@link QuotaCalendar.Period#end() end} is when the quota is next
	 * full again (its {@code resetsAt}), its {@link QuotaCalendar.Period#length() length} the length of
	 * this period. With a wall clock set back, the highest period seen (Q3).
	 *
	 * @return the period
	 */
	public QuotaCalendar.Period currentPeriod() {
		long second = nowSecond();
		this.lock.lock();
		try {
			advance(second);
			return this.period;
		}
		finally {
			this.lock.unlock();
		}
	}

	@Override
	public String toString() {
		return "CalendarQuota" + of() + "[limit=" + this.limit + " per " + this.calendar + "]";
	}

	// ---- internals ------------------------------------------------------------------------------------

	/**
	 * Q2, Q3: moves to the period of {@code second} when it is at or past the current period's end; a
	 * second before it (a clock set back, or a reading older than another caller's) changes nothing.
	 */
	private void advance(long second) {
		QuotaCalendar.Period current = this.period;
		if (second < current.endSecond) {
			return;
		}
		QuotaCalendar.Period next = this.calendar.periodOfSecond(second);
		this.used = paidDown(this.used, this.limit, next.index() - current.index());
		this.period = next;
		serveQueue();
	}

	/** Q2: what remains of {@code used} after {@code periods} allowances of {@code limit}. */
	private static long paidDown(long used, long limit, long periods) {
		if (used <= 0 || periods >= ceilDiv(used, limit)) {
			return 0;
		}
		return used - limit * periods; // limit * periods < used
	}

	/** Q4, Q7: covers the claims at the head of the line that fit, and pays the charges that reach it. */
	private void serveQueue() {
		for (Object head = this.queue.peekFirst(); head != null; head = this.queue.peekFirst()) {
			if (head instanceof Charge charge) {
				this.used += charge.n;
				this.queuedCharges -= charge.n;
			}
			else {
				Claim claim = (Claim) head;
				if (claim.tokens() > this.limit - this.used) {
					return;
				}
				this.used += claim.tokens();
				claim.coveredIn = this.period.index();
				claim.coveredAfterResets = this.resets;
			}
			this.queue.pollFirst();
		}
	}

	/**
	 * Q6: the epoch second of the boundary at which the periods ahead, served in order with nobody else
	 * taking or giving back, cover the entry at {@code position} in the line, or a claim of {@code extra}
	 * tokens at the end of the line ({@code position == queue.size()}), or ({@code position == -1}) make
	 * the quota full; {@link #NEVER} beyond 400 years or for a claim larger than the limit.
	 */
	private long boundaryWhen(int position, long extra) {
		Object[] entries = this.queue.toArray();
		int length = (position == entries.length) ? entries.length + 1 : entries.length;
		long limit = this.limit;
		long used = this.used;
		QuotaCalendar.Period p = this.period;
		long horizon = p.index() + this.calendar.periodsIn400Years();
		int at = 0;
		for (;;) {
			// the first boundary at which the head of the line can fit: used - limit * m <= limit - need
			long need = (at < length) ? sizeAt(entries, at, extra) : limit; // past the line: full again
			if (need > limit) {
				return NEVER;
			}
			long excess = used - (limit - need);
			long m = (excess <= 0) ? 1 : ceilDiv(excess, limit);
			if (m > horizon - p.index()) {
				return NEVER;
			}
			QuotaCalendar.Period next = this.calendar.periodFrom(p.index() + m);
			used = paidDown(used, limit, next.index() - p.index());
			p = next;
			if (at == length && used == 0) {
				return p.startSecond;
			}
			while (at < length) {
				long size = sizeAt(entries, at, extra);
				boolean charge = at < entries.length && entries[at] instanceof Charge;
				if (!charge && size > limit - used) {
					break;
				}
				used += size;
				if (at == position) {
					return p.startSecond;
				}
				at++;
			}
		}
	}

	private static long sizeAt(Object[] entries, int at, long extra) {
		if (at == entries.length) {
			return extra;
		}
		return (entries[at] instanceof Claim claim) ? claim.tokens() : ((Charge) entries[at]).n;
	}

	/** Nanoseconds from {@code nowNanos} to the boundary at {@code second}, at least 1; saturated. */
	private long nanosUntil(long second, long nowNanos) {
		long boundaryNanos = (second == NEVER) ? Long.MAX_VALUE : nanosOfSecond(second);
		if (boundaryNanos == Long.MAX_VALUE) {
			return Long.MAX_VALUE; // never, or beyond 292 years
		}
		try {
			return Math.max(1, Math.subtractExact(boundaryNanos, nowNanos));
		}
		catch (ArithmeticException ex) {
			return Long.MAX_VALUE;
		}
	}

	/**
	 * The wall clock's epoch second, from its milliseconds (no {@code Instant} on the try path): boundaries
	 * are whole seconds, so the second decides which period an instant is in.
	 */
	private long nowSecond() {
		return Math.floorDiv(this.clock.millis(), 1000L);
	}

	/** The reservations' clock: nanoseconds since {@link #originSecond}, from the wall clock; saturated. */
	private long nanoTime() {
		Instant now = this.clock.instant();
		return saturatedNanos(now.getEpochSecond() - this.originSecond, now.getNano());
	}

	private long nanosOfSecond(long second) {
		return saturatedNanos(second - this.originSecond, 0);
	}

	private static long saturatedNanos(long seconds, int nanos) {
		long high = Math.multiplyHigh(seconds, NANOS_PER_SECOND);
		long low = seconds * NANOS_PER_SECOND;
		if ((high != 0 || low < 0) && (high != -1 || low >= 0)) {
			return (seconds < 0) ? Long.MIN_VALUE : Long.MAX_VALUE;
		}
		long sum = low + nanos;
		return (low > 0 && sum < 0) ? Long.MAX_VALUE : sum;
	}

	/** The epoch second of a reading of the reservations' clock. */
	private long secondOf(long nanos) {
		return this.originSecond + Math.floorDiv(nanos, NANOS_PER_SECOND);
	}

	private static long ceilDiv(long x, long y) {
		return -Math.floorDiv(-x, y);
	}

	private void wakeAll() {
		Sleepers.wakeAll(this.sleepers);
	}

	private void checkCost(long n) {
		Amounts.nonNegative(n);
		long limit = this.limit;
		if (n > limit) {
			throw new InvalidArgumentException("n", n, 0L, limit, "n must be at most " + limit + " tokens (the limit of"
					+ ((this.name != null) ? " '" + this.name + "'" : " the quota") + " per " + this.calendar.unit()
					+ ": more can never be granted in one period), was " + n);
		}
	}

	private static long checkedLimit(@Nullable Long limit) {
		if (limit == null) {
			throw new InvalidArgumentException("limit", null, 1L, MAX_LIMIT,
					"limit must be set: the tokens per calendar period, 1.." + MAX_LIMIT);
		}
		if (limit < 1 || limit > MAX_LIMIT) {
			throw new InvalidArgumentException("limit", limit, 1L, MAX_LIMIT,
					"limit must be between 1 and " + MAX_LIMIT + " tokens, was " + limit);
		}
		return limit;
	}

	private String of() {
		return (this.name != null) ? " '" + this.name + "'" : "";
	}

	/** A charge that came while callers waited: paid when it reaches the head of the line (Q7). */
	private record Charge(long n) {
	}

	/** A caller's claim: in the line until covered (Q4), then holding its tokens in its period (Q5). */
	private final class Claim extends AbstractReservation {

		/** The period it was covered in, {@link #NOT_COVERED} while in the line; guarded by the lock. */
		long coveredIn = NOT_COVERED;

		/** Q8: the resets before it was covered; guarded by the lock. */
		long coveredAfterResets;

		/** Covered when it was made (set before the claim is published). */
		boolean coveredAtOnce;

		Claim(long n, Duration maxWait, long nowNanos) {
			super(CalendarQuota.this.name, n, maxWait, CalendarQuota.this.nanoClock, nowNanos,
					CalendarQuota.this.stats, CalendarQuota.this.waitingCallers);
		}

		@Override
		protected long delayNanos(long nowNanos) {
			if (tokens() == 0) {
				return 0;
			}
			CalendarQuota.this.lock.lock();
			try {
				advance(secondOf(nowNanos));
				if (this.coveredIn != NOT_COVERED) {
					return 0;
				}
				int position = 0;
				for (Object entry : CalendarQuota.this.queue) {
					if (entry == this) {
						break;
					}
					position++;
				}
				return nanosUntil(boundaryWhen(position, 0), nowNanos);
			}
			finally {
				CalendarQuota.this.lock.unlock();
			}
		}

		@Override
		protected void giveBack() {
			CalendarQuota.this.sleepers.remove(this);
			if (tokens() == 0) {
				return;
			}
			long second = nowSecond();
			CalendarQuota.this.lock.lock();
			try {
				advance(second);
				if (this.coveredIn == NOT_COVERED) {
					CalendarQuota.this.queue.remove(this);
				}
				else if (this.coveredIn == CalendarQuota.this.period.index()
						&& this.coveredAfterResets == CalendarQuota.this.resets) { // (Q8: a reset forgot it)
					CalendarQuota.this.used = Math.max(0, CalendarQuota.this.used - tokens());
				}
				serveQueue();
			}
			finally {
				CalendarQuota.this.lock.unlock();
			}
			wakeAll();
		}

		@Override
		protected Permit grantedPermit() {
			CalendarQuota.this.sleepers.remove(this);
			return Permit.noop();
		}

		void wakeUp() {
			wake();
		}
	}

	/**
	 * Builds a {@link CalendarQuota}. The limit and the calendar are required; the zone is UTC and the
	 * clock {@link InstantSource#system()} unless set.
	 */
	public static final class Builder {

		private @Nullable String name;

		private @Nullable Long limit;

		private QuotaCalendar.@Nullable Unit unit;

		private @Nullable QuotaCalendar calendar;

		private ZoneId zone = ZoneOffset.UTC;

		private InstantSource clock = InstantSource.system();

		private StatsRecorder stats = StatsRecorder.disabled();

		private Builder() {
		}

		/**
		 * Names the quota; the name is carried by {@link RateLimitExceededException}.
		 *
		 * @param name the name, may be {@code null}
		 * @return this builder
		 */
		public Builder name(@Nullable String name) {
			this.name = name;
			return this;
		}

		/**
		 * The tokens per period, all there at the period's start: {@code 1..2^50}.
		 *
		 * @param limit the allowance per period
		 * @return this builder
		 */
		public Builder limit(long limit) {
			this.limit = limit;
			return this;
		}

		/**
		 * The length of a period, in the {@linkplain #zone(ZoneId) zone}.
		 *
		 * @param unit minute, hour, day, week (from Monday), month or year
		 * @return this builder
		 */
		public Builder calendar(QuotaCalendar.Unit unit) {
			this.unit = unit;
			this.calendar = null;
			return this;
		}

		/**
		 * The calendar, unit and zone together (the {@linkplain #zone(ZoneId) zone} set apart is then not
		 * used).
		 *
		 * @param calendar the calendar
		 * @return this builder
		 */
		public Builder calendar(QuotaCalendar calendar) {
			if (calendar == null) {
				throw new InvalidArgumentException("calendar", null, null, null, "calendar must not be null");
			}
			this.calendar = calendar;
			this.unit = null;
			return this;
		}

		/**
		 * The zone whose local time the periods follow; default UTC.
		 *
		 * @param zone the zone
		 * @return this builder
		 */
		public Builder zone(ZoneId zone) {
			if (zone == null) {
				throw new InvalidArgumentException("zone", null, null, null, "zone must not be null");
			}
			this.zone = zone;
			return this;
		}

		/**
		 * The wall clock; default {@link InstantSource#system()}.
		 *
		 * @param clock the clock
		 * @return this builder
		 */
		public Builder clock(InstantSource clock) {
			if (clock == null) {
				throw new InvalidArgumentException("clock", null, null, null, "clock must not be null");
			}
			this.clock = clock;
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
				throw new InvalidArgumentException("stats", null, null, null, "stats must not be null");
			}
			this.stats = stats;
			return this;
		}

		/**
		 * Builds the quota, full, in the period of the clock's instant.
		 *
		 * @return the quota
		 * @throws IllegalArgumentException naming the argument that is missing or out of range
		 */
		public CalendarQuota build() {
			return new CalendarQuota(this);
		}
	}
}
