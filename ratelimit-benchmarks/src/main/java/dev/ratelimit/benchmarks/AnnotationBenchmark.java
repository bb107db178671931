package dev.ratelimit.benchmarks;

import java.util.Map;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.RateLimitAutoConfiguration;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.core.env.MapPropertySource;

/**
 * What {@code @RateLimited} adds to a call: the same bean method called directly and through the
 * Spring proxy that takes a token from a bucket no caller exhausts (every call granted, none waits).
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 2, jvmArgsAppend = { "-Xms512m", "-Xmx512m" })
@State(Scope.Benchmark)
public class AnnotationBenchmark {

	private AnnotationConfigApplicationContext context;

	private Work proxied;

	private final Work direct = new Work();

	@Setup(Level.Trial)
	public void setUp() {
		this.context = new AnnotationConfigApplicationContext();
		this.context.getEnvironment()
			.getPropertySources()
			.addFirst(new MapPropertySource("bench", Map.of("ratelimit.buckets.bench.rate", "1000000000",
					"ratelimit.buckets.bench.limit", "1000000000")));
		this.context.register(RateLimitAutoConfiguration.class, Work.class);
		this.context.refresh();
		this.proxied = this.context.getBean(Work.class);
		if (this.proxied.getClass() == Work.class) {
			throw new IllegalStateException("@RateLimited bean was not proxied");
		}
	}

	@TearDown(Level.Trial)
	public void tearDown() {
		this.context.close();
	}

	@Benchmark
	public long direct() {
		return this.direct.next();
	}

	@Benchmark
	public long rateLimited() {
		return this.proxied.next();
	}

	/** The guarded work: a counter, so that the call itself costs next to nothing. */
	public static class Work {

		private long count;

		@RateLimited("bench")
		public long next() {
			return ++this.count;
		}
	}
}
