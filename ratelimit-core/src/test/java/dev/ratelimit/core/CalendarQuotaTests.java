package dev.ratelimit.core;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Calendar quotas on a fake wall clock, on the days and months that matter: days of 23 and 25 hours,
 * February of a leap year, a clock set back, waiters at a boundary, debts, and the arguments.
 */
class CalendarQuotaTests {

	private static final ZoneId BERLIN = ZoneId.of("Europe/Berlin");

	private static CalendarQuota quota(long limit, QuotaCalendar.Unit unit, ZoneId zone, FakeWallClock clock) {
		return CalendarQuota.builder().name("quota").limit(limit).calendar(unit).zone(zone).clock(clock)
			.stats(StatsRecorder.concurrent()).build();
	}

	private static Instant berlin(String localDateTime) {
		return LocalDateTime.parse(localDateTime).atZone(BERLIN).toInstant();
	}

	private static Duration retryAfter(CalendarQuota quota, long n) {
		try {
			quota.acquire(n, Duration.ZERO).close();
		}
		catch (RateLimitExceededException ex) {
			return ex.getRetryAfter();
		}
		catch (InterruptedException ex) {
			throw new IllegalStateException(ex);
		}
		throw new AssertionError("acquire(" + n + ") was granted");
	}

	@ParameterizedTest
	@CsvSource({ "2026-03-29, 23", "2026-10-25, 25", "2026-06-15, 24" })
	void aThousandPerDayInBerlinGivesExactlyAThousandBetweenTwoMidnights(LocalDate day, int hours) {
		Instant midnight = day.atStartOfDay(BERLIN).toInstant();
		Instant next = day.plusDays(1).atStartOfDay(BERLIN).toInstant();
		assertThat(Duration.between(midnight, next)).isEqualTo(Duration.ofHours(hours));
		FakeWallClock clock = new FakeWallClock(midnight.minus(Duration.ofHours(3)));
		CalendarQuota quota = quota(1000, QuotaCalendar.Unit.DAY, BERLIN, clock);
		int before = 0;
		while (quota.tryAcquire()) {
			before++;
		}
		assertThat(before).isEqualTo(1000); // the day before's allowance, used up before its end
		clock.set(midnight.minusNanos(1));
		assertThat(retryAfter(quota, 1)).isEqualTo(Duration.ofNanos(1));
		// a call every 30 seconds from midnight to midnight, more than 1,000 in any day
		long granted = 0;
		for (Instant t = midnight; t.isBefore(next); t = t.plusSeconds(30)) {
			clock.set(t);
			if (quota.tryAcquire()) {
				granted++;
			}
			else if (t.getEpochSecond() % 3600 == 0) {
				assertThat(retryAfter(quota, 1)).isEqualTo(Duration.between(t, next));
			}
		}
		clock.set(next.minusNanos(1));
		assertThat(quota.tryAcquire()).isFalse();
		assertThat(granted).isEqualTo(1000);
		assertThat(quota.snapshot().resetsAt()).isEqualTo(next);
		assertThat(quota.snapshot().untilReset()).isEqualTo(Duration.ofNanos(1));
		assertThat(quota.currentPeriod().start()).isEqualTo(midnight);
		assertThat(quota.currentPeriod().length()).isEqualTo(Duration.ofHours(hours));
		assertThat(quota.snapshot().period()).isEqualTo(Duration.ofHours(hours));
		clock.set(next);
		assertThat(quota.snapshot().available()).isEqualTo(1000);
		assertThat(quota.currentPeriod().start()).isEqualTo(next);
	}

	@Test
	void aCallerWaitsForMidnightOnlyWhenItsMaxWaitReachesIt() {
		FakeWallClock clock = new FakeWallClock(berlin("2026-10-25T23:00:00"));
		CalendarQuota quota = quota(1, QuotaCalendar.Unit.DAY, BERLIN, clock);
		assertThat(quota.tryAcquire()).isTrue();
		assertThatThrownBy(() -> quota.reserve(1, Duration.ofMinutes(59)))
			.isInstanceOfSatisfying(RateLimitExceededException.class,
					(ex) -> assertThat(ex.getRetryAfter()).isEqualTo(Duration.ofHours(1)));
		Reservation waiter = quota.reserve(1, Duration.ofHours(1));
		assertThat(waiter.poll()).isEqualTo(Duration.ofHours(1).toNanos());
		clock.set(berlin("2026-10-25T23:59:59.999999999"));
		assertThat(waiter.poll()).isEqualTo(1);
		clock.set(berlin("2026-10-26T00:00:00"));
		assertThat(waiter.poll()).isZero();
		waiter.permit().close();
		assertThat(quota.tryAcquire()).isFalse(); // the waiter had the new day's token
		assertThat(quota.snapshot().granted()).isEqualTo(2);
		assertThat(quota.snapshot().rejected()).isEqualTo(2);
	}

