package dev.ratelimit.spring.aop;

import java.util.List;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Contract, "Annotation" (revision 2): a fallback has "a return type assignable to the guarded method's".
 * The element-type check of aa6a22b (FallbackMethod.resolve, ResolvableType.isAssignableFrom) refuses
 * fallbacks that Java assigns: a generic fallback {@code <T> Mono<T>} (one fallback shared by several
 * methods, typically {@code Mono.error(...)}), which Java infers for a {@code Mono<String>} method, and a
 * raw {@code List} fallback (accepted before aa6a22b). Both fail start-up saying the fallback returns
 * {@code Mono<?>} / {@code List<?>}, which is not what the source says.
 */
class FallbackTypesJavaAcceptsTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withPropertyValues("ratelimit.buckets.quote-api.rate=1", "ratelimit.buckets.quote-api.period=1h",
				"ratelimit.buckets.quote-api.limit=1", "ratelimit.buckets.quote-api.max-wait=0");

	@Test
	void aGenericFallbackSharedByMethodsOfDifferentElementTypesStarts() {
		this.runner.withUserConfiguration(GenericConfiguration.class).run((context) -> {
			assertThat(context).hasNotFailed();
			GenericQuotes quotes = context.getBean(GenericQuotes.class);
			assertThat(quotes.quote("DE").block()).isEqualTo("live DE");
			assertThat(quotes.quote("DE").blockOptional()).isEmpty(); // one an hour: the fallback's
		});
	}

	@Test
	void aRawFallbackStartsAsItDidBefore() {
		this.runner.withUserConfiguration(RawConfiguration.class).run((context) -> {
			assertThat(context).hasNotFailed();
		});
	}

	@Configuration(proxyBeanMethods = false)
	static class GenericConfiguration {

		@Bean
		GenericQuotes genericQuotes() {
			return new GenericQuotes();
		}
	}

	static class GenericQuotes {

		@RateLimited(value = "quote-api", fallback = "nothing")
		public Mono<String> quote(String country) {
			return Mono.just("live " + country);
		}

		@RateLimited(value = "quote-api", fallback = "nothing")
		public Mono<Integer> count(String country) {
			return Mono.just(1);
		}

		/** Java assigns it to Mono<String> and to Mono<Integer> alike ({@code Mono<String> m = nothing(c, ex);}). */
		<T> Mono<T> nothing(String country, RateLimitExceededException ex) {
			return Mono.empty();
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class RawConfiguration {

		@Bean
		RawQuotes rawQuotes() {
			return new RawQuotes();
		}
	}

	static class RawQuotes {

		@RateLimited(value = "quote-api", fallback = "cached")
		public List<String> quotes(String country) {
			return List.of("live " + country);
		}

		@SuppressWarnings("rawtypes")
		List cached(String country) {
			return List.of("cached " + country);
		}
	}
}
