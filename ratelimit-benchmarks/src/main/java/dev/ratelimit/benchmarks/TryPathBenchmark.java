package dev.ratelimit.benchmarks;

import java.util.concurrent.TimeUnit;

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
import org.openjdk.jmh.annotations.Warmup;

/**
 * Throughput of the try path: {@code permissive} (10^9 per second with a burst of 10^9, Bucket4j's highest rate: every call granted) and
 * {@code saturated} (1,000,000 per second, hammered: most calls refused; the grants per second are
 * counted to show accuracy). {@link ReferenceBenchmark} gives the floors to read them against.
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 2, jvmArgsAppend = { "-Xms512m", "-Xmx512m" })
@State(Scope.Benchmark)
public class TryPathBenchmark {

	@Param({ "SHARED", "HYBRID", "QUOTA", "GUAVA", "RESILIENCE4J", "BUCKET4J" })
	public Limiters limiter;

	@Param({ "permissive", "saturated" })
	public String load;

	private Limiters.Limiter under;

	@Setup(Level.Trial)
	public void setUp() {
		if (this.load.equals("permissive")) {
			this.under = this.limiter.create(1_000_000_000L, 1_000_000_000L);
		}
		else {
			this.under = this.limiter.create(1_000_000, 1_000);
		}
	}

	/**
	 * Grants counted per iteration, reported as a rate next to the calls per second. Padded: two threads'
	 * counters 64 bytes apart shared a pair of cache lines, and one fork in four or five ran at half speed
	 * for every limiter that does not share a line of its own (2026-11-26).
	 */
	@State(Scope.Thread)
	@AuxCounters(AuxCounters.Type.OPERATIONS)
	@SuppressWarnings("unused")
	public static class Grants {

		private long p01;
		private long p02;
		private long p03;
		private long p04;
		private long p05;
		private long p06;
		private long p07;
		private long p08;
		private long p09;
		private long p10;
		private long p11;
		private long p12;
		private long p13;
		private long p14;
		private long p15;
		private long p16;

		public long granted;

		private long q01;
		private long q02;
		private long q03;
		private long q04;
		private long q05;
		private long q06;
		private long q07;
		private long q08;
		private long q09;
		private long q10;
		private long q11;
		private long q12;
		private long q13;
		private long q14;
		private long q15;
		private long q16;

		@Setup(Level.Iteration)
		public void reset() {
			this.granted = 0;
		}
	}

	@Benchmark
	public boolean tryAcquire(Grants grants) {
		boolean ok = this.under.tryAcquire();
		if (ok) {
			grants.granted++;
		}
		return ok;
	}
}
