package dev.ratelimit.spring.actuate;

import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.spring.BucketStatsFactory;
import dev.ratelimit.spring.WaitObserver;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.observation.ObservationRegistry;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingClass;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * What every bucket records, part of the starter's auto-configuration (imported by
 * {@code RateLimitAutoConfiguration}, before any bucket is made): its counts, its waits timed on the
 * application's Micrometer registry when there is one, and the {@code ratelimit.acquire} observations when
 * an {@code ObservationRegistry} records. Here, so that the recorders stay inside this package.
 */
@Configuration(proxyBeanMethods = false)
public final class RateLimitObservabilityConfiguration {

	@Configuration(proxyBeanMethods = false)
	@ConditionalOnMissingClass("io.micrometer.core.instrument.MeterRegistry")
	static class CountingStatsConfiguration {

		@Bean
		@ConditionalOnMissingBean
		BucketStatsFactory rateLimitBucketStatsFactory() {
			return (bucket) -> StatsRecorder.concurrent();
		}
	}

	/**
	 * With Micrometer on the class path, buckets also time their waits on the application's registry
	 * (looked up when a bucket is made, after every registry exists; without one, they only count).
	 */
	@Configuration(proxyBeanMethods = false)
	@ConditionalOnClass(name = "io.micrometer.core.instrument.MeterRegistry")
	static class MicrometerStatsConfiguration {

		@Bean
		@ConditionalOnMissingBean
		BucketStatsFactory rateLimitBucketStatsFactory(ObjectProvider<MeterRegistry> meters) {
			MicrometerBucketStatsFactory timed = new MicrometerBucketStatsFactory(meters::getObject);
			return (bucket) -> (meters.getIfAvailable() != null) ? timed.create(bucket) : StatsRecorder.concurrent();
		}
	}

	/**
	 * With Micrometer's observation API on the class path and an {@code ObservationRegistry} that records,
	 * calls that wait or are refused make a {@code ratelimit.acquire} observation; without one, buckets
	 * observe nothing and pay nothing.
	 */
	@Configuration(proxyBeanMethods = false)
	@ConditionalOnClass(name = "io.micrometer.observation.ObservationRegistry")
	static class ObservationConfiguration {

		@Bean
		@ConditionalOnMissingBean
		WaitObserver rateLimitWaitObserver(ObjectProvider<ObservationRegistry> registry,
				ObjectProvider<RateLimitObservationConvention> convention) {
			ObservationRegistry observations = registry.getIfAvailable();
			if (observations == null || observations.isNoop()) {
				return WaitObserver.NONE;
			}
			return new ObservationWaitObserver(observations, convention.getIfAvailable());
		}
	}
}
