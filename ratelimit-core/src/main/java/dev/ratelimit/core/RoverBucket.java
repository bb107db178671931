package dev.ratelimit.core;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.function.LongSupplier;

import org.jspecify.annotations.Nullable;

/**
 * Rover mode of a {@link SharedTokenBucket}: its state, the clock, the lock-free claim on the tail and the
 * arithmetic of the locked sections, shared with striped mode ({@link StripedBucket}). The invariants it
 * keeps, I1-I8, are in the design notes below; the methods name the ones they keep.
 * Split out of the bucket as {@code Striped64} is out of {@code LongAdder}: fields and methods are
 * package-private, so that nothing here is public API.
 */
abstract class RoverBucket {

	/*
	 * Design notes. The code is in three classes, as LongAdder's is over Striped64: RoverBucket (the state,
	 * the lock-free claim on the tail, the arithmetic under the lock), StripedBucket (striped mode, its notes
	 * S1-S6, and enterLocked, the one entry of every locked section) and this one (the API, the covered claim
	 * that tryAcquire compiles into, the waiting claims).
	 *
	 * State, in tokens, 64-bit counters that wrap and are compared only by difference:
	 * - tail: tokens claimed so far, plus tokens a full bucket wasted (see I2). A claim of n moves it from
	 *   t to t + n; the new value is the claim's ticket.
	 * - head(now) = base + floor((now - start) * rate): tokens made available so far. It is never stored:
	 *   (start, base, rate), the epoch, is an immutable State (but see S6) read through one volatile field,
	 *   and every call computes the head from the clock, exactly, in 128-bit arithmetic (Rate.tokensIn). So a
	 *   caller always knows when it takes its tokens, which is what an exact token bucket needs: without the
	 *   time of each take it must either break the bound or under-fill after idle.
	 * - ceil (capped release only): limit + tokens released + tokens refunded to it + tokens a full bucket
	 *   wasted + tokens charged (see I7, I8); a ticket is covered when both the head and the ceiling reached it.
	 * - holes (in the same State): claims given back by waiters that others queue behind, as (ticket,
	 *   tokens); a ticket behind a hole counts its tokens as covered.
	 * - charges (in the same State, capped release only): charges not yet in the ceiling, as (ticket,
	 *   tokens); a ticket behind one counts its tokens as within the ceiling (I7).
	 *
	 * Invariants, each with the tests that check it:
	 *
	 * I1. At most limit tokens are available: available is min(head - tail, limit), never more (and,
	 * capped, also at most ceil - tail). (SharedTokenBucketModelTests, against an exact reference bucket;
	 * SharedTokenBucketTests.holdsAtMostItsLimitAfterTenIdleDaysAtOneBillionPerSecond.)
	 *
	 * I2. A full bucket wastes time, the fraction of the next token included. A claim that finds
	 * head - tail >= limit first moves the tail to head - limit (the wasted tokens; capped: the ceiling moves
	 * with it, so ceil - tail still counts the tokens not in flight), and when the head at that instant is not
	 * a whole number of tokens, restarts the epoch there. So the next token takes a whole interval after the
	 * take, and over any window w at most limit + rate * w tokens go out; after an idle period of limit / rate
	 * exactly limit are available however the earlier tokens were taken or given back.
	 * (SharedTokenBucketModelTests, SharedTokenBucketTests.aFullBucketEarnsNoPartOfTheNextTokenEither.)
	 *
	 * I3. Tickets are covered in order. The tail only grows except when the last claim is given back; a
	 * claim given back with others behind it becomes a hole, whose tokens every later ticket counts as
	 * covered at once (they move up) and no earlier one does (they gain nothing). Once the head reaches a
	 * hole, the hole moves into the epoch's base (and, capped, into the ceiling): nothing changes for anyone,
	 * the state is just smaller. (SharedTokenBucketModelTests, jcstress GiveUpRacingGrant.)
	 *
	 * I4. Nothing is lost or counted twice. A refusal claims nothing (it is decided before the claim, or the
	 * claim is given back under the lock); giving back is exact (I3) and never lifts the bucket above its
	 * limit (I1). (SharedTokenBucketModelTests.)
	 *
	 * I5. Time never goes back. Every call uses the latest clock reading seen so far (or a later replenish
	 * argument); a clock that stands still or goes back changes nothing. (SharedTokenBucketTests
	 * .aReplenishAheadOfTheClockIsKept, .aClockThatStandsStillOrGoesBackChangesNothing;
	 * SharedTokenBucketModelTests, whose clock steps back.)
	 *
	 * I6. One writer of the structure at a time. Epoch changes (I2's restart, I3's holes, rate and limit
	 * changes), capped mode, every claim that must wait and, in striped mode, every call but a stripe grant
	 * (S2) go through one lock, and every locked section enters through StripedBucket.enterLocked, which
	 * folds first. The lock-free fast path reads the clock, the tail, then the state (so the state is the
	 * one in force at a time no earlier than the clock's), only claims tokens that are there, with one CAS on
	 * the tail, and re-reads the state after its CAS: if the state changed meanwhile it re-checks its claim
	 * under the lock and gives it back when it is not covered; a refusal reads the tail and the state again,
	 * unchanged. Writers publish a new state before they move the tail, so a CAS that succeeds on an
	 * unchanged state was decided on the state in force at that instant. (StaleStateFastClaimTests; jcstress
	 * TwoCallersOnTheLastToken, RefundRacingReplenish.)
	 *
	 * I7. A refund and a charge act on the rate as if the call had taken fewer or more tokens. refund(n) (a
	 * granted call gives tokens back: refundIf, or settle to a smaller cost) moves the epoch's base, so the
	 * head, up by n, but never more than limit beyond the claims: the first callers in line are covered
	 * first, the bucket never holds more than its limit (I1) and the head never runs away from the tail (no
	 * wrap). With capped release the ceiling moves too (I8). charge(n) (settle to a larger cost) is a claim
	 * at the end of the line that nobody waits for: a full bucket first wastes its excess (I2), so on a full
	 * bucket it is a take; callers ahead of it keep their tickets and waits (what was covered stays covered,
	 * and no ticket ahead of it moves); callers behind it wait for it, in order (I3). With capped release a
	 * charge puts nothing in flight: a ticket behind it counts its tokens as within the ceiling (the state's
	 * charges; while a claim ahead of it waits for releases it is kept apart, so that claim gains nothing,
	 * and then moves into the ceiling, as a hole does). Neither is a call: the statistics do not change.
	 * (SharedTokenBucketModelTests, jcstress ChargeRacingFastClaim, RefundRacingFastClaim.)
	 *
	 * I8. Capped: the ceiling counts what is not claimed. ceil - (tail less holes and charges) = limit - claimed,
	 * claimed being the tokens claimed (in flight, or waiting) and neither released nor refunded. A refund gives
	 * its tokens back to the ceiling as well as to the head (a caller that gave up never shrinks the bucket),
	 * never more than are claimed (so in flight plus available never exceed limit); the caller then releases
	 * only the rest: a permit's close releases what it was granted less what was refunded through it
	 * (refund(n, Permit), CappedPermit), and a refund through a closed permit acts on the head only. A refund
	 * without a permit waits at the end of the line (RoverBucket.ceilingCredits) until every claim ahead of it
	 * is within the ceiling, so that none gains early. (SharedTokenBucketModelTests, whose reference keeps the
	 * same credits; SharedTokenBucketTests.aCappedRefundGivesItsTokensBackToTheCeiling,
	 * .aRefundInCappedModeThroughThePermitAndTheReleaseGiveTheTokensBackOnce.)
	 *
	 * W1. A give-back wakes only the claims behind it. A claim that waits is told when what it waits for may
	 * have changed, so that a caller polling on a timer polls again at once (Reservation.onWake). By I3 a
	 * claim given back as a hole moves up the claims behind it and gives nothing to those ahead; a claim
	 * given back at the end of the line (every refusal at the claim, and a waiter that was last in line)
	 * moves nobody, and wakes nobody. A release, a refund, a rate or limit change may move any claim, and
	 * wakes every one. (Under overload, every refusal used to wake every waiter: with 10 asynchronous waiters
	 * and 1,000 refusals a second the starter's one timer thread ran ~15,000 useless polls a second and fell
	 * up to 0.7 s behind, so waiters were granted that long after their tokens were there:
	 * SharedTokenBucketTests.aRefusalWakesNoWaiter, .aWaiterThatGivesUpWakesOnlyTheClaimsBehindIt.)
	 *
	 * R1. A reset forgets what is owed, and nothing leaks (contract revision 3). Under the lock, entered through
	 * enterLocked (which folds the stripes, so striped mode too), with the fast claims held off by S4's held state:
	 * the claims waiting for time or releases move to the end of the line, in ticket order, with new tickets; the
	 * epoch restarts at now with base = resetTail + limit, resetTail being the tail at that instant, and no holes or
	 * charges, so every ticket up to resetTail is covered (a covered claim keeps its tokens and costs the full bucket
	 * nothing; a grab ticket's debt is forgotten) and the moved claims claim from the full bucket first. Capped: the
	 * ceiling becomes resetTail + limit - what stays claimed (in flight, covered claims, grab tickets), so I8 holds
	 * and a release after the reset never lifts the bucket above its limit. A ticket up to resetTail given back
	 * after the reset gives nothing back to the rate (the reset forgot it; capped, its tokens leave the claims, as
	 * a release does). So from the reset on the bucket grants at most limit + rate * w over a window w, plus what
	 * refunds give back (as ever, I7). (SharedTokenBucketModelTests and StripedBucketModelTests, whose reference
	 * resets alike; SharedTokenBucketTests.aResetFillsTheBucketAndWakesTheWaitersToClaimAgain,
	 * .aReleaseAfterAResetNeverLiftsACappedBucketAboveItsLimit; SharedTokenBucketConcurrencyTests
	 * .resetsRacingCallersNeverGrantMoreThanTheFullBucketsAndTheRate.)
	 *
	 * R2. Readers outside the lock see a reset whole. resets is odd while a reset rewrites the state, the ceiling
	 * and the moved claims' tickets; a poll of a waiting claim or deficiency reads resets, then the ticket, the
	 * ceiling and the state, then resets again, and reads under the lock when it changed (or was odd): a moved
	 * claim is never judged by its old ticket against the new epoch, which covers it.
	 * (SharedTokenBucketConcurrencyTests.resetsRacingCallersNeverGrantMoreThanTheFullBucketsAndTheRate.)
	 *
	 * Linearization points: a reset at its publication of the new state (a fast claim that took the tail before it,
	 * with a ticket up to resetTail, took tokens of before the reset and is ordered before it; one with a later
	 * ticket re-checks under the lock against the new state, I6); a claim at its CAS on tail (fast path: provided the state is unchanged after it,
	 * else at the re-check under the lock); a stripe grant at its CAS on the stripe's word, at the time it
	 * logged (the fold puts grants in the order of their times, each read within its call; S2 makes any
	 * order valid); a fold when it has closed the last stripe; a charge likewise, at its CAS under the lock;
	 * a give-back, a refund, a release, a rate or limit change at the write of the state, the tail or the
	 * ceiling under the lock (a fast-path claim that raced a refund sees a new state and re-checks, I6).
	 *
	 * Access modes: tail and state volatile (the rovers publish the work that released tokens to the caller
	 * that gets them); seen opaque (a racy maximum: a reader that sees an older value computes fewer tokens,
	 * never more); ceil volatile, written under the lock after the state (a reader that reads the ceiling
	 * first never counts a hole or a charge twice); the fields of striped mode under the lock, but for the
	 * stripes' words (Stripes).
	 *
	 * Overflow: rovers are 64-bit counters compared by difference, so a ticket still held (a grab ticket, a
	 * claim not yet taken or given up) is read exactly while the rovers travel less than 2^63 past it. Time
	 * moves them at most 10^9 tokens per second (2^63 in 292 years); without time, only a give-up folded into
	 * the base or a charge followed by a refund moves them, by at most one claim each, and claims are at most
	 * 2^50 tokens (MAX_COST, as on Redis), so it takes 2^13 give-ups of the largest claim while one ticket is
	 * held. (With claims up to 2^62, as before, two were enough:
	 * SharedTokenBucketTests.aCoveredTicketStaysCoveredAfterGiveUpsOfTheLargestClaimBehindIt, found by the
	 * model test.) Rate computes heads and waits in 128 bits and saturates waits, so rates from one per
	 * century to 10^9 per second and a century of uptime are exact.
	 */

