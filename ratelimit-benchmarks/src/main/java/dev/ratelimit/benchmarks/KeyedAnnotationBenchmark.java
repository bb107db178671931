package dev.ratelimit.benchmarks;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import com.giffing.bucket4j.spring.boot.starter.config.aspect.Bucket4jAopConfig;
import com.giffing.bucket4j.spring.boot.starter.config.cache.Bucket4jCacheConfiguration;
import com.giffing.bucket4j.spring.boot.starter.context.RateLimiting;
import dev.ratelimit.annotation.RateLimited;
import javax.cache.configuration.MutableConfiguration;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.RateLimitPlanResolver;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimiterRegistry;
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

import org.springframework.boot.SpringApplication;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.ImportAutoConfiguration;
import org.springframework.boot.cache.autoconfigure.CacheAutoConfiguration;
import org.springframework.boot.cache.autoconfigure.JCacheManagerCustomizer;
import org.springframework.cache.annotation.EnableCaching;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.EnableAspectJAutoProxy;
import org.springframework.core.env.MapPropertySource;

/**
 * A keyed {@code @RateLimited} call ({@code key = "#user"}) over 1, 1,000 and 1,000,000 distinct
 * keys, against the same call unkeyed (same signature, so the proxy's argument array is the same),
 * and against the two ways Bucket4j users get the same:
 * <ul>
 * <li>{@link #bucket4jStarterPerKey}: the Bucket4j Spring Boot starter's annotation,
 * {@code @RateLimiting(name = "bench", cacheKey = "#user")}, set up as its README and its Caffeine
 * example do (Spring's JCache support with Caffeine's JCache provider, the buckets in a cache named in
 * {@code bucket4j.methods[].cache-name}): the annotation-to-annotation comparison;</li>
 * <li>{@link #bucket4jMapPerKey}: what users hand-roll, a {@code ConcurrentHashMap} of Bucket4j buckets
 * called directly, one per key, with no bound and no proxy.</li>
 * </ul>
 * And, to compare like with like against the hand-rolled map, {@link #keyedWithoutProxy}: the same
 * per-key buckets the keyed call uses (bounded by {@code keys.max}, dropped when idle), pinned and taken
 * from directly, without the Spring proxy that every annotated call pays.
 * And {@link #keyedWithPlanResolver} (issue #34, contract revision 3, "Plans"): the keyed call on a bucket
 * with plans whose plan comes from a {@link RateLimitPlanResolver} bean (half the keys on {@code pro},
 * half on the template), against {@link #keyed} on a bucket without plans; issue #34 asks at most 1.25x at
 * 1,000 keys.
 * Buckets no caller exhausts, so every call is granted.
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

	private KeyedBuckets keyedBuckets;

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
							"ratelimit.buckets.bench.keys.max", "10000", "ratelimit.buckets.planned.rate", "1000000000",
							"ratelimit.buckets.planned.limit", "1000000000", "ratelimit.buckets.planned.keys.max", "10000",
							"ratelimit.buckets.planned.plans.pro.rate", "1000000000",
							"ratelimit.buckets.planned.plans.pro.limit", "1000000000")));
		this.context.register(RateLimitAutoConfiguration.class, Work.class, Plans.class);
		this.context.refresh();
		this.proxied = this.context.getBean(Work.class);
		this.keyedBuckets = this.context.getBean(RateLimiterRegistry.class).get("bench").keyed();
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
	public long keyedWithPlanResolver(Keys keys) {
		return this.proxied.keyedPlanned(keys.next(this.keys));
	}

	@Benchmark
	public boolean keyedWithoutProxy(Keys keys) {
		KeyedBuckets.Entry entry = this.keyedBuckets.pin(keys.next(this.keys));
		try {
			return entry.limiter().tryAcquire(1);
		}
		finally {
			entry.unpin();
		}
	}

	@Benchmark
	public boolean bucket4jMapPerKey(Keys keys) {
		long key = keys.next(this.keys);
		return this.handRolled.computeIfAbsent(key, (k) -> Bucket.builder().addLimit(this.bandwidth).build())
			.tryConsume(1);
	}

	@Benchmark
	public long bucket4jStarterPerKey(Bucket4jStarter starter, Keys keys) {
		return starter.proxied.keyed(keys.next(this.keys));
	}

	/**
	 * A Spring Boot application with the Bucket4j starter and nothing of ours: the same rate and limit
	 * as {@code bench}, the buckets kept in a Caffeine JCache cache.
	 */
	@State(Scope.Benchmark)
	public static class Bucket4jStarter {

		private ConfigurableApplicationContext context;

		StarterWork proxied;

		@Setup(Level.Trial)
		public void setUp() {
			Map<String, Object> properties = new HashMap<>();
			properties.put("spring.main.banner-mode", "off");
			properties.put("logging.level.root", "warn");
			properties.put("spring.cache.type", "jcache");
			properties.put("spring.cache.jcache.provider", "com.github.benmanes.caffeine.jcache.spi.CaffeineCachingProvider");
			properties.put("bucket4j.methods[0].name", "bench");
			properties.put("bucket4j.methods[0].cache-name", "buckets");
			properties.put("bucket4j.methods[0].rate-limit.bandwidths[0].capacity", "1000000000");
			properties.put("bucket4j.methods[0].rate-limit.bandwidths[0].time", "1");
			properties.put("bucket4j.methods[0].rate-limit.bandwidths[0].unit", "seconds");
			properties.put("bucket4j.methods[0].rate-limit.bandwidths[0].refill-speed", "greedy");
			SpringApplication application = new SpringApplication(StarterApplication.class);
			application.setWebApplicationType(WebApplicationType.NONE);
			application.setDefaultProperties(properties);
			this.context = application.run();
			this.proxied = this.context.getBean(StarterWork.class);
			if (this.proxied.getClass() == StarterWork.class) {
				throw new IllegalStateException("@RateLimiting bean was not proxied");
			}
		}

		@TearDown(Level.Trial)
		public void tearDown() {
			this.context.close();
		}
	}

	/** The Bucket4j starter's auto-configuration, and the bean it guards. */
	@Configuration(proxyBeanMethods = false)
	@EnableAspectJAutoProxy
	@EnableCaching
	@ImportAutoConfiguration({ CacheAutoConfiguration.class, Bucket4jCacheConfiguration.class, Bucket4jAopConfig.class })
	public static class StarterApplication {

		/**
		 * The buckets' cache, made by reference: the JCache default (and so what {@code spring.cache.cache-names}
		 * makes) stores by value, copying every bucket through Java serialization on each read and write, which
		 * would cost the starter several microseconds a call that have nothing to do with Bucket4j.
		 */
		@Bean
		JCacheManagerCustomizer bucketsByReference() {
			return (cacheManager) -> cacheManager.createCache("buckets",
					new MutableConfiguration<Object, Object>().setStoreByValue(false));
		}

		@Bean
		StarterWork starterWork() {
			return new StarterWork();
		}
	}

	/** The same work guarded by the Bucket4j starter's annotation. */
	public static class StarterWork {

		@RateLimiting(name = "bench", cacheKey = "#user")
		public long keyed(long user) {
			return user;
		}
	}

	/** The plan resolver of {@link #keyedWithPlanResolver}: answers from memory, even keys on pro. */
	@Configuration(proxyBeanMethods = false)
	public static class Plans {

		@Bean
		RateLimitPlanResolver planResolver() {
			return (bucket, key) -> ((((Long) key) & 1) == 0) ? "pro" : null;
		}
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

		@RateLimited(value = "planned", key = "#user")
		public long keyedPlanned(long user) {
			return user;
		}
	}
}
