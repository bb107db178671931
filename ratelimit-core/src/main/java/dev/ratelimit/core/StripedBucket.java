package dev.ratelimit.core;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.function.IntSupplier;
import java.util.function.LongSupplier;

import org.jspecify.annotations.Nullable;

/**
 * Striped mode of a {@link SharedTokenBucket}: when callers contend for the tail, the bucket reserves a
 * budget of tokens for each of its {@link Stripes}, and covered claims take from their thread's stripe
 * until a call that needs the tail folds what the stripes granted back into the epoch, exactly. Also the
 * one entry of the bucket's locked sections, {@link #enterLocked}, which folds first. Package-private, as
 * {@code Striped64} is below {@code LongAdder}.
 */
abstract class StripedBucket extends RoverBucket {

	/*
	 * Design notes of striped mode (the rover bucket's, I1-I8, are in SharedTokenBucket's).
	 *
	 * Two threads that take from one bucket must not write one cache line on every take, yet an exact
	 * bucket must know when each take happened (I2). State, all guarded by the lock but for the stripes'
	 * words: the stripes (Stripes: per stripe a word of budget and log count, and a log of (time, n)), the
	 * reservation (stripeFrom, the tail before it, and stripeReserved), the reused states (S6) and the fold's
	 * candidate (S3). Invariants, each with the tests that check it:
	 *
	 * S1. Stripes get tokens that are there. When a covered claim loses the tail to another caller and at
	 * least 16 tokens per stripe are available, the lock reserves an equal budget for each stripe, all of
	 * them together at most the tokens available at that instant, as one claim on the tail, and publishes a
	 * state that names the stripes. Only without capped release, with a threshold of 1, without holes or
	 * charges, and with nobody waiting. A fast claim that raced it sees the new state and re-checks (I6): one
	 * made before the reservation is covered (the reservation counted it); one made after it folds the
	 * stripes first (S3) and is judged as any claim. (StripedModeTests.theStripesShareOutOnlyTheTokensThereAre;
	 * jcstress RoverRefusalRacingStripeReservation, LockedClaimRacingFastClaimOnTheLastToken.)
	 *
	 * S2. A stripe grant is one CAS on a word of the stripe's own. A covered claim that needs no ticket
	 * (tryAcquire, the first try of acquire; not reserve or grab) takes n from its stripe's budget and logs
	 * (time, n), the time never before the stripe's previous entry nor its opening. It never needs the tail:
	 * the level only drops through grants, so at every instant it is at least the level at the reservation
	 * less what the stripes granted since, and whatever order the grants are put in, each finds its tokens
	 * there. (StripesTests.aStripeLogsNoTimeBeforeItsPreviousEntryOrItsOpening, StripedBucketModelTests;
	 * jcstress TwoGrantsOnOneStripeAcrossAClockMove, StripeGrantRacingFold, TwoCallersOnOneStripesLastBudget,
	 * StripeGrantRacingClockAndFold.)
	 *
	 * S3. A fold is exact. Every other call (a stripe short of budget or log, a refusal to decide, grab,
	 * reserve, a give-back, refund(n), charge, a rate or limit change, a snapshot) takes the lock and enters
	 * through enterLocked, which closes every stripe, reads the clock (no logged time is later), and rebuilds
	 * the epoch from the level at that instant: the smallest of limit; the level if no grant found the bucket
	 * full (head - reservation start - granted); and for each logged grant, limit less the tokens granted at
	 * or after it plus the tokens made since (the bucket full just before it, I2). Each is an upper bound on
	 * the level (a grant that did not find the bucket full found at most limit - 1, and at most the fraction
	 * of one token was carried), and the one for the last grant that found it full, or the first when none
	 * did, is the level; among equal ones, the one with the smallest fraction of the next token stays the
	 * smallest until the next grant, so the epoch follows it. A grant older than the time the granted tokens
	 * take to come back is skipped: its bound is above the limit. The budgets not used go back.
	 * (SharedTokenBucketModelTests, a third of whose runs stripe, StripedBucketModelTests; jcstress
	 * StripeGrantRacingRefund, StripeGrantRacingUpdateLimit, SnapshotRacingStripeGrant.)
	 *
	 * S4. One caller folds, the others wait for it. A caller whose stripe is closed, or that finds its
	 * stripe short while another caller has begun to fold, spins until the new state is published instead
	 * of queueing for the lock (which parks threads); a caller that folds and stripes again in one hold of
	 * the lock publishes the state in between as held, which sends fast claims to wait rather than take the
	 * tail for that moment. (StripedModeTests.whileACallerFoldsAndStripesAgainAFastClaimWaitsForIt; the spin
	 * is for speed, measured by TryPathBenchmark on 2 threads.)
	 *
	 * S5. Stripes are a thread's own. Two per processor; a thread moves to a random other stripe when it
	 * finds another caller on its stripe or finds that another thread took from it last; each stripe's log
	 * grows from 64 to 2,048 entries when it fills before its budget, and stripes and logs are padded by 128
	 * bytes. (StripesTests.aThreadMovesToAnotherStripeWhenAnotherThreadTookFromItsStripeLast,
	 * .aStripesLogThatFillsBeforeItsBudgetGrowsUpToItsLargestSize; the padding is measured, not tested.)
	 *
	 * S6. Folding and striping again allocate nothing. The states striped mode publishes (striped, and held,
	 * S4) are reused: one held and two striped ones, in turn, written under the lock. Only the lock's holder
	 * reads their epoch: the fast paths turn away on their stripes or their hold first, and a reader of a
	 * ticket's coverage outside the lock (deficiency, a waiting claim) that finds one takes the lock and
	 * folds. (It cannot take every ticket as covered: a grab that moves the tail between the stripes' check
	 * and their reservation, which then gives up, has its ticket while the striped state is published, found
	 * by GrabDeficiencyRacingStripeTests and jcstress GrabRacingStripeReservation.) Every other state is made
	 * anew and never written after it is published. (BucketAllocationTests; the model tests above, which
	 * fold and stripe again thousands of times per run.)
	 *
	 * Access modes: a stripe's word volatile, taken by CAS and released by a release write that publishes
	 * its log entry (Stripes); folding volatile, set by CAS (S4); eagerStripeChooser volatile, tests only;
	 * every other field under the lock.
	 */

