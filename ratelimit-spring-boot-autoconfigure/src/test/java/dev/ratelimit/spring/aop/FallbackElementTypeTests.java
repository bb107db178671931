package dev.ratelimit.spring.aop;

import java.util.List;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitConfigurationException;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.assertj.AssertableApplicationContext;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Contract, "Annotation" (revision 2): a fallback has "a return type assignable to the guarded method's",
 * and "a fallback that does not exist or does not fit fails start-up naming the method and the fallback".
 * Found by an auditor: the check compared raw classes only, so a {@code Mono<Integer>} fallback of a
 * {@code Mono<String>} method (or a {@code List<Integer>} one of a {@code List<String>} method) started, and
 * the first refusal handed the caller an Integer where its code reads a String. The element types are
 * compared too, as Java would assign them ({@code Mono<String>} fits {@code Mono<? extends CharSequence>}).
 */
class FallbackElementTypeTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withPropertyValues("ratelimit.buckets.quote-api.rate=1", "ratelimit.buckets.quote-api.period=1h",
				"ratelimit.buckets.quote-api.limit=1", "ratelimit.buckets.quote-api.max-wait=0");

	@Test
	void aMonoFallbackOfAnotherElementTypeFailsStartUpNamingTheMethodAndTheFallback() {
		this.runner.withUserConfiguration(MonoConfiguration.class).run((context) -> {
			assertThat(context).as("Mono<Integer> fallback of a Mono<String> method").hasFailed();
			assertFailureNames(context, "countMono");
		});
	}

	@Test
	void aListFallbackOfAnotherElementTypeFailsStartUpNamingTheMethodAndTheFallback() {
		this.runner.withUserConfiguration(ListConfiguration.class).run((context) -> {
			assertThat(context).as("List<Integer> fallback of a List<String> method").hasFailed();
			assertFailureNames(context, "countList");
		});
	}

	@Test
	void aFallbackWhoseElementTypeJavaWouldAssignStarts() {
		this.runner.withUserConfiguration(WildcardConfiguration.class).run((context) -> {
			assertThat(context).hasNotFailed();
			WildcardQuotes quotes = context.getBean(WildcardQuotes.class);
			assertThat(quotes.quotes("DE").block()).hasToString("live DE");
			assertThat(quotes.quotes("DE").block()).hasToString("cached DE"); // one an hour: the fallback's
		});
	}

	@Test
	void theMessageSaysBothTypesAsTheSourceDoes() {
		this.runner.withUserConfiguration(MonoConfiguration.class).run((context) -> {
			Throwable failure = context.getStartupFailure();
			while (failure != null && !(failure instanceof RateLimitConfigurationException)) {
				failure = failure.getCause();
			}
			assertThat(failure).hasMessageContaining("returns Mono<Integer>, which does not fit the method's Mono<String>");
		});
	}

	private static void assertFailureNames(AssertableApplicationContext context, String fallback) {
		Throwable failure = context.getStartupFailure();
		while (failure != null && !(failure instanceof RateLimitConfigurationException)) {
			failure = failure.getCause();
		}
		assertThat(failure).isNotNull().hasMessageContaining(fallback).hasMessageContaining("quotes");
	}

	@Configuration(proxyBeanMethods = false)
	static class MonoConfiguration {

		@Bean
		MonoQuotes monoQuotes() {
			return new MonoQuotes();
		}
	}

	static class MonoQuotes {

		@RateLimited(value = "quote-api", fallback = "countMono")
		public Mono<String> quotes(String country) {
			return Mono.just("live " + country);
		}

		Mono<Integer> countMono(String country) {
			return Mono.just(42);
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class WildcardConfiguration {

		@Bean
		WildcardQuotes wildcardQuotes() {
			return new WildcardQuotes();
		}
	}

	static class WildcardQuotes {

		@RateLimited(value = "quote-api", fallback = "cached")
		public Mono<? extends CharSequence> quotes(String country) {
			return Mono.just("live " + country);
		}

		Mono<String> cached(String country) {
			return Mono.just("cached " + country);
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class ListConfiguration {

		@Bean
		ListQuotes listQuotes() {
			return new ListQuotes();
		}
	}

	static class ListQuotes {

		@RateLimited(value = "quote-api", fallback = "countList")
		public List<String> quotes(String country) {
			return List.of("live " + country);
		}

		List<Integer> countList(String country) {
			return List.of(42);
		}
	}
}
