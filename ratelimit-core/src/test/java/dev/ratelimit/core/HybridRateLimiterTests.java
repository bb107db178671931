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
		assertThat(quitter.cancel()).isTrue();
		assertThat(ahead.poll()).isEqualTo(2_000_000);
		assertThat(last.cancel()).isTrue();
		this.clock.advance(Duration.ofMillis(2));
		assertThat(ahead.poll()).isZero();
		ahead.permit().close();
		// the quitter's time went to the waiting pool: the schedule lost nothing
		assertThat(pacer.snapshot().pools().waiting()).isEqualTo(2.0);
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
}
