package dev.ratelimit.core;

import java.time.DayOfWeek;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneId;
import java.time.ZonedDateTime;
import java.time.temporal.ChronoUnit;
import java.time.temporal.TemporalAdjusters;
import java.time.zone.ZoneOffsetTransition;
import java.time.zone.ZoneRules;
import java.util.Locale;
import java.util.Objects;

/**
 * The calendar of a {@link CalendarQuota}: periods of one {@link Unit} (a minute, an hour, a day, a
 * week starting on Monday, a month or a year) of the local time in a zone, and the instants at which
 * they begin.
 *
 * <pre>{@code
 * QuotaCalendar days = QuotaCalendar.of(QuotaCalendar.Unit.DAY, ZoneId.of("Europe/Berlin"));
 * QuotaCalendar.Period today = days.periodOf(Instant.parse("2026-03-29T12:00:00Z"));
 * today.start();   // 2026-03-28T23:00:00Z, midnight in Berlin (CET)
 * today.end();     // 2026-03-29T22:00:00Z, the next midnight (CEST): a day of 23 hours
 * }</pre>
 *
 * <p>Periods are numbered by their local start: period {@code k} of a calendar of days is the
 * {@code k}-th day after 1970-01-01 (negative before), of months the {@code k}-th month after January
 * 1970, of weeks the {@code k}-th week after the one starting on Monday 1969-12-29. Period {@code k}
 * begins at the <em>boundary</em> {@code b(k)}: the first instant at which the local time in the zone
 * reaches the period's local start, as {@code java.time} has the zone's rules. When that local time
 * falls in a gap (clocks moved forward over it, as Sao Paulo's midnight in some years, or Apia's whole
 * 30 December 2011), the boundary is the instant of the transition, when the local time jumps past it
 * ({@link java.time.LocalDate#atStartOfDay(ZoneId)}'s reading); when it falls in an overlap (clocks
 * moved back), the boundary is its first occurrence. So an hour that a change to winter time repeats
 * is one period of two hours, as the day that contains it is one day of 25 hours, and a period whose
 * local times were skipped entirely is empty (it has no instant). An instant {@code t} belongs to the
 * period {@code k} with {@code b(k) <= t < b(k + 1)}: periods are contiguous, ordered, and every
 * instant belongs to exactly one, also where a zone's historic offsets moved the local time back across
 * the start of a period (there the local time alone would name an earlier period again).
 *
 * <p>Boundaries are whole seconds (zone offsets are whole seconds). Instances are immutable and
 * thread-safe.
 */
public final class QuotaCalendar {

	private final Unit unit;

	private final ZoneId zone;

	private final ZoneRules rules;

	private QuotaCalendar(Unit unit, ZoneId zone) {
		this.unit = Objects.requireNonNull(unit, "unit");
		this.zone = Objects.requireNonNull(zone, "zone");
		this.rules = zone.getRules();
	}

	/**
	 * The calendar of {@code unit} in {@code zone}.
	 *
	 * @param unit the length of a period
	 * @param zone the zone whose local time the periods follow
	 * @return the calendar
	 * @throws IllegalArgumentException when an argument is {@code null}
	 */
	public static QuotaCalendar of(Unit unit, ZoneId zone) {
		if (unit == null) {
			throw new InvalidArgumentException("calendar", null, null, null,
					"calendar must be one of " + Unit.names() + ", was null");
		}
		if (zone == null) {
			throw new InvalidArgumentException("zone", null, null, null,
					"zone must be a time zone (e.g. UTC or Europe/Berlin), was null");
		}
		return new QuotaCalendar(unit, zone);
	}

	/**
	 * The unit of the periods.
	 *
	 * @return the unit
	 */
	public Unit unit() {
		return this.unit;
	}

	/**
	 * The zone whose local time the periods follow.
	 *
	 * @return the zone
	 */
	public ZoneId zone() {
		return this.zone;
	}

	/**
	 * The period that contains {@code instant}.
	 *
	 * @param instant the instant
	 * @return its period: {@code start() <= instant < end()}
	 */
	public Period periodOf(Instant instant) {
		long second = instant.getEpochSecond();
		// boundaries are whole seconds: t >= b exactly when t's second >= b
		return periodOfSecond(second);
	}

