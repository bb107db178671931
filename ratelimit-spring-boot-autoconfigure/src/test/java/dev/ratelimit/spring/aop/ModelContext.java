package dev.ratelimit.spring.aop;

import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.autoconfigure.RateLimitMetricsAutoConfiguration;
import dev.ratelimit.spring.engine.RateLimitExecutors;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.micrometer.metrics.autoconfigure.CompositeMeterRegistryAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.MetricsAutoConfiguration;
import org.springframework.boot.micrometer.metrics.autoconfigure.export.simple.SimpleMetricsExportAutoConfiguration;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/**
 * The application a model test runs its sequences against: the starter with its meters (a simple meter
 * registry), the test's guarded service, the fake clock as {@link RateLimitClock}, and a
 * {@link ManualTimer} as the starter's timer, delayed calls running on the polling thread; so nothing runs
 * unless the test runs it.
 *
 * <p>Read by {@link AsyncSingleBucketModelTests} and {@link SeveralBucketsPollModelTests}, which add their
 * buckets' properties (and beans of their own).
 */
final class ModelContext {

	private ModelContext() {
	}

	/** A runner of the application, with the test's configuration of its service. */
	static ApplicationContextRunner runner(AtomicLong clock, ManualTimer timer, Class<?> serviceConfiguration) {
		return new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(MetricsAutoConfiguration.class,
					CompositeMeterRegistryAutoConfiguration.class, SimpleMetricsExportAutoConfiguration.class,
					RateLimitAutoConfiguration.class, RateLimitMetricsAutoConfiguration.class))
			.withUserConfiguration(serviceConfiguration)
			.withBean(RateLimitClock.class, () -> clock::get)
			.withBean(RateLimitExecutors.class, () -> new RateLimitExecutors(timer, Runnable::run));
	}

	/** Fails when the application did not start (a model test has nothing to check then). */
	static void started(AssertableApplicationContext context) {
		if (context.getStartupFailure() != null) {
			throw new AssertionError("context did not start", context.getStartupFailure());
		}
	}
}
