package dev.ratelimit.spring;

import java.time.Duration;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.SharedTokenBucket;
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
 * while sprayed keys owing tokens fill the store (100,000 or 1,000,000 owing at once), on a fake clock,
 * at the default {@code keys.memory}. Reports, besides the time per well-behaved call (and the sprayed
 * calls it brings due), the counters {@code calls} and {@code refused} (well-behaved calls, and those the
 * store refused although the key's own bucket, never dropped, was full: a refusal because of the
 * sprayers); their ratio is what the contract bounds (fewer than one in a million at 100,000).
 *
 * <p>Over 10 million well-behaved calls (single-threaded: the workload is one fake timeline):
 * <pre>
 * java -jar ratelimit-benchmarks/target/benchmarks.jar KeyedSprayBenchmark -f 1 -wi 1 -w 10s -i 10 -r 60s
 * </pre>
 * and read {@code calls} and {@code refused} (summed over the iterations) in the result.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 1, time = 10)
@Measurement(iterations = 10, time = 60)
@Fork(value = 1, jvmArgsAppend = { "-Xms2g", "-Xmx2g" })
@Threads(1)
@State(Scope.Benchmark)
public class KeyedSprayBenchmark {

	private static final long LIMIT = 10;

	private static final long TOKEN_NANOS = Duration.ofSeconds(1).toNanos();

	/** Sprayed keys owing tokens at once (each owes up to 10 s: 1/10 of this many sprayed per second). */
	@Param({ "100000", "1000000" })
	public int sprayed;

	/** Keys within their rate, each calling about once per second. */
	@Param({ "10000" })
	public int goodKeys;

	private final AtomicLong now = new AtomicLong(1L << 40);

	private KeyedBuckets keys;

	private SplittableRandom random;

	/** The keys within their rate by the time of their next call: {time, key}. */
	private java.util.PriorityQueue<long[]> goodNext;

	private String[] goodNames;

	private long sprayDebt;

	private int sprayedSoFar;

	/** The counters JMH reports with the result. */
	@State(Scope.Thread)
	@AuxCounters(AuxCounters.Type.EVENTS)
	public static class Counts {

		/** Calls within their rate. */
		public long calls;

		/** Of them, refused by the store. */
		public long refused;

		@Setup(Level.Iteration)
		public void clear() {
			this.calls = 0;
			this.refused = 0;
		}
	}

	@Setup(Level.Trial)
	public void setUp() {
		this.random = new SplittableRandom(42);
		this.keys = new KeyedBuckets(0, KeyedBuckets.DEFAULT_MEMORY, true, this.now::get, (key) -> SharedTokenBucket
			.builder()
			.rate(1, Duration.ofSeconds(1))
			.limit(LIMIT)
			.clock(this.now::get)
			.build(), (bucket) -> {
			});
		this.goodNext = new java.util.PriorityQueue<>((a, b) -> Long.compare(a[0] - b[0], 0));
		this.goodNames = new String[this.goodKeys];
		for (int i = 0; i < this.goodKeys; i++) {
			this.goodNames[i] = "user-" + i + "@example.com";
			this.goodNext.add(new long[] { this.now.get() + this.random.nextLong(TOKEN_NANOS), i });
		}
		// fill the store: 11 s of the fake clock, so that the sprayed keys owing reach their number
		for (int i = 0; i < 20_000; i++) {
			call(null);
		}
	}

	@TearDown(Level.Trial)
	public void tearDown() {
		System.out.printf("%nspray: %d sprayed keys made, %d live keys, %d forgotten keys owing exactly%n",
				this.sprayedSoFar, this.keys.size(), this.keys.owing());
	}

	/**
	 * One call of a key within its rate, and the sprayed calls due before it.
	 *
	 * @param counts the counters
	 * @return whether the call was granted
	 */
	@Benchmark
	public boolean wellBehavedCallUnderSpray(Counts counts) {
		return call(counts);
	}

	private boolean call(Counts counts) {
		long[] next = this.goodNext.poll();
		int k = (int) next[1];
		long at = next[0];
		if (at - this.now.get() > 0) {
			spray(at - this.now.get());
			this.now.set(at);
		}
		long n = 1 + this.random.nextLong(LIMIT);
		boolean got = take(this.goodNames[k], n);
		if (counts != null) {
			counts.calls++;
			if (!got) {
				counts.refused++;
			}
		}
		// within its rate: back once its n tokens are made again, so its own bucket is full at each call
		next[0] = this.now.get() + n * TOKEN_NANOS;
		this.goodNext.add(next);
		return got;
	}

	private void spray(long nanos) {
		this.sprayDebt += nanos * (this.sprayed / LIMIT);
		while (this.sprayDebt >= TOKEN_NANOS) {
			this.sprayDebt -= TOKEN_NANOS;
			int id = this.sprayedSoFar++;
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
