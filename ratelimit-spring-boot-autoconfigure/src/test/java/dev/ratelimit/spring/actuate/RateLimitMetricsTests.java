package dev.ratelimit.spring.actuate;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.BucketStatsFactory;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.autoconfigure.RateLimitMetricsAutoConfiguration;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Metrics;
import io.micrometer.core.instrument.Timer;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class RateLimitMetricsTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(MetricsAutoConfiguration.class,
				CompositeMeterRegistryAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
				RateLimitAutoConfiguration.class, RateLimitMetricsAutoConfiguration.class))
		.withPropertyValues("ratelimit.buckets.db.rate=2", "ratelimit.buckets.db.period=1h",
				"ratelimit.buckets.db.max-wait=0", "ratelimit.buckets.fast.rate=200", "ratelimit.buckets.fast.limit=1",
				"ratelimit.buckets.fast.initial=0", "ratelimit.buckets.io.rate=1000", "ratelimit.buckets.io.limit=3",
				"ratelimit.buckets.io.capped-release=true", "ratelimit.buckets.feed.type=hybrid",
				"ratelimit.buckets.feed.rate=12000");

	@Test
	void countsGrantedAndRejectedCallsTaggedByBucketAndOutcome() {
		this.runner.run((context) -> {
			MeterRegistry meters = context.getBean(MeterRegistry.class);
			RateLimiter db = context.getBean("db", RateLimiter.class);
			db.acquire(1, Duration.ZERO).close();
			db.acquire(1, Duration.ZERO).close();
			assertThatThrownBy(() -> db.acquire(1, Duration.ZERO)).isInstanceOf(RateLimitExceededException.class);
			assertThat(meters.get("ratelimit.calls").tags("bucket", "db", "outcome", "granted").functionCounter().count())
				.isEqualTo(2);
			assertThat(meters.get("ratelimit.calls").tags("bucket", "db", "outcome", "rejected").functionCounter().count())
				.isEqualTo(1);
			// Prometheus writes one HELP line per name: it describes the meter, not one outcome
			assertThat(meters.find("ratelimit.calls").meters()).extracting((meter) -> meter.getId().getDescription())
				.containsOnly(RateLimitMeterBinder.CALLS_DESCRIPTION);
			assertThat(meters.get("ratelimit.tokens.available").tag("bucket", "db").gauge().value()).isZero();
			assertThat(meters.get("ratelimit.waiting").tag("bucket", "db").gauge().value()).isZero();
			Timer waits = meters.get("ratelimit.wait").tag("bucket", "db").timer();
			assertThat(waits.count()).isZero();
			assertThat(meters.getMeters()).allSatisfy((meter) -> {
				if (meter.getId().getName().startsWith("ratelimit.")) {
					assertThat(meter.getId().getTag("bucket")).isNotNull();
				}
			});
		});
	}

	@Test
	void timesOnlyTheCallsThatWaited() {
		AtomicLong now = new AtomicLong(1_000_000_000L);
		this.runner.withBean(RateLimitClock.class, () -> now::get).run((context) -> {
			MeterRegistry meters = context.getBean(MeterRegistry.class);
			RateLimiter fast = context.getBean("fast", RateLimiter.class);
			Reservation reservation = fast.reserve(1, Duration.ofSeconds(1));
			long delay = reservation.poll();
			assertThat(delay).isEqualTo(5_000_000);
			now.addAndGet(delay);
			assertThat(reservation.poll()).isZero();
			reservation.permit().close();
			now.addAndGet(5_000_000);
			fast.acquire(1, Duration.ZERO).close();
			Timer waits = meters.get("ratelimit.wait").tag("bucket", "fast").timer();
			assertThat(waits.count()).isEqualTo(1);
			assertThat(waits.totalTime(TimeUnit.MILLISECONDS)).isEqualTo(5.0);
		});
	}

	@Test
	void showsTokensInFlightForCappedRelease() {
		this.runner.run((context) -> {
			MeterRegistry meters = context.getBean(MeterRegistry.class);
			RateLimiter io = context.getBean("io", RateLimiter.class);
			Permit first = io.acquire(1, Duration.ZERO);
			Permit second = io.acquire(1, Duration.ZERO);
			assertThat(meters.get("ratelimit.in.flight").tag("bucket", "io").gauge().value()).isEqualTo(2);
			assertThat(meters.get("ratelimit.tokens.available").tag("bucket", "io").gauge().value()).isEqualTo(1);
			first.close();
			second.close();
			assertThat(meters.get("ratelimit.in.flight").tag("bucket", "io").gauge().value()).isZero();
		});
	}

	@Test
	void showsThePoolLevelsOfHybridBucketsOnly() {
		this.runner.run((context) -> {
			MeterRegistry meters = context.getBean(MeterRegistry.class);
			assertThat(meters.get("ratelimit.pool.level").tags("bucket", "feed", "pool", "active").gauge().value())
				.isEqualTo(12.0);
			// burst holds at most active * (1.1 - 1) = 1.2 operations
			assertThat(meters.get("ratelimit.pool.level").tags("bucket", "feed", "pool", "burst").gauge().value())
				.isBetween(0.0, 1.2);
			assertThat(meters.get("ratelimit.pool.level").tags("bucket", "feed", "pool", "waiting").gauge())
				.isNotNull();
			assertThat(meters.find("ratelimit.pool.level").tag("bucket", "db").gauge()).isNull();
			assertThat(meters.get("ratelimit.tokens.deficiency").tag("bucket", "feed").gauge().value()).isZero();
		});
	}

	@Test
	void metersAHybridBucketThroughGrantedRejectedAndWaitedCalls() {
		AtomicLong now = new AtomicLong(1_000_000_000L);
		this.runner.withBean(RateLimitClock.class, () -> now::get).run((context) -> {
			MeterRegistry meters = context.getBean(MeterRegistry.class);
			RateLimiter feed = context.getBean("feed", RateLimiter.class);
			// 12000/s: the active pool holds 1 ms, 12 operations, and starts full
			assertThat(feed.tryAcquire(12)).isTrue();
			assertThat(feed.tryAcquire(1)).isFalse();
			assertThat(gauge(meters, "ratelimit.pool.level", "feed", "pool", "active")).isZero();
			Reservation reservation = feed.reserve(1, Duration.ofSeconds(1));
			long delay = reservation.poll();
			assertThat(delay).isPositive();
			assertThat(gauge(meters, "ratelimit.waiting", "feed")).isEqualTo(1);
			assertThat(gauge(meters, "ratelimit.tokens.deficiency", "feed")).isPositive();
			now.addAndGet(delay);
			assertThat(reservation.poll()).isZero();
			reservation.permit().close();
			assertThat(gauge(meters, "ratelimit.waiting", "feed")).isZero();
			assertThat(gauge(meters, "ratelimit.in.flight", "feed")).isZero();
			assertThat(meters.get("ratelimit.calls").tags("bucket", "feed", "outcome", "granted").functionCounter().count())
				.isEqualTo(2);
			assertThat(meters.get("ratelimit.calls").tags("bucket", "feed", "outcome", "rejected").functionCounter().count())
				.isEqualTo(1);
			Timer waits = meters.get("ratelimit.wait").tag("bucket", "feed").timer();
			assertThat(waits.count()).isEqualTo(1);
			assertThat(waits.totalTime(TimeUnit.NANOSECONDS)).isEqualTo(delay);
			now.addAndGet(Duration.ofSeconds(1).toNanos());
			// a second idle: the active pool refills, the rest of the second is the backlog
			assertThat(gauge(meters, "ratelimit.pool.level", "feed", "pool", "active")).isEqualTo(12.0);
			double burst = gauge(meters, "ratelimit.pool.level", "feed", "pool", "burst");
			assertThat(burst).isBetween(0.0, 1.2);
			assertThat(gauge(meters, "ratelimit.pool.level", "feed", "pool", "waiting")).isGreaterThan(11_000.0);
			assertThat(gauge(meters, "ratelimit.tokens.available", "feed")).isGreaterThanOrEqualTo(12.0);
		});
	}

	private static double gauge(MeterRegistry meters, String name, String bucket, String... tags) {
		return meters.get(name).tag("bucket", bucket).tags(tags).gauge().value();
	}

	@Test
	void neverUsesTheGlobalRegistry() {
		this.runner.run((context) -> assertThat(Metrics.globalRegistry.find("ratelimit.calls").meters()).isEmpty());
	}

	@Test
	void backsOffWithoutMicrometer() {
		this.runner.withClassLoader(new FilteredClassLoader("io.micrometer.core"))
			.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class, RateLimitMetricsAutoConfiguration.class))
			.run((context) -> {
				assertThat(context).hasNotFailed();
				assertThat(context).doesNotHaveBean(RateLimitMeterBinder.class);
				assertThat(context.getBean("db", RateLimiter.class).tryAcquire(1)).isTrue();
			});
	}

	@Test
	void backsOffWithoutAMeterRegistry() {
		new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class, RateLimitMetricsAutoConfiguration.class))
			.withPropertyValues("ratelimit.buckets.db.rate=2")
			.run((context) -> {
				assertThat(context).hasNotFailed();
				assertThat(context).doesNotHaveBean(RateLimitMeterBinder.class);
				assertThat(context).getBean(BucketStatsFactory.class).isNotInstanceOf(MicrometerBucketStatsFactory.class);
			});
	}
}