	@Test
	void aMonthQuotaIsExactInFebruaryOfALeapYear() {
		FakeWallClock clock = new FakeWallClock(berlin("2028-01-31T23:59:59.999999999"));
		CalendarQuota quota = quota(100, QuotaCalendar.Unit.MONTH, BERLIN, clock);
		assertThat(quota.tryAcquire(100)).isTrue(); // January's
		clock.set(berlin("2028-02-01T00:00:00"));
		assertThat(quota.tryAcquire(99)).isTrue();
		assertThat(quota.currentPeriod().length()).isEqualTo(Duration.ofDays(29));
		clock.set(berlin("2028-02-29T12:00:00"));
		assertThat(quota.tryAcquire(2)).isFalse();
		assertThat(retryAfter(quota, 2)).isEqualTo(Duration.ofHours(12));
		clock.set(berlin("2028-02-29T23:59:59.999999999"));
		assertThat(quota.tryAcquire(1)).isTrue();
		assertThat(quota.tryAcquire(1)).isFalse();
		assertThat(quota.snapshot().untilFull()).isEqualTo(Duration.ofNanos(1));
		clock.set(berlin("2028-03-01T00:00:00"));
		assertThat(quota.snapshot().available()).isEqualTo(100);
		assertThat(quota.currentPeriod().length()).isEqualTo(Duration.ofDays(31).minusHours(1)); // summer time on the 26th
		QuotaCalendar months = QuotaCalendar.of(QuotaCalendar.Unit.MONTH, ZoneOffset.UTC);
		assertThat(months.periodOf(Instant.parse("2027-02-10T00:00:00Z")).length()).isEqualTo(Duration.ofDays(28));
		assertThat(months.periodOf(Instant.parse("2100-02-10T00:00:00Z")).length()).isEqualTo(Duration.ofDays(28));
		assertThat(months.periodOf(Instant.parse("2000-02-10T00:00:00Z")).length()).isEqualTo(Duration.ofDays(29));
	}

	@Test
	void aWallClockSetBackNeverOpensAPeriodTwice() {
		FakeWallClock clock = new FakeWallClock(berlin("2026-06-16T00:10:00"));
		CalendarQuota quota = quota(5, QuotaCalendar.Unit.DAY, BERLIN, clock);
		assertThat(quota.tryAcquire(5)).isTrue();
		clock.set(berlin("2026-06-15T23:50:00")); // the day before, never used
		assertThat(quota.tryAcquire()).isFalse();
		assertThat(retryAfter(quota, 1)).isEqualTo(Duration.ofHours(24).plusMinutes(10));
		assertThat(quota.currentPeriod().start()).isEqualTo(berlin("2026-06-16T00:00:00"));
		clock.set(berlin("2026-06-17T00:00:00"));
		assertThat(quota.tryAcquire(5)).isTrue();
	}

	@Test
	void waitersAreServedInOrderAndMoveUpWhenOneAheadGivesUp() {
		FakeWallClock clock = new FakeWallClock(Instant.parse("2026-01-01T10:30:00Z"));
		CalendarQuota quota = quota(3, QuotaCalendar.Unit.HOUR, ZoneOffset.UTC, clock);
		assertThat(quota.tryAcquire(3)).isTrue();
		Reservation a = quota.reserve(2, Duration.ofHours(3));
		Reservation b = quota.reserve(2, Duration.ofHours(3));
		Reservation c = quota.reserve(1, Duration.ofHours(3));
		assertThat(c.poll()).isEqualTo(Duration.ofMinutes(90).toNanos()); // behind b, who does not fit at 11:00
		clock.set(Instant.parse("2026-01-01T11:00:00Z"));
		assertThat(a.poll()).isZero();
		assertThat(b.poll()).isEqualTo(Duration.ofHours(1).toNanos());
		assertThat(c.poll()).isEqualTo(Duration.ofHours(1).toNanos()); // one token is left, but b is ahead
		assertThat(quota.tryAcquire(1)).isFalse();
		assertThat(quota.snapshot().deficiency()).isEqualTo(3);
		List<String> woken = new ArrayList<>();
		c.onWake(() -> woken.add("c"));
		b.cancel();
		assertThat(woken).containsExactly("c");
		assertThat(c.poll()).isZero();
		a.permit().close();
		c.permit().close();
		assertThat(quota.snapshot().available()).isZero();
		assertThat(quota.snapshot().waiting()).isZero();
	}

