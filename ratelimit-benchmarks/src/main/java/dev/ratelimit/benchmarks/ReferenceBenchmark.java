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

	@Benchmark
	public long nanoTimeAndGetAndAdd() {
		return System.nanoTime() + this.counter.getAndAdd(1);
	}
}
