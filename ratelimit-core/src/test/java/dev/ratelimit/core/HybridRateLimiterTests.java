package dev.ratelimit.core;

import java.time.Duration;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatIllegalArgumentException;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

class HybridRateLimiterTests {

	private final FakeClock clock = new FakeClock();

	private HybridRateLimiter.Builder pacer(long perSecond) {
		return HybridRateLimiter.builder().rate(perSecond, Duration.ofSeconds(1)).clock(this.clock);
	}

	private static long drain(HybridRateLimiter pacer) {
		long taken = 0;
		while (pacer.tryAcquire(1)) {
			taken++;
		}
		return taken;
	}

	private long pollEveryMillisecondFor(HybridRateLimiter pacer, Duration duration) {
		long taken = 0;
		for (long ms = 0; ms < duration.toMillis(); ms++) {
			this.clock.advance(Duration.ofMillis(1));
			taken += drain(pacer);
		}
		return taken;
	}

	@Test
	void aRefundAfterAGrantMakesTheOperationsAvailableAtOnceAndTheExcessGoesToTheWaitingPool() {
		HybridRateLimiter pacer = pacer(10).limit(10).burstRatio(1.0).build();
		assertThat(pacer.tryAcquire(4)).isTrue();
		assertThat(pacer.snapshot().available()).isEqualTo(6.0);
		pacer.refund(3);
		assertThat(pacer.snapshot().available()).isEqualTo(9.0);
		assertThat(pacer.behindSchedule()).isZero();
		pacer.refund(4); // more than was taken: the pools stay at their size, no time is lost (P1, P2)
		assertThat(pacer.snapshot().available()).isEqualTo(10.0);
		assertThat(pacer.behindSchedule()).isEqualTo(Duration.ofMillis(300));
	}

	@Test
	void aRefundCoversTheCallersInLineAtOnce() {
		HybridRateLimiter pacer = pacer(10).limit(10).burstRatio(1.0).build();
		assertThat(pacer.tryAcquire(10)).isTrue();
		Reservation first = pacer.reserve(2, Duration.ofSeconds(10));
		Reservation second = pacer.reserve(2, Duration.ofSeconds(10));
		assertThat(second.poll()).isEqualTo(Duration.ofMillis(400).toNanos());
		pacer.refund(3);
		assertThat(first.poll()).isZero();
		assertThat(second.poll()).isEqualTo(Duration.ofMillis(100).toNanos());
	}

	@Test
	void aChargeOfFiveOnAnEmptyTenPerSecondPacerMakesTheNextCallerWaitExactlyHalfASecondMore() {
		HybridRateLimiter pacer = pacer(10).limit(10).burstRatio(1.0).build();
		assertThat(pacer.tryAcquire(10)).isTrue();
		long without = pacer.reserve(1, Duration.ofDays(1)).poll();
		this.clock.advance(Duration.ofNanos(without)); // that caller gets its operation; the pools are empty
		pacer.charge(5);
		long with = pacer.reserve(1, Duration.ofDays(1)).poll();
		assertThat(with - without).isEqualTo(Duration.ofMillis(500).toNanos());
		assertThat(pacer.snapshot().deficiency()).isEqualTo(6.0);
	}

	@Test
	void aWaiterQueuedBeforeAChargeKeepsItsWait() {
		HybridRateLimiter pacer = pacer(10).limit(10).burstRatio(1.0).build();
		assertThat(pacer.tryAcquire(10)).isTrue();
		Reservation before = pacer.reserve(2, Duration.ofSeconds(10));
		assertThat(before.poll()).isEqualTo(Duration.ofMillis(200).toNanos());
		pacer.charge(25); // more than the pools hold: owed
		assertThat(before.poll()).isEqualTo(Duration.ofMillis(200).toNanos());
		Reservation after = pacer.reserve(1, Duration.ofSeconds(10));
		assertThat(after.poll()).isEqualTo(Duration.ofMillis(2_800).toNanos());
		this.clock.advance(Duration.ofMillis(200));
		assertThat(before.poll()).isZero();
	}

