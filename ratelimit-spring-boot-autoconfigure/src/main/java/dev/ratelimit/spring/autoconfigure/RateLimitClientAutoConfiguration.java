package dev.ratelimit.spring.autoconfigure;

import java.time.InstantSource;

import dev.ratelimit.spring.BucketDefinitions;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimitProperties;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.client.ClientRules;
import dev.ratelimit.spring.client.RateLimitClientInterceptor;
import dev.ratelimit.spring.client.RateLimitExchangeFilter;
import dev.ratelimit.spring.client.SharedGates;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;

import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.restclient.RestClientCustomizer;
import org.springframework.boot.restclient.RestTemplateCustomizer;
import org.springframework.boot.webclient.WebClientCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The outbound rules ({@code ratelimit.clients}, contract revision 3): checked at start-up, and added to
 * the {@code RestClient.Builder}, {@code RestTemplateBuilder} and {@code WebClient.Builder} that Spring
 * Boot auto-configures (through their customizers, which also reach the HTTP interface clients made on
 * them, {@code @ImportHttpServices} groups included), each when its client is on the class path and rules
 * exist. A client built without those builders is not limited. A {@link SharedGates} bean (the Redis
 * module defines one) keeps the servers' word about the buckets it shares outside this JVM.
 */
@AutoConfiguration(after = RateLimitAutoConfiguration.class)
@ConditionalOnBooleanProperty(name = "ratelimit.enabled", matchIfMissing = true)
@ConditionalOnClass(name = { "org.springframework.http.HttpRequest",
		"org.springframework.web.util.pattern.PathPattern" })
public final class RateLimitClientAutoConfiguration {

	@Bean
	@ConditionalOnMissingBean
	ClientRules rateLimitClientRules(RateLimitProperties properties, BucketDefinitions definitions,
			ObjectProvider<RateLimiterRegistry> registry, ObjectProvider<RateLimitClock> clock,
			ObjectProvider<InstantSource> wall, ObjectProvider<ClientRules.Throttled> throttled,
			ObjectProvider<SharedGates> shared) {
		RateLimitClock nanos = clock.getIfAvailable(() -> System::nanoTime);
		return ClientRules.of(properties.getClients(), definitions, registry::getObject, nanos::nanoTime,
				wall.getIfAvailable(InstantSource::system), throttled.getIfAvailable(() -> (bucket, status) -> {
				}), shared.getIfAvailable());
	}

	/** The buckets' views bound to the servers' word before the first call ({@link ClientRules#bindViews()}). */
	@Bean
	static SmartInitializingSingleton rateLimitClientViews(ObjectProvider<ClientRules> rules) {
		return () -> rules.ifAvailable(ClientRules::bindViews);
	}

	/** {@code ratelimit.client.throttled}: the servers' 429 and 503 answers to limited calls. */
	@Configuration(proxyBeanMethods = false)
	@ConditionalOnClass(name = "io.micrometer.core.instrument.MeterRegistry")
	static class ThrottledMeterConfiguration {

		@Bean
		@ConditionalOnMissingBean
		ClientRules.Throttled rateLimitClientThrottled(ObjectProvider<MeterRegistry> meters) {
			return (bucket, status) -> {
				MeterRegistry registry = meters.getIfAvailable();
				if (registry != null) {
					Counter.builder("ratelimit.client.throttled")
						.description("The servers' 429 and 503 answers to limited outbound calls")
						.tag("bucket", bucket)
						.tag("status", String.valueOf(status))
						.register(registry)
						.increment();
				}
			};
		}
	}

	@Configuration(proxyBeanMethods = false)
	@ConditionalOnClass(name = { "org.springframework.boot.restclient.RestClientCustomizer",
			"org.springframework.web.client.RestClient" })
	static class RestClientRulesConfiguration {

		@Bean
		RestClientCustomizer rateLimitRestClientCustomizer(ClientRules rules) {
			RateLimitClientInterceptor interceptor = new RateLimitClientInterceptor(rules);
			return (builder) -> {
				if (!rules.isEmpty()) { // an interceptor makes RestClient buffer request bodies: none without rules
					builder.requestInterceptor(interceptor);
				}
			};
		}
	}

	@Configuration(proxyBeanMethods = false)
	@ConditionalOnClass(name = { "org.springframework.boot.restclient.RestTemplateCustomizer",
			"org.springframework.web.client.RestTemplate" })
	static class RestTemplateRulesConfiguration {

		@Bean
		RestTemplateCustomizer rateLimitRestTemplateCustomizer(ClientRules rules) {
			RateLimitClientInterceptor interceptor = new RateLimitClientInterceptor(rules);
			return (template) -> {
				if (!rules.isEmpty()) {
					template.getInterceptors().add(interceptor);
				}
			};
		}
	}

	@Configuration(proxyBeanMethods = false)
	@ConditionalOnClass(name = { "org.springframework.boot.webclient.WebClientCustomizer",
			"org.springframework.web.reactive.function.client.WebClient", "reactor.core.publisher.Mono" })
	static class WebClientRulesConfiguration {

		@Bean
		WebClientCustomizer rateLimitWebClientCustomizer(ClientRules rules) {
			RateLimitExchangeFilter filter = new RateLimitExchangeFilter(rules);
			return (builder) -> {
				if (!rules.isEmpty()) {
					builder.filter(filter);
				}
			};
		}
	}
}