	@Test
	void aDebtIsPaidByTheAllowancesOfTheFollowingPeriods() {
		FakeWallClock clock = new FakeWallClock(Instant.parse("2026-01-01T12:00:00Z"));
		CalendarQuota quota = quota(10, QuotaCalendar.Unit.DAY, ZoneOffset.UTC, clock);
		quota.charge(25);
		assertThat(quota.snapshot().deficiency()).isEqualTo(15);
		clock.set(Instant.parse("2026-01-02T00:00:00Z"));
		assertThat(quota.snapshot().available()).isZero();
		assertThat(quota.snapshot().deficiency()).isEqualTo(5);
		assertThat(quota.snapshot().untilFull()).isEqualTo(Duration.ofDays(2));
		clock.set(Instant.parse("2026-01-03T00:00:00Z"));
		assertThat(quota.snapshot().available()).isEqualTo(5);
		quota.refund(100); // never above the limit
		assertThat(quota.snapshot().available()).isEqualTo(10);
	}

	@Test
	void anHourThatWinterTimeRepeatsIsOnePeriodAndASkippedDayIsNone() {
		QuotaCalendar hours = QuotaCalendar.of(QuotaCalendar.Unit.HOUR, BERLIN);
		QuotaCalendar.Period repeated = hours.periodOf(Instant.parse("2026-10-25T01:30:00Z")); // 02:30 CET
		assertThat(repeated.start()).isEqualTo(Instant.parse("2026-10-25T00:00:00Z")); // 02:00 CEST
		assertThat(repeated.length()).isEqualTo(Duration.ofHours(2));
		QuotaCalendar.Period skipped = hours.periodOf(Instant.parse("2026-03-29T01:00:00Z")); // 03:00 CEST
		assertThat(skipped.start()).isEqualTo(Instant.parse("2026-03-29T01:00:00Z"));
		assertThat(hours.periodOf(skipped.start().minusNanos(1)).length()).isEqualTo(Duration.ofHours(1));
		ZoneId apia = ZoneId.of("Pacific/Apia");
		QuotaCalendar days = QuotaCalendar.of(QuotaCalendar.Unit.DAY, apia);
		QuotaCalendar.Period dec29 = days.periodOf(LocalDateTime.parse("2011-12-29T12:00").atZone(apia).toInstant());
		QuotaCalendar.Period dec31 = days.next(dec29);
		assertThat(dec31.index() - dec29.index()).isEqualTo(2); // 30 December 2011 had no instant in Apia
		assertThat(dec29.end()).isEqualTo(dec31.start());
		assertThat(dec31.start()).isEqualTo(LocalDate.parse("2011-12-31").atStartOfDay(apia).toInstant());
		QuotaCalendar weeks = QuotaCalendar.of(QuotaCalendar.Unit.WEEK, ZoneOffset.UTC);
		assertThat(weeks.periodOf(Instant.parse("2026-11-29T23:59:59Z")).start())
			.isEqualTo(Instant.parse("2026-11-23T00:00:00Z")); // a Sunday belongs to the week of the Monday before
	}

	@Test
	void aQuotaHasNoRate() {
		CalendarQuota quota = quota(10, QuotaCalendar.Unit.DAY, BERLIN, new FakeWallClock(Instant.EPOCH));
		assertThatIllegalArgumentException().isThrownBy(() -> quota.updateRate(5, Duration.ofSeconds(1)))
			.withMessageContaining("'quota' is a calendar quota: it has no rate")
			.withMessageContaining("change the limit");
	}

