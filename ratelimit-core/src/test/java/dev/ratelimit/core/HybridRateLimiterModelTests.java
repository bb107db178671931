package dev.ratelimit.core;

import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import org.junit.jupiter.api.Test;

/**
 * The pacer checked step by step against a reference schedule written for the test in unbounded
 * integers (ticks of {@code 1 / num} nanosecond, nothing saturates, nothing wraps): seeded random
 * sequences of tries, claims that wait, polls, give-ups, refunds of what a granted call took
 * ({@code refundIf}, {@code settle} to a smaller cost), charges ({@code settle} to a larger cost, into
 * debt, with callers waiting), rate, burst and limit changes, resets (contract revision 3: a new pacer's
 * pools, the backlog forgotten, the waiters claiming again) and clock moves (standing, going back,
 * jumping days), at rates from 0.001 to 10^9 per second. Every decision, readiness, wait, the
 * available operations and the time behind schedule must equal the reference's, and the invariants
 * hold at every step: the pools never hold more than their sizes, the operations granted (net of
 * refunds, charges included) never exceed what the schedule made since the start plus what is owed,
 * a charge leaves every waiter's wait as it was and a refund moves the waiters up at once. A failure
 * prints the seed and the trace; {@code -Dmodel.seed=<seed>} replays one sequence.
 */
class HybridRateLimiterModelTests {

	private static final long SEQUENCES = Long.getLong("model.sequences", 10_000);

	private static final int STEPS = 60;

	private static final boolean SKIP_CHECKS = Boolean.getBoolean("model.skipChecks");

	private static final long DAY = Duration.ofDays(1).toNanos();

	@Test
	void agreesWithAnExactScheduleOnRandomSequences() {
		Long only = Long.getLong("model.seed");
		if (only != null) {
			new Run(only).execute();
			return;
		}
		long seeds = new SplittableRandom().nextLong();
		for (long i = 0; i < SEQUENCES; i++) {
			new Run(seeds + i).execute();
		}
	}

	private static final class Run {

		private final long seed;

		private final SplittableRandom random;

		private final List<String> trace = new ArrayList<>();

		private final FakeClock clock = new FakeClock();

		private HybridRateLimiter pacer;

		private Ref ref;

		private final List<Object[]> waiters = new ArrayList<>();

		/** Granted calls as {@code (operations, refunded so far)}. */
		private final List<long[]> grants = new ArrayList<>();

		Run(long seed) {
			this.seed = seed;
			this.random = new SplittableRandom(seed);
		}

		void execute() {
			try {
				if (this.random.nextInt(10) == 0) {
					tooLarge();
				}
				long[] rate = randomRate();
				double ratio = randomRatio();
				Long limit = this.random.nextInt(3) == 0 ? (long) (1 + this.random.nextInt(20)) : null;
				Duration maxBacklog = this.random.nextBoolean() ? null : Duration.ofMillis(this.random.nextInt(5000));
				HybridRateLimiter.Builder builder = HybridRateLimiter.builder().rate(rate[0], Duration.ofNanos(rate[1]))
					.burstRatio(ratio).maxBacklog(maxBacklog).clock(this.clock);
				if (limit != null) {
					builder.limit(limit);
				}
				this.pacer = builder.build();
				this.ref = new Ref(rate[0], rate[1], ratio, limit, maxBacklog, this.clock.getAsLong());
				log("build rate=%d per %d ns ratio=%s limit=%s maxBacklog=%s", rate[0], rate[1], ratio, limit, maxBacklog);
				for (int step = 0; step < STEPS; step++) {
					if (step() || !SKIP_CHECKS || this.random.nextBoolean()) {
						check(); // (not always after a clock move: the next operation is then the first to fill)
					}
				}
			}
			catch (AssertionError | RuntimeException ex) {
				StringBuilder message = new StringBuilder("seed ").append(this.seed)
					.append(" (replay with -Dmodel.seed=").append(this.seed).append(")\n");
				for (String line : this.trace) {
					message.append("  ").append(line).append('\n');
				}
				message.append("  => ").append(ex);
				throw new AssertionError(message.toString(), ex);
			}
		}

