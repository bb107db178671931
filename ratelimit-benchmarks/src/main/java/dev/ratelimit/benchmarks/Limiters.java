package dev.ratelimit.benchmarks;

import java.time.Duration;

import com.google.common.util.concurrent.RateLimiter;
import dev.ratelimit.core.CalendarQuota;
import dev.ratelimit.core.HybridRateLimiter;
import dev.ratelimit.core.QuotaCalendar;
import dev.ratelimit.core.SharedTokenBucket;
import io.github.bucket4j.Bandwidth;
import io.github.bucket4j.Bucket;
import io.github.resilience4j.ratelimiter.RateLimiterConfig;
import io.github.resilience4j.ratelimiter.internal.AtomicRateLimiter;

/**
 * The limiters under test (ours: the rover bucket, the pacer, the calendar quota; the peers), each built for a rate per second and a burst in tokens, with their
 * try call and their blocking call behind one interface.
 */
public enum Limiters {

	SHARED {
		@Override
		Limiter create(long perSecond, long burst) {
			SharedTokenBucket bucket = SharedTokenBucket.builder().rate(perSecond, Duration.ofSeconds(1)).limit(burst)
				.build();
			return new Limiter() {
				@Override
				public boolean tryAcquire() {
					return bucket.tryAcquire(1);
				}

				@Override
				public void acquire() throws InterruptedException {
					bucket.acquire(1, Duration.ofMinutes(1)).close();
				}
			};
		}
	},

	HYBRID {
		@Override
		Limiter create(long perSecond, long burst) {
			HybridRateLimiter pacer = HybridRateLimiter.builder().rate(perSecond, Duration.ofSeconds(1)).limit(burst)
				.burstRatio(1.0).build();
			return new Limiter() {
				@Override
				public boolean tryAcquire() {
					return pacer.tryAcquire(1);
				}

				@Override
				public void acquire() throws InterruptedException {
					pacer.acquire(1, Duration.ofMinutes(1)).close();
				}
			};
		}
	},

	/**
	 * A calendar quota of a minute's worth of the rate per calendar minute: permissive, it never runs out
	 * in a run; saturated, it runs out within seconds and refuses until the minute turns.
	 */
	QUOTA {
		@Override
		Limiter create(long perSecond, long burst) {
			CalendarQuota quota = CalendarQuota.builder().limit(Math.min(perSecond * 60, 1L << 50))
				.calendar(QuotaCalendar.Unit.MINUTE).build();
			return new Limiter() {
				@Override
				public boolean tryAcquire() {
					return quota.tryAcquire(1);
				}

				@Override
				public void acquire() throws InterruptedException {
					quota.acquire(1, Duration.ofMinutes(1)).close();
				}
			};
		}
	},

	GUAVA {
		@Override
		@SuppressWarnings("UnstableApiUsage")
		Limiter create(long perSecond, long burst) {
			// Guava banks at most one second of permits (SmoothBursty's default)
			RateLimiter limiter = RateLimiter.create(perSecond);
			return new Limiter() {
				@Override
				public boolean tryAcquire() {
					return limiter.tryAcquire();
				}

				@Override
				public void acquire() {
					limiter.acquire();
				}
			};
		}
	},

	RESILIENCE4J {
		@Override
		Limiter create(long perSecond, long burst) {
			// a cycle of `burst` permits every burst / rate
			long cycleNanos = Math.max(1, burst * 1_000_000_000L / perSecond);
			RateLimiterConfig config = RateLimiterConfig.custom()
				.limitForPeriod((int) burst)
				.limitRefreshPeriod(Duration.ofNanos(cycleNanos))
				.timeoutDuration(Duration.ZERO)
				.build();
			AtomicRateLimiter limiter = new AtomicRateLimiter("bench", config);
			AtomicRateLimiter blocking = new AtomicRateLimiter("bench-blocking",
					RateLimiterConfig.from(config).timeoutDuration(Duration.ofMinutes(1)).build());
			return new Limiter() {
				@Override
				public boolean tryAcquire() {
					return limiter.acquirePermission();
				}

				@Override
				public void acquire() {
					blocking.acquirePermission();
				}
			};
		}
	},

	BUCKET4J {
		@Override
		Limiter create(long perSecond, long burst) {
			Bucket bucket = Bucket.builder()
				.addLimit(Bandwidth.builder().capacity(burst).refillGreedy(perSecond, Duration.ofSeconds(1)).build())
				.withNanosecondPrecision()
				.build();
			return new Limiter() {
				@Override
				public boolean tryAcquire() {
					return bucket.tryConsume(1);
				}

				@Override
				public void acquire() throws InterruptedException {
					bucket.asBlocking().consume(1);
				}
			};
		}
	};

	abstract Limiter create(long perSecond, long burst);

	/** A limiter's try and blocking calls. */
	public interface Limiter {

		boolean tryAcquire();

		void acquire() throws InterruptedException;
	}
}
