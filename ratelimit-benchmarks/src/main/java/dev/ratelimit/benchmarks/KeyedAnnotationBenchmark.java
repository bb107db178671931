package dev.ratelimit.benchmarks;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.RateLimitAutoConfiguration;
import io.github.bucket4j.Bandwidth;
import io.github.bucket4j.Bucket;
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
import org.openjdk.jmh.annotations.Warmup;

import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.core.env.MapPropertySource;

/**
 * A keyed {@code @RateLimited} call ({@code key = "#user"}) over 1, 1,000 and 1,000,000 distinct
 * keys, against the same call unkeyed (same signature, so the proxy's argument array is the same),
 * and against what users hand-roll with Bucket4j: a {@code ConcurrentHashMap} of buckets, one per
 * key, with no bound. Buckets no caller exhausts, so every call is granted.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = { "-Xms2g", "-Xmx2g" })
@State(Scope.Benchmark)
public class KeyedAnnotationBenchmark {

	@Param({ "1", "1000", "1000000" })
	public int keys;

	private AnnotationConfigApplicationContext context;

	private Work proxied;

	private final Map<Long, Bucket> handRolled = new ConcurrentHashMap<>();

	private final Bandwidth bandwidth = Bandwidth.builder()
		.capacity(1_000_000_000L)
		.refillGreedy(1_000_000_000L, Duration.ofSeconds(1))
		.build();

	@Setup(Level.Trial)
	public void setUp() {
		this.context = new AnnotationConfigApplicationContext();
		this.context.getEnvironment()
			.getPropertySources()
			.addFirst(new MapPropertySource("bench",
					Map.of("ratelimit.buckets.bench.rate", "1000000000", "ratelimit.buckets.bench.limit", "1000000000",
							"ratelimit.buckets.bench.keys.max", "10000")));
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

	/** Each thread's walk over the keys: 0, 1, ..., keys - 1, 0, ... */
	@State(Scope.Thread)
	public static class Keys {

		long next;

		long next(int keys) {
			long key = this.next;
			this.next = (key + 1 == keys) ? 0 : key + 1;
			return key;
		}
	}

	@Benchmark
	public long unkeyed(Keys keys) {
		return this.proxied.unkeyed(keys.next(this.keys));
	}

	@Benchmark
	public long keyed(Keys keys) {
		return this.proxied.keyed(keys.next(this.keys));
	}

	@Benchmark
	public boolean bucket4jMapPerKey(Keys keys) {
		long key = keys.next(this.keys);
		return this.handRolled.computeIfAbsent(key, (k) -> Bucket.builder().addLimit(this.bandwidth).build())
			.tryConsume(1);
	}

	/** The guarded work: returns its argument. */
	public static class Work {

		@RateLimited("bench")
		public long unkeyed(long user) {
			return user;
		}

		@RateLimited(value = "bench", key = "#user")
		public long keyed(long user) {
			return user;
		}
	}
}