		/**
		 * Revision 3: the largest limit and the largest claim are 2^50 operations, whatever the pools could hold at
		 * the rate; a larger limit fails at the builder naming {@code limit}, a larger claim naming {@code n}.
		 */
		private void tooLarge() {
			long over = SharedTokenBucket.MAX_COST + 1 + ((this.random.nextBoolean()) ? 0 : this.random.nextLong(1L << 55));
			HybridRateLimiter.Builder builder = HybridRateLimiter.builder().rate(1_000_000_000, Duration.ofSeconds(1))
				.burstRatio(1.0).clock(this.clock);
			try {
				builder.limit(over).build();
				throw new AssertionError("a pacer was built with a limit of " + over + " operations, above 2^50");
			}
			catch (IllegalArgumentException ex) {
				log("build limit=%d -> rejected: %s", over, ex.getMessage());
				if (!String.valueOf(ex.getMessage()).startsWith("limit")) {
					throw new AssertionError("a limit of " + over + " was rejected without naming it: " + ex.getMessage(), ex);
				}
			}
			HybridRateLimiter largest = builder.limit(SharedTokenBucket.MAX_COST).burstRatio(2.0).build();
			try {
				largest.tryAcquire(SharedTokenBucket.MAX_COST + 1);
				throw new AssertionError("tryAcquire(2^50 + 1) was accepted");
			}
			catch (IllegalArgumentException ex) {
				log("tryAcquire(2^50 + 1) -> rejected: %s", ex.getMessage());
				if (!String.valueOf(ex.getMessage()).startsWith("n ")) {
					throw new AssertionError("a claim above 2^50 was rejected without naming n: " + ex.getMessage(), ex);
				}
			}
		}

		private long[] randomRate() {
			return switch (this.random.nextInt(8)) {
				case 0 -> new long[] { 1, 1_000_000_000_000L }; // 0.001 per second
				case 1 -> new long[] { 999_999_937, 1_000_000_000 };
				case 2 -> new long[] { 1_000_000_000, 1_000_000_000 };
				case 3 -> new long[] { 1_000_003, 1_000_000_000 };
				case 4 -> new long[] { 12345, 1_000_000_000 };
				case 5 -> new long[] { 20, 1_000_000_000 };
				default -> new long[] { 1 + this.random.nextInt(100_000), 1_000_000 + this.random.nextLong(10_000_000_000L) };
			};
		}

		private double randomRatio() {
			return switch (this.random.nextInt(5)) {
				case 0 -> 1.0;
				case 1 -> 1.3;
				case 2 -> 2.0;
				default -> 1.1;
			};
		}