	@Test
	void badArgumentsAreRefusedNamingThem() {
		FakeWallClock clock = new FakeWallClock(Instant.EPOCH);
		assertThatIllegalArgumentException()
			.isThrownBy(() -> CalendarQuota.builder().calendar(QuotaCalendar.Unit.DAY).clock(clock).build())
			.withMessageContaining("limit must be set");
		assertThatIllegalArgumentException()
			.isThrownBy(() -> CalendarQuota.builder().limit((1L << 50) + 1).calendar(QuotaCalendar.Unit.DAY).build())
			.withMessageContaining("limit must be between 1 and 1125899906842624");
		assertThatIllegalArgumentException().isThrownBy(() -> CalendarQuota.builder().limit(0).calendar(QuotaCalendar.Unit.DAY).build())
			.withMessageContaining("limit must be between 1");
		assertThatIllegalArgumentException().isThrownBy(() -> CalendarQuota.builder().limit(1).build())
			.withMessageContaining("calendar must be set: one of minute | hour | day | week | month | year");
		assertThatIllegalArgumentException().isThrownBy(() -> QuotaCalendar.Unit.parse("fortnight"))
			.withMessage("calendar must be one of minute | hour | day | week | month | year, was fortnight");
		assertThat(QuotaCalendar.Unit.parse("Month")).isEqualTo(QuotaCalendar.Unit.MONTH);
		CalendarQuota quota = quota(10, QuotaCalendar.Unit.DAY, BERLIN, clock);
		assertThatIllegalArgumentException().isThrownBy(() -> quota.tryAcquire(11))
			.withMessageContaining("n must be at most 10 tokens");
		assertThatIllegalArgumentException().isThrownBy(() -> quota.reserve(-1, Duration.ZERO))
			.withMessageContaining("n must be >= 0");
		assertThatIllegalArgumentException().isThrownBy(() -> quota.updateLimit(0)).withMessageContaining("limit");
		assertThatIllegalArgumentException().isThrownBy(() -> quota.charge((1L << 62) + 1)).withMessageContaining("n (");
		assertThat(quota.snapshot().available()).isEqualTo(10); // nothing taken by the refused charge
	}

	@Test
	void concurrentCallersGetExactlyTheLimitOfAPeriod() throws InterruptedException {
		FakeWallClock clock = new FakeWallClock(Instant.parse("2026-05-05T08:00:00Z"));
		CalendarQuota quota = quota(10_000, QuotaCalendar.Unit.DAY, ZoneOffset.UTC, clock);
		AtomicLong granted = new AtomicLong();
		CountDownLatch start = new CountDownLatch(1);
		List<Thread> threads = new ArrayList<>();
		for (int i = 0; i < 4; i++) {
			Thread thread = new Thread(() -> {
				try {
					start.await();
				}
				catch (InterruptedException ex) {
					return;
				}
				for (int j = 0; j < 6_000; j++) {
					if (quota.tryAcquire()) {
						granted.incrementAndGet();
					}
				}
			});
			thread.start();
			threads.add(thread);
		}
		start.countDown();
		for (Thread thread : threads) {
			thread.join(60_000);
		}
		assertThat(granted).hasValue(10_000);
		assertThat(quota.snapshot().granted()).isEqualTo(10_000);
		assertThat(quota.snapshot().rejected()).isEqualTo(14_000);
	}

	@Test
	void aResetGivesTheWholeAllowanceAgainAndServesTheWaiters() {
		FakeWallClock clock = new FakeWallClock(Instant.parse("2026-01-01T12:00:00Z"));
		CalendarQuota quota = quota(10, QuotaCalendar.Unit.DAY, ZoneOffset.UTC, clock);
		assertThat(quota.tryAcquire(8)).isTrue();
		Reservation early = quota.reserve(2, Duration.ZERO); // covered at once
		quota.charge(5); // a debt, paid from tomorrow's allowance
		Reservation waiter = quota.reserve(4, Duration.ofDays(3));
		assertThat(waiter.poll()).isPositive();
		long granted = quota.snapshot().granted();

		quota.reset();

		assertThat(waiter.poll()).isZero(); // served at once from the whole allowance, the debt forgotten
		waiter.permit().close();
		assertThat(quota.snapshot().available()).isEqualTo(6);
		early.cancel(); // covered before the reset: its tokens went with it, nothing to give back
		assertThat(quota.snapshot().available()).isEqualTo(6);
		assertThat(quota.snapshot().granted()).isEqualTo(granted + 1);
		assertThat(quota.snapshot().resetsAt()).isEqualTo(Instant.parse("2026-01-02T00:00:00Z"));
	}
}
