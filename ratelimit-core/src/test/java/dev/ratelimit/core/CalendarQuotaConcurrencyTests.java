package dev.ratelimit.core;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import java.time.Instant;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

/**
 * Callers racing for one quota, period after period: tries, claims covered at once that are taken or
 * given back, claims refused. Whatever the interleaving, each period grants exactly its limit when
 * asked for more (Q1, Q5), and leaves nobody counted as waiting.
 */
class CalendarQuotaConcurrencyTests {

	private static final int THREADS = 4;

	private static final int CALLS = 3_000;

	private static final long LIMIT = 2_000;

	@Test
	void eachPeriodGrantsExactlyItsLimitToRacingCallers() throws Exception {
		ZoneId zone = ZoneId.of("Europe/Berlin");
		// three days around the change to summer time: 24, 23 and 24 hours
		Instant[] days = { Instant.parse("2026-03-28T09:00:00Z"), Instant.parse("2026-03-29T09:00:00Z"),
				Instant.parse("2026-03-30T09:00:00Z") };
		FakeWallClock clock = new FakeWallClock(days[0]);
		CalendarQuota quota = CalendarQuota.builder().limit(LIMIT).calendar(QuotaCalendar.Unit.DAY).zone(zone)
			.clock(clock).stats(StatsRecorder.concurrent()).build();
		AtomicLong calls = new AtomicLong();
		AtomicLong[] granted = new AtomicLong[days.length];
		for (int i = 0; i < days.length; i++) {
			granted[i] = new AtomicLong();
		}
		CyclicBarrier barrier = new CyclicBarrier(THREADS + 1);
		AtomicReference<Throwable> failure = new AtomicReference<>();
		List<Thread> threads = new ArrayList<>();
		for (int t = 0; t < THREADS; t++) {
			SplittableRandom random = new SplittableRandom(t);
			Thread thread = new Thread(() -> {
				try {
					for (int day = 0; day < days.length; day++) {
						barrier.await(30, TimeUnit.SECONDS);
						for (int i = 0; i < CALLS; i++) {
							long tokens = call(quota, random);
							granted[day].addAndGet(tokens);
							calls.addAndGet((tokens > 0) ? 1 : 0);
						}
						barrier.await(30, TimeUnit.SECONDS);
					}
				}
				catch (Throwable ex) {
					failure.compareAndSet(null, ex);
				}
			});
			thread.start();
			threads.add(thread);
		}
		for (int day = 0; day < days.length; day++) {
			clock.set(days[day]);
			barrier.await(30, TimeUnit.SECONDS); // go
			barrier.await(60, TimeUnit.SECONDS); // done
			assertThat(failure.get()).isNull();
			assertThat(granted[day]).as("day %d", day).hasValue(LIMIT);
			RateLimiterSnapshot s = quota.snapshot();
			assertThat(s.available()).isZero();
			assertThat(s.waiting()).isZero();
			assertThat(s.deficiency()).isZero();
		}
		for (Thread thread : threads) {
			thread.join(10_000);
		}
		assertThat(quota.snapshot().granted()).isEqualTo(calls.get()); // (calls, not tokens)
	}

	/** One call; the tokens it kept. */
	private static long call(CalendarQuota quota, SplittableRandom random) {
		switch (random.nextInt(3)) {
			case 0:
				return quota.tryAcquire() ? 1 : 0;
			case 1:
				try {
					Reservation r = quota.reserve(2, Duration.ZERO);
					if (random.nextBoolean()) {
						r.cancel();
						return 0;
					}
					assertThat(r.poll()).isZero();
					r.permit().close();
					return 2;
				}
				catch (RateLimitExceededException ex) {
					return 0;
				}
			default:
				try {
					quota.acquire(1, Duration.ZERO).close();
					return 1;
				}
				catch (RateLimitExceededException ex) {
					return 0;
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
					return 0;
				}
		}
	}
}