		/** One random operation; {@code false} when it only moved the clock. */
		private boolean step() {
			int op = this.random.nextInt(100);
			if (op < 30) {
				long interval = Math.max(1, this.ref.opNanos());
				long delta = switch (this.random.nextInt(7)) {
					case 0 -> 0;
					case 1 -> 1;
					case 2 -> -(1 + this.random.nextLong(Math.min(interval, DAY)));
					case 3 -> this.random.nextLong(Math.min(interval, DAY)) + 1;
					case 4 -> DAY * (1 + this.random.nextInt(50));
					default -> Math.min(interval, DAY) * (1 + this.random.nextInt(30));
				};
				this.clock.advanceNanos(delta);
				log("clock %+d ns", delta);
				return false;
			}
			else if (op < 55) {
				long n = 1 + this.random.nextLong(this.ref.maxOps());
				this.ref.fill(this.clock.getAsLong());
				boolean expected = this.ref.tryAcquire(n);
				boolean actual = this.pacer.tryAcquire(n);
				log("tryAcquire(%d) -> %s (reference %s)", n, actual, expected);
				equal("tryAcquire", actual, expected);
				if (actual) {
					granted(n);
				}
			}
			else if (op < 70) {
				long n = 1 + this.random.nextLong(this.ref.maxOps());
				long budget = switch (this.random.nextInt(3)) {
					case 0 -> 0;
					case 1 -> this.random.nextLong(Math.max(1, Math.min(this.ref.opNanos() * 10, DAY)));
					default -> Long.MAX_VALUE;
				};
				this.ref.fill(this.clock.getAsLong());
				int id = this.ref.claim(n);
				long wait = this.ref.waitNanos(id);
				try {
					Reservation r = this.pacer.reserve(n, Duration.ofNanos(budget));
					log("reserve(%d, %d ns) -> accepted (reference wait %d)", n, budget, wait);
					equal("accepted", true, wait <= budget);
					this.waiters.add(new Object[] { r, id, this.ref.time, budget });
				}
				catch (RateLimitExceededException ex) {
					log("reserve(%d, %d ns) -> refused after %s (reference wait %d)", n, budget, ex.getRetryAfter(), wait);
					equal("refused", true, wait > budget);
					equal("retry-after", ex.getRetryAfter().toNanos(), wait);
					this.ref.giveUp(id);
				}
			}
			else if (op < 82) {
				if (this.waiters.isEmpty()) {
					return true;
				}
				int index = this.random.nextInt(this.waiters.size());
				Object[] w = this.waiters.get(index);
				Reservation r = (Reservation) w[0];
				int id = (int) w[1];
				this.ref.fill(this.clock.getAsLong());
				long wait = this.ref.waitNanos(id);
				long left = (long) w[3] - Math.max(0, this.ref.time - (long) w[2]);
				try {
					long delay = r.poll();
					log("poll #%d -> %d (reference %d)", id, delay, wait);
					equal("poll", delay, wait);
					if (delay == 0 && this.random.nextBoolean()) {
						r.permit().close();
						long n = this.ref.grant(id);
						this.waiters.remove(index);
						log("permit #%d", id);
						granted(n);
					}
				}
				catch (RateLimitExceededException ex) {
					log("poll #%d -> refused (reference wait %d, left %d)", id, wait, left);
					equal("refused poll", true, wait > left);
					this.ref.giveUp(id);
					this.waiters.remove(index);
				}
			}
			else if (op < 90) {
				if (this.waiters.isEmpty()) {
					return true;
				}
				Object[] w = this.waiters.remove(this.random.nextInt(this.waiters.size()));
				this.ref.fill(this.clock.getAsLong());
				((Reservation) w[0]).cancel();
				this.ref.giveUp((int) w[1]);
				log("cancel #%d", (int) w[1]);
			}
			else if (op < 92) {
				refund();
			}
			else if (op < 95) {
				charge();
			}
			else if (op < 96) {
				long[] rate = randomRate();
				this.ref.fill(this.clock.getAsLong());
				if (!this.ref.claimsFit(rate[0], rate[1])) {
					return true;
				}
				this.pacer.updateRate(rate[0], Duration.ofNanos(rate[1]));
				this.ref.updateRate(rate[0], rate[1]);
				log("updateRate(%d per %d ns)", rate[0], rate[1]);
			}
			else if (op < 97) {
				double ratio = randomRatio();
				this.ref.fill(this.clock.getAsLong());
				this.pacer.updateBurstRatio(ratio);
				this.ref.updateSettings(this.ref.ratio(ratio), this.ref.limit);
				log("updateBurstRatio(%s)", ratio);
			}
			else if (op < 99) {
				long limit = 1 + this.random.nextInt(20);
				this.ref.fill(this.clock.getAsLong());
				if (!this.ref.claimsFitLimit(limit)) {
					return true;
				}
				this.pacer.updateLimit(limit);
				this.ref.updateSettings(this.ref.ratio, limit);
				log("updateLimit(%d)", limit);
			}
			else {
				reset();
			}
			return true;
		}

