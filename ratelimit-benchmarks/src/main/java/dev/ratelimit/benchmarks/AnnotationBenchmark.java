package dev.ratelimit.benchmarks;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
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

import io.micrometer.observation.ObservationRegistry;

import io.github.resilience4j.ratelimiter.RateLimiterConfig;
import io.github.resilience4j.ratelimiter.RateLimiterRegistry;
import io.github.resilience4j.spring6.fallback.FallbackDecorators;
import io.github.resilience4j.spring6.fallback.FallbackExecutor;
import io.github.resilience4j.spring6.ratelimiter.configure.RateLimiterAspect;
import io.github.resilience4j.spring6.ratelimiter.configure.RateLimiterConfigurationProperties;
import io.github.resilience4j.spring6.spelresolver.DefaultSpelResolver;
import io.github.resilience4j.spring6.spelresolver.SpelResolver;

import org.springframework.aop.aspectj.annotation.AspectJProxyFactory;
import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.core.env.MapPropertySource;

/**
 * What {@code @RateLimited} adds to a call: the same bean method called directly, through the Spring
 * proxy that takes a token from a bucket no caller exhausts (every call granted, none waits), and
 * through Resilience4j's {@code @RateLimiter} aspect with a limiter no caller exhausts either. Also
 * the general path of the annotation: a method with two buckets ({@code twoBuckets}, to compare with
 * {@code rateLimited}: issue #15 asks for at most 2x) and one with {@code settle} ({@code settled}). And
 * {@code rateLimitedObserved}: {@code rateLimited} in an application with a recording {@code ObservationRegistry}
 * bean (observations on, issue #35): a call granted at once makes no {@code ratelimit.acquire} observation, so
 * its figure should be {@code rateLimited}'s within noise.
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

	private Resilience4jWork resilience4j;

	@Setup(Level.Trial)
	public void setUp() {
		this.context = new AnnotationConfigApplicationContext();
		this.context.getEnvironment()
			.getPropertySources()
			.addFirst(new MapPropertySource("bench", Map.of("ratelimit.buckets.bench.rate", "1000000000",
					"ratelimit.buckets.bench.limit", "1000000000", "ratelimit.buckets.second.rate", "1000000000",
					"ratelimit.buckets.second.limit", "1000000000")));
		this.context.register(RateLimitAutoConfiguration.class, Work.class);
		this.context.refresh();
		this.proxied = this.context.getBean(Work.class);
		if (this.proxied.getClass() == Work.class) {
			throw new IllegalStateException("@RateLimited bean was not proxied");
		}
		this.resilience4j = resilience4jProxy(this.context);
	}

	/** Resilience4j's own aspect, as its Spring configuration builds it, around the same shape of bean. */
	private static Resilience4jWork resilience4jProxy(AnnotationConfigApplicationContext context) {
		RateLimiterRegistry registry = RateLimiterRegistry.of(RateLimiterConfig.custom()
			.limitForPeriod(1_000_000_000)
			.limitRefreshPeriod(Duration.ofSeconds(1))
			.timeoutDuration(Duration.ZERO)
			.build());
		SpelResolver spel = new DefaultSpelResolver(new SpelExpressionParser(), new DefaultParameterNameDiscoverer(),
				context.getBeanFactory());
		RateLimiterAspect aspect = new RateLimiterAspect(registry, new RateLimiterConfigurationProperties(),
				List.of(), new FallbackExecutor(spel, new FallbackDecorators(List.of())), spel);
		AspectJProxyFactory factory = new AspectJProxyFactory(new Resilience4jWork());
		factory.setProxyTargetClass(true);
		factory.addAspect(aspect);
		return factory.getProxy();
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

	/**
	 * {@link #rateLimited()} with observations on: the same bean in a context whose {@code ObservationRegistry}
	 * records (a handler that takes every context), so that the starter observes waits and refusals.
	 *
	 * @param observed the context with the registry
	 * @return the counter
	 */
	@Benchmark
	public long rateLimitedObserved(Observed observed) {
		return observed.proxied.next();
	}

	@Benchmark
	public long twoBuckets() {
		return this.proxied.twice();
	}

	@Benchmark
	public long settled() {
		return this.proxied.settled();
	}

	@Benchmark
	public long resilience4jAspect() {
		return this.resilience4j.next();
	}

	/** The application of {@link #rateLimitedObserved}: the same buckets and bean, and an ObservationRegistry that records. */
	@State(Scope.Benchmark)
	public static class Observed {

		private AnnotationConfigApplicationContext context;

		private Work proxied;

		@Setup(Level.Trial)
		public void setUp() {
			this.context = new AnnotationConfigApplicationContext();
			this.context.getEnvironment()
				.getPropertySources()
				.addFirst(new MapPropertySource("bench", Map.of("ratelimit.buckets.bench.rate", "1000000000",
						"ratelimit.buckets.bench.limit", "1000000000", "ratelimit.buckets.second.rate", "1000000000",
						"ratelimit.buckets.second.limit", "1000000000")));
			ObservationRegistry observations = ObservationRegistry.create();
			observations.observationConfig().observationHandler((context) -> true); // records: not a no-op
			this.context.registerBean(ObservationRegistry.class, () -> observations);
			this.context.register(RateLimitAutoConfiguration.class, Work.class);
			this.context.refresh();
			this.proxied = this.context.getBean(Work.class);
			if (this.proxied.getClass() == Work.class) {
				throw new IllegalStateException("@RateLimited bean was not proxied");
			}
			if (this.context.getBean(dev.ratelimit.spring.WaitObserver.class) == dev.ratelimit.spring.WaitObserver.NONE) {
				throw new IllegalStateException("observations are not on: the starter saw no recording ObservationRegistry");
			}
		}

		@TearDown(Level.Trial)
		public void tearDown() {
			this.context.close();
		}
	}

	/** The same work under Resilience4j's annotation. */
	public static class Resilience4jWork {

		private long count;

		@io.github.resilience4j.ratelimiter.annotation.RateLimiter(name = "bench")
		public long next() {
			return ++this.count;
		}
	}

	/** The guarded work: a counter, so that the call itself costs next to nothing. */
	public static class Work {

		private long count;

		@RateLimited("bench")
		public long next() {
			return ++this.count;
		}

		@RateLimited("bench")
		@RateLimited("second")
		public long twice() {
			return ++this.count;
		}

		@RateLimited(value = "bench", settle = "1")
		public long settled() {
			return ++this.count;
		}
	}
}
