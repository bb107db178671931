package dev.ratelimit.spring.aop;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import io.micrometer.common.KeyValue;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.observation.tck.TestObservationRegistry;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static io.micrometer.observation.tck.TestObservationRegistryAssert.assertThat;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Contract revision 3: with an {@code ObservationRegistry}, a call that waits or is refused (a shadow
 * bucket's would-be refusal included) makes a {@code ratelimit.acquire} observation with the keys
 * {@code bucket} and {@code outcome}; a call granted at once, and a shadow call that would only have
 * waited, make none. For blocking, {@code CompletionStage} and {@code Mono} methods, one bucket and
 * several; time from a fake clock.
 */
class AcquireObservationTests {

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	private final TestObservationRegistry observations = TestObservationRegistry.create();

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(ServiceConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withBean(ObservationRegistry.class, () -> this.observations)
		.withPropertyValues("ratelimit.buckets.paced.rate=10", "ratelimit.buckets.paced.limit=1",
				"ratelimit.buckets.paced.max-wait=1s", "ratelimit.buckets.strict.rate=1",
				"ratelimit.buckets.strict.period=1h", "ratelimit.buckets.strict.limit=1",
				"ratelimit.buckets.strict.max-wait=0", "ratelimit.buckets.trial.rate=1",
				"ratelimit.buckets.trial.period=1h", "ratelimit.buckets.trial.limit=1",
				"ratelimit.buckets.trial.max-wait=1s", "ratelimit.buckets.trial.mode=shadow");

	@Test
	void aCallGrantedAtOnceMakesNoObservation() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			assertThat(service.paced()).isEqualTo("ran");
			assertThat(service.strict()).isEqualTo("ran");
			assertThat(this.observations).doesNotHaveAnyObservation();
		});
	}

	@Test
	void aBlockingCallThatWaitsIsObservedAsGranted() throws Exception {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			service.paced();
			CompletableFuture<String> waiting = CompletableFuture.supplyAsync(service::paced);
			awaitWaiting(context, "paced");
			this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(100));
			assertThat(waiting.get(10, TimeUnit.SECONDS)).isEqualTo("ran");
			assertThat(this.observations).hasNumberOfObservationsEqualTo(1)
				.hasObservationWithNameEqualTo("ratelimit.acquire")
				.that()
				.hasLowCardinalityKeyValue("bucket", "paced")
				.hasLowCardinalityKeyValue("outcome", "granted")
				.hasBeenStopped();
		});
	}

	@Test
	void aRefusedCallIsObservedAsRejectedNamingTheBucket() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			service.strict();
			assertThatThrownBy(service::strict).isInstanceOf(RateLimitExceededException.class);
			assertThat(this.observations).hasNumberOfObservationsEqualTo(1)
				.hasObservationWithNameEqualTo("ratelimit.acquire")
				.that()
				.hasLowCardinalityKeyValue("bucket", "strict")
				.hasLowCardinalityKeyValue("outcome", "rejected")
				.hasBeenStopped();
		});
	}

	@Test
	void aRefusalByOneOfSeveralBucketsNamesTheRefusingBucket() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			service.both();
			assertThatThrownBy(service::both).isInstanceOf(RateLimitExceededException.class);
			assertThat(this.observations).hasNumberOfObservationsEqualTo(1)
				.hasObservationWithNameEqualTo("ratelimit.acquire")
				.that()
				.hasLowCardinalityKeyValue("bucket", "strict")
				.hasLowCardinalityKeyValue("outcome", "rejected");
		});
	}

	@Test
	void aCompletionStageCallThatWaitsIsObservedAsGranted() throws Exception {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			service.pacedLater().get(5, TimeUnit.SECONDS);
			CompletableFuture<String> waiting = service.pacedLater();
			awaitWaiting(context, "paced");
			this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(100));
			assertThat(waiting.get(10, TimeUnit.SECONDS)).isEqualTo("ran");
			Awaitility.await()
				.atMost(Duration.ofSeconds(10))
				.untilAsserted(() -> assertThat(this.observations).hasNumberOfObservationsEqualTo(1)
					.hasObservationWithNameEqualTo("ratelimit.acquire")
					.that()
					.hasLowCardinalityKeyValue("outcome", "granted")
					.hasBeenStopped());
		});
	}

	@Test
	void aRefusedMonoIsObservedAsRejected() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			StepVerifier.create(service.strictMono()).expectNext("ran").verifyComplete();
			StepVerifier.create(service.strictMono()).verifyError(RateLimitExceededException.class);
			assertThat(this.observations).hasNumberOfObservationsEqualTo(1)
				.hasObservationWithNameEqualTo("ratelimit.acquire")
				.that()
				.hasLowCardinalityKeyValue("bucket", "strict")
				.hasLowCardinalityKeyValue("outcome", "rejected");
		});
	}

	@Test
	void aShadowBucketsWouldBeRefusalIsObservedAndItsWouldBeWaitIsNot() {
		this.runner.run((context) -> {
			Service service = context.getBean(Service.class);
			assertThat(service.trial()).isEqualTo("ran"); // the token
			assertThat(service.trial()).isEqualTo("ran"); // would wait an hour: longer than max-wait, would refuse
			assertThat(this.observations).hasNumberOfObservationsEqualTo(1)
				.hasObservationWithNameEqualTo("ratelimit.acquire")
				.that()
				.hasLowCardinalityKeyValue(KeyValue.of("outcome", "shadow-rejected"))
				.hasLowCardinalityKeyValue("bucket", "trial");
		});
	}

	private static void awaitWaiting(ApplicationContext context, String bucket) {
		RateLimiter limiter = context.getBean(bucket, RateLimiter.class);
		Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> limiter.snapshot().waiting() == 1);
	}

	@Configuration(proxyBeanMethods = false)
	static class ServiceConfiguration {

		@Bean
		Service service() {
			return new Service();
		}
	}

	static class Service {

		@RateLimited("paced")
		public String paced() {
			return "ran";
		}

		@RateLimited("strict")
		public String strict() {
			return "ran";
		}

		@RateLimited("paced")
		@RateLimited("strict")
		public String both() {
			return "ran";
		}

		@RateLimited("paced")
		public CompletableFuture<String> pacedLater() {
			return CompletableFuture.completedFuture("ran");
		}

		@RateLimited("strict")
		public Mono<String> strictMono() {
			return Mono.just("ran");
		}

		@RateLimited("trial")
		public String trial() {
			return "ran";
		}
	}
}