	@Test
	void refundAndChargeAreNotCallsAndCheckTheirArguments() {
		HybridRateLimiter pacer = pacer(10).limit(10).name("batch").stats(StatsRecorder.concurrent()).build();
		assertThat(pacer.tryAcquire(4)).isTrue();
		pacer.refund(0);
		pacer.charge(0);
		assertThat(pacer.snapshot().available()).isEqualTo(6.0);
		pacer.refund(4);
		pacer.charge(3);
		RateLimiterSnapshot s = pacer.snapshot();
		assertThat(s.granted()).isEqualTo(1);
		assertThat(s.rejected()).isZero();
		assertThatIllegalArgumentException().isThrownBy(() -> pacer.refund(-1)).withMessageContaining("n must be >= 0");
		assertThatIllegalArgumentException().isThrownBy(() -> pacer.charge(-1)).withMessageContaining("n must be >= 0");
		assertThatIllegalArgumentException().isThrownBy(() -> pacer.charge(Long.MAX_VALUE))
				.withMessageContaining("n (" + Long.MAX_VALUE + ")").withMessageContaining("'batch'");
		pacer.refund(Long.MAX_VALUE); // saturates into the waiting pool, never overflows
		assertThat(pacer.snapshot().available()).isEqualTo(11.0);
	}

	@Test
	void catchesUpATenthOfTheBacklogPerSecondWithBurstRatioOnePointOne() {
		HybridRateLimiter pacer = pacer(1000).burstRatio(1.1).build();
		this.clock.advance(Duration.ofSeconds(1));
		long taken = pollEveryMillisecondFor(pacer, Duration.ofSeconds(1));
		assertThat(taken).isBetween(1095L, 1105L);
		assertThat(pacer.behindSchedule()).isBetween(Duration.ofMillis(890), Duration.ofMillis(910));
	}

	@Test
	void neverCatchesUpWithBurstRatioOne() {
		HybridRateLimiter pacer = pacer(1000).burstRatio(1.0).build();
		this.clock.advance(Duration.ofSeconds(1));
		long taken = pollEveryMillisecondFor(pacer, Duration.ofSeconds(1));
		assertThat(taken).isBetween(1000L, 1002L);
		assertThat(pacer.behindSchedule()).isEqualTo(Duration.ofMillis(1001));
	}

	@ParameterizedTest
	@CsvSource({ "1, 10, 2.0", "100, 1, 2.0", "12000, 1, 12.0", "10000000, 1, 10000.0" })
	void sizesTheActivePoolAtOneMillisecondOrTwoOperations(long operations, long periodSeconds, double active) {
		HybridRateLimiter pacer = HybridRateLimiter.builder().rate(operations, Duration.ofSeconds(periodSeconds))
				.clock(this.clock).build();
		RateLimiterSnapshot snapshot = pacer.snapshot();
		assertThat(snapshot.limit()).isEqualTo(active);
		assertThat(snapshot.pools().active()).isEqualTo(active);
		assertThat(snapshot.pools().burst()).isZero();
		assertThat(snapshot.pools().waiting()).isZero();
		assertThat(snapshot.available()).isEqualTo(active);
		this.clock.advance(Duration.ofSeconds(periodSeconds * 100));
		RateLimiterSnapshot idle = pacer.snapshot();
		assertThat(idle.pools().burst()).isCloseTo(active * 0.1, within(1e-6));
	}

	@Test
	void isExactAtThreePerSecondOverALongRun() {
		HybridRateLimiter pacer = pacer(3).build();
		long taken = drain(pacer);
		for (int i = 0; i < 100_000; i++) {
			this.clock.advance(Duration.ofMillis(10));
			taken += drain(pacer);
		}
		// 1000 s at 3/s, plus the 2 operations of the full active pool at start
		assertThat(taken).isBetween(3001L, 3002L);
	}

	@Test
	void isExactAtSevenMillionPerSecondWhereWholeNanosecondsRunFast() {
		HybridRateLimiter pacer = pacer(7_000_000).build();
		long taken = drain(pacer);
		for (int i = 0; i < 100_000; i++) {
			this.clock.advanceNanos(1_000);
			taken += drain(pacer);
		}
		// 100 ms at 7,000,000/s = 700,000, plus the 7,000 operations of the full active pool
		assertThat(taken).isBetween(706_999L, 707_000L);
	}