		/**
		 * Revision 3's reset (P7): a new pacer's pools, nothing behind schedule; the waiters not covered claim again
		 * at the end of the line, in order; counts kept.
		 */
		private void reset() {
			this.ref.fill(this.clock.getAsLong());
			pollAll("before reset");
			RateLimiterSnapshot before = this.pacer.snapshot();
			this.pacer.reset();
			this.ref.reset();
			log("reset");
			RateLimiterSnapshot after = this.pacer.snapshot();
			equal("granted after a reset", after.granted(), before.granted());
			equal("rejected after a reset", after.rejected(), before.rejected());
			equal("waiting after a reset", after.waiting(), before.waiting());
			pollAll("after reset");
		}

		private void granted(long n) {
			this.grants.add(new long[] { n, 0 });
			if (this.grants.size() > 32) {
				this.grants.remove(this.random.nextInt(this.grants.size() - 1));
			}
		}

		/** A granted call gives back part or all of what it took; the waiters move up at once. */
		private void refund() {
			List<long[]> refundable = this.grants.stream().filter((g) -> g[1] < g[0]).toList();
			if (refundable.isEmpty()) {
				return;
			}
			long[] grant = refundable.get(this.random.nextInt(refundable.size()));
			long left = grant[0] - grant[1];
			long n = this.random.nextBoolean() ? left : 1 + this.random.nextLong(left);
			if (unobservedClockMove()) {
				this.pacer.refund(n);
				this.ref.refund(n);
				grant[1] += n;
				log("refund(%d) of a call of %d, first to see the time", n, grant[0]);
				pollAll("after refund");
				return;
			}
			this.ref.fill(this.clock.getAsLong());
			List<long[]> before = pollAll("before refund");
			grant[1] += n;
			this.pacer.refund(n);
			this.ref.refund(n);
			log("refund(%d) of a call of %d", n, grant[0]);
			List<long[]> after = pollAll("after refund");
			for (long[] a : after) {
				for (long[] b : before) {
					if (a[0] == b[0] && a[1] > b[1]) {
						throw new AssertionError("refund: claim #" + a[0] + " waits longer: " + a[1] + " > " + b[1]);
					}
				}
			}
		}

		/** A call turns out to cost more: taken at once, into debt; nobody waiting moves. */
		private void charge() {
			long max = this.ref.maxOps();
			long n = (this.random.nextInt(5) == 0) ? 1 + this.random.nextLong(max * 5) : 1 + this.random.nextLong(max);
			if (unobservedClockMove()) {
				this.pacer.charge(n);
				this.ref.charge(n);
				log("charge(%d), first to see the time", n);
				pollAll("after charge");
				return;
			}
			this.ref.fill(this.clock.getAsLong());
			List<long[]> before = pollAll("before charge");
			this.pacer.charge(n);
			this.ref.charge(n);
			log("charge(%d)", n);
			List<long[]> after = pollAll("after charge");
			if (after.size() != before.size()) {
				throw new AssertionError("charge: waiters refused after it that were not before");
			}
			for (int i = 0; i < after.size(); i++) {
				equal("charge: wait of claim #" + after.get(i)[0], after.get(i)[1], before.get(i)[1]);
			}
		}

		/**
		 * Sometimes moves the clock without anyone looking, so that the refund or charge that follows is
		 * the first to fill the pacer up to now (it must fill before it acts); the reference fills then.
		 */
		private boolean unobservedClockMove() {
			if (this.random.nextInt(3) != 0) {
				return false;
			}
			long delta = 1 + this.random.nextLong(Math.max(1, Math.min(this.ref.opNanos() * 3, DAY)));
			this.clock.advanceNanos(delta);
			log("clock %+d ns (unobserved)", delta);
			this.ref.fill(this.clock.getAsLong());
			return true;
		}

		/** Polls every waiter now against the reference, without granting: {@code (id, wait)} of those left. */
		private List<long[]> pollAll(String when) {
			List<long[]> waits = new ArrayList<>();
			for (Object[] w : new ArrayList<>(this.waiters)) {
				int id = (int) w[1];
				long wait = this.ref.waitNanos(id);
				long left = (long) w[3] - Math.max(0, this.ref.time - (long) w[2]);
				try {
					long delay = ((Reservation) w[0]).poll();
					equal(when + ": poll #" + id, delay, wait);
					waits.add(new long[] { id, delay });
				}
				catch (RateLimitExceededException ex) {
					log("%s: poll #%d -> refused (reference wait %d, left %d)", when, id, wait, left);
					equal(when + ": refused poll", true, wait > left);
					this.ref.giveUp(id);
					this.waiters.remove(w);
				}
			}
			return waits;
		}

