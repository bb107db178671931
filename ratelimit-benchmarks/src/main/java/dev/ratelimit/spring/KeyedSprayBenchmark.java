package dev.ratelimit.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.PriorityQueue;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.SharedTokenBucket;
import org.jspecify.annotations.Nullable;
import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Contract revision 3, "per-key buckets under attack", in numbers: keys that call within their rate
 * while sprayed keys owing tokens fill the store, at the default {@code keys.memory}.
 *
 * <p><b>How time is driven.</b> The store and every bucket run on a fake clock (an injected
 * {@code LongSupplier} of nanoseconds) that the workload moves forward itself: each call is made at the
 * instant the workload gives it, as fast as the CPU allows, so that 60 s of the buckets' time pass in
 * however long the CPU takes (a few seconds to a few minutes). Nothing here waits on the wall clock; the
 * wall time only says how long the run took.
 *
 * <p><b>The workload.</b> One template: 100 tokens per second, limit 1,000. Sprayed keys are new keys
 * (1 to 110 characters, so that some are digested) that each take 998 to 1,000 tokens once and owe them
 * for about 10 s; they come at the rate that keeps {@code sprayed} of them owing at once (at 100,000:
 * 10,000 new keys per second). 20,000 keys within their rate each take 1 to 20 tokens and come back
 * exactly when those tokens are made again, so that their own bucket, were it never dropped, is full at
 * each of their calls (about 190,000 such calls per second of the fake clock: over 11 million in 60 s).
 * Counted over the measured 60 s (after 11 s that fill the store): {@code calls} (of the keys within their
 * rate), {@code refused} (of them: a refusal is the store's doing), and {@code charged} (of them: calls
 * whose key's bucket was made owing tokens its key did not owe, another key's debt read by a collision;
 * an upper bound on the refusals whatever a key within its rate takes, since such a key's small calls
 * are refused only when the debt read is nearly its whole limit).
 *
 * <p>The curve, from 100,000 to 1,000,000 sprayed keys owing, 60 s of the fake clock each (a main, not
 * JMH: the measure is the counts, not the time):
 * <pre>
 * java -cp ratelimit-benchmarks/target/benchmarks.jar dev.ratelimit.spring.KeyedSprayBenchmark \
 *     60 100000 200000 300000 500000 700000 1000000
 * </pre>
 * The JMH benchmark gives the time per call of a key within its rate (with the sprayed calls it brings
 * due) and the same counters ({@code calls}, {@code refused}, {@code charged}, summed over iterations):
 * <pre>
 * java -jar ratelimit-benchmarks/target/benchmarks.jar KeyedSprayBenchmark -f 1 -wi 1 -w 10s -i 1 -r 60s
 * </pre>
 * There the fake clock moves as fast as the calls are made, so JMH's iteration time, not 60 s of the
 * buckets' time, bounds the counts.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 1, time = 10)
@Measurement(iterations = 1, time = 60)
@Fork(value = 1, jvmArgsAppend = { "-Xms2g", "-Xmx2g" })
@Threads(1)
@State(Scope.Benchmark)
public class KeyedSprayBenchmark {

	/** Sprayed keys owing tokens at once. */
	@Param({ "100000", "1000000" })
	public int sprayed;

	private Spray spray;

	/** The counters JMH reports with the result. */
	@State(Scope.Thread)
	@AuxCounters(AuxCounters.Type.EVENTS)
	public static class Counts {

		/** Calls within their rate. */
		public long calls;

		/** Of them, refused by the store. */
		public long refused;

		/** Of them, made owing another key's debt. */
		public long charged;

		@Setup(Level.Iteration)
		public void clear() {
			this.calls = 0;
			this.refused = 0;
			this.charged = 0;
		}
	}

	@Setup(Level.Trial)
	public void setUp() {
		this.spray = new Spray(this.sprayed, 42);
		this.spray.fill();
	}