	@Test
	void isExactAtOneOperationPerThousandSeconds() {
		HybridRateLimiter pacer = HybridRateLimiter.builder().rate(1, Duration.ofSeconds(1000)).burstRatio(1.0)
				.clock(this.clock).build();
		assertThat(drain(pacer)).isEqualTo(2);
		this.clock.advance(Duration.ofSeconds(999));
		assertThat(pacer.tryAcquire(1)).isFalse();
		this.clock.advance(Duration.ofSeconds(1));
		assertThat(pacer.tryAcquire(1)).isTrue();
	}

	@Test
	void refusesAtOnceWhenTheWaitExceedsTheBudgetAndKeepsNothing() {
		HybridRateLimiter pacer = pacer(1000).name("feed").burstRatio(1.0).build();
		drain(pacer);
		assertThatThrownBy(() -> pacer.acquire(2, Duration.ofMillis(1))).isInstanceOfSatisfying(
				RateLimitExceededException.class, (ex) -> {
					assertThat(ex.getBucket()).isEqualTo("feed");
					assertThat(ex.getRetryAfter()).isEqualTo(Duration.ofMillis(2));
				});
		this.clock.advance(Duration.ofMillis(2));
		assertThat(drain(pacer)).isEqualTo(2);
	}

	@Test
	void servesWaitersInOrder() {
		HybridRateLimiter pacer = pacer(1000).burstRatio(1.0).build();
		drain(pacer);
		Reservation first = pacer.reserve(2, Duration.ofSeconds(1));
		Reservation second = pacer.reserve(1, Duration.ofSeconds(1));
		assertThat(pacer.snapshot().waiting()).isEqualTo(2);
		assertThat(second.poll()).isEqualTo(3_000_000);
		this.clock.advance(Duration.ofMillis(2));
		assertThat(first.poll()).isZero();
		assertThat(second.poll()).isEqualTo(1_000_000);
		this.clock.advance(Duration.ofMillis(1));
		assertThat(second.poll()).isZero();
		first.permit().close();
		second.permit().close();
		assertThat(pacer.snapshot().waiting()).isZero();
	}

	@Test
	void aWaiterThatGivesUpKeepsNothingAndNobodyAheadGains() {
		HybridRateLimiter pacer = pacer(1000).burstRatio(1.0).build();
		drain(pacer);
		Reservation ahead = pacer.reserve(2, Duration.ofSeconds(1));
		Reservation quitter = pacer.reserve(2, Duration.ofSeconds(1));
		Reservation last = pacer.reserve(1, Duration.ofSeconds(1));
		assertThat(last.poll()).isEqualTo(5_000_000);
		assertThat(quitter.cancel()).isTrue();
		// contract revision 2: the caller behind moves up at once, the one ahead gains nothing
		assertThat(ahead.poll()).isEqualTo(2_000_000);
		assertThat(last.poll()).isEqualTo(3_000_000);
		assertThat(last.cancel()).isTrue();
		this.clock.advance(Duration.ofMillis(2));
		assertThat(ahead.poll()).isZero();
		ahead.permit().close();
		// nobody else claimed any of the schedule, and none of it was left unclaimed
		assertThat(pacer.snapshot().pools().waiting()).isZero();
		assertThat(pacer.snapshot().available()).isZero();
	}

	@Test
	void anInterruptedCallerNeverGoesThrough() {
		HybridRateLimiter pacer = pacer(1000).build();
		Thread.currentThread().interrupt();
		try {
			assertThatThrownBy(() -> pacer.acquire(1, Duration.ofSeconds(1))).isInstanceOf(InterruptedException.class);
			assertThat(Thread.currentThread().isInterrupted()).isTrue();
		}
		finally {
			Thread.interrupted();
		}
		assertThat(pacer.snapshot().available()).isEqualTo(2.0);
	}

	@Test
	void rejectsARequestLargerThanItsPoolsCanHold() {
		HybridRateLimiter pacer = pacer(1000).name("feed").burstRatio(2.0).build();
		assertThatIllegalArgumentException().isThrownBy(() -> pacer.tryAcquire(5))
				.withMessageContaining("at most 4 operations").withMessageContaining("'feed'");
	}

