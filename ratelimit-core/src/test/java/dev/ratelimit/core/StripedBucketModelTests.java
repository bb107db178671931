package dev.ratelimit.core;

import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.IntSupplier;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Striped mode (S1-S5) checked step by step against the exact token bucket of
 * {@link SharedTokenBucketModelTests.Reference}: an uncapped bucket that stripes whenever it is allowed
 * ({@link SharedTokenBucket#stripeEagerly}), each covered claim on a stripe the run chooses (random, alternating,
 * always the same, round robin, numbers outside {@code 0..stripes-1}), on a fake clock. Steps: bursts of
 * small {@code tryAcquire}s on alternating stripes at one instant, 1 ns apart or a fraction of a token apart,
 * often on a full bucket (the cap makes the grants' times matter when the stripes are folded); single
 * {@code tryAcquire(n)} with {@code n} larger than a stripe's share, the limit, or {@code 2^50}; clock moves
 * (none, 1 ns, part of a token, whole intervals, idle until full, a little back); and, less often since each
 * folds the stripes: snapshots, {@code refund(n)}, {@code charge(n)}, {@code grab} and its give-back, resets,
 * {@code acquire(n, maxWait)} (granted at once, refused at once with the exact wait, or waiting in a thread
 * that is polled until the reference says its tokens are there), rate and limit changes.
 *
 * <p>Every call's result must be the reference's at that step (a refusal's retry-after, a grab's deficiency,
 * the snapshot's {@code available}, {@code untilFull} and {@code waiting}); {@code available <= limit}; and the
 * grants logged since the last refund, give-back or rate or limit change never exceed {@code limit + rate * w}
 * over any window {@code w}, checked exactly in rational arithmetic. A failure prints the seed and the trace;
 * {@code -Dstriped.seed=<seed>} replays one sequence, {@code -Dstriped.sequences=<n>} runs more.
 */
class StripedBucketModelTests {

	private static final long SEQUENCES = Long.getLong("striped.sequences", 2_500);

	private static final int STEPS = 100;

	private static final long YEAR = Duration.ofDays(365).toNanos();

	private static final long CENTURY = 100 * YEAR;

	/** Duration too long for nanoseconds: no limit (the contract). */
	private static final Duration FOREVER = Duration.ofSeconds(Long.MAX_VALUE);

	/** Calls made while the bucket was striped, over every run: the test is not vacuous. */
	private static final AtomicLong STRIPED_CALLS = new AtomicLong();

	@Test
	void agreesWithAnExactTokenBucketWhicheverStripesTheCallsUse() {
		Long only = Long.getLong("striped.seed");
		if (only != null) {
			new Run(only, true).execute();
			return;
		}
		long seeds = new SplittableRandom().nextLong();
		long before = STRIPED_CALLS.get();
		for (long i = 0; i < SEQUENCES; i++) {
			new Run(seeds + i, false).execute();
		}
		assertThat(STRIPED_CALLS.get() - before).as("calls made in striped mode").isGreaterThan(SEQUENCES);
	}

	@Test
	void agreesOnFixedSeeds() {
		for (long seed = 0; seed < 300; seed++) {
			new Run(seed, false).execute();
		}
	}

	/** One random sequence against the reference. */
	private static final class Run {

		private final long seed;

		private final SplittableRandom random;

		private final List<String> trace = new ArrayList<>();

		private final FakeClock clock = new FakeClock();

		private SharedTokenBucket bucket;

		private SharedTokenBucketModelTests.Reference ref;

		/** How the run picks stripes: 0 random, 1 alternating 0/1, 2 round robin, 3 always 0, 4 any int. */
		private int policy;

		private int calls;

		/** The stripe the next covered claim uses (read by the chooser, possibly on the waiter's thread). */
		private volatile int nextStripe;

		private long[] rate;

		private final List<long[]> grabs = new ArrayList<>();

		private Waiter waiter;

		private long elapsed;

		/** Window check, since the last reset: rate num/den, limit, time origin, sum, max of V_i. */
		private BigInteger wNum;

		private BigInteger wDen;

		private long wLimit;

		private long wOrigin;

		private BigInteger wSum;

		private BigInteger wMax;

		private int wGrants;

		/** Whether the trace is written (a failure replays its seed with it: writing it always costs half the time). */
		private final boolean tracing;

		Run(long seed, boolean tracing) {
			this.seed = seed;
			this.tracing = tracing;
			this.random = new SplittableRandom(seed);
		}

		void execute() {
			try {
				build();
				for (int step = 0; step < STEPS; step++) {
					step();
					settleWaiter();
				}
				check();
			}
			catch (AssertionError | RuntimeException ex) {
				if (!this.tracing) {
					stopWaiter();
					try {
						new Run(this.seed, true).execute();
					}
					catch (AssertionError traced) {
						traced.addSuppressed(ex);
						throw traced;
					}
					throw new AssertionError("seed " + this.seed + " failed, but not when replayed with its trace: " + ex, ex);
				}
				StringBuilder message = new StringBuilder("seed ").append(this.seed)
					.append(" (replay with -Dstriped.seed=").append(this.seed).append(")\n");
				for (String line : this.trace) {
					message.append("  ").append(line).append('\n');
				}
				message.append("  => ").append(ex);
				throw new AssertionError(message.toString(), ex);
			}
			finally {
				stopWaiter();
			}
		}

		private void stopWaiter() {
			if (this.waiter != null) {
				this.waiter.thread.interrupt();
				try {
					this.waiter.thread.join(10_000);
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
				}
				this.waiter = null;
			}
		}

		private void build() {
			this.rate = randomRate();
			long limit = randomLimit();
			long initial = switch (this.random.nextInt(3)) {
				case 0 -> limit;
				case 1 -> 0;
				default -> this.random.nextLong(limit + 1);
			};
			this.bucket = SharedTokenBucket.builder()
				.rate(this.rate[0], Duration.ofNanos(this.rate[1]))
				.limit(limit)
				.initial(initial)
				.clock(this.clock)
				.build();
			this.ref = new SharedTokenBucketModelTests.Reference(this.rate[0], this.rate[1], limit, initial,
					this.clock.getAsLong(), false);
			this.policy = this.random.nextInt(5);
			IntSupplier chooser = () -> this.nextStripe;
			this.bucket.stripeEagerly(chooser);
			resetWindow();
			log("build rate=%d per %dns limit=%d initial=%d stripes=%d policy=%d", this.rate[0], this.rate[1], limit,
					initial, this.bucket.stripes(), this.policy);
		}

		private long[] randomRate() {
			return switch (this.random.nextInt(10)) {
				case 0 -> new long[] { 1_000_000_000, 1_000_000_000 };
				case 1 -> new long[] { 1, Duration.ofHours(1).toNanos() };
				case 2 -> new long[] { 999_999_937, 1_000_000_000 };
				case 3 -> new long[] { 7, Duration.ofMillis(3).toNanos() };
				case 4 -> new long[] { 1, 1_000_000 };
				case 5 -> new long[] { 3, 1_000_000_000 };
				case 6 -> new long[] { 1, 100 * YEAR };
				case 7 -> new long[] { 1_000_000, 1_000_000_000 };
				default -> new long[] { 1 + this.random.nextLong(1_000_000),
						1 + this.random.nextLong(Duration.ofSeconds(10).toNanos()) };
			};
		}

		private long randomLimit() {
			int stripes = (this.bucket != null) ? this.bucket.stripes() : 8;
			return switch (this.random.nextInt(8)) {
				case 0 -> 1;
				case 1 -> 1 + this.random.nextLong(1_000_000);
				case 2 -> 1L << 40;
				case 3 -> Math.max(1, stripes * (1 + this.random.nextInt(4)) + this.random.nextInt(3) - 1);
				default -> 1 + this.random.nextLong(40);
			};
		}

		/** Sets the stripe for the next covered claim according to the run's policy. */
		private void chooseStripe() {
			int c = this.calls++;
			this.nextStripe = switch (this.policy) {
				case 0 -> this.random.nextInt(this.bucket.stripes());
				case 1 -> c & 1;
				case 2 -> c;
				case 3 -> 0;
				default -> this.random.nextInt();
			};
		}

		private void step() {
			int op = this.random.nextInt(100);
			if (op < 30) {
				burst();
			}
			else if (op < 50) {
				tryAcquire(randomCost());
			}
			else if (op < 66) {
				moveClock();
			}
			else if (op < 72) {
				check();
			}
			else if (op < 76) {
				refund();
			}
			else if (op < 80) {
				charge();
			}
			else if (op < 84) {
				grabOrGiveBack();
			}
			else if (op < 93) {
				acquire();
			}
			else if (op < 95) {
				updateRate();
			}
			else if (op < 98) {
				updateLimit();
			}
			else {
				reset();
			}
		}

		/**
		 * Revision 3's reset (R1), which folds the stripes: full again, nothing owed; a waiting acquire claims again
		 * (woken, and granted when, and only when, the reference covers it); grab tickets are covered. The window
		 * of the bound starts again: from the reset on the bucket grants at most {@code limit + rate * w}.
		 */
		private void reset() {
			this.ref.advance(this.clock.getAsLong());
			this.bucket.reset();
			this.ref.reset((this.waiter != null) ? Set.of(this.waiter.claim) : Set.of());
			log("reset");
			for (long[] grab : this.grabs) {
				equal("deficiency of a grab after a reset", this.bucket.deficiency(grab[0]), 0L);
			}
			this.grabs.clear(); // (their callers go ahead)
			resetWindow(); // (the waiter, if the reference covers it now, is settled after this step)
		}

		private long randomCost() {
			long limit = this.ref.limit;
			long share = Math.max(1, limit / this.bucket.stripes());
			return switch (this.random.nextInt(20)) {
				case 0 -> SharedTokenBucket.MAX_COST;
				case 1 -> limit + 1;
				case 2 -> limit;
				case 3, 4 -> share + 1 + this.random.nextLong(Math.min(share, 1_000));
				case 5, 6 -> 1 + this.random.nextLong(Math.min(limit, 1_000_000));
				case 7, 8, 9 -> 1 + this.random.nextInt(3);
				default -> 1;
			};
		}

		private long interval() {
			return Math.min(this.ref.intervalNanos(), YEAR);
		}

		private void advanceClock(long delta) {
			if (delta == Long.MIN_VALUE || delta > YEAR * 5 || delta < 0 && -delta > YEAR || this.elapsed + delta > CENTURY) {
				delta = 0; // the contract's range: a century of uptime, a clock that steps back a little
			}
			this.elapsed += Math.max(delta, 0);
			this.clock.advanceNanos(delta);
			// both read the clock at every move (I5: a clock that goes back is measured against the latest
			// reading, which the waiter's thread may read at any moment), without folding
			this.ref.advance(this.clock.getAsLong());
			this.bucket.deficiency(0);
			log("clock %+d ns", delta);
		}

		private void moveClock() {
			long interval = interval();
			long delta = switch (this.random.nextInt(8)) {
				case 0 -> 0;
				case 1 -> 1;
				case 2 -> this.random.nextLong(interval) + 1;
				case 3 -> interval * (1 + this.random.nextInt(5));
				case 4 -> -(this.random.nextLong(Math.max(1, this.random.nextBoolean() ? Math.min(interval, 1_000_000)
						: interval * (1 + this.random.nextInt(8)))) + 1); // (back a little, or several intervals)
				case 5 -> saturatedAdd(untilFull(), this.random.nextInt(3));
				case 6 -> YEAR + this.random.nextLong(YEAR);
				default -> interval * (1 + this.random.nextLong(Math.min(this.ref.limit, 1_000)));
			};
			advanceClock(delta);
		}

		private static long saturatedAdd(long a, long b) {
			long sum = a + b;
			return (((a ^ sum) & (b ^ sum)) < 0) ? Long.MAX_VALUE : sum;
		}

		private long untilFull() {
			this.ref.advance(this.clock.getAsLong());
			return this.ref.nanosUntilFull();
		}

		/**
		 * Many small takes on alternating (or the run's) stripes at one instant, 1 ns apart or a fraction of
		 * a token apart, mostly on a bucket just full: which grants found it full decides the level.
		 */
		private void burst() {
			if (this.random.nextInt(3) != 0) {
				advanceClock(saturatedAdd(untilFull(), this.random.nextBoolean() ? 0 : this.random.nextInt(3)));
			}
			// now and then long enough to fill a stripe's log (64 entries at first, doubled at each fold that
			// finds it full, up to 2048)
			int takes = (this.random.nextInt(40) == 0) ? 2 + this.random.nextInt(5000) : 2 + this.random.nextInt(40);
			int gaps = this.random.nextInt(4);
			boolean alternate = this.random.nextBoolean();
			long n = (this.random.nextInt(3) == 0) ? 1 + this.random.nextInt(3) : 1;
			log("burst of %d takes of %d, gaps %d, alternating %s", takes, n, gaps, alternate);
			for (int i = 0; i < takes; i++) {
				if (i > 0) {
					long delta = switch (gaps) {
						case 0 -> 0;
						case 1 -> 1;
						case 2 -> this.random.nextInt(2);
						default -> this.random.nextLong(Math.max(1, interval() / 3)) + 1;
					};
					if (delta != 0) {
						advanceClock(delta);
					}
				}
				if (alternate) {
					this.nextStripe = i & 1;
					tryAcquireOnChosenStripe(n);
				}
				else {
					tryAcquire(n);
				}
			}
		}

		private void tryAcquire(long n) {
			chooseStripe();
			tryAcquireOnChosenStripe(n);
		}

		private void tryAcquireOnChosenStripe(long n) {
			this.ref.advance(this.clock.getAsLong());
			boolean striped = this.bucket.isStriped();
			if (striped) {
				STRIPED_CALLS.incrementAndGet();
			}
			boolean expected = this.ref.tryAcquire(n);
			boolean actual = this.bucket.tryAcquire(n);
			log("tryAcquire(%d) on stripe %d -> %s (reference %s)%s", n, this.nextStripe, actual, expected,
					striped ? " striped" : "");
			equal("tryAcquire(" + n + ")", actual, expected);
			if (actual) {
				granted(n);
			}
		}

		/** The acquire's first attempt takes from a stripe: granted at once, refused at once, or it waits. */
		private void acquire() {
			long n = randomCost();
			Duration maxWait = switch (this.random.nextInt(5)) {
				case 0 -> Duration.ZERO;
				case 1 -> Duration.ofNanos(this.random.nextLong(interval() * 4));
				case 2 -> FOREVER;
				default -> Duration.ofNanos(interval() * (1 + this.random.nextInt(20)));
			};
			chooseStripe();
			this.ref.advance(this.clock.getAsLong());
			SharedTokenBucketModelTests.Reference.Claim claim = this.ref.claim(n);
			if (this.ref.owedTooMuch()) {
				this.ref.giveUp(claim);
				try {
					this.bucket.acquire(n, maxWait);
				}
				catch (IllegalArgumentException ex) {
					log("acquire(%d) -> rejected: %s", n, ex.getMessage());
					return;
				}
				catch (InterruptedException ex) {
					throw new AssertionError(ex);
				}
				throw new AssertionError("acquire(" + n + ") was accepted with more than MAX_COST tokens in line");
			}
			long wait = this.ref.rateWait(claim);
			long budget = AbstractReservation.saturatedNanos(maxWait);
			if (wait > 0 && wait <= budget) {
				if (this.waiter != null || wait > Long.MAX_VALUE / 4 || this.random.nextInt(3) != 0) {
					// one waiter at a time, and not always (each is a thread: on a busy machine they cost most of the
					// run's time); the reference's claim and give-up change nothing; and none whose wait
					// saturates (a waiter without a time limit whose wait does not fit in nanoseconds is refused at
					// its first poll: not striped mode's concern, reported apart)
					this.ref.giveUp(claim);
					return;
				}
				startWaiter(n, claim, wait);
				return;
			}
			try {
				this.bucket.acquire(n, maxWait).close();
			}
			catch (RateLimitExceededException ex) {
				log("acquire(%d, %s) on stripe %d -> refused, retry after %s (reference wait %d ns)", n, maxWait,
						this.nextStripe, ex.getRetryAfter(), wait);
				equal("refused acquire(" + n + ", " + maxWait + ")", true, wait > budget);
				equal("retry-after of acquire(" + n + ")", ex.getRetryAfter().toNanos(), wait);
				this.ref.giveUp(claim);
				return;
			}
			catch (InterruptedException ex) {
				throw new AssertionError(ex);
			}
			log("acquire(%d, %s) on stripe %d -> granted (reference wait %d ns)", n, maxWait, this.nextStripe, wait);
			equal("granted acquire(" + n + ", " + maxWait + ")", wait, 0L);
			this.ref.grant(claim);
			granted(n);
		}

		/** An acquire that must wait, in its own thread, without a time limit; woken at every step. */
		private void startWaiter(long n, SharedTokenBucketModelTests.Reference.Claim claim, long wait) {
			CompletableFuture<Permit> result = new CompletableFuture<>();
			Thread thread = new Thread(() -> {
				try {
					result.complete(this.bucket.acquire(n, FOREVER));
				}
				catch (Throwable ex) {
					result.completeExceptionally(ex);
				}
			}, "striped-model-waiter");
			thread.setDaemon(true);
			thread.start();
			this.waiter = new Waiter(thread, result, claim, n);
			log("acquire(%d, no limit) on stripe %d -> waits (reference wait %d ns)", n, this.nextStripe, wait);
			// the claim is made before the run goes on, so that it is in line before the next call
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
			while (this.bucket.snapshot().waiting() == 0) {
				if (result.isDone()) {
					throw new AssertionError("acquire(" + n + ") returned though the reference says it waits "
							+ wait + " ns: " + describe(result));
				}
				if (System.nanoTime() - deadline > 0) {
					throw new AssertionError("acquire(" + n + ") did not queue within 10 s");
				}
				Thread.yield(); // (the waiter's thread needs a processor: on a busy machine spinning starves it)
			}
		}

		/** The waiter is granted when, and only when, the reference covers its claim. */
		private void settleWaiter() {
			Waiter w = this.waiter;
			if (w == null) {
				return;
			}
			this.ref.advance(this.clock.getAsLong());
			if (!this.ref.covered(w.claim)) {
				if (w.result.isDone()) {
					throw new AssertionError("the waiting acquire(" + w.n + ") returned before its tokens were there: "
							+ describe(w.result) + " (reference wait " + this.ref.rateWait(w.claim) + " ns)");
				}
				return;
			}
			long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
			while (!w.result.isDone()) {
				LockSupport.unpark(w.thread);
				if (System.nanoTime() - deadline > 0) {
					throw new AssertionError("the waiting acquire(" + w.n + ") was not granted within 10 s of real time"
							+ " though the reference covers it");
				}
				Thread.yield();
			}
			Permit permit = w.result.join();
			permit.close();
			this.ref.grant(w.claim);
			this.waiter = null;
			log("the waiting acquire(%d) is granted", w.n);
			// not counted in the window check (its tokens were claimed when it queued); counting fewer is sound
		}

		private static String describe(CompletableFuture<Permit> result) {
			try {
				return "permit " + result.join();
			}
			catch (RuntimeException ex) {
				return ex.toString();
			}
		}

		private void refund() {
			long n = switch (this.random.nextInt(4)) {
				case 0 -> this.ref.limit;
				case 1 -> 1 + this.random.nextLong(Math.min(this.ref.limit, 1_000_000) * 2);
				default -> 1 + this.random.nextInt(3);
			};
			this.ref.advance(this.clock.getAsLong());
			this.bucket.refund(n);
			this.ref.refund(n, 0, false);
			log("refund(%d)", n);
			resetWindow(); // tokens given back may be taken again: the window restarts
		}

		private void charge() {
			long limit = this.ref.limit;
			long n = switch (this.random.nextInt(10)) {
				case 0 -> (this.random.nextInt(4) == 0) ? SharedTokenBucket.MAX_COST : limit;
				case 1 -> 1 + this.random.nextLong(Math.min(limit, 1_000_000) * 3);
				default -> 1 + this.random.nextLong(Math.min(limit, 1_000));
			};
			this.ref.advance(this.clock.getAsLong());
			if (!this.ref.charge(n)) {
				try {
					this.bucket.charge(n);
				}
				catch (IllegalArgumentException ex) {
					log("charge(%d) -> rejected: %s", n, ex.getMessage());
					return;
				}
				throw new AssertionError("charge(" + n + ") was accepted with more than MAX_COST tokens in line");
			}
			this.bucket.charge(n);
			log("charge(%d)", n);
			// not counted in the window check (it may go into debt); counting fewer is sound
			checkGrabs("after charge");
		}

		private void grabOrGiveBack() {
			this.ref.advance(this.clock.getAsLong());
			if (!this.grabs.isEmpty() && (this.grabs.size() >= 3 || this.random.nextBoolean())) {
				long[] grab = this.grabs.remove(this.random.nextInt(this.grabs.size()));
				this.bucket.refund(grab[0], grab[1]);
				this.ref.giveUp(this.ref.byId((int) grab[2]));
				log("refund(ticket, %d) of a grab", grab[1]);
				resetWindow();
				checkGrabs("after a give-back");
				return;
			}
			long n = switch (this.random.nextInt(4)) {
				case 0 -> this.ref.limit + this.random.nextInt(3);
				default -> 1 + this.random.nextInt(3);
			};
			SharedTokenBucketModelTests.Reference.Claim claim = this.ref.claim(n);
			if (this.ref.owedTooMuch()) {
				this.ref.giveUp(claim);
				try {
					this.bucket.grab(n);
				}
				catch (IllegalArgumentException ex) {
					log("grab(%d) -> rejected: %s", n, ex.getMessage());
					return;
				}
				throw new AssertionError("grab(" + n + ") was accepted with more than MAX_COST tokens in line");
			}
			long ticket = this.bucket.grab(n);
			this.grabs.add(new long[] { ticket, n, claim.id() });
			log("grab(%d) -> ticket %d", n, ticket);
			checkGrabs("after grab");
		}

		private void checkGrabs(String when) {
			for (long[] grab : this.grabs) {
				SharedTokenBucketModelTests.Reference.Claim c = this.ref.byId((int) grab[2]);
				equal(when + ": deficiency of grab #" + c.id(), this.bucket.deficiency(grab[0]), this.ref.deficiency(c));
			}
		}

		private void updateRate() {
			long[] next = randomRate();
			this.ref.advance(this.clock.getAsLong());
			if (this.waiter != null && (this.ref.rateWait(this.waiter.claim) > Long.MAX_VALUE / 4
					|| BigInteger.valueOf(next[0]).multiply(BigInteger.valueOf(this.rate[1]))
						.compareTo(BigInteger.valueOf(this.rate[0]).multiply(BigInteger.valueOf(next[1]))) < 0)) {
				// a waiter without a time limit whose wait would no longer fit in nanoseconds is refused (its
				// wait saturates): keep its wait in range, only faster rates while it waits
				return;
			}
			this.rate = next;
			this.bucket.updateRate(this.rate[0], Duration.ofNanos(this.rate[1]));
			this.ref.updateRate(this.rate[0], this.rate[1]);
			log("updateRate(%d per %d ns)", this.rate[0], this.rate[1]);
			resetWindow();
		}

		private void updateLimit() {
			long limit = randomLimit();
			this.ref.advance(this.clock.getAsLong());
			this.bucket.updateLimit(limit);
			this.ref.updateLimit(limit);
			log("updateLimit(%d)", limit);
			resetWindow();
		}

		private void check() {
			this.ref.advance(this.clock.getAsLong());
			RateLimiterSnapshot s = this.bucket.snapshot();
			log("snapshot available=%s untilFull=%s waiting=%d", s.available(), s.untilFull(), s.waiting());
			equal("available", (long) s.available(), this.ref.availableTokens());
			equal("until full (ns)", s.untilFull().toNanos(), this.ref.nanosUntilFull());
			equal("waiting", (long) s.waiting(), (this.waiter != null) ? 1L : 0L);
			if ((long) s.available() > this.ref.limit) {
				throw new AssertionError("available " + s.available() + " above the limit " + this.ref.limit);
			}
			checkGrabs("at a snapshot");
		}

		// ---- the token-bucket bound, exactly ---------------------------------------------------------

		/**
		 * Starts a new window log at the current rate and limit. Over grants i..j (times t, sums S) the bound
		 * is {@code (S_j - S_{i-1}) den <= limit den + num (t_j - t_i)}, i.e.
		 * {@code S_j den - num t_j + max_{i<=j} (num t_i - S_{i-1} den) <= limit den}: one pass, exact.
		 */
		private void resetWindow() {
			BigInteger t = BigInteger.valueOf(this.rate[0]);
			BigInteger p = BigInteger.valueOf(this.rate[1]);
			BigInteger g = t.gcd(p);
			this.wNum = t.divide(g);
			this.wDen = p.divide(g);
			this.wLimit = this.ref.limit;
			this.wOrigin = this.ref.time;
			this.wSum = BigInteger.ZERO;
			this.wMax = null;
			this.wGrants = 0;
		}

		private void granted(long n) {
			long t = this.ref.time; // the bucket's time (never goes back, I5)
			BigInteger elapsedTokensScaled = this.wNum.multiply(BigInteger.valueOf(t - this.wOrigin));
			BigInteger v = elapsedTokensScaled.subtract(this.wSum.multiply(this.wDen));
			this.wMax = (this.wMax == null) ? v : this.wMax.max(v);
			this.wSum = this.wSum.add(BigInteger.valueOf(n));
			this.wGrants++;
			BigInteger lhs = this.wSum.multiply(this.wDen).subtract(elapsedTokensScaled).add(this.wMax);
			if (lhs.compareTo(BigInteger.valueOf(this.wLimit).multiply(this.wDen)) > 0) {
				throw new AssertionError("the token-bucket bound is broken: over a window ending with this grant of " + n
						+ " tokens, the grants less rate * w are " + lhs + "/" + this.wDen + " > limit " + this.wLimit
						+ " (grants in the log: " + this.wGrants + ")");
			}
		}

		private void log(String format, Object... args) {
			if (!this.tracing) {
				return;
			}
			this.trace.add(String.format(format, args) + "    [ref " + ((this.ref != null) ? this.ref : "-")
					+ ((this.bucket != null && this.bucket.isStriped()) ? ", striped" : "") + "]");
		}

		private static void equal(String what, Object actual, Object expected) {
			if (!actual.equals(expected)) {
				throw new AssertionError(what + ": bucket " + actual + ", reference " + expected);
			}
		}
	}

	private record Waiter(Thread thread, CompletableFuture<Permit> result, SharedTokenBucketModelTests.Reference.Claim claim,
			long n) {
	}
}
