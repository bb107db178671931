package dev.ratelimit.spring.aop;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import io.micrometer.context.ContextRegistry;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The threads of the {@code CompletionStage} path belong to the starter (or to the application) and
 * end with the context; a call that waited never runs on {@code ForkJoinPool.commonPool()}.
 */
class RateLimitExecutorsTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(ServiceConfiguration.class)
		// one token, then one every 50 ms: the second call waits
		.withPropertyValues("ratelimit.buckets.async.rate=20", "ratelimit.buckets.async.limit=1",
				"ratelimit.buckets.async.max-wait=5s");

	@Test
	void aCallThatWaitedRunsOnTheStartersThreadsWhichEndWithTheContext() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			service.where().get(5, TimeUnit.SECONDS);
			assertThat(service.where().get(5, TimeUnit.SECONDS)).startsWith("ratelimit-run-");
			assertThat(threadsNamed("ratelimit-timer")).isPositive();
		});
		Awaitility.await().atMost(java.time.Duration.ofSeconds(5)).until(() -> threadsNamed("ratelimit-timer") == 0);
	}

	@Test
	void theApplicationsExecutorRunsDelayedCallsWhenItHasOne() {
		this.runner.withUserConfiguration(OwnExecutorConfiguration.class).run((context) -> {
			Service service = context.getBean(Service.class);
			service.where().get(5, TimeUnit.SECONDS);
			assertThat(service.where().get(5, TimeUnit.SECONDS)).startsWith("own-");
		});
	}

	@Test
	void aDelayedCallRunsWithItsCallersContext() {
		ThreadLocal<String> tenant = new ThreadLocal<>();
		ContextRegistry.getInstance().registerThreadLocalAccessor("test.tenant", tenant::get, tenant::set, tenant::remove);
		try {
			assertThat(delayedTenant(this.runner, tenant)).isEqualTo("acme on ratelimit-run-");
			assertThat(delayedTenant(this.runner.withPropertyValues("ratelimit.executor.propagate-context=false"),
					tenant)).isEqualTo("null on ratelimit-run-");
		}
		finally {
			ContextRegistry.getInstance().removeThreadLocalAccessor("test.tenant");
		}
	}

	/** What a call that had to wait (on a fake clock) sees of the caller's tenant, and where it runs. */
	private static String delayedTenant(ApplicationContextRunner runner, ThreadLocal<String> tenant) {
		AtomicLong now = new AtomicLong();
		AtomicReference<String> seen = new AtomicReference<>();
		runner.withBean(RateLimitClock.class, () -> now::get).run((context) -> {
			Service service = context.getBean(Service.class);
			tenant.set("acme");
			try {
				service.where().get(5, TimeUnit.SECONDS);
				CompletableFuture<String> delayed = service.tenant(tenant);
				now.addAndGet(TimeUnit.SECONDS.toNanos(1));
				seen.set(delayed.get(5, TimeUnit.SECONDS));
			}
			finally {
				tenant.remove();
			}
		});
		return seen.get();
	}

	@Test
	void maxThreadsBoundsTheStartersThreads() {
		AtomicLong now = new AtomicLong();
		this.runner.withPropertyValues("ratelimit.executor.max-threads=1")
			.withBean(RateLimitClock.class, () -> now::get)
			.run((context) -> {
				Service service = context.getBean(Service.class);
				service.where().get(5, TimeUnit.SECONDS);
				List<CompletableFuture<String>> delayed = new ArrayList<>();
				for (int i = 0; i < 5; i++) {
					delayed.add(service.where());
				}
				now.addAndGet(TimeUnit.SECONDS.toNanos(1));
				for (CompletableFuture<String> call : delayed) {
					assertThat(call.get(5, TimeUnit.SECONDS)).isEqualTo("ratelimit-run-1");
				}
			});
		this.runner.withPropertyValues("ratelimit.executor.max-threads=-1").run((context) -> {
			assertThat(context).hasFailed();
			assertThat(context.getStartupFailure()).rootCause().hasMessageContaining("ratelimit.executor.max-threads");
		});
	}

	@Test
	void virtualThreadsRunDelayedCallsOnJava21AndLaterAndFailStartUpClearlyBefore() {
		AtomicLong now = new AtomicLong();
		ApplicationContextRunner virtual = this.runner.withPropertyValues("ratelimit.executor.virtual-threads=true")
			.withBean(RateLimitClock.class, () -> now::get);
		if (Runtime.version().feature() >= 21) {
			virtual.run((context) -> {
				Service service = context.getBean(Service.class);
				service.where().get(5, TimeUnit.SECONDS);
				CompletableFuture<Boolean> delayed = service.virtual();
				now.addAndGet(TimeUnit.SECONDS.toNanos(1));
				assertThat(delayed.get(5, TimeUnit.SECONDS)).isTrue();
				// a delayed call's virtual thread is named like the starter's platform threads, for dumps and logs
				service.where().get(5, TimeUnit.SECONDS); // the token there: runs on the caller's thread
				CompletableFuture<String> named = service.where();
				now.addAndGet(TimeUnit.SECONDS.toNanos(1));
				assertThat(named.get(5, TimeUnit.SECONDS)).matches("ratelimit-run-[0-9]+");
			});
		}
		else {
			virtual.run((context) -> {
				assertThat(context).hasFailed();
				assertThat(context.getStartupFailure()).hasStackTraceContaining("need Java 21 or later")
					.rootCause().isInstanceOf(dev.ratelimit.spring.RateLimitConfigurationException.class);
			});
		}
	}

	private static long threadsNamed(String prefix) {
		return Thread.getAllStackTraces().keySet().stream()
			.filter((thread) -> thread.isAlive() && thread.getName().startsWith(prefix))
			.count();
	}

	@Configuration(proxyBeanMethods = false)
	static class ServiceConfiguration {

		@Bean
		Service service() {
			return new Service();
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class OwnExecutorConfiguration {

		@Bean(destroyMethod = "shutdown")
		ExecutorService rateLimitTaskExecutor() {
			return Executors.newSingleThreadExecutor((runnable) -> {
				Thread thread = new Thread(runnable, "own-executor");
				thread.setDaemon(true);
				return thread;
			});
		}
	}

	static class Service {

		@RateLimited("async")
		public CompletableFuture<String> where() {
			return CompletableFuture.completedFuture(Thread.currentThread().getName());
		}

		@RateLimited("async")
		public CompletableFuture<String> tenant(ThreadLocal<String> tenant) {
			String thread = Thread.currentThread().getName();
			return CompletableFuture.completedFuture(tenant.get() + " on " + thread.replaceAll("[0-9]+$", ""));
		}

		@RateLimited("async")
		public CompletableFuture<Boolean> virtual() throws Exception {
			return CompletableFuture.completedFuture((Boolean) Thread.class.getMethod("isVirtual").invoke(Thread.currentThread()));
		}
	}
}