	@Test
	void changingTheRateKeepsTheBacklogInOperations() {
		HybridRateLimiter pacer = pacer(1000).burstRatio(1.0).build();
		this.clock.advance(Duration.ofSeconds(1));
		assertThat(pacer.snapshot().pools().waiting()).isEqualTo(1000.0);
		pacer.updateRate(500, Duration.ofSeconds(1));
		RateLimiterSnapshot after = pacer.snapshot();
		assertThat(after.pools().waiting()).isEqualTo(1000.0);
		assertThat(after.rate()).isEqualTo(500);
		assertThat(pacer.behindSchedule()).isEqualTo(Duration.ofSeconds(2));
		drain(pacer);
		long taken = pollEveryMillisecondFor(pacer, Duration.ofSeconds(1));
		assertThat(taken).isBetween(499L, 501L);
	}

	@Test
	void loweringTheLimitMovesTheExcessToTheWaitingPool() {
		HybridRateLimiter pacer = pacer(12000).build();
		pacer.updateLimit(4);
		RateLimiterSnapshot snapshot = pacer.snapshot();
		assertThat(snapshot.limit()).isEqualTo(4.0);
		assertThat(snapshot.available()).isEqualTo(4.4);
		assertThat(snapshot.pools().waiting()).isCloseTo(7.6, within(1e-9));
	}

	@Test
	void raisingTheBurstRatioLetsCallersCatchUpFaster() {
		HybridRateLimiter pacer = pacer(1000).burstRatio(1.0).build();
		this.clock.advance(Duration.ofSeconds(1));
		pacer.updateBurstRatio(1.5);
		long taken = pollEveryMillisecondFor(pacer, Duration.ofSeconds(1));
		assertThat(taken).isBetween(1495L, 1505L);
	}

	@ParameterizedTest
	@CsvSource({ "'12000,1.1', 12000, 1, 1.1", "'12K', 12000, 1, 1.1", "'2.5K, 1.5', 2500, 1, 1.5",
			"'1M,1.0', 1000000, 1, 1.0", "'0.5', 5, 10, 1.1", "'1G', 1000000000, 1, 1.1" })
	void parsesTheNosqlbenchSpecForm(String spec, long operations, long periodSeconds, double ratio) {
		HybridRateLimiter pacer = HybridRateLimiter.parse(spec);
		RateLimiterSnapshot snapshot = pacer.snapshot();
		assertThat(snapshot.rate()).isEqualTo(operations);
		assertThat(snapshot.period()).isEqualTo(Duration.ofSeconds(periodSeconds));
		assertThat(pacer.burstRatio()).isEqualTo(ratio);
	}

	@ParameterizedTest
	@ValueSource(strings = { "", "0", "-5", "12000,0.9", "12000,1.1,restart", "restart", "12X", "12000;1.1" })
	void rejectsAnythingElseShowingTheAcceptedForm(String spec) {
		assertThatIllegalArgumentException().isThrownBy(() -> HybridRateLimiter.parse(spec))
				.withMessageContaining("<rate>[,<burst-ratio>]");
	}

	@Test
	void rejectsBadBuilderArgumentsNamingThem() {
		assertThatIllegalArgumentException().isThrownBy(() -> pacer(0).build()).withMessageContaining("rate");
		assertThatIllegalArgumentException().isThrownBy(() -> pacer(10).burstRatio(0.9).build())
				.withMessageContaining("burstRatio");
		assertThatIllegalArgumentException().isThrownBy(() -> pacer(10).limit(0).build()).withMessageContaining("limit");
	}

	@Test
	void countsGrantedAndRejectedCalls() {
		HybridRateLimiter pacer = pacer(1000).stats(StatsRecorder.concurrent()).build();
		drain(pacer);
		RateLimiterSnapshot snapshot = pacer.snapshot();
		assertThat(snapshot.granted()).isEqualTo(2);
		assertThat(snapshot.rejected()).isEqualTo(1);
		assertThat(snapshot.cappedRelease()).isFalse();
		assertThat(snapshot.inFlight()).isZero();
	}

