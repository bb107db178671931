package dev.ratelimit.core;

import java.math.BigInteger;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneId;
import java.time.zone.ZoneOffsetTransition;
import java.time.zone.ZoneRules;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeSet;

import org.junit.jupiter.api.Test;

/**
 * The calendar quota checked step by step against a reference written for the test: a calendar that
 * finds each boundary by walking the zone's offset transitions ({@link ZoneRules#nextTransition}, the
 * first instant whose local time reaches the period's start, with the local time computed as the instant
 * plus its offset), without the resolution of local times that the quota uses ({@code getTransition},
 * {@code ZonedDateTime.of}), and a quota that serves its line period by period. Seeded random sequences
 * in random zones (with daylight saving time, 30-minute and 45-minute offsets, historic offsets of odd
 * seconds, Apia's skipped day, Casablanca's Ramadan changes) over 400 years (1850 to 2250), at month
 * ends and leap days, with the wall clock moved forward, to a boundary and one nanosecond either side,
 * several periods at once, and back (by a nanosecond, across a boundary, by years): tries, claims that
 * wait, polls, give-ups of waiting and of covered claims, refunds, charges (into debt, with callers
 * waiting), limit changes and views. Every decision, readiness, wait and retry-after (to the
 * nanosecond), the tokens available, owed and the time until full, the running period and the counts
 * must equal the reference's; and in runs without charges, no period grants more than its largest limit
 * plus what was given back in it (Q1). A failure prints the seed and the trace;
 * {@code -Dmodel.seed=<seed>} replays one sequence.
 */
class CalendarQuotaModelTests {

	private static final long SEQUENCES = Long.getLong("model.sequences", 3_000);

	private static final int STEPS = 60;

	private static final long NANOS = 1_000_000_000L;

	private static final long NEVER = Long.MAX_VALUE;

	private static final long FROM = LocalDate.of(1850, 1, 1).toEpochDay() * 86_400;

	private static final long TO = LocalDate.of(2250, 1, 1).toEpochDay() * 86_400;

	private static final long YEAR = 366L * 86_400;

	private static final String[] ZONES = { "UTC", "Europe/Berlin", "America/Sao_Paulo", "Australia/Lord_Howe",
			"Pacific/Apia", "Asia/Kathmandu", "Africa/Casablanca", "Europe/Paris", "America/St_Johns", "Pacific/Chatham",
			"Europe/Dublin", "Antarctica/Troll", "Europe/Amsterdam", "Asia/Kolkata", "+05:45", "-03:30" };

	private static final List<String> ALL_ZONES = new ArrayList<>(new TreeSet<>(ZoneId.getAvailableZoneIds()));

