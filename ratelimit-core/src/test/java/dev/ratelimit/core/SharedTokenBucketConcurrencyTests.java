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
 * Real threads racing on a fake clock that only a driver thread moves: tries, claims that wait and
 * give up, grants and releases all at once, then everything settles. Whatever the interleaving, the
 * bucket hands out at most {@code limit + rate * elapsed} (exact: time is fake), in capped mode never
 * lets more than {@code limit} be in flight, leaves nobody waiting and nothing owed, and is full again
 * after an idle period. A busy machine only changes the interleaving, never the bounds.
 */
class SharedTokenBucketConcurrencyTests {

	@ParameterizedTest
	@ValueSource(booleans = { false, true })
	void keepsTheBoundAndEndsFullWhateverTheInterleaving(boolean capped) throws Exception {
		FakeClock clock = new FakeClock();
		long limit = 20;
		SharedTokenBucket bucket = SharedTokenBucket.builder().rate(7, Duration.ofMillis(3)).limit(limit)
				.cappedRelease(capped).clock(clock).build();
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
		assertThat(worstInFlight.get()).isLessThanOrEqualTo(capped ? limit : Long.MAX_VALUE);
		RateLimiterSnapshot settled = bucket.snapshot();
		assertThat(settled.waiting()).isZero();
		assertThat(settled.deficiency()).isZero();
		assertThat(settled.inFlight()).isZero();
		clock.advance(Duration.ofSeconds(1));
		assertThat(bucket.snapshot().available()).isEqualTo(limit);
		long drained = 0;
		while (bucket.tryAcquire(1)) {
			drained++;
		}
		assertThat(drained).isEqualTo(limit);
	}

	private static void settle(Reservation claim, boolean tryToTake, boolean capped, SharedTokenBucket bucket,
			AtomicLong granted, AtomicLong inFlight, AtomicLong worst) {
		try {
			if (tryToTake && claim.poll() == 0) {
				Permit permit = claim.permit();
				long n = ((AbstractReservation) claim).tokens();
				granted.addAndGet(n);
				if (capped) {
					worst.accumulateAndGet(inFlight.addAndGet(n), Math::max);
					inFlight.addAndGet(-n);
				}
				permit.close();
				return;
			}
		}
		catch (RateLimitExceededException | IllegalStateException ex) {
			return; // refused while waiting: given back already
		}
		claim.cancel();
	}

	private static void take(long n, boolean capped, SharedTokenBucket bucket, AtomicLong granted, AtomicLong inFlight,
			AtomicLong worst) {
		granted.addAndGet(n);
		if (capped) {
			worst.accumulateAndGet(inFlight.addAndGet(n), Math::max);
			inFlight.addAndGet(-n);
			bucket.release(n);
		}
	}

	@ParameterizedTest
	@ValueSource(booleans = { false, true })
	void resetsRacingCallersNeverGrantMoreThanTheFullBucketsAndTheRate(boolean capped) throws Exception {
		FakeClock clock = new FakeClock();
		long limit = 20;
		SharedTokenBucket bucket = SharedTokenBucket.builder().rate(7, Duration.ofMillis(3)).limit(limit)
				.cappedRelease(capped).clock(clock).build();
		long start = clock.getAsLong();
		AtomicLong granted = new AtomicLong();
		AtomicLong inFlight = new AtomicLong();
		AtomicLong worstInFlight = new AtomicLong();
		AtomicBoolean stop = new AtomicBoolean();
		CountDownLatch done = new CountDownLatch(4);
		for (int t = 0; t < 4; t++) {
			long seed = t;
			new Thread(() -> {
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
							if (!claims.isEmpty()) {
								Reservation claim = claims.remove(random.nextInt(claims.size()));
								settle(claim, random.nextBoolean(), capped, bucket, granted, inFlight, worstInFlight);
							}
						}
					}
				}
				for (Reservation claim : claims) {
					settle(claim, false, capped, bucket, granted, inFlight, worstInFlight);
				}
				done.countDown();
			}).start();
		}
		long resets = 0;
		for (int step = 0; step < 5_000; step++) {
			clock.advanceNanos(50_000);
			if (step % 50 == 0) {
				bucket.reset(); // R1: at most limit more tokens each
				resets++;
			}
			LockSupport.parkNanos(20_000);
		}
		stop.set(true);
		done.await();
		long elapsed = clock.getAsLong() - start;
		double bound = limit * (resets + 1) + 7.0 * elapsed / Duration.ofMillis(3).toNanos();
		assertThat((double) granted.get()).isLessThanOrEqualTo(bound);
		assertThat(worstInFlight.get()).isLessThanOrEqualTo(capped ? limit : Long.MAX_VALUE);
		RateLimiterSnapshot settled = bucket.snapshot();
		assertThat(settled.waiting()).isZero();
		assertThat(settled.inFlight()).isZero();
		bucket.reset();
		assertThat(bucket.snapshot().available()).isEqualTo(limit); // nothing leaked, nothing lost
		clock.advance(Duration.ofSeconds(1));
		long drained = 0;
		while (bucket.tryAcquire(1)) {
			drained++;
		}
		assertThat(drained).isEqualTo(limit);
	}
}
