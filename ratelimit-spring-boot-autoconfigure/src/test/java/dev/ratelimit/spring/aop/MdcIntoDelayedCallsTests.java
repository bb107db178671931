package dev.ratelimit.spring.aop;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import io.micrometer.context.ContextRegistry;
import io.micrometer.context.integration.Slf4jThreadLocalAccessor;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.MDC;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The README's recipe: register {@code Slf4jThreadLocalAccessor} and a delayed {@code CompletableFuture}
 * call logs with its caller's MDC, on the starter's platform threads and on virtual threads, and the
 * MDC does not stay behind on a reused thread for the next caller.
 */
class MdcIntoDelayedCallsTests {

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(MdcConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withPropertyValues("ratelimit.buckets.async.rate=1", "ratelimit.buckets.async.limit=1",
				"ratelimit.buckets.async.max-wait=10s", "ratelimit.executor.max-threads=1");

	@BeforeEach
	void register() {
		ContextRegistry.getInstance().registerThreadLocalAccessor(new Slf4jThreadLocalAccessor("request"));
	}

	@AfterEach
	void unregister() {
		ContextRegistry.getInstance().removeThreadLocalAccessor(Slf4jThreadLocalAccessor.KEY);
		MDC.clear();
	}

	@Test
	void aDelayedCallSeesItsCallersMdcAndLeavesNoneBehind() {
		this.runner.run((context) -> {
			Mdc service = context.getBean(Mdc.class);
			MDC.put("request", "r-1");
			assertThat(service.request().get(5, TimeUnit.SECONDS)).isEqualTo("r-1 on main");
			CompletableFuture<String> delayed = service.request();
			MDC.remove("request");
			this.now.addAndGet(TimeUnit.SECONDS.toNanos(1));
			assertThat(delayed.get(5, TimeUnit.SECONDS)).isEqualTo("r-1 on ratelimit-run-1");
			CompletableFuture<String> anonymous = service.request(); // no MDC, same (only) thread
			this.now.addAndGet(TimeUnit.SECONDS.toNanos(1));
			assertThat(anonymous.get(5, TimeUnit.SECONDS)).isEqualTo("null on ratelimit-run-1");
		});
	}

	@Test
	void onVirtualThreadsToo() {
		org.junit.jupiter.api.Assumptions.assumeTrue(Runtime.version().feature() >= 21);
		this.runner.withPropertyValues("ratelimit.executor.virtual-threads=true").run((context) -> {
			Mdc service = context.getBean(Mdc.class);
			service.request().get(5, TimeUnit.SECONDS);
			MDC.put("request", "r-2");
			CompletableFuture<String> delayed = service.request();
			MDC.remove("request");
			this.now.addAndGet(TimeUnit.SECONDS.toNanos(1));
			assertThat(delayed.get(5, TimeUnit.SECONDS)).isEqualTo("r-2 on virtual");
		});
	}

	@Configuration(proxyBeanMethods = false)
	static class MdcConfiguration {

		@Bean
		Mdc mdc() {
			return new Mdc();
		}
	}

	static class Mdc {

		@RateLimited("async")
		public CompletableFuture<String> request() throws Exception {
			Thread thread = Thread.currentThread();
			boolean virtual = Runtime.version().feature() >= 21
					&& (Boolean) Thread.class.getMethod("isVirtual").invoke(thread);
			return CompletableFuture.completedFuture(MDC.get("request") + " on " + (virtual ? "virtual" : thread.getName()));
		}
	}
}
