package dev.ratelimit.spring.aop;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.RateLimitAutoConfiguration;
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
	}
}
