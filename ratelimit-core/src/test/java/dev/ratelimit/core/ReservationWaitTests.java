package dev.ratelimit.core;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Function;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The wait a granted claim records (AbstractReservation, R4): the time from its claim to its permit when,
 * and only when, it had to wait for tokens. Before R4 every reservation recorded the time to its permit,
 * so the {@code ratelimit.wait} timer of an asynchronous method (and of every Redis bucket, whose answer
 * takes a round trip) counted every granted call, with the microseconds between the claim and the permit.
 */
class ReservationWaitTests {

	private final FakeClock clock = new FakeClock();

	private final Waits waits = new Waits();

	private SharedTokenBucket bucket(long initial) {
		return SharedTokenBucket.builder().rate(1, Duration.ofMillis(1)).limit(10).initial(initial).clock(this.clock)
			.stats(this.waits).build();
	}

	private HybridRateLimiter pacer() {
		return HybridRateLimiter.builder().rate(1000, Duration.ofSeconds(1)).limit(10).burstRatio(1.0)
			.clock(this.clock).stats(this.waits).build();
	}

	@Test
	void aClaimCoveredWhenMadeRecordsNoWaitHoweverLateItsPermitIsTaken() {
		for (Function<ReservationWaitTests, RateLimiter> limiter : List.<Function<ReservationWaitTests, RateLimiter>>of(
				(t) -> t.bucket(10), (t) -> t.pacer())) {
			this.waits.recorded.clear();
			RateLimiter covered = limiter.apply(this);
			Reservation reservation = covered.reserve(1, Duration.ofSeconds(1));
			this.clock.advance(Duration.ofMillis(5)); // the caller is slow to poll: not a wait for tokens
			assertThat(reservation.poll()).isZero();
			this.clock.advance(Duration.ofMillis(5));
			reservation.permit().close();
			assertThat(this.waits.recorded).as(covered.getClass().getSimpleName()).containsExactly(0L);
		}
	}

	@Test
	void aClaimNotCoveredWhenMadeRecordsItsWaitEvenWhenItsFirstPollFindsItCovered() {
		SharedTokenBucket bucket = bucket(0);
		Reservation reservation = bucket.reserve(3, Duration.ofSeconds(1)); // 3 ms to wait
		this.clock.advance(Duration.ofMillis(4));
		assertThat(reservation.poll()).isZero();
		reservation.permit().close();
		assertThat(this.waits.recorded).containsExactly(4_000_000L);
	}

	@Test
	void aClaimToldToWaitRecordsTheTimeFromItsClaimToItsPermit() {
		HybridRateLimiter pacer = pacer();
		for (int i = 0; i < 10; i++) {
			assertThat(pacer.tryAcquire(1)).isTrue();
		}
		this.waits.recorded.clear();
		Reservation reservation = pacer.reserve(1, Duration.ofSeconds(1));
		long delay = reservation.poll();
		assertThat(delay).isPositive();
		this.clock.advanceNanos(delay);
		assertThat(reservation.poll()).isZero();
		reservation.permit().close();
		assertThat(this.waits.recorded).containsExactly(delay);
	}

	@Test
	void aCappedClaimThatWaitsForAReleaseRecordsItsWait() throws InterruptedException {
		SharedTokenBucket bucket = SharedTokenBucket.builder().rate(1, Duration.ofMillis(1)).limit(1)
			.cappedRelease(true).clock(this.clock).stats(this.waits).build();
		Permit held = bucket.acquire(1, Duration.ZERO);
		this.clock.advance(Duration.ofMillis(10)); // the rate covers the next claim, the ceiling does not
		Reservation reservation = bucket.reserve(1, Duration.ofSeconds(1));
		assertThat(reservation.poll()).isPositive();
		this.clock.advance(Duration.ofMillis(2));
		held.close();
		assertThat(reservation.poll()).isZero();
		reservation.permit().close();
		assertThat(this.waits.recorded).containsExactly(0L, 2_000_000L);
	}

	/** Records every grant's wait, in order. */
	private static final class Waits implements StatsRecorder {

		final List<Long> recorded = new CopyOnWriteArrayList<>();

		@Override
		public void recordGranted(long waitedNanos) {
			this.recorded.add(waitedNanos);
		}

		@Override
		public void recordRejected() {
		}

		@Override
		public long granted() {
			return this.recorded.size();
		}

		@Override
		public long rejected() {
			return 0;
		}
	}
	/**
	 * A {@code maxWait} too long for nanoseconds is no limit (the contract): a claim whose wait does not fit in
	 * nanoseconds either (33 tokens at 1 per 100 years) is accepted, and polls keep telling it to wait, years
	 * on, instead of refusing it at the first poll because its budget, counted down, fell below the saturated
	 * wait (found by the adversarial tests). (The pacer's limits keep its waits within nanoseconds.)
	 */
	@Test
	void aMaxWaitTooLongForNanosecondsNeverRunsOut() {
		SharedTokenBucket bucket = SharedTokenBucket.builder().rate(1, Duration.ofDays(365 * 100)).limit(33).initial(0)
			.clock(this.clock).build();
		Reservation reservation = bucket.reserve(33, Duration.ofSeconds(Long.MAX_VALUE));
		for (int year = 0; year < 5; year++) {
			assertThat(reservation.poll()).as("after %d years", year).isPositive();
			this.clock.advance(Duration.ofDays(365));
		}
		reservation.cancel();
		assertThat(bucket.snapshot().available()).isZero();
	}
}
