package dev.ratelimit.core;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;

import org.jspecify.annotations.Nullable;

/**
 * A token bucket shared by many threads: seastar's rover bucket, exact, with a lock-free fast path.
 *
 * <p>Callers take tokens by advancing the tail rover; time makes tokens available by advancing the
 * head; a caller whose ticket lies beyond the head waits, in ticket order, until the head reaches
 * it. With <em>capped release</em> a third rover, the ceiling, bounds the head as well: tokens come
 * back only when the guarded work releases them, so the bucket limits both the rate and the work in
 * flight. No background thread runs: every call reads the clock and sees the time that passed. When
 * callers contend, covered claims take from stripes of their own (striped mode) without changing what
 * is granted.
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
 * <p>With capped release, tokens are in flight from grant to release. A call that holds its tokens for a
 * latency {@code d} lets at most {@code limit} tokens be in flight, so the throughput is bounded by
 * {@code min(rate, limit / d)}: size {@code limit >= rate * d} (with head-room for latency spikes),
 * or the bucket runs below its rate whenever the guarded work slows down, which is the point of
 * capped release, but a surprise when {@code limit} is sized for bursts only.
 *
 * <p>Memory consistency effects: actions in a thread prior to releasing tokens ({@link #release},
 * closing a capped {@link Permit}) <i>happen-before</i> actions following a successful acquisition
 * of those tokens in another thread.
 */
public final class SharedTokenBucket extends StripedBucket implements RateLimiter {

	/*
	 * Design notes: in RoverBucket, after its class opening (I1-I8 of the rovers, W1, R1-R2 of a reset); striped
	 * mode's, S1-S6, in StripedBucket. This class is the API, the covered claim that tryAcquire compiles into,
	 * and the waiting claims.
	 */

	private final StatsRecorder stats;

	private final AtomicInteger waiting = new AtomicInteger();

	/** Claims that wait, woken when something ahead of them changes (I3, W1). */
	private final Set<Claim> sleepers = ConcurrentHashMap.newKeySet();

	/** I5 for claims: their deadlines are measured on the same never-going-back time. */
	private final LongSupplier seenClock = this::now;

	private SharedTokenBucket(Builder builder) {
		super(builder.name, builder.clock, builder.isCappedRelease(), builder.threshold);
		Rate rate = builder.rate();
		long lim = builder.checkedLimit(rate);
		long init = (builder.initial != null) ? builder.initial : lim;
		if (init < 0 || init > lim) {
			throw new InvalidArgumentException("initial", init, 0L, lim, "initial must be between 0 and limit (" + lim + "), was " + init);
		}
		if (builder.threshold < 1 || builder.threshold > lim) {
			throw new InvalidArgumentException("threshold", builder.threshold, 1L, lim,
					"threshold must be between 1 and limit (" + lim + "), was " + builder.threshold);
		}
		this.stats = builder.stats;
		long now = this.clock.getAsLong();
		this.seen = now;
		this.tail = 0;
		this.ceil = lim;
		this.state = new State(rate, now, init, lim, NO_HOLES, NO_HOLES);
	}

	/**
	 * The limit a bucket has when none is given: one period's tokens of the rate as given to the builder,
	 * at least 1 ({@link #defaultLimit(BigDecimal)}).
	 *
	 * @param rate the rate
	 * @return the default limit
	 */
	public static long defaultLimit(Rate rate) {
		return defaultLimit(BigDecimal.valueOf(rate.tokens()));
	}