		private void check() {
			this.ref.fill(this.clock.getAsLong());
			RateLimiterSnapshot s = this.pacer.snapshot();
			double expected = this.ref.availableOps();
			if (Math.abs(s.available() - expected) > 1e-9 * Math.max(1, expected)) {
				throw new AssertionError("available: pacer " + s.available() + ", reference " + expected);
			}
			equal("behind schedule", this.pacer.behindSchedule().toNanos(), this.ref.behindNanos());
			if (this.ref.level.compareTo(this.ref.cap) > 0) {
				throw new AssertionError("level " + this.ref.level + " above the pools' size " + this.ref.cap);
			}
			if (s.pools().active() > s.limit() + 1e-9) {
				throw new AssertionError("active pool " + s.pools().active() + " above its size " + s.limit());
			}
			if (this.ref.granted.compareTo(this.ref.produced.add(this.ref.owedUnits()).add(BigInteger.valueOf(1000))) > 0) {
				throw new AssertionError("granted " + this.ref.granted + " ticks, more than the schedule made, "
						+ this.ref.produced + ", and what is owed, " + this.ref.owedUnits());
			}
		}

		private void log(String format, Object... args) {
			this.trace.add(String.format(format, args) + "    [" + this.ref + "]");
		}

		private static void equal(String what, Object actual, Object expected) {
			if (!actual.equals(expected)) {
				throw new AssertionError(what + ": pacer " + actual + ", reference " + expected);
			}
		}
	}

	/**
	 * The schedule, in unbounded ticks: {@code level} (active + burst, net of every queued claim and every
	 * charge, negative when owed), {@code behind} (may be caught up, at most maxBacklog) and {@code lost}
	 * (beyond it), a FIFO of claims, with the charges made while claims wait in it (behind those claims,
	 * never granted, dropped once no claim is ahead of them).
	 */
	private static final class Ref {

		BigInteger num;

		BigInteger den;

		BigInteger[] ratio;

		Long limit;

		final BigInteger maxBacklog;

		BigInteger activeMax;

		BigInteger cap;

		BigInteger level;

		/** In ticks of the current rate (1 / num ns): rescaled when the rate changes. */
		BigInteger behind = BigInteger.ZERO;

		BigInteger lostNanos = BigInteger.ZERO;

		BigInteger carry = BigInteger.ZERO;

		/** Ticks (of the rate in force when they happened, as operations * den) for the conservation check. */
		BigInteger granted = BigInteger.ZERO;

		BigInteger produced;

		long time;

		final List<long[]> queue = new ArrayList<>();

		/**
		 * At least the operations in the pacer's holes (claims given back with others behind them, kept
		 * while a debt or a claim ahead is not covered): a pacer's debt is counted with them.
		 */
		private BigInteger holeOps = BigInteger.ZERO;

		private int ids;

		Ref(long tokens, long periodNanos, double burstRatio, Long limit, Duration maxBacklog, long now) {
			setRate(tokens, periodNanos);
			this.ratio = ratio(burstRatio);
			this.limit = limit;
			this.maxBacklog = (maxBacklog != null) ? BigInteger.valueOf(maxBacklog.toNanos()) : null;
			sizes();
			this.level = this.activeMax;
			this.produced = opsToUnits(this.activeMax);
			this.time = now;
		}

		BigInteger[] ratio(double r) {
			java.math.BigDecimal d = new java.math.BigDecimal(Double.toString(r)).stripTrailingZeros();
			int scale = Math.max(d.scale(), 0);
			BigInteger n = d.movePointRight(scale).toBigIntegerExact();
			BigInteger m = BigInteger.TEN.pow(scale);
			BigInteger g = n.gcd(m);
			return new BigInteger[] { n.divide(g), m.divide(g) };
		}