	@TearDown(Level.Trial)
	public void tearDown() {
		System.out.printf("%nspray: %d sprayed keys made, %d live keys, %d forgotten keys owing exactly%n",
				this.spray.sprayedSoFar, this.spray.keys.size(), this.spray.keys.owing());
	}

	/**
	 * One call of a key within its rate, and the sprayed calls due before it.
	 *
	 * @param counts the counters
	 * @return whether the call was granted
	 */
	@Benchmark
	public boolean wellBehavedCallUnderSpray(Counts counts) {
		long calls = this.spray.calls;
		long refused = this.spray.refused;
		long charged = this.spray.charged;
		boolean got = this.spray.call();
		counts.calls += this.spray.calls - calls;
		counts.refused += this.spray.refused - refused;
		counts.charged += this.spray.charged - charged;
		return got;
	}

	/**
	 * The curve: for each number of sprayed keys owing, 60 s (or the first argument's seconds) of the fake
	 * clock, and a row of counts.
	 *
	 * @param args seconds of the fake clock, then the numbers of sprayed keys owing
	 */
	public static void main(String[] args) {
		long seconds = (args.length > 0) ? Long.parseLong(args[0]) : 60;
		List<Integer> points = new ArrayList<>();
		for (int i = 1; i < args.length; i++) {
			points.add(Integer.parseInt(args[i]));
		}
		if (points.isEmpty()) {
			points = List.of(100_000, 200_000, 300_000, 500_000, 700_000, 1_000_000);
		}
		System.out.printf(Locale.ROOT, "| sprayed keys owing | fake time | well-behaved calls | refused | refused per million"
				+ " | charged another key's debt | sprayed keys made | wall time |%n");
		System.out.printf("|---:|---:|---:|---:|---:|---:|---:|---:|%n");
		for (int sprayed : points) {
			Spray spray = new Spray(sprayed, 42);
			spray.fill();
			long calls = spray.calls;
			long refused = spray.refused;
			long charged = spray.charged;
			long made = spray.sprayedSoFar;
			long start = System.nanoTime();
			long end = spray.now.get() + TimeUnit.SECONDS.toNanos(seconds);
			long tick = spray.now.get();
			while (spray.now.get() - end < 0) {
				spray.call();
				if (spray.now.get() - tick >= TimeUnit.SECONDS.toNanos(10)) {
					tick = spray.now.get();
					System.err.printf(Locale.ROOT, "  %d s of %d: %,d calls, %,d refused, %.0f s%n",
							seconds - (end - tick) / 1_000_000_000L, seconds, spray.calls - calls, spray.refused - refused,
							(System.nanoTime() - start) / 1e9);
				}
			}
			long wall = System.nanoTime() - start;
			calls = spray.calls - calls;
			refused = spray.refused - refused;
			System.out.printf(Locale.ROOT, "| %,d | %d s | %,d | %,d | %.3f | %,d | %,d | %.0f s |%n", sprayed, seconds, calls,
					refused, refused * 1e6 / calls, spray.charged - charged, spray.sprayedSoFar - made, wall / 1e9);
		}
	}

	/** The workload on its fake clock (see the class's javadoc). */
	static final class Spray {

		static final long LIMIT = 1_000;

		/** 100 tokens per second. */
		static final long TOKEN_NANOS = 10_000_000;

		/** How long a sprayed key owes: its whole limit's time. */
		static final long OWES_NANOS = LIMIT * TOKEN_NANOS;

		static final int GOOD_KEYS = 20_000;

		/** The most a key within its rate takes per call. */
		static final long GOOD_MOST = 20;

		final AtomicLong now = new AtomicLong(1L << 40);

		final KeyedBuckets keys;

		private final int sprayed;

		private final SplittableRandom random;

		/** The keys within their rate by the time of their next call: {time, key}. */
		private final PriorityQueue<long[]> goodNext = new PriorityQueue<>((a, b) -> Long.compare(a[0] - b[0], 0));

		private final String[] goodNames = new String[GOOD_KEYS];

