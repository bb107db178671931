package dev.ratelimit.core;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The production path of striped mode (no hooks: the bucket stripes when callers contend on its tail) with
 * real threads on a fake clock, where the exact outcome does not depend on the interleaving, so it is
 * checked exactly against {@link SharedTokenBucketModelTests.Reference}:
 * <ul>
 * <li>a clock that stands still while 4 threads take 1 token at a time until refused 20 times in a row:
 * together they get exactly the whole tokens there are, and no thread is granted a token after it was refused
 * one (the tokens only go down, so that refusal came while there were tokens), phase after phase, the clock moved between phases (none, 1 ns, part
 * of a token, whole intervals, until full and beyond);</li>
 * <li>a clock that a fifth thread moves while 4 threads take 1 to 3 tokens, on a bucket that never fills:
 * then the cap never acts, and the tokens granted plus those left (and the time until full) are exactly
 * what the time made, whatever the order;</li>
 * <li>the same with a small limit, where the cap acts: every grant is bracketed by the fake clock's readings
 * before and after its call, and the token-bucket bound is checked over every window, as in
 * {@link StripedBucketStressTests} (no slack beyond the brackets).</li>
 * </ul>
 */
class StripedBucketConcurrencyTests {

	private static final int THREADS = 4;

	/** Phases per rate at a clock standing still: each striping from rover mode is a chance for the races. */
	private static final int PHASES = 120;

	@Test
	void onAClockThatStandsStillThreadsGetExactlyTheWholeTokensThereAre() throws Exception {
		long seed = Long.getLong("striped.seed", new SplittableRandom().nextLong());
		long[][] rates = { { 1_000_000_000, 1_000_000_000 }, { 999_999_937, 1_000_000_000 }, { 7, 3_000_000 },
				{ 1, 1_000 } };
		for (long[] rate : rates) {
			phases(seed, rate[0], rate[1]);
		}
	}

	private static void phases(long seed, long tokens, long period) throws Exception {
		SplittableRandom random = new SplittableRandom(seed);
		long limit = 2_000 + random.nextLong(30_000);
		FakeClock clock = new FakeClock();
		SharedTokenBucket bucket = SharedTokenBucket.builder()
			.rate(tokens, Duration.ofNanos(period))
			.limit(limit)
			.clock(clock)
			.build();
		SharedTokenBucketModelTests.Reference ref = new SharedTokenBucketModelTests.Reference(tokens, period, limit,
				limit, clock.getAsLong(), false);
		long interval = ref.intervalNanos();
		List<String> trace = new ArrayList<>();
		trace.add("seed " + seed + " (-Dstriped.seed), rate " + tokens + " per " + period + " ns, limit " + limit);
		int stripedPhases = 0;
		for (int phase = 0; phase < PHASES; phase++) {
			long delta = switch (random.nextInt(6)) {
				case 0 -> 0;
				case 1 -> 1;
				case 2 -> random.nextLong(interval) + 1;
				case 3 -> interval * (1 + random.nextLong(Math.min(limit, 64)));
				case 4 -> ref.nanosUntilFull() + random.nextInt(3);
				default -> interval * (1 + random.nextLong(limit));
			};
			clock.advanceNanos(delta);
			ref.advance(clock.getAsLong());
			long expected = ref.availableTokens();
			ref.tryAcquire(expected);
			AtomicLong granted = new AtomicLong();
			AtomicLong refusedThenGranted = new AtomicLong();
			AtomicBoolean striped = new AtomicBoolean();
			runThreads(() -> {
				long mine = 0;
				boolean refused = false;
				// on until refused 20 times in a row; at a clock standing still the tokens only go down, so a
				// grant after a refusal of the same thread proves that the refusal came while there were tokens
				for (int misses = 0, calls = 0; misses < 20; calls++) {
					if (bucket.tryAcquire(1)) {
						mine++;
						misses = 0;
						if (refused) {
							refusedThenGranted.incrementAndGet();
						}
					}
					else {
						refused = true;
						misses++;
					}
					if ((calls & 63) == 0 && bucket.isStriped()) {
						striped.set(true);
					}
				}
				granted.addAndGet(mine);
			});
			stripedPhases += striped.get() ? 1 : 0;
			RateLimiterSnapshot s = bucket.snapshot();
			trace.add("phase " + phase + ": clock +" + delta + " ns, granted " + granted.get() + " (reference "
					+ expected + "), striped " + striped.get() + ", then available " + s.available() + " until full "
					+ s.untilFull().toNanos() + " ns (reference " + ref.availableTokens() + ", " + ref.nanosUntilFull()
					+ ")");
			assertThat(granted.get()).as("granted at a clock standing still\n%s", String.join("\n", trace))
				.isEqualTo(expected);
			assertThat(refusedThenGranted.get())
				.as("grants after a refusal of the same thread (refused while there were tokens)\n%s",
						String.join("\n", trace))
				.isZero();
			assertThat((long) s.available()).as("available\n%s", String.join("\n", trace)).isEqualTo(ref.availableTokens());
			assertThat(s.untilFull().toNanos()).as("until full\n%s", String.join("\n", trace))
				.isEqualTo(ref.nanosUntilFull());
		}
		System.out.printf("clock standing still, rate %d per %d ns, limit %d: %d of %d phases striped%n", tokens,
				period, limit, stripedPhases, PHASES);
	}