	/**
	 * The largest claim, 2^50 tokens: rovers compared by difference stay exact while a held ticket is
	 * less than 2^63 behind them (the design notes), which takes 2^13 give-ups of the largest claim.
	 */
	static final long MAX_COST = 1L << 50;

	static final long[] NO_HOLES = new long[0];

	/**
	 * Spin-waits after a lost CAS on the tail, doubling up to {@link #MAX_BACKOFF_SPINS}: chosen with
	 * {@code TryPathBenchmark} on 2 threads (0: 15 ops/us, 16: 39, 64: 37).
	 */
	private static final int BACKOFF_SPINS = 32;

	private static final int MAX_BACKOFF_SPINS = 1024;

	static final VarHandle TAIL;

	static final VarHandle SEEN;


	static {
		try {
			MethodHandles.Lookup lookup = MethodHandles.lookup();
			TAIL = lookup.findVarHandle(RoverBucket.class, "tail", long.class);
			SEEN = lookup.findVarHandle(RoverBucket.class, "seen", long.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	/** What the claim methods return when they claimed nothing. Tickets never equal it: see {@link #tryFastClaim}. */
	static final long NO_TICKET = Long.MIN_VALUE;

	/** What {@link #tryFastClaim} returns when the tokens are not there (and the lock could not help). */
	static final long REFUSED = Long.MIN_VALUE + 1;

	/**
	 * What {@link #tryFastClaim} returns to a covered claim that lost the tail to another caller while the
	 * bucket held enough tokens to stripe (S1): the lock decides, then stripes.
	 */
	static final long CONTENDED = Long.MIN_VALUE + 2;

	final @Nullable String name;

	final LongSupplier clock;

	/** I5: the default clock, {@code System.nanoTime()}, never goes back: {@code seen} is not needed. */
	final boolean monotonic;

	final boolean cappedRelease;

	final long threshold;

	/** I6: the one writer of the state, the ceiling and capped claims. */
	final Object lock = new Object();

	volatile State state;

	/**
	 * Tests only ({@link StripedBucket#stripeEagerly}): no state is {@code plain}, so that every covered claim
	 * takes the slow path, where it stripes. Read when a state is made, never on a fast path.
	 */
	volatile boolean eager;

	@SuppressWarnings("unused")
	volatile long tail;

	/** I5: the latest clock reading seen; written opaquely, read racily (see SharedTokenBucket's access modes). */
	@SuppressWarnings("unused")
	volatile long seen;

	/** Capped release only: guarded by {@link #lock}; volatile for readers outside it. */
	volatile long ceil;

	/**
	 * Capped release only (I8): {@code (tail, tokens)} pairs of tokens refunded without a permit, not yet in the
	 * ceiling, in tail order: each moves into it once the claims ahead of {@code tail} are within it (guarded by
	 * {@link #lock}; only read under it).
	 */
	long[] ceilingCredits = NO_HOLES;

	/**
	 * R1: the tail when the bucket was last reset: a ticket at or before it was forgotten by the reset (guarded by
	 * {@link #lock}; meaningful once {@link #wasReset}).
	 */
	long resetTail;

	/** R1: whether the bucket was ever reset (guarded by {@link #lock}). */
	boolean wasReset;

	/**
	 * R2: odd while a reset rewrites the state, the ceiling and the waiting claims' tickets under the lock, and
	 * one more after it: a reader outside the lock that saw it change, or odd, reads again under the lock.
	 */
	volatile int resets;

	RoverBucket(@Nullable String name, LongSupplier clock, boolean cappedRelease, long threshold) {
		this.name = name;
		this.clock = clock;
		this.monotonic = (clock == RateLimiterBuilder.NANO_TIME);
		this.cappedRelease = cappedRelease;
		this.threshold = threshold;
	}

	/** I5: the clock, never earlier than a reading already seen. */
	final long now() {
		if (this.monotonic) {
			return System.nanoTime(); // the clock itself, read without the supplier
		}
		long t = this.clock.getAsLong();
		long s = (long) SEEN.getOpaque(this);
		if (t - s > 0) {
			SEEN.setOpaque(this, t);
			return t;
		}
		return s;
	}

	/**
	 * The lock-free path (I6): claims {@code n} tokens with one CAS on the tail when no structure is in
	 * the way (no capped release, no holes, and no epoch restart needed by I2); {@code covered} asks
	 * for tokens that are there now, otherwise the claim is made whatever it waits for. With
	 * {@code stripe} (a covered claim that needs no ticket, which looked at its stripe first, S2) it says
	 * {@link #CONTENDED} after losing the tail while there are tokens to share out (S1). A state of striped
	 * mode, striped or held (S4), sends every caller to the lock.
	 *
	 * @return the ticket, or {@link #NO_TICKET} when the caller must take the lock, {@link #REFUSED} (with
	 *         {@code covered}) when the tokens are not there, or {@link #CONTENDED}
	 */
	final long tryFastClaim(long n, long now, boolean covered, boolean stripe) {
		if (this.cappedRelease) {
			return NO_TICKET;
		}
		int backoff = BACKOFF_SPINS;
		for (;;) {
			long tl = (long) TAIL.getVolatile(this); // before the state: see claimCovered
			State s = this.state;
			if (s.marker() || s.holes.length != 0) {
				return NO_TICKET;
			}
			long tokens = s.tokens(now);
			long next;
			if (s.base + tokens - tl - s.limit >= 0) {
				// full (I2): waste the excess; the epoch must restart unless the head is a whole number
				if (covered && n > s.limit) {
					if (!refusable(s, tl)) {
						continue;
					}
					return REFUSED;
				}
				if (this.threshold != 1 || !s.rate.isWhole(now - s.start)) {
					return NO_TICKET;
				}
				next = s.base + tokens - s.limit + n;
			}
			else {
				long available = s.base + quantized(tokens) - tl;
				if (available < n && covered) {
					if (!refusable(s, tl)) {
						continue;
					}
					return REFUSED; // decided on the state in force: no lock needed to say no
				}
				if (available < n && n - available > MAX_COST) {
					return NO_TICKET;
				}
				next = tl + n;
			}
			if (isSentinel(next)) {
				return NO_TICKET;
			}
			if (TAIL.compareAndSet(this, tl, next)) {
				return (this.state == s || recheck(next, n, covered)) ? next : NO_TICKET;
			}
			if (stripe && this.threshold == 1
					&& Math.min(s.base + tokens - tl, s.limit) >= Stripes.MIN_BUDGET * Stripes.COUNT) {
				return CONTENDED; // S1: another caller took the tail meanwhile, and there are tokens to share out
			}
			// another caller won the tail: let it have the cache line for a while before trying again,
			// longer after each loss (on 2 threads this triples the throughput of a bare retry)
			for (int spin = 0; spin < backoff; spin++) {
				Thread.onSpinWait();
			}
			backoff = Math.min(backoff << 1, MAX_BACKOFF_SPINS);
		}
	}

	/**
	 * I6: the state changed while a lock-free claim of {@code n} tokens took {@code ticket}; keeps the claim
	 * only if it still holds ({@code covered}: its tokens are there), else gives it back.
	 *
	 * @return whether the claim stands
	 */
	abstract boolean recheck(long ticket, long n, boolean covered);

	/**
	 * Whether a refusal decided on {@code s} and the tail {@code tl} (read before {@code s}) holds: the tail,
	 * then the state, read again and unchanged, so that at the instant the tail was read again the bucket was
	 * {@code (s, tl)} (a state of rover mode is never published twice). A give-back can move the tail down without
	 * a new state, and a new state can come between the two first reads.
	 */
	final boolean refusable(State s, long tl) {
		return (long) TAIL.getVolatile(this) == tl && this.state == s;
	}

	/** Whether a ticket would read as one of the values {@link #tryFastClaim} returns instead of tickets. */
	static boolean isSentinel(long ticket) {
		return ticket < CONTENDED + 1; // NO_TICKET .. CONTENDED: the three lowest longs
	}

	/**
	 * Claims {@code n} tokens at {@code now} under the lock, whatever it waits for: a full bucket first
	 * wastes its excess and restarts its epoch (I2). A {@code charge} with capped release is held apart
	 * from the ceiling for the tickets behind it (I7).
	 *
	 * @return the ticket
	 */
	final long claimLocked(long n, long now, boolean charge) {
		State s = foldReached(now);
		settleFull(s, now);
		s = this.state;
		long tl = (long) TAIL.getVolatile(this);
		long owed = tl - s.credit(tl + 1) + n - s.headAt(now);
		if (owed > MAX_COST || owed < -MAX_COST) {
			throw new InvalidArgumentException("n", n, 0L, null, "n (" + n + ") would put more than 2^50 (" + MAX_COST + ") tokens in line"
					+ of() + ": " + (owed - n) + " are owed already");
		}
		if (charge && this.cappedRelease) {
			// published before the tail moves (I6); capped, nothing moves the tail outside the lock
			this.state = s.withCharge(tl + n, n);
		}
		for (;;) {
			if (TAIL.compareAndSet(this, tl, tl + n)) {
				return tl + n;
			}
			tl = (long) TAIL.getVolatile(this);
		}
	}

	/**
	 * I2 under the lock: when the bucket is full at {@code now}, restarts the epoch there (unless the
	 * head is a whole number and the quantum 1) and moves the tail to {@code head - limit}.
	 *
	 * @return whether the bucket was full
	 */
	final boolean settleFull(State s, long now) {
		long head = s.headAt(now);
		if (this.cappedRelease) {
			// every capped call holds the lock: the head itself comes down to the limit, so that tickets
			// waiting for the ceiling (holes among them) keep their places relative to it
			long tl = (long) TAIL.getVolatile(this);
			long effectiveTail = tl - s.credit(tl + 1);
			if (head - effectiveTail - s.limit < 0) {
				return false;
			}
			this.state = new State(s.rate, now, effectiveTail + s.limit, s.limit, s.holes, s.charges);
			return true;
		}
		if (s.holes.length != 0 || head - (long) TAIL.getVolatile(this) - s.limit < 0) {
			return false; // (holes: without capped release they mean that callers wait for time)
		}
		if (this.threshold != 1 || !s.rate.isWhole(now - s.start)) {
			// (held, S4, the state stays held: it is written in place, S6)
			s = s.held ? markerLocked(s, now, head, null) : new State(s.rate, now, head, s.limit, s.holes, s.charges);
			this.state = s; // published before the tail moves (I6)
		}
		long floor = head - s.limit;
		for (;;) {
			long tl = (long) TAIL.getVolatile(this);
			if (floor - tl <= 0 || TAIL.compareAndSet(this, tl, floor)) {
				return true; // (or a fast-path claim moved it already)
			}
		}
	}

	/**
	 * S6, under the lock: a state of striped mode with the rate and limit of {@code s} and the epoch
	 * {@code (start, base)}, reused: the held one ({@code stripes == null}) or a striped one.
	 */
	abstract State markerLocked(State s, long start, long base, @Nullable Stripes stripes);

	/**
	 * Gives back a claim under the lock (I3): the tail moves back when it is the last claim, otherwise it
	 * becomes a hole; then holes the head reached fold into the epoch.
	 *
	 * @return whether it became a hole, so that claims behind it moved up (W1); the last claim given back
	 *         changes nothing for anyone
	 */
	final boolean giveBackLocked(long ticket, long n, long now) {
		State s = this.state;
		if (!TAIL.compareAndSet(this, ticket, ticket - n)) {
			this.state = s.withHole(ticket, n);
			foldReached(now);
			return true;
		}
		else if (s.holes.length != 0) {
			// holes now at the end of the line go too: nobody is behind them
			long[] holes = s.holes;
			int keep = holes.length;
			long tl = ticket - n;
			while (keep > 0 && holes[keep - 2] == tl) {
				long size = holes[keep - 1];
				if (!TAIL.compareAndSet(this, tl, tl - size)) {
					break;
				}
				tl -= size;
				keep -= 2;
			}
			if (keep != holes.length) {
				this.state = s.withBase(s.base, Arrays.copyOf(holes, keep));
			}
		}
		long tl = (long) TAIL.getVolatile(this);
		for (int i = 0; i < this.ceilingCredits.length; i += 2) {
			if (this.ceilingCredits[i] - tl > 0) {
				this.ceilingCredits[i] = tl; // I8: the claims between were given back (written under the lock)
			}
		}
		foldReached(now);
		return false;
	}

	/**
	 * I7 and I8 under the lock, entered at {@code now}: {@code n} tokens back to the head, {@code toCeiling} of
	 * them (capped release) to the ceiling: at once when they come from a permit, else once the claims now in
	 * line are within it.
	 */
	final void refundLocked(long n, long toCeiling, boolean throughPermit, long now) {
		State s = this.state;
		long tl = (long) TAIL.getVolatile(this);
		long effectiveTail = tl - s.credit(tl + 1);
		// I1: the head need never run more than the limit ahead of the claims (and so never wraps);
		// a fast-path claim that moves the tail meanwhile sees the new state and re-checks (I6)
		long room = effectiveTail + s.limit - s.headAt(now);
		if (room > 0) {
			this.state = s.withBase(s.base + Math.min(n, room), s.holes);
		}
		if (this.cappedRelease && toCeiling > 0) {
			// I8: the tokens claimed and neither released nor refunded, which the ceiling never passes
			long claimed = effectiveTail - s.charged(tl + 1) - pendingCredits() + s.limit - this.ceil;
			long back = Math.min(toCeiling, claimed);
			if (back > 0 && throughPermit) {
				this.ceil += back; // a permit's tokens were within the ceiling: the claims behind them move up
			}
			else if (back > 0) {
				// not known to be within the ceiling (a waiter that gave up may be anywhere in line): the
				// tokens wait at the end of the line until every claim ahead is within it, so none gains early
				long[] credits = Arrays.copyOf(this.ceilingCredits, this.ceilingCredits.length + 2);
				credits[credits.length - 2] = tl;
				credits[credits.length - 1] = back;
				this.ceilingCredits = credits;
			}
		}
		foldReached(now);
	}

	/**
	 * I3 and I7 under the lock: holes whose claims ahead are all covered move into the epoch's base (and
	 * the ceiling); capped charges whose claims ahead are all within the ceiling move into the ceiling;
	 * nobody's coverage changes.
	 *
	 * @return the state in force after folding
	 */
	final State foldReached(long now) {
		for (;;) {
			State s = foldHolesAndCharges(now);
			if (this.ceilingCredits.length == 0 || !foldCredits(s)) {
				return s; // (a refund in the ceiling may let a charge or a hole behind it fold, and so on)
			}
		}
	}

	/**
	 * I8 under the lock: refunds waiting at the end of the line move into the ceiling once the claims ahead of
	 * them are within it (after the state's holes and charges folded).
	 *
	 * @return whether any moved
	 */
	private boolean foldCredits(State s) {
		long[] credits = this.ceilingCredits;
		long cap = this.ceil;
		int i = 0;
		while (i < credits.length && capMissing(cap, s, credits[i]) == 0) {
			cap += credits[i + 1];
			i += 2;
		}
		if (i == 0) {
			return false;
		}
		this.ceilingCredits = (i == credits.length) ? NO_HOLES : Arrays.copyOfRange(credits, i, credits.length);
		this.ceil = cap;
		return true;
	}

	/** I8: tokens refunded that wait to move into the ceiling (not in flight any more; under the lock). */
	final long pendingCredits() {
		long sum = 0;
		for (int i = 1; i < this.ceilingCredits.length; i += 2) {
			sum += this.ceilingCredits[i];
		}
		return sum;
	}

	/** {@link #foldReached}, without the refunds of I8. */
	private State foldHolesAndCharges(long now) {
		State s = this.state;
		long[] holes = s.holes;
		long[] charges = s.charges;
		if (holes.length == 0 && charges.length == 0) {
			return s;
		}
		int hole = 0;
		int charge = 0;
		long base = s.base;
		long head = s.headAt(now);
		long cap = this.ceil; // plus what folded so far
		for (boolean moved = true; moved;) {
			moved = false;
			if (hole < holes.length) {
				long before = holes[hole] - holes[hole + 1]; // the ticket of the claim just ahead of the hole
				long folded = base - s.base;
				if (before - (head + folded) <= 0
						&& (!this.cappedRelease || before - credit(charges, charge, before + 1) - cap <= 0)) {
					base += holes[hole + 1];
					cap += holes[hole + 1];
					hole += 2;
					moved = true;
				}
			}
			if (charge < charges.length) {
				long before = charges[charge] - charges[charge + 1];
				if (before - credit(holes, hole, before + 1) - cap <= 0) {
					cap += charges[charge + 1];
					charge += 2;
					moved = true;
				}
			}
		}
		if (hole == 0 && charge == 0) {
			return s;
		}
		s = new State(s.rate, s.start, base, s.limit, Arrays.copyOfRange(holes, hole, holes.length),
				Arrays.copyOfRange(charges, charge, charges.length));
		this.state = s;
		if (this.cappedRelease) {
			// after the state: a reader that reads the ceiling first and then the state never counts a
			// hole or a charge twice (once as credit, once in the ceiling)
			this.ceil = cap;
		}
		return s;
	}

	/**
	 * Tokens missing for {@code ticket} at {@code now}: by rate, and with capped release by the ceiling
	 * {@code cap}, read before {@code s} (see {@link #foldReached}).
	 */
	final long missing(long cap, State s, long ticket, long now) {
		long effective = ticket - s.credit(ticket);
		long missing = effective - s.dueAt(now);
		if (this.cappedRelease) {
			missing = Math.max(missing, effective - s.charged(ticket) - cap);
		}
		return Math.max(missing, 0);
	}

	/** Tokens the ceiling {@code cap} still lacks for {@code ticket} (capped release only). */
	final long capMissing(long cap, State s, long ticket) {
		return this.cappedRelease ? Math.max(0, ticket - s.credit(ticket) - s.charged(ticket) - cap) : 0;
	}

	/** Nanoseconds from {@code now} until the head reaches {@code ticket}, as the state stands. */
	final long rateWait(State s, long ticket, long now) {
		long effective = ticket - s.credit(ticket);
		long need = effective - s.dueAt(now);
		if (need <= 0) {
			return 0;
		}
		long wait = s.nanosUntilDue(effective, now);
		return Math.max(wait, 1);
	}

	/** Tokens of the {@code (ticket, tokens)} pairs from index {@code from} whose ticket is before {@code ticket}. */
	static long credit(long[] pairs, int from, long ticket) {
		long credit = 0;
		for (int i = from; i < pairs.length; i += 2) {
			if (pairs[i] - ticket >= 0) {
				break;
			}
			credit += pairs[i + 1];
		}
		return credit;
	}

	final long quantized(long tokens) {
		return (this.threshold == 1) ? tokens : tokens - tokens % this.threshold;
	}

	final long quantum(long tokens) {
		if (this.threshold == 1) {
			return tokens;
		}
		long rem = tokens % this.threshold;
		return (rem == 0 || tokens > MAX_COST) ? tokens : tokens + this.threshold - rem;
	}

	String of() {
		return (this.name != null) ? " '" + this.name + "'" : "";
	}

	/**
	 * The epoch, the limit and the holes, replaced as a whole under the lock (I6), and immutable once
	 * published except for the reused states of striped mode (S6):
	 * {@code head(t) = base + floor((t - start) * rate)}.
	 */
	final class State {

		final Rate rate;

		/**
		 * Written before the state is published; only the states of striped mode (a striped or held
		 * {@link #marker}) are written again, under the lock, and only the lock's holder reads their epoch (S6).
		 */
		long start;

		/** As {@link #start}. */
		long base;

		final long limit;

		/** {@code (ticket, tokens)} pairs of claims given back with others behind them, in ticket order. */
		final long[] holes;

		/**
		 * Capped release only: {@code (ticket, tokens)} pairs of charges not yet in the ceiling (I7), in
		 * ticket order; a ticket behind one counts its tokens as within the ceiling, not as in flight.
		 */
		final long[] charges;

		/** Striped mode (S1): the stripes; {@code null} in rover mode. */
		final @Nullable Stripes stripes;

		/** S4: a fold under the lock will stripe again: fast claims wait for it instead of taking the tail. */
		final boolean held;

		/**
		 * Nothing in the way of {@code SharedTokenBucket.claimOnce}: rover mode, no holes or charges, not
		 * capped, a threshold of 1, and no test hook that stripes eagerly (read when the state is made, so
		 * that the fast path never reads the hook).
		 */
		final boolean plain;

		State(Rate rate, long start, long base, long limit, long[] holes, long[] charges) {
			this(rate, start, base, limit, holes, charges, null, false);
		}

		State(Rate rate, long start, long base, long limit, long[] holes, long[] charges,
				@Nullable Stripes stripes, boolean held) {
			this.rate = rate;
			this.start = start;
			this.base = base;
			this.limit = limit;
			this.holes = holes;
			this.charges = charges;
			this.stripes = stripes;
			this.held = held;
			this.plain = stripes == null && !held && holes.length == 0 && charges.length == 0
					&& !RoverBucket.this.cappedRelease && RoverBucket.this.threshold == 1
					&& !RoverBucket.this.eager;
		}

		/**
		 * Whether this is a state of striped mode, striped or held (S6), whose epoch only the lock's holder
		 * reads: the fast paths turn away on {@code stripes} or {@code held} before they read it, and a reader
		 * of a ticket's coverage outside the lock folds it first ({@code SharedTokenBucket.deficiency}, a waiting claim's poll).
		 */
		boolean marker() {
			return this.stripes != null || this.held;
		}

		/** Whole tokens made since the start of the epoch. */
		long tokens(long now) {
			return this.rate.tokensIn(now - this.start);
		}

		/** The head at {@code now}, every whole token counted. */
		long headAt(long now) {
			return this.base + tokens(now);
		}

		/** The head as tickets see it: whole quanta of the threshold only. */
		long dueAt(long now) {
			return this.base + quantized(tokens(now));
		}

		/** The head as a caller at the end of the line sees it: at most {@code limit} beyond the tail (I1). */
		long visibleHead(long now, long tail) {
			long head = headAt(now);
			if (head - tail - this.limit >= 0) {
				return tail + this.limit;
			}
			return this.base + quantized(head - this.base);
		}

		/** Nanoseconds from {@code now} until {@link #dueAt} reaches {@code target}. */
		long nanosUntilDue(long target, long now) {
			return this.rate.nanosUntil(quantum(target - this.base), now - this.start);
		}

		/** Tokens of the holes ahead of {@code ticket}. */
		long credit(long ticket) {
			return RoverBucket.credit(this.holes, 0, ticket);
		}

		/** Tokens of the charges ahead of {@code ticket} not yet in the ceiling (capped release only). */
		long charged(long ticket) {
			return RoverBucket.credit(this.charges, 0, ticket);
		}

		State withBase(long newBase, long[] newHoles) {
			return new State(this.rate, this.start, newBase, this.limit, newHoles, this.charges);
		}

		State withCharge(long ticket, long n) {
			long[] next = Arrays.copyOf(this.charges, this.charges.length + 2);
			next[this.charges.length] = ticket; // the last claim: the charges stay in ticket order
			next[this.charges.length + 1] = n;
			return new State(this.rate, this.start, this.base, this.limit, this.holes, next);
		}

		State withHole(long ticket, long n) {
			long[] holes = this.holes;
			int at = 0;
			while (at < holes.length && holes[at] - ticket < 0) {
				at += 2;
			}
			long[] next = new long[holes.length + 2];
			System.arraycopy(holes, 0, next, 0, at);
			next[at] = ticket;
			next[at + 1] = n;
			System.arraycopy(holes, at, next, at + 2, holes.length - at);
			return withBase(this.base, next);
		}
	}
}