	/** Spin-waits for a fold by another caller before taking the lock (S4): a fold takes a few microseconds. */
	private static final int FOLD_SPINS = 1 << 12;

	/** {@link #tryClaimNow}: granted, from a stripe or on the tail. */
	static final int GRANTED = Stripes.TAKEN;

	/** {@link #tryClaimNow}: another caller folds (S4): wait for it. */
	static final int FOLDING = Stripes.FOLDING;

	/** {@link #tryClaimNow}: not decided (a stripe short of budget or log, or the tail): the lock decides. */
	static final int UNSURE = Stripes.SHORT;

	/** {@link #tryClaimNow}: refused, decided on the state in force (I6). */
	static final int NOT_THERE = 3;

	/**
	 * {@link #tryClaimNow}: the tail was lost while there were tokens to share out: the lock decides, then
	 * stripes (S1).
	 */
	static final int SHARE_OUT = 4;

	private static final VarHandle FOLDER;

	static {
		try {
			FOLDER = MethodHandles.lookup().findVarHandle(StripedBucket.class, "folding", boolean.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	/** Striped mode's stripes, made the first time it is entered (guarded by {@link #lock}). */
	private @Nullable Stripes stripeSet;

	/**
	 * Tests only: stripe whenever allowed, each caller on the stripe this chooses. Read under the lock and on
	 * the slow path of covered claims ({@link #claimCoveredSlowly}), never on a fast path.
	 */
	private volatile @Nullable IntSupplier eagerStripeChooser;

	/** Striped mode (S1): the tail before the stripes' reservation (guarded by {@link #lock}). */
	private long stripeFrom;

	/** Striped mode (S1): the tokens reserved for the stripes (guarded by {@link #lock}). */
	private long stripeReserved;

	/** S6: the held state of striped mode, reused (guarded by {@link #lock}). */
	private @Nullable State heldState;

	/** S6: the two striped states, reused in turn (guarded by {@link #lock}). */
	private final @Nullable State[] stripedStates = new State[2];

	/** S6: the striped state to use next (guarded by {@link #lock}). */
	private int stripedTurn;

	/** S3: the fold's smallest candidate for the level so far, and its epoch (guarded by {@link #lock}). */
	private long foldLevel;

	private long foldStart;

	private long foldBase;

	/** S3: the fraction of the next token at the fold's smallest candidate (guarded by {@link #lock}). */
	private long foldFraction;

	/** S4: a caller is folding the stripes, the others wait for it (set by CAS, before the lock). */
	@SuppressWarnings("unused")
	private volatile boolean folding;

	StripedBucket(@Nullable String name, LongSupplier clock, boolean cappedRelease, long threshold) {
		super(name, clock, cappedRelease, threshold);
	}

	/**
	 * The one entry of the bucket's locked sections: every operation that takes the lock calls it first (I6).
	 * It folds striped mode (S3; with {@code hold}, for a caller that stripes again before it lets go of the
	 * lock, S4) and then the holes and charges the head reached (I3, I7), at a clock reading taken after both.
	 *
	 * @return that clock reading, no earlier than any time a stripe logged
	 */
	final long enterLocked(boolean hold) {
		assert Thread.holdsLock(this.lock);
		foldStripesLocked(hold);
		long now = now();
		foldReached(now);
		return now;
	}

	/** {@link #enterLocked(boolean)} for a caller that does not stripe again. */
	final long enterLocked() {
		return enterLocked(false);
	}

	/** Whether claims wait in line (striped mode needs nobody waiting, S1). */
	abstract boolean hasWaiters();

	/** Whether {@code ticket} was claimed before the stripes' reservation, which counted it (S1; under the lock). */
	final boolean claimedBeforeStripes(long ticket) {
		return this.state.stripes != null && ticket - this.stripeFrom <= 0;
	}

	/**
	 * A covered claim that needs no ticket ({@code tryAcquire}, the first try of {@code acquire}): from the
	 * caller's stripe in striped mode (S2), otherwise on the tail (I6).
	 *
	 * @return {@link #GRANTED}, {@link #FOLDING}, {@link #UNSURE}, {@link #NOT_THERE} or {@link #SHARE_OUT}
	 */
	final int tryClaimNow(long n, long now) {
		State s = this.state;
		Stripes stripes = s.stripes;
		if (stripes != null) {
			return stripes.take(n, now); // S2: its outcomes are GRANTED, FOLDING and UNSURE
		}
		if (s.held) {
			return FOLDING; // S4
		}
		long ticket = tryFastClaim(n, now, true, true);
		if (ticket == NO_TICKET) {
			return UNSURE;
		}
		return (ticket == REFUSED) ? NOT_THERE : (ticket == CONTENDED) ? SHARE_OUT : GRANTED;
	}

	/**
	 * A covered claim that needs no ticket, when its first try did not decide: {@code asked}, when not
	 * {@code null}, is the striped state whose stripe already answered {@code answer} (as {@link #tryClaimNow}
	 * would have), so that the first attempt does not ask it again.
	 */
	final boolean claimCoveredSlowly(long n, @Nullable State asked, int answer) {
		for (int attempt = 0;; attempt++) {
			State seen;
			int outcome;
			if (attempt == 0 && asked != null) {
				seen = asked;
				outcome = answer;
			}
			else {
				seen = this.state;
				// (tests only: a bucket that stripes eagerly sends every covered claim in rover mode to the lock)
				outcome = (this.eagerStripeChooser != null && !seen.marker()) ? SHARE_OUT : tryClaimNow(n, now());
			}
			if (outcome == NOT_THERE) {
				return false;
			}
			if (outcome == GRANTED) {
				return true;
			}
			boolean folder = false;
			if (seen.stripes != null && attempt < 2) {
				// S4: one caller folds, the others wait for its fold, which gives their stripes new budgets in a
				// few microseconds, rather than queue for the lock it holds (which would park them)
				folder = outcome == UNSURE && FOLDER.compareAndSet(this, false, true);
				if (!folder) {
					for (int spin = 0; spin < FOLD_SPINS && this.state == seen; spin++) {
						Thread.onSpinWait();
					}
					if (this.state != seen) {
						continue;
					}
				}
			}
			try {
				synchronized (this.lock) {
					State current = this.state;
					if (current.stripes != null && current != seen && attempt < 2) {
						continue; // another caller folded and striped again meanwhile
					}
					return claimAvailableLocked(n, outcome == SHARE_OUT);
				}
			}
			finally {
				if (folder) {
					this.folding = false;
				}
			}
		}
	}

	/**
	 * Under the lock: takes {@code n} tokens that are there now, or nothing; then stripes (S1) when the
	 * bucket was striped, the tail was contended, or a test asks for it.
	 */
	private boolean claimAvailableLocked(long n, boolean contended) {
		boolean wasStriped = this.state.stripes != null;
		try {
			long now = enterLocked(true);
			State s = this.state;
			if (s.holes.length != 0) {
				return false; // callers wait ahead of this one
			}
			long tl = (long) TAIL.getVolatile(this);
			long available = s.visibleHead(now, tl) - tl;
			if (this.cappedRelease) {
				available = Math.min(available, this.ceil - (tl - s.charged(tl + 1)));
			}
			boolean granted = available >= n;
			if (granted) {
				long ticket = claimLocked(n, now, false);
				if (missing(this.ceil, this.state, ticket, now) != 0) {
					// a lock-free claim took the tail after the tokens were counted: it came first, and this
					// claim, the last one, goes back (nobody waits behind it: the lock is held)
					giveBackLocked(ticket, n, now);
					granted = false;
				}
			}
			if (wasStriped || contended || this.eagerStripeChooser != null) {
				stripeLocked(now);
			}
			return granted;
		}
		finally {
			State s = this.state;
			if (s.held) {
				this.state = s.withBase(s.base, s.holes); // not striped again: the fast paths are open
			}
		}
	}

	/**
	 * S1, under the lock: reserves tokens for the stripes, an equal budget each, and enters striped mode,
	 * when the bucket allows it: uncapped, a threshold of 1, nobody waiting, no holes, and at least
	 * {@link Stripes#MIN_BUDGET} tokens per stripe available.
	 *
	 * @return whether it striped
	 */
	private boolean stripeLocked(long now) {
		IntSupplier eager = this.eagerStripeChooser;
		if (this.cappedRelease || this.threshold != 1 || hasWaiters() || this.state.stripes != null) {
			return false;
		}
		State s = foldReached(now);
		if (s.holes.length != 0 || s.charges.length != 0) {
			return false;
		}
		settleFull(s, now); // I2: the level at this instant is at most the limit
		s = this.state;
		Stripes stripes = this.stripeSet;
		if (stripes == null) {
			stripes = new Stripes(Stripes.COUNT, eager);
			this.stripeSet = stripes;
		}
		long least = (eager != null) ? 1 : Stripes.MIN_BUDGET;
		long head = s.headAt(now);
		int count = stripes.count();
		long tl = (long) TAIL.getVolatile(this);
		if ((head - tl) / count < least) {
			return false;
		}
		this.state = markerLocked(s, s.start, s.base, stripes); // published before the tail moves (I6): fast claims re-check
		for (;;) {
			long perStripe = Math.min(Stripes.MAX_BUDGET, (head - tl) / count);
			if (perStripe < least) {
				this.state = s.withBase(s.base, s.holes); // a fast claim took them meanwhile
				return false;
			}
			long reserved = perStripe * count;
			if (TAIL.compareAndSet(this, tl, tl + reserved)) {
				this.stripeFrom = tl;
				this.stripeReserved = reserved;
				stripes.open(perStripe, now);
				return true;
			}
			tl = (long) TAIL.getVolatile(this);
		}
	}

	/**
	 * S3, under the lock: closes the stripes and folds what they granted into the epoch, exactly; the
	 * bucket is in rover mode after it. With {@code hold}, the state it publishes sends fast claims to wait
	 * (S4), for a caller that stripes again before it lets go of the lock, so that they do not take the
	 * tail for the moment in between.
	 */
	private void foldStripesLocked(boolean hold) {
		State s = this.state;
		Stripes stripes = s.stripes;
		if (stripes == null) {
			return;
		}
		stripes.closeAll();
		long now = now(); // after closing: every time logged was read before it
		int count = stripes.count();
		int[] at = stripes.cursors();
		long granted = 0;
		for (int i = 0; i < count; i++) {
			at[i] = stripes.entries(i) - 1;
			granted += stripes.granted(i);
		}
		Rate rate = s.rate;
		long limit = s.limit;
		long end = this.stripeFrom + this.stripeReserved; // every reserved token counts as claimed ...
		// ... and the candidates for the level at now, head - end: the smallest is the level (S3)
		candidate(limit, now, end + limit, 0); // full: the epoch restarts now
		long uncapped = s.headAt(now) - this.stripeFrom - granted; // no grant found the bucket full
		if (uncapped < this.foldLevel) {
			// the budgets not used go back
			candidate(uncapped, s.start, s.base + this.stripeReserved - granted, rate.fractionIn(now - s.start));
		}
		foldLog(stripes, rate, limit, end, granted, now);
		this.state = hold ? markerLocked(s, this.foldStart, this.foldBase, null)
				: new State(rate, this.foldStart, this.foldBase, limit, NO_HOLES, NO_HOLES);
	}

	/** S3: the fold's candidates of the logged grants, latest first: the bucket full just before each. */
	private void foldLog(Stripes stripes, Rate rate, long limit, long end, long granted, long now) {
		int count = stripes.count();
		int[] at = stripes.cursors();
		long window = rate.nanosFor(granted); // a grant this long ago cannot bound the level any more
		long since = 0; // tokens granted at or after the entry at hand
		for (;;) {
			int pick = -1;
			long t = 0;
			for (int i = 0; i < count; i++) {
				if (at[i] >= 0) {
					long ti = stripes.time(i, at[i]);
					if (pick < 0 || ti - t > 0) {
						pick = i;
						t = ti;
					}
				}
			}
			if (pick < 0) {
				break;
			}
			if (t - now > 0) {
				t = now; // a clock that is not monotonic across threads: nothing is later than the fold
			}
			if (now - t >= window) {
				break; // this entry and every older one leave the level above the limit
			}
			since += stripes.tokens(pick, at[pick]--);
			// the bucket full just before this grant: limit - since, plus what came after it
			long d = now - t;
			long level = limit - since + rate.tokensIn(d);
			long f = rate.fractionIn(d);
			if (level < this.foldLevel || level == this.foldLevel && f < this.foldFraction) {
				candidate(level, t, end + limit - since, f);
			}
		}
	}

	/** S3: records the fold's smallest candidate so far. */
	private void candidate(long level, long start, long base, long fraction) {
		this.foldLevel = level;
		this.foldStart = start;
		this.foldBase = base;
		this.foldFraction = fraction;
	}

	/**
	 * S6, under the lock: a state of striped mode, with the rate and limit of {@code s} and the epoch
	 * {@code (start, base)}: the held one ({@code stripes == null}) or a striped one, reused rather than made
	 * anew, so that folding and striping again allocate nothing. The two striped ones take turns, so that a
	 * caller that compares states to see whether a fold came sees a change (unless two folds came meanwhile:
	 * then it folds once more than needed, which changes nothing else).
	 */
	@Override
	final State markerLocked(State s, long start, long base, @Nullable Stripes stripes) {
		State m;
		if (stripes == null) {
			m = this.heldState;
			if (m == null || m.rate != s.rate || m.limit != s.limit) {
				m = new State(s.rate, start, base, s.limit, NO_HOLES, NO_HOLES, null, true);
				this.heldState = m;
			}
		}
		else {
			int turn = this.stripedTurn;
			m = this.stripedStates[turn];
			if (m == null || m.rate != s.rate || m.limit != s.limit || m.stripes != stripes) {
				m = new State(s.rate, start, base, s.limit, NO_HOLES, NO_HOLES, stripes, false);
				this.stripedStates[turn] = m;
			}
			this.stripedTurn = turn ^ 1;
		}
		m.start = start;
		m.base = base;
		return m;
	}

	/**
	 * Tests only: from now on, a covered claim stripes whenever the bucket allows it (not only when
	 * contended, and from one token per stripe), each caller on the stripe {@code stripeOfCaller} says
	 * (modulo {@link #stripes()}).
	 */
	void stripeEagerly(IntSupplier stripeOfCaller) {
		synchronized (this.lock) {
			enterLocked();
			this.stripeSet = new Stripes(Stripes.COUNT, stripeOfCaller);
			this.eagerStripeChooser = stripeOfCaller;
			this.eager = true;
			State s = this.state;
			this.state = s.withBase(s.base, s.holes); // not plain: covered claims go where the hook sends them
		}
	}

	/** The number of stripes in striped mode. */
	int stripes() {
		return Stripes.COUNT;
	}

	/** Whether the bucket is in striped mode now. */
	boolean isStriped() {
		return this.state.stripes != null;
	}
}