	@Test
	void onAMovingClockABucketThatNeverFillsGrantsExactlyWhatTheTimeMade() throws Exception {
		long[][] rates = { { 1_000_000_000, 1_000_000_000 }, { 999_999_937, 1_000_000_000 }, { 7, 3_000_000 } };
		for (long[] rate : rates) {
			long tokens = rate[0];
			long period = rate[1];
			FakeClock clock = new FakeClock();
			long limit = 1L << 40;
			SharedTokenBucket bucket = SharedTokenBucket.builder()
				.rate(tokens, Duration.ofNanos(period))
				.limit(limit)
				.initial(0)
				.clock(clock)
				.build();
			SharedTokenBucketModelTests.Reference ref = new SharedTokenBucketModelTests.Reference(tokens, period, limit, 0,
					clock.getAsLong(), false);
			long interval = ref.intervalNanos();
			AtomicLong granted = new AtomicLong();
			AtomicBoolean done = new AtomicBoolean();
			AtomicBoolean striped = new AtomicBoolean();
			Thread ticker = ticker(clock, 3 * interval, 200, done);
			runThreads(() -> {
				ThreadLocalRandom random = ThreadLocalRandom.current();
				long mine = 0;
				for (long calls = 0; !done.get(); calls++) {
					long n = 1 + random.nextInt(3);
					if (bucket.tryAcquire(n)) {
						mine += n;
					}
					if ((calls & 63) == 0 && bucket.isStriped()) {
						striped.set(true);
					}
				}
				granted.addAndGet(mine);
			});
			ticker.join();
			ref.advance(clock.getAsLong());
			assertThat(ref.tryAcquire(granted.get())).as("granted %d, more than the time made", granted.get()).isTrue();
			RateLimiterSnapshot s = bucket.snapshot();
			System.out.printf("moving clock, never full, rate %d per %d ns: granted %d, striped %s%n", tokens, period,
					granted.get(), striped.get());
			assertThat((long) s.available()).as("tokens left after granting %d", granted.get())
				.isEqualTo(ref.availableTokens());
			assertThat(s.untilFull().toNanos()).as("until full after granting %d", granted.get())
				.isEqualTo(ref.nanosUntilFull());
		}
	}