	/**
	 * The period that contains the second {@code epochSecond} (every instant within it).
	 *
	 * @param epochSecond seconds since 1970-01-01T00:00Z
	 * @return its period
	 */
	Period periodOfSecond(long epochSecond) {
		LocalDateTime local = ZonedDateTime.ofInstant(Instant.ofEpochSecond(epochSecond), this.zone).toLocalDateTime();
		long index = indexOf(local);
		// the local time names the period but for two cases: it lies in a period whose boundary is later than
		// the instant (a gap that did not start at the period's start), or the local time went back across a
		// boundary that was already reached
		long start = boundary(index);
		while (start > epochSecond) {
			index--;
			start = boundary(index);
		}
		long end = boundary(index + 1);
		while (end <= epochSecond) {
			index++;
			start = end;
			end = boundary(index + 1);
		}
		return new Period(index, start, end);
	}

	/**
	 * The period that follows {@code period} (the next one that is not empty).
	 *
	 * @param period a period of this calendar
	 * @return the next period, starting at {@code period.end()}
	 */
	public Period next(Period period) {
		return periodOfSecond(period.endSecond);
	}

	/**
	 * The first period whose number is {@code index} or more and that is not empty.
	 *
	 * @param index a period's number
	 * @return that period
	 */
	Period periodFrom(long index) {
		return periodOfSecond(boundary(index));
	}

	/**
	 * The most periods of this unit that 400 years hold: beyond them a wait is "never".
	 *
	 * @return the count
	 */
	long periodsIn400Years() {
		return this.unit.per400Years;
	}

	/** The number of the period whose local start is the local time's, truncated to the unit. */
	private long indexOf(LocalDateTime local) {
		LocalDateTime start = switch (this.unit) {
			case MINUTE -> local.truncatedTo(ChronoUnit.MINUTES);
			case HOUR -> local.truncatedTo(ChronoUnit.HOURS);
			case DAY -> local.toLocalDate().atStartOfDay();
			case WEEK -> local.toLocalDate().with(TemporalAdjusters.previousOrSame(DayOfWeek.MONDAY)).atStartOfDay();
			case MONTH -> local.toLocalDate().with(TemporalAdjusters.firstDayOfMonth()).atStartOfDay();
			case YEAR -> local.toLocalDate().with(TemporalAdjusters.firstDayOfYear()).atStartOfDay();
		};
		// both on the unit's grid: the count of whole units between them is exact
		return this.unit.chronoUnit.between(this.unit.origin, start);
	}

	/** The local time at which period {@code index} starts. */
	private LocalDateTime localStart(long index) {
		return this.unit.origin.plus(index, this.unit.chronoUnit);
	}

	/**
	 * {@code b(index)} in epoch seconds: the first instant at which the local time reaches the period's
	 * local start (a gap: the transition; an overlap: the earlier offset, its first occurrence).
	 */
	long boundary(long index) {
		LocalDateTime start = localStart(index);
		ZoneOffsetTransition transition = this.rules.getTransition(start);
		if (transition != null && transition.isGap()) {
			return transition.toEpochSecond();
		}
		// not in a gap: ZonedDateTime.of takes the earlier offset in an overlap
		return ZonedDateTime.of(start, this.zone).toEpochSecond();
	}

	@Override
	public boolean equals(Object other) {
		return (other instanceof QuotaCalendar that) && this.unit == that.unit && this.zone.equals(that.zone);
	}

	@Override
	public int hashCode() {
		return this.unit.hashCode() * 31 + this.zone.hashCode();
	}

	@Override
	public String toString() {
		return this.unit.toString() + " in " + this.zone;
	}

	/**
	 * The length of a calendar period.
	 */
	public enum Unit {

		/** A minute of local time. */
		MINUTE(ChronoUnit.MINUTES, 400L * 366 * 24 * 60),

		/** An hour of local time (an hour that a change to winter time repeats is one period). */
		HOUR(ChronoUnit.HOURS, 400L * 366 * 24),