		private void setRate(long tokens, long periodNanos) {
			BigInteger t = BigInteger.valueOf(tokens);
			BigInteger p = BigInteger.valueOf(periodNanos);
			BigInteger g = t.gcd(p);
			this.num = t.divide(g);
			this.den = p.divide(g);
		}

		private void sizes() {
			this.activeMax = (this.limit != null) ? BigInteger.valueOf(this.limit).multiply(this.den)
					: BigInteger.valueOf(1_000_000).multiply(this.num).max(BigInteger.TWO.multiply(this.den));
			this.cap = this.activeMax.multiply(this.ratio[0]).divide(this.ratio[1]);
		}

		/** Granted and produced are compared in operations scaled by a common unit: ticks * 10^18 / den. */
		private BigInteger opsToUnits(BigInteger ticks) {
			return ticks.multiply(BigInteger.TEN.pow(18)).divide(this.den);
		}

		long opNanos() {
			return this.den.divide(this.num).min(BigInteger.valueOf(Long.MAX_VALUE / 4)).longValueExact();
		}

		long maxOps() {
			return this.cap.divide(this.den).longValueExact();
		}

		void fill(long now) {
			long elapsed = now - this.time;
			if (elapsed <= 0) {
				return;
			}
			this.time = now;
			BigInteger d = BigInteger.valueOf(elapsed).multiply(this.num);
			this.produced = this.produced.add(opsToUnits(d));
			BigInteger toActive = d.min(this.activeMax.subtract(this.level).max(BigInteger.ZERO));
			this.level = this.level.add(toActive);
			this.behind = this.behind.add(d.subtract(toActive));
			if (!this.ratio[0].equals(this.ratio[1])) {
				BigInteger scaled = d.multiply(this.ratio[0].subtract(this.ratio[1])).add(this.carry);
				BigInteger allowance = scaled.divide(this.ratio[1]);
				this.carry = scaled.mod(this.ratio[1]);
				BigInteger move = allowance.min(this.cap.subtract(this.level)).min(this.behind).max(BigInteger.ZERO);
				if (move.compareTo(allowance) < 0) {
					this.carry = BigInteger.ZERO;
				}
				this.level = this.level.add(move);
				this.behind = this.behind.subtract(move);
			}
			capBacklog();
		}

		private void capBacklog() {
			if (this.maxBacklog == null) {
				return;
			}
			BigInteger max = this.maxBacklog.multiply(this.num);
			if (this.behind.compareTo(max) > 0) {
				this.lostNanos = this.lostNanos.add(this.behind.subtract(max).divide(this.num));
				this.behind = max;
			}
		}

		private void capLevel() {
			BigInteger excess = this.level.subtract(this.cap);
			if (excess.signum() > 0) {
				this.level = this.cap;
				this.behind = this.behind.add(excess);
				capBacklog();
			}
		}

		boolean tryAcquire(long n) {
			BigInteger cost = BigInteger.valueOf(n).multiply(this.den);
			if (this.level.compareTo(cost) < 0) {
				return false; // (callers waiting make the level negative)
			}
			this.level = this.level.subtract(cost);
			this.granted = this.granted.add(opsToUnits(cost));
			return true;
		}

		int claim(long n) {
			int id = this.ids++;
			this.queue.add(new long[] { id, n, 0 });
			this.level = this.level.subtract(BigInteger.valueOf(n).multiply(this.den));
			return id;
		}

		/** As if the call had not taken {@code n}: back to the level, the excess over the pools to the waiting pool. */
		void refund(long n) {
			BigInteger ticks = BigInteger.valueOf(n).multiply(this.den);
			this.level = this.level.add(ticks);
			this.granted = this.granted.subtract(opsToUnits(ticks));
			capLevel();
		}

