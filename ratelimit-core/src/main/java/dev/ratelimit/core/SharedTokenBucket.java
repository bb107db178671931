package dev.ratelimit.core;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Duration;
import java.util.Arrays;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntSupplier;
import java.util.function.LongSupplier;

import org.jspecify.annotations.Nullable;

/**
 * A token bucket shared by many threads: seastar's rover bucket, exact, with a lock-free fast path.
 *
 * <p>Callers take tokens by advancing the tail rover; time makes tokens available by advancing the
 * head; a caller whose ticket lies beyond the head waits, in ticket order, until the head reaches
 * it. With <em>capped release</em> a third rover, the ceiling, bounds the head as well: tokens come
 * back only when the guarded work releases them, so the bucket limits both the rate and the work in
 * flight. No background thread runs: every call reads the clock and sees the time that passed.
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
 * State, in tokens, 64-bit counters that wrap and are compared only by difference:
 * <ul>
 * <li>{@code tail}: tokens claimed so far, plus tokens a full bucket wasted (see I2). A claim of
 * {@code n} moves it from {@code t} to {@code t + n}; the new value is the claim's ticket.</li>
 * <li>{@code head(now) = base + floor((now - start) * rate)}: tokens made available so far. It is never
 * stored: {@code (start, base, rate)}, the <em>epoch</em>, is an immutable {@code State} (but see S6) read
 * through one volatile field, and every call computes the head from the clock, exactly, in 128-bit
 * arithmetic ({@link Rate#tokensIn}). So a caller always knows when it takes its tokens, which is
 * what an exact token bucket needs: without the time of each take it must either break the bound or
 * under-fill after idle.</li>
 * <li>{@code ceil} (capped release only): {@code limit + tokens released + tokens refunded to it + tokens
 * a full bucket wasted + tokens charged} (see I7, I8); a ticket is covered when both the head and the
 * ceiling reached it.</li>
 * <li>{@code holes} (in the same {@code State}): claims given back by waiters that others queue
 * behind, as {@code (ticket, tokens)}; a ticket behind a hole counts its tokens as covered.</li>
 * <li>{@code charges} (in the same {@code State}, capped release only): charges not yet in the ceiling,
 * as {@code (ticket, tokens)}; a ticket behind one counts its tokens as within the ceiling (I7).</li>
 * </ul>
 * Invariants:
 * <ul>
 * <li>I1. <b>At most {@code limit} tokens are available</b>: available is
 * {@code min(head - tail, limit)}, never more (and, capped, also at most {@code ceil - tail}).
 * Checked by {@code SharedTokenBucketModelTests} against an exact reference bucket.</li>
 * <li>I2. <b>A full bucket wastes time, the fraction of the next token included.</b> A claim that
 * finds {@code head - tail >= limit} first moves the tail to {@code head - limit} (the wasted tokens;
 * capped: the ceiling moves with it, so {@code ceil - tail} still counts the tokens not in flight),
 * and when the head at that instant is not a whole number of tokens, restarts the epoch there. So the
 * next token takes a whole interval after the take, and over any window {@code w} at most
 * {@code limit + rate * w} tokens go out; after an idle period of {@code limit / rate} exactly
 * {@code limit} are available however the earlier tokens were taken or given back.
 * ({@code SharedTokenBucketModelTests}, {@code SharedTokenBucketTests.aFullBucketEarnsNoPartOfTheNextTokenEither}).</li>
 * <li>I3. <b>Tickets are covered in order.</b> The tail only grows except when the last claim is given
 * back; a claim given back with others behind it becomes a hole, whose tokens every later ticket
 * counts as covered at once (they move up) and no earlier one does (they gain nothing). Once the head
 * reaches a hole, the hole moves into the epoch's base (and, capped, into the ceiling): nothing changes
 * for anyone, the state is just smaller. ({@code SharedTokenBucketModelTests},
 * jcstress {@code GiveUpRacingGrant}).</li>
 * <li>I4. <b>Nothing is lost or counted twice.</b> A refusal claims nothing (it is decided before the
 * claim, or the claim is given back under the lock); giving back is exact (I3) and never lifts the
 * bucket above its limit (I1). ({@code SharedTokenBucketModelTests}).</li>
 * <li>I5. <b>Time never goes back.</b> Every call uses the latest clock reading seen so far (or a later
 * {@link #replenish} argument); a clock that stands still or goes back changes nothing.</li>
 * <li>I6. <b>One writer of the structure at a time.</b> Epoch changes (I2's restart, I3's holes, rate and
 * limit changes), capped mode, every claim that must wait and, in striped mode, every call but a stripe
 * grant (S3) go through one lock. The lock-free fast
 * path reads the clock, the tail, then the state (so the state is the one in force at a time no earlier than
 * the clock's), only claims tokens that are there, with one CAS on the tail, and re-reads the state after its
 * CAS: if the state changed meanwhile it re-checks its claim under the lock and gives it back when it
 * is not covered; a refusal reads the tail and the state again, unchanged
 * ({@code StaleStateFastClaimTests}). Writers publish a new state before they move the tail, so a CAS that succeeds on an
 * unchanged state was decided on the state in force at that instant. (jcstress
 * {@code TwoCallersOnTheLastToken}, {@code RefundRacingReplenish}).</li>
 * <li>I7. <b>A refund and a charge act on the rate as if the call had taken fewer or more tokens.</b>
 * {@link #refund(long) refund(n)} (a granted call gives tokens back: {@code refundIf}, or {@code settle}
 * to a smaller cost) moves the epoch's base, so the head, up by {@code n}, but never more than
 * {@code limit} beyond the claims: the first callers in line are covered first, the bucket never holds
 * more than its limit (I1) and the head never runs away from the tail (no wrap). With capped release the
 * ceiling moves too (I8). {@link #charge(long) charge(n)} ({@code settle}
 * to a larger cost) is a claim at the end of the line that nobody waits for: a full bucket first wastes
 * its excess (I2), so on a full bucket it is a take; callers ahead of it keep their tickets and waits
 * (what was covered stays covered, and no ticket ahead of it moves); callers behind it wait for it, in
 * order (I3). With capped release a charge puts nothing in flight: a ticket behind it counts its tokens
 * as within the ceiling (the state's {@code charges}; while a claim ahead of it waits for releases it is
 * kept apart, so that claim gains nothing, and then moves into the ceiling, as a hole does). Neither is a
 * call: the statistics do not change. ({@code SharedTokenBucketModelTests}, jcstress
 * {@code ChargeRacingFastClaim}, {@code RefundRacingFastClaim}).</li>
 * <li>I8. <b>Capped: the ceiling counts what is not claimed.</b> {@code ceil - (tail less holes and charges)
 * = limit - claimed}, where claimed is the tokens claimed (granted and in flight, or waiting) and neither
 * released nor refunded. A refund gives its tokens back to the ceiling as well as to the head (contract:
 * a caller that gave up never shrinks the bucket), never more than are claimed ({@code claimed >= 0}, so
 * tokens in flight plus tokens available never exceed {@code limit}); the caller then holds fewer, and
 * releases only the rest: a permit's close releases what it was granted less what was refunded through
 * it ({@link #refund(long, Permit)}), and a refund through a closed permit acts on the head only, so no
 * token goes back to the ceiling twice. ({@code SharedTokenBucketModelTests},
 * {@code SharedTokenBucketTests.aCappedRefundGivesItsTokensBackToTheCeiling}).</li>
 * </ul>
 * Striped mode (two threads that take from one bucket must not write one cache line on every take,
 * yet an exact bucket must know when each take happened, I2):
 * <ul>
 * <li>S1. <b>Stripes get tokens that are there.</b> When a covered claim loses the tail to another caller
 * and at least 16 tokens per stripe are available, the lock reserves an equal
 * budget for each stripe, all of them together at most the tokens available at that instant, as one
 * claim on the tail, and publishes a state that names the stripes. Only without capped release, with a
 * threshold of 1, without holes or charges, and with nobody waiting. A fast claim that raced it sees the
 * new state and re-checks (I6): one made before the reservation is covered (the reservation counted
 * it); one made after it folds the stripes first (S3) and is judged as any claim.</li>
 * <li>S2. <b>A stripe grant is one CAS on a word of the stripe's own.</b> A covered claim that needs no
 * ticket ({@link #tryAcquire}, the first try of {@link #acquire}; not {@link #reserve} or {@link #grab})
 * takes {@code n} from its stripe's budget and logs {@code (time, n)}, the time never before the
 * stripe's previous entry nor its opening. It never needs the tail: the level only drops through grants,
 * so at every instant it is at least the level at the reservation less what the stripes granted since,
 * and whatever order the grants are put in, each finds its tokens there.</li>
 * <li>S3. <b>A fold is exact.</b> Every other call (a stripe short of budget or log, a refusal to decide,
 * {@link #grab}, {@link #reserve}, a give-back, {@link #refund(long)}, {@link #charge}, a rate or limit
 * change, a snapshot) takes the lock, closes every stripe, reads the clock (no logged time is later), and
 * rebuilds the epoch from the level at that instant: the smallest of {@code limit}; the level if no grant
 * found the bucket full ({@code head - reservation start - granted}); and for each logged grant,
 * {@code limit} less the tokens granted at or after it plus the tokens made since (the bucket full just
 * before it, I2). Each is an upper bound on the level (a grant that did not find the bucket full found at
 * most {@code limit - 1}, and at most the fraction of one token was carried), and the one for the last
 * grant that found it full, or the first when none did, is the level; among equal ones, the one with the
 * smallest fraction of the next token stays the smallest until the next grant, so the epoch follows it.
 * A grant older than the time the granted tokens take to come back is skipped: its bound is above the
 * limit. The budgets not used go back. ({@code SharedTokenBucketModelTests}, a third of whose runs
 * stripe, {@code StripedBucketModelTests}).</li>
 * <li>S4. <b>One caller folds, the others wait for it.</b> A caller whose stripe is closed, or that finds
 * its stripe short while another caller has begun to fold, spins until the new state is published
 * instead of queueing for the lock (which parks threads); a caller that folds and stripes again in one
 * hold of the lock publishes the state in between as {@code held}, which sends fast claims to wait
 * rather than take the tail for that moment.</li>
 * <li>S5. <b>Stripes are a thread's own.</b> Two per processor; a thread moves to a random other stripe when
 * it finds another caller on its stripe or finds that another thread took from it last; each stripe's
 * log grows from 64 to 2,048 entries when it fills before its budget, and stripes and logs are padded
 * by 128 bytes.</li>
 * <li>S6. <b>Folding and striping again allocate nothing.</b> The states striped mode publishes (striped, and
 * held, S4) are reused: one held and two striped ones, in turn, written under the lock. Only the lock's holder
 * reads their epoch: the fast paths turn away on their stripes or their hold first, and a reader of a ticket's
 * coverage outside the lock ({@link #deficiency}, a waiting claim) that finds one takes the lock and folds. (It
 * cannot take every ticket as covered: a grab that moves the tail between the stripes' check and their
 * reservation, which then gives up, has its ticket while the striped state is published, found by
 * {@code GrabDeficiencyRacingStripeTests} and jcstress {@code GrabRacingStripeReservation}.) Every other state
 * is made anew and never written after it is published. ({@code BucketAllocationTests}; the model tests above,
 * which fold and stripe again thousands of times per run.)</li>
 * </ul>
 * Wake-ups (a claim that waits is told when what it waits for may have changed, so that a caller
 * polling on a timer polls again at once, {@link Reservation#onWake}):
 * <ul>
 * <li>W1. <b>A give-back wakes only the claims behind it.</b> By I3 a claim given back as a hole moves
 * up the claims behind it and gives nothing to those ahead; a claim given back at the end of the line
 * (every refusal at the claim, and a waiter that was last in line) moves nobody, and wakes nobody. A
 * release, a refund, a rate or limit change may move any claim, and wakes every one. (Under overload,
 * every refusal used to wake every waiter: with 10 asynchronous waiters and 1,000 refusals a second the
 * starter's one timer thread ran ~15,000 useless polls a second and fell up to 0.7 s behind, so waiters
 * were granted that long after their tokens were there: {@code SharedTokenBucketTests.aRefusalWakesNoWaiter}.)</li>
 * </ul>
 * Linearization points: a claim at its CAS on {@code tail} (fast path: provided the state is unchanged
 * after it, else at the re-check under the lock); a stripe grant at its CAS on the stripe's word, at the
 * time it logged (the fold puts grants in the order of their times, each read within its call; S2 makes
 * any order valid); a fold when it has closed the last stripe; a charge likewise, at its CAS under the lock; a
 * give-back, a refund, a release, a rate or limit change at the write of the state, the tail or the
 * ceiling under the lock (a fast-path claim that raced a refund sees a new state and re-checks, I6). Access modes: {@code tail} and
 * {@code state} volatile (the rovers publish the work that released tokens to the caller that gets
 * them); {@code seen} opaque (a racy maximum: a reader that sees an older value computes fewer tokens,
 * never more). Overflow: rovers are 64-bit counters compared by difference, so a ticket still held (a
 * {@link #grab} ticket, a claim not yet taken or given up) is read exactly while the rovers travel less
 * than 2^63 past it. Time moves them at most 10^9 tokens per second (2^63 in 292 years); without time,
 * only a give-up folded into the base or a charge followed by a refund moves them, by at most one
 * claim each, and claims are at most {@code 2^50} tokens ({@code MAX_COST}, as on Redis), so it takes
 * 2^13 give-ups of the largest claim while one ticket is held. (With claims up to 2^62, as before, two
 * were enough: {@code SharedTokenBucketTests.aCoveredTicketStaysCoveredAfterGiveUpsOfTheLargestClaimBehindIt},
 * found by the model test.) {@link Rate} computes heads and waits in 128 bits and saturates waits, so
 * rates from one per century to 10^9 per second and a century of uptime are exact.
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

	/**
	 * The largest claim, 2^50 tokens: rovers compared by difference stay exact while a held ticket is
	 * less than 2^63 behind them (see the class notes), which takes 2^13 give-ups of the largest claim.
	 */
	static final long MAX_COST = 1L << 50;

	private static final long[] NO_HOLES = new long[0];

	/**
	 * Spin-waits after a lost CAS on the tail, doubling up to {@link #MAX_BACKOFF_SPINS}: chosen with
	 * {@code TryPathBenchmark} on 2 threads (0: 15 ops/us, 16: 39, 64: 37).
	 */
	private static final int BACKOFF_SPINS = 32;

	private static final int MAX_BACKOFF_SPINS = 1024;

	private static final VarHandle TAIL;

	private static final VarHandle SEEN;

	private static final VarHandle FOLDER;

	static {
		try {
			MethodHandles.Lookup lookup = MethodHandles.lookup();
			TAIL = lookup.findVarHandle(SharedTokenBucket.class, "tail", long.class);
			SEEN = lookup.findVarHandle(SharedTokenBucket.class, "seen", long.class);
			FOLDER = lookup.findVarHandle(SharedTokenBucket.class, "folding", boolean.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	private final @Nullable String name;

	private final LongSupplier clock;

	/** I5: the default clock, {@code System.nanoTime()}, never goes back: {@code seen} is not needed. */
	private final boolean monotonic;

	private final boolean cappedRelease;

	/** I5 for claims: their deadlines are measured on the same never-going-back time. */
	private final LongSupplier seenClock = this::now;

	private final long threshold;

	private final StatsRecorder stats;

	private final AtomicInteger waiting = new AtomicInteger();

	/** Claims that wait, woken when something ahead of them changes (I3, W1). */
	private final Set<Claim> sleepers = ConcurrentHashMap.newKeySet();

	/** I6: the one writer of the state, the ceiling and capped claims. */
	private final Object lock = new Object();

	private volatile State state;

	/** Striped mode's stripes, made the first time it is entered (guarded by {@link #lock}). */
	private @Nullable Stripes stripeSet;

	/** Tests only: stripe whenever allowed, each caller on the stripe this chooses. */
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

	/** S4: a caller is folding the stripes, the others wait for it (set by CAS, before the lock). */
	@SuppressWarnings("unused")
	private volatile boolean folding;

	@SuppressWarnings("unused")
	private volatile long tail;

	/** I5: the latest clock reading seen; written opaquely, read racily (see the class notes). */
	@SuppressWarnings("unused")
	private volatile long seen;

	/** Capped release only: guarded by {@link #lock}; volatile for readers outside it. */
	private volatile long ceil;

	/**
	 * Capped release only (I8): {@code (tail, tokens)} pairs of tokens refunded without a permit, not yet in the
	 * ceiling, in tail order: each moves into it once the claims ahead of {@code tail} are within it (guarded by
	 * {@link #lock}; only read under it).
	 */
	private long[] ceilingCredits = NO_HOLES;

	private SharedTokenBucket(Builder builder) {
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
		this.name = builder.name;
		this.clock = builder.clock;
		this.monotonic = (builder.clock == RateLimiterBuilder.NANO_TIME);
		this.cappedRelease = builder.isCappedRelease();
		this.threshold = builder.threshold;
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
			unstripeLocked();
			return claimLocked(n, now(), false);
		}
	}

	/**
	 * Tokens claimed up to {@code ticket} that are not there yet.
	 *
	 * @param ticket a ticket from {@link #grab(long)}
	 * @return {@code 0} when the ticket is covered (go ahead), otherwise the tokens missing
	 */
	public long deficiency(long ticket) {
		long cap = this.ceil;
		State s = roverState();
		return missing(cap, s, ticket, now());
	}

	/**
	 * S6: the state in force, for a reader outside the lock that reads its epoch: a state of striped mode
	 * (whose epoch only the lock's holder reads) is folded first, under the lock. (Striped mode never has a
	 * claim waiting, but a ticket can be out while it is entered: a grab that moved the tail between the
	 * stripes' check and their reservation, which then gives up: {@code GrabDeficiencyRacingStripeTests}.)
	 */
	private State roverState() {
		State s = this.state;
		if (!s.marker()) {
			return s;
		}
		synchronized (this.lock) {
			unstripeLocked();
			return foldReached(now());
		}
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
				foldReached(now());
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
		checkNonNegative(n);
		if (this.cappedRelease && n > 0) {
			synchronized (this.lock) {
				this.ceil += n;
				if (this.ceilingCredits.length != 0) {
					foldReached(now()); // I8: refunds waiting at the end of the line that the ceiling now reaches
				}
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
		if (checkedAmount(n) == 0) {
			return;
		}
		refundLocked(n, n, false);
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
		if (checkedAmount(n) == 0) {
			return;
		}
		boolean ours = permit instanceof CappedPermit held && held.bucket == this;
		refundLocked(n, ours ? ((CappedPermit) permit).takeBack(n) : 0, true);
	}

	/**
	 * I7 and I8: {@code n} tokens back to the head, {@code toCeiling} of them (capped release) to the ceiling: at
	 * once when they come from a permit, else once the claims now in line are within it.
	 */
	private void refundLocked(long n, long toCeiling, boolean throughPermit) {
		synchronized (this.lock) {
			unstripeLocked();
			long now = now();
			State s = foldReached(now);
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
		if (checkedAmount(n) == 0) {
			return;
		}
		synchronized (this.lock) {
			unstripeLocked();
			long now = now();
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
		if (checkedAmount(n) == 0) {
			return;
		}
		boolean hole;
		synchronized (this.lock) {
			unstripeLocked();
			hole = giveBackLocked(ticket, n, now());
		}
		if (hole) {
			wakeBehind(ticket);
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
		checkNonNegative(missing);
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
			unstripeLocked();
			long now = now();
			State s = foldReached(now);
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
			unstripeLocked();
			long now = now();
			State s = foldReached(now);
			if (settleFull(s, now)) {
				s = this.state;
				this.state = new State(s.rate, now, s.headAt(now), s.limit, s.holes, s.charges);
			}
			s = this.state;
			if (this.cappedRelease) {
				this.ceil += newLimit - s.limit;
			}
			this.state = new State(s.rate, s.start, s.base, newLimit, s.holes, s.charges);
			if (this.ceilingCredits.length != 0) {
				foldReached(now); // I8
			}
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
		if (n == 0) {
			this.stats.recordGranted(0);
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
		if (Thread.currentThread().isInterrupted()) {
			throw new InterruptedException("Interrupted before acquiring " + n + " tokens" + of());
		}
		if (n == 0) {
			this.stats.recordGranted(0);
			return Permit.noop();
		}
		long now = now();
		long ticket = tryFastClaim(n, now, true, true);
		if (ticket != NO_TICKET && ticket != REFUSED && ticket != CONTENDED && ticket != FOLDING) {
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
			unstripeLocked();
			long now = now();
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
			unstripeLocked();
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

	// ---- internals ------------------------------------------------------------------------------------

	/** What the claim methods return when they claimed nothing. Tickets never equal it: see {@link #tryFastClaim}. */
	private static final long NO_TICKET = Long.MIN_VALUE;

	/** What {@link #tryFastClaim} returns when the tokens are not there (and the lock could not help). */
	private static final long REFUSED = Long.MIN_VALUE + 1;

	/**
	 * What {@link #tryFastClaim} returns to a covered claim that lost the tail to another caller while the
	 * bucket held enough tokens to stripe (S1): the lock decides, then stripes.
	 */
	private static final long CONTENDED = Long.MIN_VALUE + 2;

	/** What {@link #tryFastClaim} returns for tokens taken from a stripe (S2): covered, no ticket. */
	private static final long STRIPED = Long.MIN_VALUE + 3;

	/** What {@link #tryFastClaim} returns when the caller's stripe is closed: another caller folds (S4). */
	private static final long FOLDING = Long.MIN_VALUE + 4;

	/** Spin-waits for a fold by another caller before taking the lock (S4): a fold takes a few microseconds. */
	private static final int FOLD_SPINS = 1 << 12;

	/** The fewest tokens per stripe worth striping for (tests that stripe eagerly take 1). */
	private static final long STRIPE_MIN_BUDGET = 16;

	private static final int STRIPE_COUNT = Stripes.defaultCount();

	/** I5: the clock, never earlier than a reading already seen. */
	private long now() {
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
	 * {@code stripe} (a covered claim that needs no ticket) it takes them from its stripe in striped
	 * mode (S2) and returns {@link #STRIPED}, or says {@link #CONTENDED} after losing the tail (S1).
	 *
	 * @return the ticket, or {@link #NO_TICKET} when the caller must take the lock (or, with
	 *         {@code covered}, when the tokens are not there)
	 */
	private long tryFastClaim(long n, long now, boolean covered, boolean stripe) {
		if (this.cappedRelease) {
			return NO_TICKET;
		}
		int backoff = BACKOFF_SPINS;
		for (;;) {
			long tl = (long) TAIL.getVolatile(this); // before the state: see claimCovered
			State s = this.state;
			Stripes stripes = s.stripes;
			if (stripes != null) {
				if (!stripe) {
					return NO_TICKET;
				}
				int taken = stripes.take(n, now); // S2
				return (taken == Stripes.TAKEN) ? STRIPED : (taken == Stripes.FOLDING) ? FOLDING : NO_TICKET;
			}
			if (s.held) {
				return stripe ? FOLDING : NO_TICKET; // S4
			}
			if (stripe && this.eagerStripeChooser != null) {
				return CONTENDED;
			}
			if (s.holes.length != 0) {
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
				if (this.state == s) {
					return next;
				}
				return recheck(next, n, covered);
			}
			if (stripe && this.threshold == 1
					&& Math.min(s.base + tokens - tl, s.limit) >= STRIPE_MIN_BUDGET * STRIPE_COUNT) {
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

	/** I6: the state changed while the fast path claimed; keep the claim only if it still holds. */
	private long recheck(long ticket, long n, boolean covered) {
		boolean hole;
		synchronized (this.lock) {
			if (this.state.stripes != null && ticket - this.stripeFrom <= 0) {
				return ticket; // S1: claimed before the stripes' reservation, which left it covered
			}
			unstripeLocked();
			long now = now();
			State s = foldReached(now);
			if (!covered || missing(this.ceil, s, ticket, now) == 0) {
				return ticket;
			}
			hole = giveBackLocked(ticket, n, now);
		}
		if (hole) {
			wakeBehind(ticket);
		}
		return NO_TICKET;
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
			if (taken == Stripes.TAKEN) {
				return true;
			}
			return claimCoveredSlowly(n, striped, (taken == Stripes.FOLDING) ? FOLDING : NO_TICKET);
		}
		// the clock, the tail, then the state (I6): a state read after the tail is the one in force when the tail
		// was read or a later one, so a CAS that succeeds on a state unchanged since is decided on the state in
		// force at that instant, at a time no later than it (a stripe needs no tail: closed before a fold reads
		// the clock, it takes nothing after it)
		long tl = (long) TAIL.getVolatile(this);
		State s = this.state;
		if (s.plain) {
			int once = claimOnce(s, n, now, tl);
			if (once != ONCE_UNSURE) {
				return once == ONCE_GRANTED;
			}
		}
		return claimCoveredSlowly(n, null, NO_TICKET);
	}

	/**
	 * The lock-free claim of I6 in its common case, tried once, small enough to be compiled into
	 * {@link #tryAcquire} ({@link #tryFastClaim} is not): on a {@code plain} state, {@code n} tokens that
	 * are there, a full bucket only when its head is a whole number (I2). Anything else, a lost CAS
	 * included, is {@link #ONCE_UNSURE}, and {@link #claimCoveredSlowly} decides.
	 */
	private int claimOnce(State s, long n, long now, long tl) {
		long head = s.base + s.tokens(now);
		long next;
		if (head - tl - s.limit >= 0) {
			if (n > s.limit) {
				return refusable(s, tl) ? ONCE_REFUSED : ONCE_UNSURE;
			}
			if (!s.rate.isWhole(now - s.start)) {
				return ONCE_UNSURE; // I2: the epoch restarts, under the lock
			}
			next = head - s.limit + n; // I2: the excess wasted
		}
		else if (head - tl >= n) {
			next = tl + n;
		}
		else {
			return refusable(s, tl) ? ONCE_REFUSED : ONCE_UNSURE;
		}
		if (isSentinel(next) || !TAIL.compareAndSet(this, tl, next)) {
			return ONCE_UNSURE;
		}
		return (this.state == s || recheck(next, n, true) != NO_TICKET) ? ONCE_GRANTED : ONCE_UNSURE;
	}

	/**
	 * Whether a refusal decided on {@code s} and the tail {@code tl} (read before {@code s}) holds: the tail,
	 * then the state, read again and unchanged, so that at the instant the tail was read again the bucket was
	 * {@code (s, tl)} (a state of rover mode is never published twice). A give-back can move the tail down without
	 * a new state, and a new state can come between the two first reads.
	 */
	private boolean refusable(State s, long tl) {
		return (long) TAIL.getVolatile(this) == tl && this.state == s;
	}

	/** {@link #claimOnce}: granted. */
	private static final int ONCE_GRANTED = 1;

	/** {@link #claimOnce}: refused, on the state in force. */
	private static final int ONCE_REFUSED = 0;

	/** {@link #claimOnce}: not decided, the slow path decides. */
	private static final int ONCE_UNSURE = -1;

	/** Whether a ticket would read as one of the values the claim methods return instead of tickets. */
	private static boolean isSentinel(long ticket) {
		return ticket < FOLDING + 1; // NO_TICKET .. FOLDING: the five lowest longs
	}

	/**
	 * {@link #claimCovered} when its first try did not decide: {@code asked}, when not {@code null}, is the
	 * striped state whose stripe already answered {@code answer} (as {@link #tryFastClaim} would have), so
	 * that the first attempt does not ask it again.
	 */
	private boolean claimCoveredSlowly(long n, @Nullable State asked, long answer) {
		for (int attempt = 0;; attempt++) {
			State seen;
			long ticket;
			if (attempt == 0 && asked != null) {
				seen = asked;
				ticket = answer;
			}
			else {
				seen = this.state;
				ticket = tryFastClaim(n, now(), true, true);
			}
			if (ticket == REFUSED) {
				return false;
			}
			if (ticket != NO_TICKET && ticket != CONTENDED && ticket != FOLDING) {
				return true;
			}
			boolean folder = false;
			if (seen.stripes != null && attempt < 2) {
				// S4: one caller folds, the others wait for its fold, which gives their stripes new budgets in a
				// few microseconds, rather than queue for the lock it holds (which would park them)
				folder = ticket == NO_TICKET && FOLDER.compareAndSet(this, false, true);
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
					return claimAvailableLocked(n, ticket == CONTENDED);
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
		boolean wasStriped = unstripeLocked(true);
		try {
			long now = now();
			State s = foldReached(now);
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
	 * {@link #STRIPE_MIN_BUDGET} tokens per stripe available.
	 *
	 * @return whether it striped
	 */
	private boolean stripeLocked(long now) {
		IntSupplier eager = this.eagerStripeChooser;
		if (this.cappedRelease || this.threshold != 1 || !this.sleepers.isEmpty() || this.state.stripes != null) {
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
			stripes = new Stripes(STRIPE_COUNT, eager);
			this.stripeSet = stripes;
		}
		long least = (eager != null) ? 1 : STRIPE_MIN_BUDGET;
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
	 * bucket is in rover mode after it.
	 *
	 * @return whether it was striped
	 */
	private boolean unstripeLocked() {
		return unstripeLocked(false);
	}

	/**
	 * S3, as {@link #unstripeLocked()}; with {@code hold}, the state it publishes sends fast claims to wait
	 * (S4), for a caller that stripes again before it lets go of the lock, so that they do not take the
	 * tail for the moment in between.
	 */
	private boolean unstripeLocked(boolean hold) {
		State s = this.state;
		Stripes stripes = s.stripes;
		if (stripes == null) {
			return false;
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
		long level = limit; // full: the epoch restarts now
		long start = now;
		long base = end + limit;
		long fraction = 0;
		long uncapped = s.headAt(now) - this.stripeFrom - granted; // no grant found the bucket full
		long uncappedFraction = rate.fractionIn(now - s.start);
		if (uncapped < level) {
			level = uncapped;
			start = s.start;
			base = s.base + this.stripeReserved - granted; // the budgets not used go back
			fraction = uncappedFraction;
		}
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
			long candidate = limit - since + rate.tokensIn(d);
			long f = rate.fractionIn(d);
			if (candidate < level || candidate == level && f < fraction) {
				level = candidate;
				start = t;
				base = end + limit - since;
				fraction = f;
			}
		}
		this.state = hold ? markerLocked(s, start, base, null) : new State(rate, start, base, limit, NO_HOLES, NO_HOLES);
		return true;
	}

	/**
	 * S6, under the lock: a state of striped mode, with the rate and limit of {@code s} and the epoch
	 * {@code (start, base)}: the held one ({@code stripes == null}) or a striped one, reused rather than made
	 * anew, so that folding and striping again allocate nothing. The two striped ones take turns, so that a
	 * caller that compares states to see whether a fold came sees a change (unless two folds came meanwhile:
	 * then it folds once more than needed, which changes nothing else).
	 */
	private State markerLocked(State s, long start, long base, @Nullable Stripes stripes) {
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
			unstripeLocked();
			this.stripeSet = new Stripes(STRIPE_COUNT, stripeOfCaller);
			this.eagerStripeChooser = stripeOfCaller;
			State s = this.state;
			this.state = s.withBase(s.base, s.holes); // not plain: covered claims go where the hook sends them
		}
	}

	/** The number of stripes in striped mode. */
	int stripes() {
		return STRIPE_COUNT;
	}

	/** Whether the bucket is in striped mode now. */
	boolean isStriped() {
		return this.state.stripes != null;
	}

	/**
	 * Claims {@code n} tokens at {@code now} under the lock, whatever it waits for: a full bucket first
	 * wastes its excess and restarts its epoch (I2). A {@code charge} with capped release is held apart
	 * from the ceiling for the tickets behind it (I7).
	 *
	 * @return the ticket
	 */
	private long claimLocked(long n, long now, boolean charge) {
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
	private boolean settleFull(State s, long now) {
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
	 * Gives back a claim under the lock (I3): the tail moves back when it is the last claim, otherwise it
	 * becomes a hole; then holes the head reached fold into the epoch.
	 *
	 * @return whether it became a hole, so that claims behind it moved up (W1); the last claim given back
	 *         changes nothing for anyone
	 */
	private boolean giveBackLocked(long ticket, long n, long now) {
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
	 * I3 and I7 under the lock: holes whose claims ahead are all covered move into the epoch's base (and
	 * the ceiling); capped charges whose claims ahead are all within the ceiling move into the ceiling;
	 * nobody's coverage changes.
	 *
	 * @return the state in force after folding
	 */
	private State foldReached(long now) {
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

	/** I8: tokens refunded that wait to move into the ceiling (not in flight any more). */
	private long pendingCredits() {
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
	private long missing(long cap, State s, long ticket, long now) {
		long effective = ticket - s.credit(ticket);
		long missing = effective - s.dueAt(now);
		if (this.cappedRelease) {
			missing = Math.max(missing, effective - s.charged(ticket) - cap);
		}
		return Math.max(missing, 0);
	}

	/** Tokens the ceiling {@code cap} still lacks for {@code ticket} (capped release only). */
	private long capMissing(long cap, State s, long ticket) {
		return this.cappedRelease ? Math.max(0, ticket - s.credit(ticket) - s.charged(ticket) - cap) : 0;
	}

	/** Nanoseconds from {@code now} until the head reaches {@code ticket}, as the state stands. */
	private long rateWait(State s, long ticket, long now) {
		long effective = ticket - s.credit(ticket);
		long need = effective - s.dueAt(now);
		if (need <= 0) {
			return 0;
		}
		long wait = s.nanosUntilDue(effective, now);
		return Math.max(wait, 1);
	}

	/** Tokens of the {@code (ticket, tokens)} pairs from index {@code from} whose ticket is before {@code ticket}. */
	private static long credit(long[] pairs, int from, long ticket) {
		long credit = 0;
		for (int i = from; i < pairs.length; i += 2) {
			if (pairs[i] - ticket >= 0) {
				break;
			}
			credit += pairs[i + 1];
		}
		return credit;
	}

	private long quantized(long tokens) {
		return (this.threshold == 1) ? tokens : tokens - tokens % this.threshold;
	}

	private long quantum(long tokens) {
		if (this.threshold == 1) {
			return tokens;
		}
		long rem = tokens % this.threshold;
		return (rem == 0 || tokens > MAX_COST) ? tokens : tokens + this.threshold - rem;
	}

	private void wakeAll() {
		for (Claim claim : this.sleepers) {
			claim.wakeUp();
		}
	}

	/** W1: a claim given back as a hole at {@code ticket} moves up the claims behind it, and only them. */
	private void wakeBehind(long ticket) {
		for (Claim claim : this.sleepers) {
			if (claim.ticket - ticket > 0) {
				claim.wakeUp();
			}
		}
	}

	private Permit permitFor(long n) {
		return this.cappedRelease ? new CappedPermit(this, n) : Permit.noop();
	}

	/**
	 * Capped release: the permit of a call, which releases what the call still holds, once (I8): what it
	 * was granted less what it refunded through {@link #refund(long, Permit)}.
	 */
	private static final class CappedPermit implements Permit {

		private static final VarHandle HELD;

		static {
			try {
				HELD = MethodHandles.lookup().findVarHandle(CappedPermit.class, "held", long.class);
			}
			catch (ReflectiveOperationException ex) {
				throw new ExceptionInInitializerError(ex);
			}
		}

		final SharedTokenBucket bucket;

		/** Tokens the call still holds: 0 once closed. */
		@SuppressWarnings("unused")
		private volatile long held;

		CappedPermit(SharedTokenBucket bucket, long n) {
			this.bucket = bucket;
			this.held = n;
		}

		/** Takes up to {@code n} of the tokens still held off the permit, for a refund: the tokens taken. */
		long takeBack(long n) {
			for (;;) {
				long h = (long) HELD.getVolatile(this);
				long take = Math.min(n, h);
				if (take <= 0 || HELD.compareAndSet(this, h, h - take)) {
					return Math.max(take, 0);
				}
			}
		}

		@Override
		public void close() {
			long h = (long) HELD.getAndSet(this, 0L);
			if (h > 0) {
				this.bucket.release(h);
			}
		}
	}

	private void checkCost(long n) {
		checkNonNegative(n);
		checkAtMostMaxCost(n);
		if (this.cappedRelease && n > this.state.limit) {
			throw new InvalidArgumentException("n", n, 0L, this.state.limit, "n must be at most the limit (" + this.state.limit
					+ ") of capped bucket" + of() + ", was " + n + ": it could never be granted");
		}
	}

	/** Tokens given back or charged: {@code 0..MAX_COST}. */
	private static long checkedAmount(long n) {
		checkNonNegative(n);
		checkAtMostMaxCost(n);
		return n;
	}

	private static void checkAtMostMaxCost(long n) {
		if (n > MAX_COST) {
			throw new InvalidArgumentException("n", n, 0L, MAX_COST, "n must be at most 2^50 (" + MAX_COST + "), was " + n);
		}
	}

	private static void checkNonNegative(long n) {
		if (n < 0) {
			throw new InvalidArgumentException("n", n, 0L, null, "n must be >= 0, was " + n);
		}
	}

	private String of() {
		return (this.name != null) ? " '" + this.name + "'" : "";
	}

	@Override
	public String toString() {
		State s = this.state;
		return "SharedTokenBucket" + of() + "[rate=" + s.rate + ", limit=" + s.limit
				+ (this.cappedRelease ? ", capped release" : "") + "]";
	}

	/**
	 * The epoch, the limit and the holes, replaced as a whole under the lock (I6), and immutable once
	 * published except for the reused states of striped mode (S6):
	 * {@code head(t) = base + floor((t - start) * rate)}.
	 */
	private final class State {

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
		 * Nothing in the way of {@link #claimOnce}: rover mode, no holes or charges, not capped, a threshold of
		 * 1, and no test hook that stripes eagerly (read when the state is made).
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
					&& !SharedTokenBucket.this.cappedRelease && SharedTokenBucket.this.threshold == 1
					&& SharedTokenBucket.this.eagerStripeChooser == null;
		}

		/**
		 * Whether this is a state of striped mode, striped or held (S6), whose epoch only the lock's holder
		 * reads: the fast paths turn away on {@code stripes} or {@code held} before they read it, and a reader
		 * of a ticket's coverage outside the lock folds it first ({@link #roverState}).
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
			return SharedTokenBucket.credit(this.holes, 0, ticket);
		}

		/** Tokens of the charges ahead of {@code ticket} not yet in the ceiling (capped release only). */
		long charged(long ticket) {
			return SharedTokenBucket.credit(this.charges, 0, ticket);
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

	/** A caller's claim: its ticket, polled until covered (I3), given back by position. */
	private final class Claim extends AbstractReservation {

		private final long ticket;

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
			long cap = SharedTokenBucket.this.ceil;
			State s = roverState();
			long now = now();
			if (missing(cap, s, this.ticket, now) == 0) {
				return 0;
			}
			if (capMissing(cap, s, this.ticket) > 0 && rateWait(s, this.ticket, now) == 0) {
				return AWAITING_RELEASE;
			}
			long wait = rateWait(s, this.ticket, now);
			return (wait > 0) ? wait : AWAITING_RELEASE;
		}

		@Override
		protected void giveBack() {
			SharedTokenBucket.this.sleepers.remove(this);
			refund(this.ticket, tokens());
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
