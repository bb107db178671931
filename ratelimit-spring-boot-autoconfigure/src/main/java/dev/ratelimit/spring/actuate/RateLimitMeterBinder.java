package dev.ratelimit.spring.actuate;

import java.util.EnumMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.ToDoubleFunction;

import dev.ratelimit.core.BackendHealth;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.BucketStats;
import dev.ratelimit.spring.BucketType;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RegisteredBucket;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.binder.MeterBinder;

/**
 * Binds every bucket's meters, tagged {@code bucket=<name>}: {@code ratelimit.calls} (function counters
 * over the bucket's own counts, so counting costs the hot path nothing more), {@code ratelimit.wait},
 * and the gauges {@code ratelimit.tokens.available}, {@code ratelimit.tokens.deficiency},
 * {@code ratelimit.waiting}, {@code ratelimit.in.flight} and, for hybrid buckets,
 * {@code ratelimit.pool.level{pool=active|burst|waiting}}, and for buckets on another backend
 * {@code ratelimit.backend.up{backend=...}} and the timer
 * {@code ratelimit.backend.calls{backend=...,outcome=ok|timeout|error}}. Counters and gauges hold their bucket weakly.
 */
public class RateLimitMeterBinder implements MeterBinder {

	/**
	 * One description for every outcome: Prometheus writes one {@code HELP} line per meter name, so it
	 * must describe the meter, not one of its outcomes.
	 */
	static final String CALLS_DESCRIPTION = "Calls to a rate-limited bucket, by outcome: granted, rejected,"
			+ " shadow-rejected (refused by a bucket in shadow mode, and let through)";


	private final RateLimiterRegistry registry;

	/**
	 * Creates the binder.
	 *
	 * @param registry the buckets
	 */
	public RateLimitMeterBinder(RateLimiterRegistry registry) {
		this.registry = registry;
	}

	@Override
	public void bindTo(MeterRegistry meters) {
		for (String name : this.registry.names()) {
			this.registry.find(name).ifPresent((bucket) -> bind(meters, bucket));
		}
	}

	private static void bind(MeterRegistry meters, RegisteredBucket bucket) {
		String name = bucket.name();
		RateLimiter limiter = bucket.limiter();
		FunctionCounter.builder("ratelimit.calls", limiter, (l) -> l.snapshot().granted())
			.tags("bucket", name, "outcome", "granted")
			.description(CALLS_DESCRIPTION)
			.register(meters);
		FunctionCounter.builder("ratelimit.calls", limiter, (l) -> l.snapshot().rejected())
			.tags("bucket", name, "outcome", "rejected")
			.description(CALLS_DESCRIPTION)
			.register(meters);
		FunctionCounter.builder("ratelimit.calls", bucket.stats(), BucketStats::shadowRejected)
			.tags("bucket", name, "outcome", "shadow-rejected")
			.description(CALLS_DESCRIPTION)
			.register(meters);
		Timer.builder("ratelimit.wait")
			.tag("bucket", name)
			.description("Time granted calls spent waiting for tokens")
			.register(meters);
		gauge(meters, "ratelimit.tokens.available", name, limiter, RateLimiterSnapshot::available,
				"Tokens a caller could take now without waiting");
		gauge(meters, "ratelimit.tokens.deficiency", name, limiter, RateLimiterSnapshot::deficiency,
				"Tokens claimed by waiting callers but not yet there");
		gauge(meters, "ratelimit.waiting", name, limiter, RateLimiterSnapshot::waiting, "Callers waiting now");
		gauge(meters, "ratelimit.in.flight", name, limiter, RateLimiterSnapshot::inFlight,
				"Tokens taken by calls that have not released them");
		if (limiter instanceof BackendHealth backend) {
			Gauge.builder("ratelimit.backend.up", backend, (b) -> b.isUp() ? 1 : 0)
				.tags("bucket", name, "backend", bucket.backend())
				.description("1 while the bucket's backend answers, 0 while it applies its failure policy")
				.register(meters);
			Map<BackendHealth.Outcome, Timer> calls = new EnumMap<>(BackendHealth.Outcome.class);
			for (BackendHealth.Outcome outcome : BackendHealth.Outcome.values()) {
				calls.put(outcome, Timer.builder("ratelimit.backend.calls")
					.tags("bucket", name, "backend", bucket.backend(), "outcome", outcome.tag())
					.description("Calls from a bucket to its backend, by outcome: ok, timeout, error")
					.register(meters));
			}
			backend.onCall((outcome, nanos) -> calls.get(outcome).record(nanos, TimeUnit.NANOSECONDS));
		}
		bucket.whenKeyed((keys) -> {
			Gauge.builder("ratelimit.keys.active", keys, KeyedBuckets::size)
				.tag("bucket", name)
				.description("Keys with a bucket of their own")
				.register(meters);
			FunctionCounter.builder("ratelimit.keys.overflow", keys, KeyedBuckets::overflowCalls)
				.tag("bucket", name)
				.description("Calls limited by the overflow bucket shared by keys beyond keys.max")
				.register(meters);
		});
		if (bucket.type().equals(BucketType.HYBRID.value())) {
			poolGauge(meters, name, limiter, "active", (p) -> p.active());
			poolGauge(meters, name, limiter, "burst", (p) -> p.burst());
			poolGauge(meters, name, limiter, "waiting", (p) -> p.waiting());
		}
	}

	private static void gauge(MeterRegistry meters, String meter, String bucket, RateLimiter limiter,
			ToDoubleFunction<RateLimiterSnapshot> value, String description) {
		Gauge.builder(meter, limiter, (l) -> value.applyAsDouble(l.snapshot()))
			.tag("bucket", bucket)
			.description(description)
			.register(meters);
	}

	private static void poolGauge(MeterRegistry meters, String bucket, RateLimiter limiter, String pool,
			ToDoubleFunction<RateLimiterSnapshot.Pools> level) {
		Gauge.builder("ratelimit.pool.level", limiter, (l) -> {
			RateLimiterSnapshot.Pools pools = l.snapshot().pools();
			return (pools != null) ? level.applyAsDouble(pools) : Double.NaN;
		}).tags("bucket", bucket, "pool", pool).description("Level of a pacer's pool, in operations").register(meters);
	}
}