		/** Taken now, into debt, behind every claim in line. */
		void charge(long n) {
			BigInteger ticks = BigInteger.valueOf(n).multiply(this.den);
			this.level = this.level.subtract(ticks);
			this.granted = this.granted.add(opsToUnits(ticks));
			if (this.queue.stream().anyMatch((c) -> c[2] == 0)) {
				this.queue.add(new long[] { this.ids++, n, 1 });
			}
		}

		/** What later callers wait for beyond the claims in line: the debt of the charges, in units. */
		BigInteger owedUnits() {
			BigInteger claims = BigInteger.ZERO;
			for (long[] c : this.queue) {
				if (c[2] == 0) {
					claims = claims.add(BigInteger.valueOf(c[1]).multiply(this.den));
				}
			}
			return opsToUnits(this.level.add(claims).negate().max(BigInteger.ZERO));
		}

		private void dropLeadingCharges() {
			while (!this.queue.isEmpty() && this.queue.get(0)[2] == 1) {
				this.queue.remove(0);
			}
		}

		private BigInteger behindOf(int id) {
			BigInteger sum = BigInteger.ZERO;
			boolean after = false;
			for (long[] c : this.queue) {
				if (after && c[2] != 2) { // (a claim a reset forgave is not in the level)
					sum = sum.add(BigInteger.valueOf(c[1]).multiply(this.den));
				}
				if (c[0] == id) {
					after = true;
				}
			}
			return sum;
		}

		/** The head covers a claim when the level net of the claims behind it is >= 0 (tickets are whole). */
		long waitNanos(int id) {
			if (this.queue.stream().anyMatch((c) -> c[0] == id && c[2] == 2)) {
				return 0; // covered at a reset, which forgave it
			}
			BigInteger missing = this.level.add(behindOf(id)).negate();
			if (missing.signum() <= 0) {
				return 0;
			}
			BigInteger withoutBurst = ceilDiv(missing.subtract(this.behind).max(BigInteger.ZERO), this.num);
			BigInteger wait = ceilDiv(missing, this.num);
			if (!this.ratio[0].equals(this.ratio[1])) {
				wait = ceilDiv(missing.multiply(this.ratio[1]), this.num.multiply(this.ratio[0])).max(withoutBurst);
			}
			return wait.max(BigInteger.ONE).min(BigInteger.valueOf(Long.MAX_VALUE)).longValueExact();
		}

		private static BigInteger ceilDiv(BigInteger x, BigInteger y) {
			BigInteger[] qr = x.divideAndRemainder(y);
			return (qr[1].signum() > 0) ? qr[0].add(BigInteger.ONE) : qr[0];
		}

		void giveUp(int id) {
			for (int i = 0; i < this.queue.size(); i++) {
				if (this.queue.get(i)[0] == id) {
					if (this.queue.get(i)[2] == 2) {
						this.queue.remove(i); // forgiven by a reset: nothing given back
						dropLeadingCharges();
						return;
					}
					if (i < this.queue.size() - 1) {
						this.holeOps = this.holeOps.add(BigInteger.valueOf(this.queue.get(i)[1]));
					}
					this.level = this.level.add(BigInteger.valueOf(this.queue.remove(i)[1]).multiply(this.den));
					capLevel();
					dropLeadingCharges();
					return;
				}
			}
		}

		long grant(int id) {
			for (int i = 0; i < this.queue.size(); i++) {
				if (this.queue.get(i)[0] == id) {
					long n = this.queue.remove(i)[1];
					this.granted = this.granted.add(opsToUnits(BigInteger.valueOf(n).multiply(this.den)));
					dropLeadingCharges();
					return n;
				}
			}
			throw new AssertionError("no claim #" + id);
		}

