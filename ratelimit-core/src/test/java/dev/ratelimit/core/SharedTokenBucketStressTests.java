package dev.ratelimit.core;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Real clock, real threads: counts what was granted. Only bounds that hold however busy the machine is
 * are asserted (upper bounds on grants are exact; how many calls a descheduled thread manages is not
 * the bucket's business, and exactness is proved on a fake clock by the model test).
 */
class SharedTokenBucketStressTests {

	@Test
	void tryAcquireFromManyThreadsNeverGrantsMoreThanRateTimesElapsedPlusLimit() throws Exception {
		long rate = 20_000;
		long limit = 100;
		SharedTokenBucket bucket = SharedTokenBucket.builder().rate(rate, Duration.ofSeconds(1)).limit(limit).build();
		AtomicLong granted = new AtomicLong();
		long start = System.nanoTime();
		long end = start + Duration.ofMillis(800).toNanos();
		List<Thread> threads = new ArrayList<>();
		for (int i = 0; i < 4; i++) {
			threads.add(startThread(() -> {
				long mine = 0;
				while (System.nanoTime() < end) {
					if (bucket.tryAcquire(1)) {
						mine++;
					}
				}
				granted.addAndGet(mine);
			}));
		}
		for (Thread t : threads) {
			t.join();
		}
		double elapsedSeconds = (System.nanoTime() - start) / 1e9;
		double bound = rate * elapsedSeconds + limit;
		assertThat((double) granted.get()).isLessThanOrEqualTo(bound);
		assertThat(granted.get()).isPositive();
		assertThat(bucket.snapshot().available()).isLessThanOrEqualTo(limit);
	}

	@Test
	void blockingCallersFromManyThreadsGetTheRate() throws Exception {
		long rate = 2_000;
		SharedTokenBucket bucket = SharedTokenBucket.builder().rate(rate, Duration.ofSeconds(1)).limit(1).initial(0)
				.build();
		AtomicLong granted = new AtomicLong();
		long start = System.nanoTime();
		long end = start + Duration.ofSeconds(1).toNanos();
		List<Thread> threads = new ArrayList<>();
		for (int i = 0; i < 8; i++) {
			threads.add(startThread(() -> {
				try {
					while (System.nanoTime() < end) {
						bucket.acquire(1, Duration.ofSeconds(1)).close();
						granted.incrementAndGet();
					}
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
				}
			}));
		}
		for (Thread t : threads) {
			t.join();
		}
		double elapsedSeconds = (System.nanoTime() - start) / 1e9;
		double expected = rate * elapsedSeconds;
		assertThat((double) granted.get()).isLessThanOrEqualTo(expected + 1 + 8);
		assertThat(granted.get()).isPositive();
		// nobody is left waiting and no token was lost: what was claimed was either granted or given back
		assertThat(bucket.snapshot().waiting()).isZero();
		assertThat(bucket.snapshot().deficiency()).isZero();
	}

	@Test
	void cappedReleaseNeverLetsMoreThanTheLimitBeInFlight() throws Exception {
		long limit = 4;
		SharedTokenBucket bucket = SharedTokenBucket.builder().rate(100_000, Duration.ofSeconds(1)).limit(limit)
				.cappedRelease(true).build();
		AtomicLong inFlight = new AtomicLong();
		AtomicLong worst = new AtomicLong();
		long end = System.nanoTime() + Duration.ofMillis(500).toNanos();
		List<Thread> threads = new ArrayList<>();
		for (int i = 0; i < 8; i++) {
			threads.add(startThread(() -> {
				while (System.nanoTime() < end) {
					try (Permit permit = bucket.acquire(1, Duration.ofMillis(50))) {
						long now = inFlight.incrementAndGet();
						worst.accumulateAndGet(now, Math::max);
						Thread.onSpinWait();
						inFlight.decrementAndGet();
					}
					catch (RateLimitExceededException ex) {
						// waited too long for a release: allowed
					}
					catch (InterruptedException ex) {
						return;
					}
				}
			}));
		}
		for (Thread t : threads) {
			t.join();
		}
		assertThat(worst.get()).isBetween(1L, limit);
		assertThat(bucket.snapshot().inFlight()).isZero();
		assertThat(bucket.snapshot().waiting()).isZero();
	}

	private static Thread startThread(Runnable body) {
		Thread thread = new Thread(body);
		thread.start();
		return thread;
	}
}