	@Test
	void agreesWithAReferenceQuotaOnRandomSequences() {
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

	@Test
	void calendarAgreesWithTheReferenceOnRandomInstants() {
		long seed = Long.getLong("model.seed", new SplittableRandom().nextLong());
		SplittableRandom random = new SplittableRandom(seed);
		for (int i = 0; i < 20_000; i++) {
			ZoneId zone = randomZone(random);
			QuotaCalendar.Unit unit = QuotaCalendar.Unit.values()[random.nextInt(QuotaCalendar.Unit.values().length)];
			QuotaCalendar calendar = QuotaCalendar.of(unit, zone);
			RefCalendar ref = new RefCalendar(unit, zone);
			long second = FROM + random.nextLong(TO - FROM);
			if (random.nextBoolean()) { // at a boundary, or a second either side
				second = ref.period(second)[2] + random.nextInt(3) - 1;
			}
			QuotaCalendar.Period actual = calendar.periodOf(Instant.ofEpochSecond(second, random.nextInt(1_000_000_000)));
			long[] expected = ref.period(second);
			String where = "seed " + seed + ": " + unit + " in " + zone + " at " + Instant.ofEpochSecond(second);
			assertEqual(where + " index", actual.index(), expected[0]);
			assertEqual(where + " start", actual.start().getEpochSecond(), expected[1]);
			assertEqual(where + " end", actual.end().getEpochSecond(), expected[2]);
		}
	}

	private static ZoneId randomZone(SplittableRandom random) {
		return ZoneId.of(random.nextInt(3) == 0 ? ALL_ZONES.get(random.nextInt(ALL_ZONES.size()))
				: ZONES[random.nextInt(ZONES.length)]);
	}

	private static void assertEqual(String what, long actual, long expected) {
		if (actual != expected) {
			throw new AssertionError(what + ": was " + actual + ", expected " + expected);
		}
	}

	/**
	 * The reference calendar: period {@code k}'s local start from the unit's arithmetic on epoch
	 * seconds and days, its boundary by walking the offset transitions from 18 hours before (no offset
	 * is larger) to the first instant whose local time (instant plus offset) reaches it.
	 */
	static final class RefCalendar {

		final QuotaCalendar.Unit unit;

		private final ZoneRules rules;

		RefCalendar(QuotaCalendar.Unit unit, ZoneId zone) {
			this.unit = unit;
			this.rules = zone.getRules();
		}

		long key(long localSecond) {
			long day = Math.floorDiv(localSecond, 86_400);
			return switch (this.unit) {
				case MINUTE -> Math.floorDiv(localSecond, 60);
				case HOUR -> Math.floorDiv(localSecond, 3600);
				case DAY -> day;
				case WEEK -> Math.floorDiv(day + 3, 7);
				case MONTH -> {
					LocalDate date = LocalDate.ofEpochDay(day);
					yield (date.getYear() - 1970L) * 12 + date.getMonthValue() - 1;
				}
				case YEAR -> LocalDate.ofEpochDay(day).getYear() - 1970L;
			};
		}

		long localStart(long key) {
			return switch (this.unit) {
				case MINUTE -> key * 60;
				case HOUR -> key * 3600;
				case DAY -> key * 86_400;
				case WEEK -> (key * 7 - 3) * 86_400;
				case MONTH -> LocalDate.of((int) (1970 + Math.floorDiv(key, 12)), (int) Math.floorMod(key, 12) + 1, 1)
					.toEpochDay() * 86_400;
				case YEAR -> LocalDate.of((int) (1970 + key), 1, 1).toEpochDay() * 86_400;
			};
		}

		long boundary(long key) {
			long local = localStart(key);
			long at = local - 18 * 3600 - 1;
			int offset = this.rules.getOffset(Instant.ofEpochSecond(at)).getTotalSeconds();
			for (;;) {
				ZoneOffsetTransition next = this.rules.nextTransition(Instant.ofEpochSecond(at));
				long end = (next != null) ? next.toEpochSecond() : Long.MAX_VALUE;
				long first = Math.max(at, local - offset);
				if (first < end) {
					return first;
				}
				at = end;
				offset = next.getOffsetAfter().getTotalSeconds();
			}
		}

		/** {@code {index, start, end}} of the period of the second. */
		long[] period(long second) {
			long k = key(second + this.rules.getOffset(Instant.ofEpochSecond(second)).getTotalSeconds());
			while (boundary(k) > second) {
				k--;
			}
			while (boundary(k + 1) <= second) {
				k++;
			}
			return new long[] { k, boundary(k), boundary(k + 1) };
		}
	}

	/** A claim in the reference. */
	private static final class RefClaim {

		final int id;

		final long n;

		final long startNanos;

		final long budget;

		final boolean unlimited;

		long coveredIn = Long.MIN_VALUE;

		boolean ready;

		boolean done;

		Reservation reservation;

		RefClaim(int id, long n, long startNanos, long budget, boolean unlimited) {
			this.id = id;
			this.n = n;
			this.startNanos = startNanos;
			this.budget = budget;
			this.unlimited = unlimited;
		}
	}

	/** The reference quota: the line served period by period, one period at a time. */
	private static final class Ref {

		final RefCalendar calendar;

		final long origin;

		long limit;

		long index;

		long start;

		long end;

		long used;

		/** Claims ({@code RefClaim}) and charges ({@code Long}) in line. */
		final List<Object> line = new ArrayList<>();

		long granted;

		long rejected;

		int waiting;

		boolean charged;

		/** Per period: tokens covered, tokens given back, the largest limit in force. */
		final Map<String, long[]> ledger = new HashMap<>();

		/** Resets so far (revision 3): each starts the period's ledger again. */
		long resets;

		Ref(RefCalendar calendar, long limit, long second, long origin) {
			this.calendar = calendar;
			this.limit = limit;
			this.origin = origin;
			long[] p = calendar.period(second);
			this.index = p[0];
			this.start = p[1];
			this.end = p[2];
			ledger(0, 0);
		}

		void advance(long second) {
			if (second < this.end) {
				return;
			}
			long[] p = this.calendar.period(second);
			this.used = paidDown(this.used, this.limit, p[0] - this.index);
			this.index = p[0];
			this.start = p[1];
			this.end = p[2];
			ledger(0, 0);
			serve();
		}

		void ledger(long covered, long givenBack) {
			long[] entry = this.ledger.computeIfAbsent(this.index + "/" + this.resets, (k) -> new long[3]);
			entry[0] += covered;
			entry[1] += givenBack;
			entry[2] = Math.max(entry[2], this.limit);
			if (!this.charged && entry[0] - entry[1] > entry[2]) {
				throw new AssertionError("period " + this.index + " granted " + entry[0] + " tokens, " + entry[1]
						+ " given back, with a limit of at most " + entry[2]);
			}
		}

		void serve() {
			while (!this.line.isEmpty()) {
				Object head = this.line.get(0);
				if (head instanceof Long charge) {
					this.used += charge;
				}
				else {
					RefClaim claim = (RefClaim) head;
					if (claim.n > this.limit - this.used) {
						return;
					}
					this.used += claim.n;
					claim.coveredIn = this.index;
					ledger(claim.n, 0);
				}
				this.line.remove(0);
			}
		}

		/**
		 * Revision 3: the period's count zero again, what is owed forgotten (charges in line dropped), the line
		 * served at once; tokens covered before it are gone (given back later, they give nothing).
		 */
		void reset(List<RefClaim> open) {
			for (RefClaim claim : open) {
				if (claim.coveredIn != Long.MIN_VALUE) {
					claim.coveredIn = Long.MIN_VALUE + 1; // (covered, in no period any more)
				}
			}
			this.resets++;
			this.used = 0;
			this.line.removeIf((entry) -> entry instanceof Long);
			this.charged = false; // (the debt is forgotten: the ledger's bound holds again)
			ledger(0, 0);
			serve();
		}

		void giveBackToPeriod(long n) {
			long before = this.used;
			this.used = Math.max(0, this.used - n);
			ledger(0, before - this.used);
		}

		/**
		 * The boundary at which the line (plus {@code extra} at its end when {@code position} is its
		 * size) covers the entry at {@code position}; {@code position == -1}: full again.
		 */
		long boundaryWhen(int position, long extra) {
			List<long[]> entries = new ArrayList<>();
			for (Object entry : this.line) {
				entries.add((entry instanceof Long charge) ? new long[] { charge, 1 } : new long[] { ((RefClaim) entry).n, 0 });
			}
			if (position == this.line.size()) {
				entries.add(new long[] { extra, 0 });
			}
			long u = this.used;
			long k = this.index;
			int at = 0;
			for (;;) {
				long need = (at < entries.size()) ? entries.get(at)[0] : this.limit; // (a claim: charges are paid at once)
				if (need > this.limit) {
					return NEVER;
				}
				// the head fits once the allowances of m periods paid what is owed: u - limit * m <= limit - need
				BigInteger excess = BigInteger.valueOf(u).subtract(BigInteger.valueOf(this.limit - need));
				long m = Math.max(1, excess.add(BigInteger.valueOf(this.limit - 1)).divide(BigInteger.valueOf(this.limit))
					.longValueExact());
				if (k + m > this.index + periodsIn400Years(this.calendar.unit)) {
					return NEVER; // (the quota's horizon)
				}
				k += m;
				u = paidDown(u, this.limit, m);
				while (this.calendar.boundary(k) == this.calendar.boundary(k + 1)) {
					k++; // an empty period: its allowance pays a debt, nobody is served in it
					u = paidDown(u, this.limit, 1);
				}
				long b = this.calendar.boundary(k);
				if (at == entries.size() && u == 0) {
					return b;
				}
				while (at < entries.size()) {
					long[] e = entries.get(at);
					if (e[1] == 0 && e[0] > this.limit - u) {
						break;
					}
					u += e[0];
					if (at == position) {
						return b;
					}
					at++;
				}
			}
		}

		static long paidDown(long used, long limit, long periods) {
			BigInteger rest = BigInteger.valueOf(used)
				.subtract(BigInteger.valueOf(limit).multiply(BigInteger.valueOf(periods)));
			return Math.max(0, rest.max(BigInteger.ZERO).longValueExact());
		}

		static long periodsIn400Years(QuotaCalendar.Unit unit) {
			return switch (unit) {
				case MINUTE -> 400L * 366 * 24 * 60;
				case HOUR -> 400L * 366 * 24;
				case DAY -> 400L * 366;
				case WEEK -> 400L * 53;
				case MONTH -> 400L * 12;
				case YEAR -> 400L;
			};
		}

		long nanosUntil(long boundary, long nowNanos) {
			if (boundary == NEVER) {
				return Long.MAX_VALUE;
			}
			BigInteger b = BigInteger.valueOf(boundary - this.origin).multiply(BigInteger.valueOf(NANOS));
			if (b.compareTo(BigInteger.valueOf(Long.MAX_VALUE)) >= 0) {
				return Long.MAX_VALUE;
			}
			BigInteger wait = b.subtract(BigInteger.valueOf(nowNanos)).max(BigInteger.ONE);
			return (wait.bitLength() < 64) ? wait.longValueExact() : Long.MAX_VALUE;
		}
	}

	private static final class Run {

		private final long seed;

		private final SplittableRandom random;

		private final List<String> trace = new ArrayList<>();

		private final List<RefClaim> open = new ArrayList<>();

		private FakeWallClock clock;

		private CalendarQuota quota;

		private Ref ref;

		private long origin;

		private int ids;

		Run(long seed) {
			this.seed = seed;
			this.random = new SplittableRandom(seed);
		}

		void execute() {
			try {
				ZoneId zone = randomZone(this.random);
				QuotaCalendar.Unit unit = QuotaCalendar.Unit.values()[this.random.nextInt(QuotaCalendar.Unit.values().length)];
				RefCalendar calendar = new RefCalendar(unit, zone);
				long second = FROM + this.random.nextLong(TO - FROM);
				int nano = this.random.nextInt(1_000_000_000);
				if (this.random.nextInt(3) == 0) { // at a boundary, or a nanosecond before it
					second = calendar.period(second)[2];
					nano = 0;
					if (this.random.nextBoolean()) {
						second--;
						nano = 999_999_999;
					}
				}
				long limit = switch (this.random.nextInt(6)) {
					case 0 -> 1;
					case 1 -> 1 + this.random.nextInt(1000);
					case 2 -> CalendarQuota.MAX_LIMIT - this.random.nextInt(3);
					default -> 1 + this.random.nextInt(10);
				};
				this.clock = new FakeWallClock(Instant.ofEpochSecond(second, nano));
				this.origin = second;
				this.quota = CalendarQuota.builder().name("q").limit(limit).calendar(unit).zone(zone).clock(this.clock)
					.stats(StatsRecorder.concurrent()).build();
				this.ref = new Ref(calendar, limit, second, this.origin);
				this.ref.charged = false;
				log("build limit=%d per %s in %s at %s", limit, unit, zone, this.clock.instant());
				boolean charges = this.random.nextBoolean();
				for (int step = 0; step < STEPS; step++) {
					step(charges);
					if (this.random.nextInt(4) == 0) {
						checkView();
					}
				}
				checkView();
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

		private long nowSecond() {
			return this.clock.instant().getEpochSecond();
		}

		private long nowNanos() {
			Instant now = this.clock.instant();
			return (now.getEpochSecond() - this.origin) * NANOS + now.getNano();
		}

		private long randomCost() {
			long limit = this.ref.limit;
			return switch (this.random.nextInt(6)) {
				case 0 -> limit;
				case 1 -> 1 + this.random.nextLong(limit);
				default -> 1 + this.random.nextLong(Math.min(limit, 3));
			};
		}

		private void step(boolean charges) {
			int op = this.random.nextInt(100);
			if (op < 25) {
				moveClock();
			}
			else if (op < 45) {
				tryAcquire();
			}
			else if (op < 60) {
				reserve();
			}
			else if (op < 75) {
				poll();
			}
			else if (op < 81) {
				cancel();
			}
			else if (op < 87) {
				long n = this.random.nextInt(3) == 0 ? this.random.nextLong(this.ref.limit + 1) : this.random.nextInt(3);
				if (n > 0) { // (a refund of nothing reads no clock)
					this.ref.advance(nowSecond());
				}
				this.ref.giveBackToPeriod(n);
				this.ref.serve();
				this.quota.refund(n);
				log("refund(%d)", n);
			}
			else if (op < 91 && charges) {
				long n = this.random.nextLong(Math.min(this.ref.limit, 1L << 40) * 3 + 1);
				if (n > 0) { // (a charge of nothing reads no clock)
					this.ref.advance(nowSecond());
				}
				this.ref.charged |= n > 0;
				if (this.ref.line.isEmpty()) {
					this.ref.used += n;
				}
				else if (n > 0) {
					this.ref.line.add(n);
				}
				this.quota.charge(n);
				log("charge(%d)", n);
			}
			else if (op < 93) {
				this.ref.advance(nowSecond());
				this.ref.reset(this.open);
				long granted = this.quota.snapshot().granted();
				this.quota.reset();
				log("reset");
				assertEqual("granted after a reset", this.quota.snapshot().granted(), granted);
			}
			else if (op < 95) {
				long limit = switch (this.random.nextInt(4)) {
					case 0 -> Math.max(1, this.ref.limit - 1);
					case 1 -> Math.min(CalendarQuota.MAX_LIMIT, this.ref.limit + 1);
					case 2 -> Math.min(CalendarQuota.MAX_LIMIT, 1 + this.random.nextLong(this.ref.limit * 2));
					default -> 1 + this.random.nextInt(10);
				};
				this.ref.advance(nowSecond());
				this.ref.limit = limit;
				this.ref.ledger(0, 0);
				this.ref.serve();
				this.quota.updateLimit(limit);
				log("updateLimit(%d)", limit);
			}
			else {
				this.ref.advance(nowSecond());
				QuotaCalendar.Period period = this.quota.currentPeriod();
				log("currentPeriod -> %s", period);
				assertEqual("period index", period.index(), this.ref.index);
				assertEqual("period start", period.start().getEpochSecond(), this.ref.start);
				assertEqual("period end", period.end().getEpochSecond(), this.ref.end);
			}
		}

		private void moveClock() {
			Instant now = this.clock.instant();
			long length = this.ref.end - this.ref.start;
			Instant to = switch (this.random.nextInt(10)) {
				case 0 -> now;
				case 1 -> now.plusNanos(1 + this.random.nextLong(10 * NANOS));
				case 2 -> Instant.ofEpochSecond(this.ref.end).plusNanos(this.random.nextInt(3) - 1);
				case 3 -> Instant.ofEpochSecond(this.ref.end).plusSeconds(this.random.nextLong(Math.max(1, 2 * length)));
				case 4 -> Instant.ofEpochSecond(this.ref.calendar.boundary(this.ref.index + 2 + this.random.nextInt(3)))
					.plusNanos(this.random.nextInt(3) - 1);
				case 5 -> now.minusNanos(1 + this.random.nextLong(Math.max(1, length) * NANOS));
				case 6 -> Instant.ofEpochSecond(this.ref.start).minusNanos(this.random.nextInt(2));
				case 7 -> now.plusSeconds(this.random.nextLong(40 * YEAR) - 20 * YEAR);
				default -> now.plusSeconds(this.random.nextLong(Math.max(1, length / 3)));
			};
			long second = Math.max(this.origin - 250 * YEAR, Math.min(this.origin + 250 * YEAR, to.getEpochSecond()));
			to = Instant.ofEpochSecond(second, to.getNano());
			this.clock.set(to);
			log("clock %s", to);
		}

		private void tryAcquire() {
			long n = (this.random.nextInt(20) == 0) ? this.random.nextInt(2) * (this.ref.limit + 1) : randomCost();
			if (n > this.ref.limit) {
				try {
					this.quota.tryAcquire(n);
					throw new AssertionError("tryAcquire(" + n + ") above the limit " + this.ref.limit + " was not refused");
				}
				catch (IllegalArgumentException expected) {
					log("tryAcquire(%d) -> IllegalArgumentException", n);
					return;
				}
			}
			if (n > 0) {
				this.ref.advance(nowSecond()); // (a try of nothing reads no clock)
			}
			boolean expected = n == 0 || (this.ref.line.isEmpty() && n <= this.ref.limit - this.ref.used);
			if (expected) {
				this.ref.used += n;
				this.ref.ledger(n, 0);
				this.ref.granted++;
			}
			else {
				this.ref.rejected++;
			}
			boolean actual = this.quota.tryAcquire(n);
			log("tryAcquire(%d) -> %s (reference %s)", n, actual, expected);
			equal("tryAcquire", actual, expected);
		}

		private void reserve() {
			long n = (this.random.nextInt(15) == 0) ? 0 : randomCost();
			if (n > 0) {
				this.ref.advance(nowSecond()); // (a claim of nothing reads the clock, but not the calendar)
			}
			long now = nowNanos();
			boolean atOnce = n == 0 || (this.ref.line.isEmpty() && n <= this.ref.limit - this.ref.used);
			long wait = atOnce ? 0 : this.ref.nanosUntil(this.ref.boundaryWhen(this.ref.line.size(), n), now);
			Duration maxWait = switch (this.random.nextInt(7)) {
				case 0 -> Duration.ZERO;
				case 1 -> Duration.ofNanos(wait);
				case 2 -> Duration.ofNanos(Math.max(0, wait - 1));
				case 3 -> Duration.ofSeconds(Long.MAX_VALUE);
				case 4 -> Duration.ofNanos(Long.MAX_VALUE);
				default -> Duration.ofNanos(this.random.nextLong(Math.max(1, Math.min(Long.MAX_VALUE / 4, wait * 2))));
			};
			long budget = AbstractReservation.saturatedNanos(maxWait);
			boolean unlimited = maxWait.getSeconds() > Long.MAX_VALUE / NANOS;
			RefClaim claim = new RefClaim(this.ids++, n, now, budget, unlimited);
			try {
				Reservation r = this.quota.reserve(n, maxWait);
				log("reserve(%d, %s) -> #%d accepted (reference wait %d)", n, maxWait, claim.id, wait);
				equal("accepted", true, wait <= budget);
				claim.reservation = r;
				if (atOnce) {
					if (n > 0) {
						this.ref.used += n;
						this.ref.ledger(n, 0);
						claim.coveredIn = this.ref.index;
					}
				}
				else {
					this.ref.line.add(claim);
				}
				this.ref.waiting++;
				this.open.add(claim);
			}
			catch (RateLimitExceededException ex) {
				log("reserve(%d, %s) -> refused after %s (reference wait %d)", n, maxWait, ex.getRetryAfter(), wait);
				equal("refused", true, wait > budget);
				assertEqual("retry-after", ex.getRetryAfter().toNanos(), wait);
				this.ref.rejected++;
			}
		}

		private void poll() {
			if (this.open.isEmpty()) {
				return;
			}
			RefClaim claim = this.open.get(this.random.nextInt(this.open.size()));
			long expected;
			boolean refused = false;
			if (claim.ready || claim.n == 0) {
				expected = 0; // (the quota does not look at the clock for these)
			}
			else {
				this.ref.advance(nowSecond());
				long now = nowNanos();
				if (claim.coveredIn != Long.MIN_VALUE) {
					expected = 0;
				}
				else {
					expected = this.ref.nanosUntil(this.ref.boundaryWhen(this.ref.line.indexOf(claim), 0), now);
					long left = claim.unlimited ? Long.MAX_VALUE : claim.budget - Math.max(0, now - claim.startNanos);
					refused = expected > left;
				}
			}
			try {
				long delay = claim.reservation.poll();
				log("poll #%d -> %d (reference %d%s)", claim.id, delay, expected, refused ? ", refused" : "");
				equal("refused", false, refused);
				assertEqual("poll #" + claim.id, delay, expected);
				if (delay == 0) {
					claim.ready = true;
					if (this.random.nextBoolean()) {
						claim.reservation.permit().close();
						log("permit #%d", claim.id);
						claim.done = true;
						this.ref.granted++;
						this.ref.waiting--;
						this.open.remove(claim);
					}
				}
			}
			catch (RateLimitExceededException ex) {
				log("poll #%d -> refused after %s (reference %d%s)", claim.id, ex.getRetryAfter(), expected,
						refused ? ", refused" : "");
				equal("refused", true, refused);
				assertEqual("retry-after", ex.getRetryAfter().toNanos(), expected);
				this.ref.rejected++;
				giveBack(claim);
			}
		}

		private void cancel() {
			if (this.open.isEmpty()) {
				return;
			}
			RefClaim claim = this.open.get(this.random.nextInt(this.open.size()));
			if (claim.n > 0) {
				this.ref.advance(nowSecond()); // (a claim of nothing gives nothing back and reads no clock)
			}
			boolean cancelled = claim.reservation.cancel();
			log("cancel #%d -> %s", claim.id, cancelled);
			equal("cancelled", cancelled, true);
			giveBack(claim);
		}

		private void giveBack(RefClaim claim) {
			this.open.remove(claim);
			this.ref.waiting--;
			claim.done = true;
			if (claim.n == 0) {
				return;
			}
			if (claim.coveredIn == Long.MIN_VALUE) {
				this.ref.line.remove(claim);
			}
			else if (claim.coveredIn == this.ref.index) {
				this.ref.giveBackToPeriod(claim.n);
			}
			this.ref.serve();
		}

		private void checkView() {
			this.ref.advance(nowSecond());
			long now = nowNanos();
			RateLimiterSnapshot s = this.quota.snapshot();
			long claimed = 0;
			long charged = 0;
			for (Object entry : this.ref.line) {
				if (entry instanceof RefClaim claim) {
					claimed += claim.n;
				}
				else {
					charged += (Long) entry;
				}
			}
			long available = this.ref.line.isEmpty() ? Math.max(0, this.ref.limit - this.ref.used) : 0;
			long owed = claimed + charged + Math.max(0, this.ref.used - this.ref.limit);
			long untilFull = (this.ref.line.isEmpty() && this.ref.used == 0) ? 0
					: this.ref.nanosUntil(this.ref.boundaryWhen(-1, 0), now);
			log("snapshot -> available %s, deficiency %s, waiting %d, untilFull %s, period %s", s.available(),
					s.deficiency(), s.waiting(), s.untilFull(), s.period());
			assertEqual("available", (long) s.available(), available);
			assertEqual("deficiency", (long) s.deficiency(), owed);
			assertEqual("waiting", s.waiting(), this.ref.waiting);
			assertEqual("untilFull", s.untilFull().toNanos(), untilFull);
			assertEqual("resetsAt", s.resetsAt().getEpochSecond(), this.ref.end);
			assertEqual("untilReset", s.untilReset().toNanos(), this.ref.nanosUntil(this.ref.end, now));
			assertEqual("limit", (long) s.limit(), this.ref.limit);
			assertEqual("rate", s.rate(), this.ref.limit);
			assertEqual("period", s.period().getSeconds(), this.ref.end - this.ref.start);
			assertEqual("granted", s.granted(), this.ref.granted);
			assertEqual("rejected", s.rejected(), this.ref.rejected);
			equal("idle", this.quota.isIdle(), available == this.ref.limit && owed == 0 && this.ref.waiting == 0);
		}

		private void equal(String what, boolean actual, boolean expected) {
			if (actual != expected) {
				throw new AssertionError(what + ": was " + actual + ", expected " + expected);
			}
		}

		private void log(String format, Object... args) {
			this.trace.add(String.format(format, args));
		}
	}
}