		/**
		 * Revision 3: as a new pacer (active pool full, nothing behind schedule, charges dropped); claims covered now
		 * are forgiven (kept, no longer in the level), the others claim again at the end of the line, in order.
		 */
		void reset() {
			List<long[]> kept = new ArrayList<>();
			List<long[]> again = new ArrayList<>();
			for (long[] c : this.queue) {
				if (c[2] != 1) {
					(c[2] == 2 || waitNanos((int) c[0]) == 0 ? kept : again).add(c);
				}
			}
			this.queue.clear();
			BigInteger forgiven = BigInteger.ZERO;
			for (long[] c : kept) {
				this.queue.add(new long[] { c[0], c[1], 2 });
				forgiven = forgiven.add(BigInteger.valueOf(c[1]).multiply(this.den));
			}
			this.level = this.activeMax;
			for (long[] c : again) {
				this.queue.add(c);
				this.level = this.level.subtract(BigInteger.valueOf(c[1]).multiply(this.den));
			}
			this.behind = BigInteger.ZERO;
			this.lostNanos = BigInteger.ZERO;
			this.carry = BigInteger.ZERO;
			this.holeOps = BigInteger.ZERO;
			// the conservation check starts again: a new pacer's pools, and what the forgiven claims may still take
			this.produced = this.granted.add(opsToUnits(this.activeMax.add(forgiven)));
		}

		/** A rate change must leave every queued claim within what the new pools can hold. */
		boolean claimsFit(long tokens, long periodNanos) {
			BigInteger t = BigInteger.valueOf(tokens);
			BigInteger p = BigInteger.valueOf(periodNanos);
			BigInteger d = p.divide(t.gcd(p));
			// and keep the backlog, which keeps its operations, within 2^62 ns at the new rate
			BigInteger behindNanos = this.behind.multiply(d).divide(this.den).divide(t.divide(t.gcd(p)))
				.add(this.lostNanos.multiply(this.num).multiply(d).divide(this.den.multiply(t.divide(t.gcd(p)))));
			// and keep a debt (charges), holes included, well within the 2^61 ticks the pacer counts exactly
			if (this.level.signum() >= 0) {
				this.holeOps = BigInteger.ZERO; // nothing owed: every hole was reached and folded
			}
			BigInteger owedOps = this.level.negate().max(BigInteger.ZERO).divide(this.den).add(BigInteger.ONE).add(this.holeOps);
			return this.queue.isEmpty() && d.compareTo(BigInteger.valueOf(HybridRateLimiter.MAX_CAP / 4)) < 0
					&& behindNanos.bitLength() < 62 && owedOps.multiply(d).bitLength() < 58;
		}

		boolean claimsFitLimit(long newLimit) {
			return this.queue.isEmpty();
		}

		void updateRate(long tokens, long periodNanos) {
			BigInteger oldNum = this.num;
			BigInteger oldDen = this.den;
			BigInteger whole = this.level.divide(oldDen);
			BigInteger frac = this.level.mod(oldDen);
			if (this.level.signum() < 0 && frac.signum() != 0) {
				whole = whole.subtract(BigInteger.ONE);
			}
			frac = this.level.subtract(whole.multiply(oldDen));
			setRate(tokens, periodNanos);
			this.level = whole.multiply(this.den).add(frac.multiply(this.den).divide(oldDen));
			// the backlog keeps its operations: ticks are operations * den
			this.behind = this.behind.multiply(this.den).divide(oldDen);
			this.lostNanos = this.lostNanos.multiply(oldNum).multiply(this.den).divide(oldDen.multiply(this.num));
			this.carry = BigInteger.ZERO;
			sizes();
			capLevel();
			capBacklog();
		}

		void updateSettings(BigInteger[] newRatio, Long newLimit) {
			this.ratio = newRatio;
			this.limit = newLimit;
			this.carry = BigInteger.ZERO;
			sizes();
			capLevel();
			capBacklog();
		}

		double availableOps() {
			return Math.max(0.0, this.level.doubleValue() / this.den.doubleValue());
		}

		long behindNanos() {
			BigInteger total = this.behind.divide(this.num).add(this.lostNanos);
			return total.min(BigInteger.valueOf(Long.MAX_VALUE)).longValueExact();
		}

		@Override
		public String toString() {
			return "t=" + this.time + " level=" + this.level + " cap=" + this.cap + " behind=" + this.behind + " lost="
					+ this.lostNanos + " queue=" + this.queue.size();
		}
	}
}
