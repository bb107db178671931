package dev.ratelimit.benchmarks;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The floors the try path is read against, in the same run: {@code System.nanoTime()}, which every
 * peer pays on every call, and {@code AtomicLong.getAndAdd} on one shared counter, the cost of one
 * atomic read-modify-write, and the two together: the floor of an exact token bucket, which must know
 * when each grab happened (one clock read) and claim its tokens (one atomic update).
 */
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 2, jvmArgsAppend = { "-Xms512m", "-Xmx512m" })
@State(Scope.Benchmark)
public class ReferenceBenchmark {

	private final AtomicLong counter = new AtomicLong();

	@Benchmark
	public long nanoTime() {
		return System.nanoTime();
	}

	@Benchmark
	public long getAndAdd() {
		return this.counter.getAndAdd(1);
	}

	/** A word and a log of the calling thread's own, padded apart from every other thread's. */
	@State(Scope.Thread)
	public static class Stripe {

		long p1, p2, p3, p4, p5, p6, p7;

		final java.util.concurrent.atomic.AtomicLong word = new java.util.concurrent.atomic.AtomicLong(1L << 40);

		long q1, q2, q3, q4, q5, q6, q7;

		final long[] log = new long[2048];
	}

	@Benchmark
	public long nanoTimeAndOwnCasAndLog(Stripe stripe) {
		long now = System.nanoTime();
		long w = stripe.word.get();
		int i = (int) (w & 1023);
		if (stripe.word.compareAndSet(w, w + 1)) {
			stripe.log[2 * i] = now;
			stripe.log[2 * i + 1] = 1;
		}
		return w;
	}

	@Benchmark
	public long nanoTimeAndGetAndAdd() {
		return System.nanoTime() + this.counter.getAndAdd(1);
	}
}
