package dev.ratelimit.core;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The pacer under real threads on a fake clock that only a driver thread moves: tries, claims that
 * wait and give up, all at once, then everything settles. Whatever the interleaving, it grants at most
 * the schedule it made (its active pool at the start plus {@code rate * elapsed}: catching up never
 * makes time), leaves nobody waiting and nothing owed, and its pools never hold more than their size.
 */
class HybridRateLimiterConcurrencyTests {

	@ParameterizedTest
	@ValueSource(doubles = { 1.0, 1.5 })
	void grantsAtMostTheScheduleWhateverTheInterleaving(double burstRatio) throws Exception {
		boolean capped = false;
		FakeClock clock = new FakeClock();
		long limit = 20;
		HybridRateLimiter bucket = HybridRateLimiter.builder().rate(7, Duration.ofMillis(3)).limit(limit)
			.burstRatio(burstRatio).clock(clock).build();
		long start = clock.getAsLong();
		AtomicLong granted = new AtomicLong();
		AtomicLong inFlight = new AtomicLong();
		AtomicLong worstInFlight = new AtomicLong();
		AtomicBoolean stop = new AtomicBoolean();
		CountDownLatch done = new CountDownLatch(4);
		List<Thread> threads = new ArrayList<>();
		for (int t = 0; t < 4; t++) {
			long seed = t;
			threads.add(new Thread(() -> {
				SplittableRandom random = new SplittableRandom(seed);
				List<Reservation> claims = new ArrayList<>();
				while (!stop.get()) {
					long n = 1 + random.nextInt(5);
					switch (random.nextInt(4)) {
						case 0 -> {
							if (bucket.tryAcquire(n)) {
								take(n, capped, bucket, granted, inFlight, worstInFlight);
							}
						}
						case 1 -> {
							try {
								claims.add(bucket.reserve(n, Duration.ofMillis(random.nextInt(20))));
							}
							catch (RateLimitExceededException ex) {
								// refused: nothing kept
							}
						}
						default -> {
							if (claims.isEmpty()) {
								break;
							}
							Reservation claim = claims.remove(random.nextInt(claims.size()));
							settle(claim, random.nextBoolean(), capped, bucket, granted, inFlight, worstInFlight);
						}
					}
				}
				for (Reservation claim : claims) {
					settle(claim, false, capped, bucket, granted, inFlight, worstInFlight);
				}
				done.countDown();
			}));
		}
		threads.forEach(Thread::start);
		for (int step = 0; step < 10_000; step++) {
			clock.advanceNanos(50_000);
			LockSupport.parkNanos(20_000);
		}
		stop.set(true);
		done.await();
		long elapsed = clock.getAsLong() - start;
		double bound = limit + 7.0 * elapsed / Duration.ofMillis(3).toNanos();
		assertThat((double) granted.get()).isLessThanOrEqualTo(bound);
		RateLimiterSnapshot settled = bucket.snapshot();
		assertThat(settled.waiting()).isZero();
		assertThat(settled.deficiency()).isZero();
		assertThat(settled.available()).isLessThanOrEqualTo(limit * burstRatio);
	}

	private static void settle(Reservation claim, boolean tryToTake, boolean capped, HybridRateLimiter pacer,
			AtomicLong granted, AtomicLong inFlight, AtomicLong worst) {
		try {
			if (tryToTake && claim.poll() == 0) {
				claim.permit().close();
				granted.addAndGet(((AbstractReservation) claim).tokens());
				return;
			}
		}
		catch (RateLimitExceededException | IllegalStateException ex) {
			return; // refused while waiting: given back already
		}
		claim.cancel();
	}

	private static void take(long n, boolean capped, HybridRateLimiter pacer, AtomicLong granted, AtomicLong inFlight,
			AtomicLong worst) {
		granted.addAndGet(n);
	}
}