		/** Sprayed keys due, in units of OWES_NANOS. */
		private long sprayDebt;

		long sprayedSoFar;

		long calls;

		long refused;

		long charged;

		/** The key of the bucket made last (the store charges a bucket right after making it). */
		private @Nullable Object made;

		Spray(int sprayed, long seed) {
			this.sprayed = sprayed;
			this.random = new SplittableRandom(seed);
			this.keys = new KeyedBuckets(0, KeyedBuckets.DEFAULT_MEMORY, true, this.now::get, new KeyedBuckets.Maker() {

				@Override
				public RateLimiter make(@Nullable String plan, @Nullable Object key) {
					Spray.this.made = key;
					return SharedTokenBucket.builder()
						.rate(1, Duration.ofNanos(TOKEN_NANOS))
						.limit(LIMIT)
						.clock(Spray.this.now::get)
						.build();
				}

				@Override
				public void follow(@Nullable String plan, RateLimiter bucket) {
				}

				@Override
				public void owe(@Nullable String plan, RateLimiter bucket, long ahead, boolean whole) {
					if (Spray.this.made instanceof String s && s.startsWith("user-")) {
						Spray.this.charged++; // a key within its rate is full at each call: never its own debt
					}
					KeyedBuckets.Maker.super.owe(plan, bucket, ahead, whole);
				}
			}, java.util.Map.of());
			for (int i = 0; i < GOOD_KEYS; i++) {
				this.goodNames[i] = "user-" + i + "@example.com";
				this.goodNext.add(new long[] { this.now.get() + this.random.nextLong(TOKEN_NANOS * GOOD_MOST), i });
			}
		}

		/**
		 * 11 s of the fake clock, so that the sprayed keys owing reach their number: 10 s of sprayed keys
		 * alone (a millisecond at a time), then 1 s with the keys within their rate too (each comes back
		 * within 0.2 s, so that is their steady state); not counted.
		 */
		void fill() {
			long sprayEnd = this.now.get() + OWES_NANOS;
			while (this.now.get() - sprayEnd < 0) {
				spray(1_000_000);
				this.now.addAndGet(1_000_000);
			}
			for (long[] next : this.goodNext) {
				next[0] += OWES_NANOS; // the heap's order is kept: every time moves by the same
			}
			long end = this.now.get() + TimeUnit.SECONDS.toNanos(1);
			while (this.now.get() - end < 0) {
				call();
			}
			this.calls = 0;
			this.refused = 0;
			this.charged = 0;
		}

		/** One call of a key within its rate, and the sprayed calls due before it. */
		boolean call() {
			long[] next = this.goodNext.poll();
			int k = (int) next[1];
			long at = next[0];
			if (at - this.now.get() > 0) {
				spray(at - this.now.get());
				this.now.set(at);
			}
			long n = 1 + this.random.nextLong(GOOD_MOST);
			boolean got = take(this.goodNames[k], n);
			this.calls++;
			if (!got) {
				this.refused++;
			}
			// within its rate: back once its n tokens are made again, so its own bucket is full at each call
			next[0] = this.now.get() + n * TOKEN_NANOS;
			this.goodNext.add(next);
			return got;
		}

		/** The sprayed keys of {@code nanos}: {@code sprayed} of them per OWES_NANOS. */
		private void spray(long nanos) {
			this.sprayDebt += nanos * this.sprayed;
			while (this.sprayDebt >= OWES_NANOS) {
				this.sprayDebt -= OWES_NANOS;
				long id = this.sprayedSoFar++;
				take("s" + id + "-" + "x".repeat((int) (((id * 0x9E3779B97F4A7C15L) >>> 56) % 100)),
						LIMIT - this.random.nextLong(3));
			}
		}

		private boolean take(String key, long n) {
			KeyedBuckets.Entry entry = this.keys.pin(key);
			try {
				return entry.limiter().tryAcquire(n);
			}
			finally {
				entry.unpin();
			}
		}
	}
}