	// ---- the examples of issue 11 ---------------------------------------------------------------------

	@ParameterizedTest
	@CsvSource({ "999999937, 1.1, PT10S", "1000003, 1.1, PT3H", "12345, 1.3, P44D" })
	void keepsPacingLongAfterItsCountersWouldHaveSaturated(long perSecond, double ratio, Duration after) {
		HybridRateLimiter pacer = pacer(perSecond).burstRatio(ratio).build();
		drain(pacer);
		// a greedy caller that polls every millisecond keeps getting the schedule
		for (Duration step = Duration.ofMinutes(10); !after.isNegative(); after = after.minus(step)) {
			this.clock.advance(step);
			drain(pacer);
		}
		long taken = pollEveryMillisecondFor(pacer, Duration.ofMillis(100));
		// at least the schedule, at most the schedule at the burst ratio plus the pools
		assertThat(taken).isBetween(perSecond / 10 - 1, (long) (perSecond * ratio / 10) + pacer.maxOperations());
	}

	@Test
	void itsPoolsNeverHoldMoreThanTheirSizeAfterACancelledClaim() {
		HybridRateLimiter pacer = pacer(1000).limit(2).burstRatio(1.0).build();
		Reservation claim = pacer.reserve(2, Duration.ofSeconds(1));
		this.clock.advance(Duration.ofSeconds(5));
		claim.cancel();
		assertThat(drain(pacer)).isEqualTo(2);
	}

	@Test
	void itsPoolsNeverHoldMoreThanTheirSizeAfterAnIdleHour() {
		HybridRateLimiter pacer = pacer(1000).limit(2).burstRatio(1.1).build();
		this.clock.advance(Duration.ofHours(1));
		RateLimiterSnapshot full = pacer.snapshot();
		assertThat(full.pools().active()).isEqualTo(2.0);
		assertThat(full.pools().burst()).isCloseTo(0.2, within(1e-9));
		// active 2 + burst 0.2: two whole operations at once, never three
		assertThat(drain(pacer)).isEqualTo(2);
	}

	@Test
	void aRateChangeWithAClockThatReadsEarlierCreditsNoTimeTwice() {
		HybridRateLimiter pacer = pacer(1000).burstRatio(1.0).build();
		drain(pacer);
		this.clock.advance(Duration.ofMillis(10));
		assertThat(drain(pacer)).isEqualTo(2); // the active pool holds 2; 8 ms went to the waiting pool
		this.clock.advanceNanos(-Duration.ofMillis(5).toNanos());
		pacer.updateRate(1000, Duration.ofSeconds(1));
		this.clock.advance(Duration.ofMillis(5));
		assertThat(drain(pacer)).isZero();
		assertThat(pacer.behindSchedule()).isEqualTo(Duration.ofMillis(8));
	}

	@Test
	void maxBacklogBoundsTheCatchUpAfterAnIdleHourButNotTheReportedLag() {
		HybridRateLimiter pacer = pacer(20).burstRatio(1.5).limit(1).maxBacklog(Duration.ofSeconds(10)).build();
		drain(pacer);
		this.clock.advance(Duration.ofHours(1));
		assertThat(pacer.behindSchedule()).isGreaterThan(Duration.ofMinutes(59));
		drain(pacer);
		// the hour is not caught up at 30/s: only 10 s of it (200 operations) on top of the schedule,
		// so "the partner allows 20 calls per second" stays true after an idle hour
		long fortySeconds = pollEveryMillisecondFor(pacer, Duration.ofSeconds(40));
		assertThat((double) fortySeconds).isBetween(40 * 20.0, 40 * 20 + 200 + 1.5);
		assertThat(pacer.behindSchedule()).isGreaterThan(Duration.ofMinutes(59));
	}