	@Test
	void onAMovingClockTheGrantsKeepTheTokenBucketBoundOverEveryWindow() throws Exception {
		long[][] cases = { { 1_000_000_000, 1_000_000_000, 300 }, { 999_999_937, 1_000_000_000, 5_000 },
				{ 7, 3_000_000, 100 }, { 3, 1_000, 1_000 } };
		for (long[] c : cases) {
			long tokens = c[0];
			long period = c[1];
			long limit = c[2];
			FakeClock clock = new FakeClock();
			SharedTokenBucket bucket = SharedTokenBucket.builder()
				.rate(tokens, Duration.ofNanos(period))
				.limit(limit)
				.clock(clock)
				.build();
			long interval = Math.max(1, (period + tokens - 1) / tokens);
			int most = 1 << 17;
			long[][] b = new long[THREADS][most];
			long[][] a = new long[THREADS][most];
			long[][] n = new long[THREADS][most];
			int[] counts = new int[THREADS];
			AtomicBoolean done = new AtomicBoolean();
			AtomicLong ids = new AtomicLong();
			Thread ticker = ticker(clock, 2 * interval, 300, done);
			runThreads(() -> {
				int id = (int) ids.getAndIncrement();
				ThreadLocalRandom random = ThreadLocalRandom.current();
				int count = 0;
				while (!done.get() && count < most) {
					long k = (id == 0) ? 1 + random.nextInt(3) : 1;
					long before = clock.getAsLong();
					boolean ok = bucket.tryAcquire(k);
					long after = clock.getAsLong();
					if (ok) {
						b[id][count] = before;
						a[id][count] = after;
						n[id][count] = k;
						count++;
					}
				}
				counts[id] = count;
			});
			done.set(true);
			ticker.join();
			long[] bs = StripedBucketStressTests.joined(b, counts);
			long[] as = StripedBucketStressTests.joined(a, counts);
			long[] ns = StripedBucketStressTests.joined(n, counts);
			int total = bs.length;
			// (the fake clock starts near Long.MAX_VALUE and wraps: the check measures from the first reading)
			long origin = clock.getAsLong();
			for (int i = 0; i < total; i++) {
				origin = (bs[i] - origin < 0) ? bs[i] : origin;
			}
			for (int i = 0; i < total; i++) {
				bs[i] -= origin;
				as[i] -= origin;
			}
			String violation = StripedBucketStressTests.tokenBucketBoundViolation(bs, as, ns, tokens, period, limit);
			System.out.printf("moving clock, rate %d per %d ns, limit %d: %d grants%n", tokens, period, limit, total);
			assertThat(violation).as("rate %d per %d ns, limit %d", tokens, period, limit).isNull();
			assertThat((long) bucket.snapshot().available()).isLessThanOrEqualTo(limit);
		}
	}

	/**
	 * Starts a thread that moves {@code clock} 20,000 times, by 1 ns one time in four and otherwise by up to
	 * {@code mostStep}, spinning up to {@code mostSpins} between moves, then sets {@code done}.
	 */
	private static Thread ticker(FakeClock clock, long mostStep, int mostSpins, AtomicBoolean done) {
		Thread ticker = new Thread(() -> {
			ThreadLocalRandom random = ThreadLocalRandom.current();
			for (int tick = 0; tick < 20_000; tick++) {
				clock.advanceNanos(random.nextInt(4) == 0 ? 1 : random.nextLong(mostStep));
				for (int spin = random.nextInt(mostSpins); spin > 0; spin--) {
					Thread.onSpinWait();
				}
			}
			done.set(true);
		});
		ticker.start();
		return ticker;
	}

	/** Runs {@code body} on {@link #THREADS} threads started together; rethrows what one threw. */
	private static void runThreads(Runnable body) throws Exception {
		CyclicBarrier start = new CyclicBarrier(THREADS);
		AtomicReference<Throwable> failure = new AtomicReference<>();
		List<Thread> threads = new ArrayList<>();
		for (int i = 0; i < THREADS; i++) {
			Thread t = new Thread(() -> {
				try {
					start.await();
					body.run();
				}
				catch (Throwable ex) {
					failure.compareAndSet(null, ex);
				}
			});
			t.start();
			threads.add(t);
		}
		for (Thread t : threads) {
			t.join();
		}
		if (failure.get() != null) {
			throw new AssertionError(failure.get());
		}
	}
}