		/** A day, from local midnight to local midnight. */
		DAY(ChronoUnit.DAYS, 400L * 366),

		/** A week, from Monday's local midnight to the next Monday's. */
		WEEK(ChronoUnit.WEEKS, 400L * 53),

		/** A month, from the local midnight of its first day to the next month's. */
		MONTH(ChronoUnit.MONTHS, 400L * 12),

		/** A year, from the local midnight of 1 January to the next year's. */
		YEAR(ChronoUnit.YEARS, 400L);

		final ChronoUnit chronoUnit;

		final long per400Years;

		/** The local start of period 0: 1970-01-01, or for weeks Monday 1969-12-29. */
		final LocalDateTime origin;

		Unit(ChronoUnit chronoUnit, long per400Years) {
			this.chronoUnit = chronoUnit;
			this.origin = (chronoUnit == ChronoUnit.WEEKS) ? LocalDate.of(1969, 12, 29).atStartOfDay()
					: LocalDate.of(1970, 1, 1).atStartOfDay();
			this.per400Years = per400Years;
		}

		/**
		 * The unit's nominal length, as {@link ChronoUnit#getDuration()} estimates it (a month is a twelfth
		 * of a mean Gregorian year): for showing a period without an instant, never for boundaries.
		 *
		 * @return the nominal length
		 */
		public Duration nominalLength() {
			return this.chronoUnit.getDuration();
		}

		/**
		 * The unit named as in the configuration: {@code minute}, {@code hour}, {@code day}, {@code week},
		 * {@code month} or {@code year}, in any case.
		 *
		 * @param name the name
		 * @return the unit
		 * @throws IllegalArgumentException listing the accepted names, for any other
		 */
		public static Unit parse(String name) {
			if (name != null) {
				for (Unit unit : values()) {
					if (unit.name().equalsIgnoreCase(name.trim())) {
						return unit;
					}
				}
			}
			throw new InvalidArgumentException("calendar", name, null, null,
					"calendar must be one of " + names() + ", was " + name);
		}

		/**
		 * The accepted names, in order, for messages.
		 *
		 * @return e.g. {@code "minute | hour | day | week | month | year"}
		 */
		public static String names() {
			StringBuilder names = new StringBuilder();
			for (Unit unit : values()) {
				names.append((names.length() == 0) ? "" : " | ").append(unit);
			}
			return names.toString();
		}

		@Override
		public String toString() {
			return name().toLowerCase(Locale.ROOT);
		}
	}

	/**
	 * One period of a calendar: its number and the boundaries where it starts and ends.
	 */
	public static final class Period {

		private final long index;

		final long startSecond;

		final long endSecond;

		Period(long index, long startSecond, long endSecond) {
			this.index = index;
			this.startSecond = startSecond;
			this.endSecond = endSecond;
		}

		/**
		 * The period's number (see {@link QuotaCalendar}): later periods have larger numbers; numbers of
		 * empty periods are skipped.
		 *
		 * @return the number
		 */
		public long index() {
			return this.index;
		}

		/**
		 * The boundary where the period starts (inclusive).
		 *
		 * @return the start
		 */
		public Instant start() {
			return Instant.ofEpochSecond(this.startSecond);
		}

		/**
		 * The boundary where the period ends and the next one starts (exclusive).
		 *
		 * @return the end
		 */
		public Instant end() {
			return Instant.ofEpochSecond(this.endSecond);
		}

		/**
		 * The period's length: 23 or 25 hours for a day with a change of offset, 29 days for February in a
		 * leap year.
		 *
		 * @return the length
		 */
		public Duration length() {
			return Duration.ofSeconds(this.endSecond - this.startSecond);
		}

		@Override
		public boolean equals(Object other) {
			return (other instanceof Period that) && this.index == that.index && this.startSecond == that.startSecond
					&& this.endSecond == that.endSecond;
		}

		@Override
		public int hashCode() {
			return Long.hashCode(this.index) * 31 + Long.hashCode(this.startSecond);
		}

		@Override
		public String toString() {
			return "#" + this.index + " [" + start() + ", " + end() + ")";
		}
	}
}
