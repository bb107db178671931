package dev.ratelimit.spring.aop;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitConfigurationException;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@code @RateLimited(fallback = ...)}: called instead when, and only when, the call is refused.
 */
class FallbackTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withPropertyValues("ratelimit.buckets.quote-api.rate=1", "ratelimit.buckets.quote-api.period=1h",
				"ratelimit.buckets.quote-api.limit=1", "ratelimit.buckets.quote-api.max-wait=0");

	@Test
	void aRefusedCallGetsTheFallbacksAnswerAndTheMethodDoesNotRun() {
		this.runner.withUserConfiguration(QuotesConfiguration.class).run((context) -> {
			Quotes quotes = context.getBean(Quotes.class);
			assertThat(quotes.quote("DE")).isEqualTo("live DE");
			assertThat(quotes.quote("DE")).isEqualTo("cached DE");
			assertThat(quotes.live()).isEqualTo(1);
			// a refusal answered by a fallback still counts as rejected
			assertThat(context.getBean("quote-api", RateLimiter.class).snapshot().rejected()).isEqualTo(1);
		});
	}

	@Test
	void theFallbackMayTakeTheRefusal() {
		this.runner.withUserConfiguration(QuotesConfiguration.class).run((context) -> {
			Quotes quotes = context.getBean(Quotes.class);
			quotes.price(3);
			assertThat(quotes.price(3)).isEqualTo(-3 * 1000 - 1); // the cost, from the refusal
		});
	}

	@Test
	void theMethodsOwnExceptionsNeverReachTheFallback() {
		this.runner.withUserConfiguration(QuotesConfiguration.class).run((context) -> {
			Quotes quotes = context.getBean(Quotes.class);
			assertThatThrownBy(() -> quotes.failing("DE")).isInstanceOf(RateLimitExceededException.class)
				.hasMessageContaining("the method's own");
		});
	}

	@Test
	void forCompletionStageMonoAndFluxTheFallbacksValueReplacesTheRefusal() throws Exception {
		this.runner.withUserConfiguration(QuotesConfiguration.class)
			.withPropertyValues("ratelimit.buckets.quote-api.limit=3", "ratelimit.buckets.quote-api.rate=3")
			.run((context) -> {
				Quotes quotes = context.getBean(Quotes.class);
				assertThat(quotes.async("FR").toCompletableFuture().get()).isEqualTo("live FR");
				StepVerifier.create(quotes.mono("IT")).expectNext("live IT").verifyComplete();
				StepVerifier.create(quotes.flux("ES")).expectNext("live ES").verifyComplete();
				assertThat(quotes.async("FR").toCompletableFuture().get()).isEqualTo("cached FR");
				StepVerifier.create(quotes.mono("IT")).expectNext("cached IT").verifyComplete();
				StepVerifier.create(quotes.flux("ES")).expectNext("cached ES", "stale ES").verifyComplete();
			});
	}

	@Test
	void aFallbackThatDoesNotExistFailsStartUpNamingTheMethodAndTheFallback() {
		this.runner.withUserConfiguration(MissingConfiguration.class).run((context) -> {
			assertThat(context).hasFailed();
			assertThat(configurationFailure(context.getStartupFailure())).hasMessageContaining("nowhere")
				.hasMessageContaining("Missing.quote");
		});
	}

	@Test
	void aFallbackOfTheWrongTypeFailsStartUp() {
		this.runner.withUserConfiguration(WrongTypeConfiguration.class).run((context) -> {
			assertThat(context).hasFailed();
			assertThat(configurationFailure(context.getStartupFailure())).hasMessageContaining("returns Integer")
				.hasMessageContaining("String");
		});
	}

	private static Throwable configurationFailure(Throwable failure) {
		while (failure != null && !(failure instanceof RateLimitConfigurationException)) {
			failure = failure.getCause();
		}
		assertThat(failure).isNotNull();
		return failure;
	}

	@Configuration(proxyBeanMethods = false)
	static class QuotesConfiguration {

		@Bean
		Quotes quotes() {
			return new Quotes();
		}
	}

	static class Quotes {

		private final AtomicInteger live = new AtomicInteger();

		int live() {
			return this.live.get();
		}

		@RateLimited(value = "quote-api", fallback = "cachedQuote")
		public String quote(String country) {
			this.live.incrementAndGet();
			return "live " + country;
		}

		private String cachedQuote(String country) {
			return "cached " + country;
		}

		@RateLimited(value = "quote-api", cost = "1", fallback = "refusedPrice")
		public long price(int items) {
			return items;
		}

		long refusedPrice(int items, RateLimitExceededException refusal) {
			return -items * 1000L - refusal.getCost();
		}

		@RateLimited(value = "quote-api", cost = "0", fallback = "cachedQuote")
		public String failing(String country) {
			throw new RateLimitExceededException("elsewhere", 1, java.time.Duration.ZERO, "the method's own");
		}

		@RateLimited(value = "quote-api", fallback = "cachedAsync")
		public CompletionStage<String> async(String country) {
			return CompletableFuture.completedFuture("live " + country);
		}

		CompletionStage<String> cachedAsync(String country) {
			return CompletableFuture.completedFuture("cached " + country);
		}

		@RateLimited(value = "quote-api", fallback = "cachedMono")
		public Mono<String> mono(String country) {
			return Mono.just("live " + country);
		}

		Mono<String> cachedMono(String country) {
			return Mono.just("cached " + country);
		}

		@RateLimited(value = "quote-api", fallback = "cachedFlux")
		public Flux<String> flux(String country) {
			return Flux.just("live " + country);
		}

		Flux<String> cachedFlux(String country) {
			return Flux.just("cached " + country, "stale " + country);
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class MissingConfiguration {

		@Bean
		Missing missing() {
			return new Missing();
		}
	}

	static class Missing {

		@RateLimited(value = "quote-api", fallback = "nowhere")
		public String quote(String country) {
			return country;
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class WrongTypeConfiguration {

		@Bean
		WrongType wrongType() {
			return new WrongType();
		}
	}

	static class WrongType {

		@RateLimited(value = "quote-api", fallback = "count")
		public String quote(String country) {
			return country;
		}

		Integer count(String country) {
			return 1;
		}
	}
}