	/**
	 * The one rule for a limit that is not given: the tokens of one period, rounded down, at least 1; the
	 * period is the one the rate is given in. A configuration that gives a fractional rate computes it from
	 * the rate as written (2.5 per second: 2) and passes it; a {@link Rate} made from 2.5 per second is
	 * 5 per 2 seconds, so a builder given that rate and no limit takes 5. Above 2^50 the builder refuses it.
	 *
	 * @param tokensPerPeriod the rate's tokens per its period, {@code > 0}
	 * @return the default limit, saturated at {@code Long.MAX_VALUE}
	 */
	public static long defaultLimit(BigDecimal tokensPerPeriod) {
		BigInteger whole = tokensPerPeriod.toBigInteger();
		return (whole.signum() <= 0) ? 1 : (whole.bitLength() > 63) ? Long.MAX_VALUE : whole.longValueExact();
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
	 * {@link #deficiency(long)} of the returned ticket is {@code 0}; a caller that gives up hands the
	 * claim back with {@link #refund(long, long)}.
	 *
	 * @param n the tokens to claim, {@code 0..2^50} (capped release: {@code <= limit})
	 * @return the ticket: the tail after this claim
	 * @throws IllegalArgumentException when {@code n} is out of range
	 */
	public long grab(long n) {
		checkCost(n);
		long now = now();
		long ticket = tryFastClaim(n, now, false, false);
		if (ticket != NO_TICKET && ticket != REFUSED) {
			return ticket;
		}
		synchronized (this.lock) {
			return claimLocked(n, enterLocked(), false);
		}
	}

	/**
	 * Tokens claimed up to {@code ticket} that are not there yet.
	 *
	 * @param ticket a ticket from {@link #grab(long)}
	 * @return {@code 0} when the ticket is covered (go ahead), otherwise the tokens missing
	 */
	public long deficiency(long ticket) {
		int resets = this.resets;
		long cap = this.ceil;
		State s = this.state;
		long now = now();
		if (s.marker() || (resets & 1) != 0 || this.resets != resets) {
			// S6: a state of striped mode is folded first (its epoch only the lock's holder reads; striped mode never
			// has a claim waiting, but a ticket can be out while it is entered: a grab that moved the tail between the
			// stripes' check and their reservation, GrabDeficiencyRacingStripeTests); R2: a reset ran meanwhile
			synchronized (this.lock) {
				long at = enterLocked();
				return missing(this.ceil, this.state, ticket, at);
			}
		}
		return missing(cap, s, ticket, now);
	}

	/**
	 * Lets the bucket know the time: the head is computed from the clock on every call, so this only
	 * matters when {@code nowNanos} is later than the clock (time never goes back, I5). Kept for
	 * seastar's protocol, where a timer replenishes.
	 *
	 * @param nowNanos a reading of the bucket's clock
	 */
	public void replenish(long nowNanos) {
		for (;;) {
			long s = (long) SEEN.getOpaque(this);
			if (nowNanos - s <= 0 || SEEN.compareAndSet(this, s, nowNanos)) {
				break;
			}
		}
		if (this.state.holes.length != 0) {
			synchronized (this.lock) {
				enterLocked();
			}
		}
	}

	/**
	 * Capped release: lets {@code n} tokens be taken again, typically when the work they guarded
	 * completes. Without capped release it does nothing.
	 *
	 * @param n the tokens released, {@code >= 0}
	 */
	public void release(long n) {
		Amounts.nonNegative(n);
		if (this.cappedRelease && n > 0) {
			synchronized (this.lock) {
				long now = enterLocked();
				this.ceil += n;
				foldReached(now); // I8: refunds waiting at the end of the line that the ceiling now reaches
			}
			wakeAll();
		}
	}

	/**
	 * Gives back {@code n} tokens that a call took, as if it had not taken them (I7): they are available
	 * again at once, first to the callers already waiting, in order, but the bucket never holds more than
	 * its limit (I1). With capped release they also go back to the ceiling (I8): a caller that gave up
	 * (seastar's give-up after {@link #grab}) never shrinks the bucket, and a caller that took them
	 * (a grab it went ahead with, {@link #tryAcquire}) then holds {@code n} fewer and releases the rest;
	 * a caller that holds a {@link Permit} refunds with {@link #refund(long, Permit)}. A waiter that gives
	 * up may also use {@link #refund(long, long)}, so that callers ahead of it gain nothing.
	 *
	 * @param n the tokens given back, {@code 0..2^50}; more than the call took only fills
	 *        the bucket up to its limit (and, capped, the ceiling up to the claims)
	 * @throws IllegalArgumentException naming {@code n} when it is out of range
	 */
	@Override
	public void refund(long n) {
		if (Amounts.checked(n) == 0) {
			return;
		}
		synchronized (this.lock) {
			refundLocked(n, n, false, enterLocked());
		}
		wakeAll();
	}

	/**
	 * Gives back {@code n} tokens of the call that holds {@code permit} (I7): as {@link #refund(long)},
	 * except that with capped release the tokens leave the flight through the permit (I8): its close
	 * releases {@code n} fewer, and once it is closed the refund acts on the rate only (the release gave
	 * the tokens back to the ceiling already). A permit that holds nothing of this bucket's (a closed one,
	 * {@link Permit#noop()} for tokens taken by a {@link #charge}, another limiter's) puts nothing in the
	 * ceiling either: the refund acts on the rate only.
	 *
	 * @param n the tokens given back, {@code 0..2^50}
	 * @param permit the permit of the call
	 * @throws IllegalArgumentException naming {@code n} when it is out of range
	 */
	@Override
	public void refund(long n, Permit permit) {
		if (Amounts.checked(n) == 0) {
			return;
		}
		long toCeiling = (permit instanceof CappedPermit held && held.bucket == this) ? held.takeBack(n) : 0;
		synchronized (this.lock) {
			refundLocked(n, toCeiling, true, enterLocked());
		}
		wakeAll();
	}

	/**
	 * Takes {@code n} more tokens now, never waiting and never refused, even into debt (I7): a claim
	 * made at the end of the line whose ticket nobody waits for. A full bucket first wastes its excess,
	 * as for any claim (I2), so a charge on a full bucket is a take of {@code n}. Callers already waiting
	 * are ahead of it and keep their place and their wait; the callers that come after wait for the debt,
	 * in order. With capped release this acts on the rate only: nothing more is in flight, so the charge
	 * moves the ceiling by {@code n} too, for the tickets behind it only (until every claim ahead of it
	 * is within the ceiling, it is held apart, as a hole is, see I3), and nothing is to be released for it.
	 *
	 * @param n the tokens taken, {@code 0..2^50} (capped release included)
	 * @throws IllegalArgumentException naming {@code n} when it is out of range, or when it would put
	 *         more than {@code 2^50} tokens in line; then nothing is taken
	 */
	@Override
	public void charge(long n) {
		if (Amounts.checked(n) == 0) {
			return;
		}
		synchronized (this.lock) {
			long now = enterLocked();
			claimLocked(n, now, true);
			if (this.cappedRelease) {
				foldReached(now); // nobody waits for releases: the charge is in the ceiling at once
			}
		}
	}

	/**
	 * Gives back the claim of {@code n} tokens that {@link #grab(long)} returned {@code ticket} for: the
	 * tokens go to the callers behind it at once (I3), never to those ahead; when the claim was the
	 * last one the tail simply moves back.
	 *
	 * @param ticket the ticket of the claim
	 * @param n the tokens of that claim
	 */
	public void refund(long ticket, long n) {
		if (Amounts.checked(n) == 0) {
			return;
		}
		int wake;
		synchronized (this.lock) {
			wake = giveBackOrForgetLocked(ticket, n, enterLocked());
		}
		wakeAfterGiveBack(wake, ticket);
	}

	/**
	 * Puts the bucket back to full (contract revision 3; R1-R3 of the design notes): {@code limit} tokens
	 * available, what is owed forgotten (the debt of the callers waiting, charges, holes), and the callers waiting
	 * for time or releases woken to claim again: their claims go to the end of the line, in the order in which
	 * they were made, so that the full bucket covers the first of them at once. A claim already covered keeps its
	 * tokens (it is as good as granted) and costs the full bucket nothing. The statistics are kept. With capped
	 * release the tokens in flight stay in flight (the work they guard still runs): the bucket has {@code limit}
	 * less those tokens available, and their release gives them back, never above the limit (I8).
	 *
	 * <p>A claim from before the reset given back after it gives nothing back to the rate (the reset forgot it;
	 * capped, its tokens leave the claims, as a release); a ticket from {@link #grab} taken before the reset is
	 * covered by it (what it owed is forgotten).
	 */
	@Override
	public void reset() {
		synchronized (this.lock) {
			long now = enterLocked();
			this.resets++; // R2: odd while the structure is rewritten
			try {
				resetLocked(now);
			}
			finally {
				this.resets++;
			}
		}
		wakeAll();
	}

	/** R1, under the lock: the reset itself (see {@link #reset()}). */
	private void resetLocked(long now) {
		State s = this.state;
		long cap = this.ceil;
		long tl = (long) TAIL.getVolatile(this);
		// the claims that wait for time or releases claim again; covered ones keep their tokens (R2 of the reservations)
		List<Claim> again = new ArrayList<>();
		long rebased = 0;
		for (Claim claim : this.sleepers) {
			if (claim.tokens() != 0 && missing(cap, s, claim.ticket, now) != 0) {
				again.add(claim);
				rebased += claim.tokens();
			}
		}
		again.sort(Comparator.comparingLong((Claim claim) -> claim.ticket - tl)); // in line order (I3)
		// capped (I8): the tokens claimed and neither released nor refunded, waiting claims included
		long claimed = tl - s.credit(tl + 1) - s.charged(tl + 1) - pendingCredits() - cap + s.limit;
		// fast claims wait for the reset (S4's held state; one that took the tail meanwhile re-checks, I6)
		this.state = markerLocked(s, s.start, s.base, null);
		long floor = (long) TAIL.getVolatile(this);
		for (Claim claim : again) {
			long n = claim.tokens();
			for (;;) {
				long t = (long) TAIL.getVolatile(this);
				if (TAIL.compareAndSet(this, t, t + n)) {
					claim.ticket = t + n;
					break;
				}
			}
		}
		if (this.cappedRelease) {
			// what stays claimed (in flight, covered claims, grab tickets) stays out of the ceiling
			this.ceil = floor + s.limit - (claimed - rebased);
			this.ceilingCredits = NO_HOLES;
		}
		this.resetTail = floor;
		this.wasReset = true;
		// R3, the linearization point: full at now (a whole epoch: I2's fraction dropped), nothing owed
		this.state = new State(s.rate, now, floor + s.limit, s.limit, NO_HOLES, NO_HOLES);
	}

	/** Nobody to wake. */
	private static final int WAKE_NONE = 0;

	/** A hole: the claims behind it moved up (W1). */
	private static final int WAKE_BEHIND = 1;

	/** The ceiling moved: any claim may have. */
	private static final int WAKE_ALL = 2;

	/**
	 * Under the lock: gives back the claim of {@code n} tokens at {@code ticket} (I3), or, when the bucket was reset
	 * after the claim was made (R1), nothing to the rate (the reset forgot the claim) and, capped, its tokens to the
	 * ceiling (they are claimed no longer).
	 *
	 * @return whom to wake
	 */
	private int giveBackOrForgetLocked(long ticket, long n, long now) {
		if (this.wasReset && ticket - this.resetTail <= 0) {
			if (!this.cappedRelease) {
				return WAKE_NONE;
			}
			this.ceil += n;
			foldReached(now);
			return WAKE_ALL;
		}
		return giveBackLocked(ticket, n, now) ? WAKE_BEHIND : WAKE_NONE;
	}

	private void wakeAfterGiveBack(int wake, long ticket) {
		if (wake == WAKE_BEHIND) {
			wakeBehind(ticket);
		}
		else if (wake == WAKE_ALL) {
			wakeAll();
		}
	}

	/**
	 * Nanoseconds until {@code missing} more tokens accumulate at the current rate: an upper bound on
	 * the wait of a caller missing that many, exact to within one token's interval.
	 *
	 * @param missing tokens still needed, {@code >= 0}
	 * @return the wait, {@code > 0} for {@code missing > 0}, {@code 0} for none
	 */
	public long durationFor(long missing) {
		Amounts.nonNegative(missing);
		return (missing == 0) ? 0 : Math.max(1, this.state.rate.nanosFor(quantum(missing)));
	}

	/**
	 * Changes the rate. The time that passed is counted under the old rate first, then the new rate
	 * applies from now; the part of a token earned under the old rate is dropped. Callers already
	 * waiting keep their place (and are woken to look again).
	 *
	 * @param tokens tokens per {@code period}, {@code > 0}
	 * @param period the period, {@code > 0}
	 */
	@Override
	public void updateRate(long tokens, Duration period) {
		updateRate(Rate.of(tokens, period));
	}

	/**
	 * Changes the rate, as {@link #updateRate(long, Duration)} does.
	 *
	 * @param rate the new rate
	 */
	public void updateRate(Rate rate) {
		if (rate == null) {
			throw new InvalidArgumentException("rate", null, null, null, "rate must not be null");
		}
		synchronized (this.lock) {
			long now = enterLocked();
			State s = this.state;
			settleFull(s, now);
			s = this.state;
			this.state = new State(rate, now, s.headAt(now), s.limit, s.holes, s.charges);
		}
		wakeAll();
	}

	/**
	 * Changes the limit. A bucket holding more than the new limit drops the excess; a larger limit
	 * fills with time from now on (idle time before it is not banked at the new limit). With capped
	 * release the ceiling moves by the difference. Callers already covered stay covered.
	 *
	 * @param newLimit the new limit, {@code 1..2^50} and at least the threshold
	 */
	@Override
	public void updateLimit(long newLimit) {
		if (newLimit < 1 || newLimit < this.threshold) {
			throw new InvalidArgumentException("limit", newLimit, Math.max(1, this.threshold), MAX_COST,
					"limit must be >= " + Math.max(1, this.threshold)
					+ " (the threshold), was " + newLimit);
		}
		if (newLimit > MAX_COST) {
			throw new InvalidArgumentException("limit", newLimit, Math.max(1, this.threshold), MAX_COST,
					"limit must be at most 2^50 (" + MAX_COST + "), was " + newLimit);
		}
		synchronized (this.lock) {
			long now = enterLocked();
			State s = this.state;
			if (settleFull(s, now)) {
				s = this.state;
				this.state = new State(s.rate, now, s.headAt(now), s.limit, s.holes, s.charges);
			}
			s = this.state;
			if (this.cappedRelease) {
				this.ceil += newLimit - s.limit;
			}
			this.state = new State(s.rate, s.start, s.base, newLimit, s.holes, s.charges);
			foldReached(now); // I8: refunds waiting at the end of the line that the ceiling now reaches
		}
		wakeAll();
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
		if (!claimCovered(n)) {
			this.stats.recordRejected();
			return false;
		}
		this.stats.recordGranted(0);
		return true;
	}

	@Override
	public Permit acquire(long n, Duration maxWait) throws InterruptedException {
		long budget = AbstractReservation.budgetNanos(maxWait);
		checkCost(n);
		if (Amounts.grantedBeforeWaiting(n, this.stats, "tokens", this.name)) {
			return Permit.noop();
		}
		long now = now();
		if (tryClaimNow(n, now) == GRANTED) {
			this.stats.recordGranted(0);
			return permitFor(n);
		}
		Claim claim = claimOrRefuse(n, maxWait, budget);
		return claim.coveredAtOnce ? claim.grantNow() : claim.await();
	}

	@Override
	public Reservation reserve(long n, Duration maxWait) {
		long budget = AbstractReservation.budgetNanos(maxWait);
		checkCost(n);
		long now = now();
		if (n == 0) {
			return new Claim(0, 0, maxWait, now);
		}
		long ticket = tryFastClaim(n, now, true, false); // (a reservation needs its ticket, a stripe has none)
		if (ticket != NO_TICKET && ticket != REFUSED) {
			return new Claim(ticket, n, maxWait, now);
		}
		return claimOrRefuse(n, maxWait, budget);
	}

	/**
	 * Claims {@code n} tokens under the lock for a caller that accepts to wait {@code budget}
	 * nanoseconds, or refuses at once, keeping nothing (I4), when the time-based wait is longer. A
	 * claim that waits for releases (capped) is accepted: it waits up to its budget for them.
	 */
	private Claim claimOrRefuse(long n, Duration maxWait, long budget) {
		long wait;
		long ticket;
		boolean hole;
		synchronized (this.lock) {
			long now = enterLocked();
			ticket = claimLocked(n, now, false);
			State s = this.state;
			wait = rateWait(s, ticket, now);
			if (wait <= budget) {
				Claim claim = new Claim(ticket, n, maxWait, now);
				claim.coveredAtOnce = (wait == 0 && capMissing(this.ceil, s, ticket) == 0);
				if (!claim.coveredAtOnce) {
					claim.notCoveredWhenMade();
				}
				this.sleepers.add(claim); // (also counts its tokens as claimed, not in flight, until granted)
				return claim;
			}
			hole = giveBackLocked(ticket, n, now);
		}
		if (hole) {
			wakeBehind(ticket); // (a refusal is the last claim, nobody is behind it, unless a fast claim came in)
		}
		this.stats.recordRejected();
		throw new RateLimitExceededException(this.name, n, Duration.ofNanos(wait));
	}

	@Override
	public RateLimiterSnapshot snapshot() {
		long tl;
		long cap;
		State s;
		long now;
		long pending = 0;
		long credits;
		synchronized (this.lock) {
			enterLocked();
			// the tail before the clock: every grab it shows read the clock before moving it, so none is
			// later than now (read the other way, a grab after the clock read shows as tokens owed)
			tl = (long) TAIL.getVolatile(this);
			now = now();
			s = foldReached(now);
			cap = this.ceil;
			credits = pendingCredits();
			for (Claim claim : this.sleepers) {
				pending += claim.tokens();
			}
		}
		long effectiveTail = tl - s.credit(tl + 1);
		long head = s.visibleHead(now, effectiveTail);
		long available = head - effectiveTail;
		long inFlight = 0;
		if (this.cappedRelease) {
			long ceilingTail = effectiveTail - s.charged(tl + 1); // charges are not in flight (I7)
			available = Math.min(available, cap - ceilingTail);
			// nor tokens refunded that wait to move into the ceiling (I8), not available yet either
			inFlight = Math.max(0, ceilingTail - credits - cap + s.limit - pending);
		}
		long owed = effectiveTail - head;
		if (this.cappedRelease) {
			// tokens in flight come back at releases, not in time: whole tokens at the rate
			return new RateLimiterSnapshot(s.rate.tokens(), s.rate.period(), s.limit, true, Math.max(available, 0),
					Math.max(owed, 0), this.waiting.get(), inFlight, this.stats.granted(), this.stats.rejected(), null,
					Duration.ZERO);
		}
		// full when the head reaches the tail plus the limit: counts the part of the next token already made
		long untilFull = (available >= s.limit) ? 0 : s.nanosUntilDue(effectiveTail + s.limit, now);
		return new RateLimiterSnapshot(s.rate.tokens(), s.rate.period(), s.limit, false, Math.max(available, 0),
				Math.max(owed, 0), this.waiting.get(), 0, this.stats.granted(), this.stats.rejected(), null,
				Duration.ZERO, Duration.ofNanos(untilFull));
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
		return this.state.limit;
	}

	/**
	 * The rate in force.
	 *
	 * @return the rate
	 */
	public Rate rate() {
		return this.state.rate;
	}

	@Override
	boolean recheck(long ticket, long n, boolean covered) {
		boolean hole;
		synchronized (this.lock) {
			if (claimedBeforeStripes(ticket)) {
				return true; // S1: claimed before the stripes' reservation, which left it covered
			}
			long now = enterLocked();
			if (!covered || missing(this.ceil, this.state, ticket, now) == 0) {
				return true;
			}
			hole = giveBackLocked(ticket, n, now);
		}
		if (hole) {
			wakeBehind(ticket);
		}
		return false;
	}

	/**
	 * A claim of {@code n} tokens that are there now, or nothing: the fast paths (a stripe or the tail),
	 * then the lock (S4).
	 */
	private boolean claimCovered(long n) {
		long now = now();
		State striped = this.state;
		Stripes stripes = striped.stripes;
		if (stripes != null) {
			int taken = stripes.take(n, now); // S2, kept apart from the rest so that it compiles small
			if (taken == GRANTED) {
				return true;
			}
			return claimCoveredSlowly(n, striped, taken);
		}
		// the clock, the tail, then the state (I6): a state read after the tail is the one in force when the tail
		// was read or a later one, so a CAS that succeeds on a state unchanged since is decided on the state in
		// force at that instant, at a time no later than it (a stripe needs no tail: closed before a fold reads
		// the clock, it takes nothing after it)
		long tl = (long) TAIL.getVolatile(this);
		State s = this.state;
		if (s.plain) {
			int once = claimOnce(s, n, now, tl);
			if (once != UNSURE) {
				return once == GRANTED;
			}
		}
		return claimCoveredSlowly(n, null, UNSURE);
	}

	/**
	 * The lock-free claim of I6 in its common case, tried once, small enough to be compiled into
	 * {@link #tryAcquire} ({@link #tryFastClaim} is not): on a {@code plain} state, {@code n} tokens that
	 * are there, a full bucket only when its head is a whole number (I2). It returns {@link #GRANTED},
	 * {@link #NOT_THERE} (decided on the state in force) or, for anything else, a lost CAS included,
	 * {@link #UNSURE}, and {@link #claimCoveredSlowly} decides.
	 */
	private int claimOnce(State s, long n, long now, long tl) {
		long head = s.base + s.tokens(now);
		long next;
		if (head - tl - s.limit >= 0) {
			if (n > s.limit) {
				return refusable(s, tl) ? NOT_THERE : UNSURE;
			}
			if (!s.rate.isWhole(now - s.start)) {
				return UNSURE; // I2: the epoch restarts, under the lock
			}
			next = head - s.limit + n; // I2: the excess wasted
		}
		else if (head - tl >= n) {
			next = tl + n;
		}
		else {
			return refusable(s, tl) ? NOT_THERE : UNSURE;
		}
		if (!TAIL.compareAndSet(this, tl, next)) {
			return UNSURE;
		}
		return (this.state == s || recheck(next, n, true)) ? GRANTED : UNSURE;
	}

	@Override
	boolean hasWaiters() {
		return !this.sleepers.isEmpty();
	}

	private void wakeAll() {
		Sleepers.wakeAll(this.sleepers);
	}

	/** W1: a claim given back as a hole at {@code ticket} moves up the claims behind it, and only them. */
	private void wakeBehind(long ticket) {
		Sleepers.wakeBehind(this.sleepers, ticket, (claim) -> claim.ticket);
	}

	private Permit permitFor(long n) {
		return this.cappedRelease ? new CappedPermit(this, n) : Permit.noop();
	}

	private void checkCost(long n) {
		Amounts.nonNegative(n);
		Amounts.atMostMaxCost(n);
		if (this.cappedRelease && n > this.state.limit) {
			throw new InvalidArgumentException("n", n, 0L, this.state.limit, "n must be at most the limit (" + this.state.limit
					+ ") of capped bucket" + of() + ", was " + n + ": it could never be granted");
		}
	}

	@Override
	public String toString() {
		State s = this.state;
		return "SharedTokenBucket" + of() + "[rate=" + s.rate + ", limit=" + s.limit
				+ (this.cappedRelease ? ", capped release" : "") + "]";
	}

	/** A caller's claim: its ticket, polled until covered (I3), given back by position. */
	private final class Claim extends AbstractReservation {

		/** Written under the lock (a reset moves a waiting claim to the end of the line, R1); read by pollers. */
		private volatile long ticket;

		/** Covered when it was made (set under the lock before the claim is published). */
		boolean coveredAtOnce;

		Claim(long ticket, long n, Duration maxWait, long now) {
			super(SharedTokenBucket.this.name, n, maxWait, SharedTokenBucket.this.seenClock, now,
					SharedTokenBucket.this.stats, SharedTokenBucket.this.waiting);
			this.ticket = ticket;
		}

		@Override
		protected long delayNanos(long nowNanos) {
			if (tokens() == 0) {
				return 0;
			}
			SharedTokenBucket bucket = SharedTokenBucket.this;
			int resets = bucket.resets;
			long ticket = this.ticket;
			long cap = bucket.ceil;
			State s = bucket.state;
			long now = now();
			if (s.marker() || (resets & 1) != 0 || bucket.resets != resets) {
				// S6: a state of striped mode is folded first; R2: a reset ran meanwhile: read it all under the lock
				synchronized (bucket.lock) {
					long at = enterLocked();
					return delayOf(this.ticket, bucket.ceil, bucket.state, at);
				}
			}
			return delayOf(ticket, cap, s, now);
		}

		private long delayOf(long ticket, long cap, State s, long now) {
			if (missing(cap, s, ticket, now) == 0) {
				return 0;
			}
			long wait = rateWait(s, ticket, now);
			if (capMissing(cap, s, ticket) > 0 && wait == 0) {
				return AWAITING_RELEASE;
			}
			return (wait > 0) ? wait : AWAITING_RELEASE;
		}

		@Override
		protected void giveBack() {
			long n = tokens();
			long ticket;
			int wake = WAKE_NONE;
			synchronized (SharedTokenBucket.this.lock) {
				// under the lock: a reset either moved this claim already or sees it still waiting (R1)
				SharedTokenBucket.this.sleepers.remove(this);
				ticket = this.ticket;
				if (n != 0) {
					wake = giveBackOrForgetLocked(ticket, n, enterLocked());
				}
			}
			wakeAfterGiveBack(wake, ticket);
		}

		@Override
		protected Permit grantedPermit() {
			SharedTokenBucket.this.sleepers.remove(this);
			return (tokens() == 0) ? Permit.noop() : permitFor(tokens());
		}

		void wakeUp() {
			wake();
		}

		Permit grantNow() {
			return grantAtOnce();
		}
	}

	/**
	 * Builds a {@link SharedTokenBucket}. Only the rate is required.
	 */
	public static final class Builder extends TokenBucketBuilder<Builder> {

		private @Nullable Long initial;

		private long threshold = 1;

		private Builder() {
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