	@Test
	void rejectsAHugeBurstRatioOrLimitNamingTheLargestAllowed() {
		assertThatIllegalArgumentException().isThrownBy(() -> pacer(1000).burstRatio(1e13).build())
				.withMessageContaining("burstRatio must be at most");
		assertThatIllegalArgumentException().isThrownBy(() -> pacer(1000).burstRatio(Double.NaN).build())
				.withMessageContaining("burstRatio");
		assertThatIllegalArgumentException().isThrownBy(() -> pacer(1_000_000_000).limit(Long.MAX_VALUE / 2).build())
				.withMessageContaining("limit must be at most");
		HybridRateLimiter pacer = pacer(1000).limit(1_000_000).build();
		assertThat(pacer.tryAcquire(1)).isTrue();
	}

	@Test
	void aClaimThatWaitsWithoutAThreadIsToldWhenACallerAheadGivesUp() {
		HybridRateLimiter pacer = pacer(1000).burstRatio(1.0).build();
		drain(pacer);
		Reservation ahead = pacer.reserve(2, Duration.ofSeconds(1));
		Reservation behind = pacer.reserve(1, Duration.ofSeconds(1));
		int[] woken = { 0 };
		behind.onWake(() -> woken[0]++);
		ahead.cancel();
		assertThat(woken[0]).isEqualTo(1);
		assertThat(behind.poll()).isEqualTo(Duration.ofMillis(1).toNanos());
	}

	/** P4: a refusal wakes nobody; a waiter that gives up wakes the claims behind it, once each, and none ahead. */
	@Test
	void aWaiterThatGivesUpWakesOnlyTheClaimsBehindIt() {
		HybridRateLimiter pacer = pacer(1000).burstRatio(1.0).build();
		drain(pacer);
		int[] woken = new int[4];
		Reservation[] waiters = new Reservation[4];
		for (int i = 0; i < waiters.length; i++) {
			waiters[i] = pacer.reserve(2, Duration.ofMillis(10));
			int which = i;
			waiters[i].onWake(() -> woken[which]++);
		}
		for (int i = 0; i < 50; i++) {
			assertThat(pacer.tryAcquire(1)).isFalse();
			assertThatThrownBy(() -> pacer.reserve(1, Duration.ofMillis(2)))
				.isInstanceOf(RateLimitExceededException.class);
		}
		assertThat(woken).containsExactly(0, 0, 0, 0);
		waiters[3].cancel(); // the last in line: nobody moves
		assertThat(woken).containsExactly(0, 0, 0, 0);
		waiters[1].cancel(); // a hole: the third moves up
		assertThat(woken).containsExactly(0, 0, 1, 0);
		assertThat(waiters[2].poll()).isEqualTo(Duration.ofMillis(4).toNanos());
		assertThat(waiters[0].poll()).isEqualTo(Duration.ofMillis(2).toNanos());
		// a refund or a retune may move anyone: every waiter is told
		pacer.refund(1);
		assertThat(woken).containsExactly(1, 0, 2, 0);
		pacer.updateRate(2000, Duration.ofSeconds(1));
		assertThat(woken).containsExactly(2, 0, 3, 0);
	}

	@Test
	void aResetFillsTheActivePoolForgetsTheBacklogAndWakesTheWaiters() {
		FakeClock clock = new FakeClock();
		HybridRateLimiter pacer = HybridRateLimiter.builder().rate(10, Duration.ofSeconds(1)).burstRatio(1.0).limit(5)
			.stats(StatsRecorder.concurrent()).clock(clock).build();
		clock.advance(Duration.ofHours(1)); // idle: the pools are full, the rest of the hour is behind schedule
		assertThat(pacer.behindSchedule()).isPositive();
		assertThat(pacer.tryAcquire(5)).isTrue();
		pacer.charge(2);
		Reservation waiter = pacer.reserve(3, Duration.ofHours(1));
		assertThat(waiter.poll()).isEqualTo(Duration.ofMillis(500).toNanos());

		pacer.reset();

		assertThat(pacer.behindSchedule()).isZero();
		assertThat(waiter.poll()).isZero(); // claimed again from the full active pool, the debt forgotten
		waiter.permit().close();
		RateLimiterSnapshot after = pacer.snapshot();
		assertThat(after.available()).isEqualTo(2.0);
		assertThat(after.granted()).isEqualTo(2);
		assertThat(pacer.tryAcquire(3)).isFalse();
		assertThat(pacer.tryAcquire(2)).isTrue();
	}
}
