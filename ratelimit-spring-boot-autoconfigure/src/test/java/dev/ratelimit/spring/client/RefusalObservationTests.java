package dev.ratelimit.spring.client;

import java.io.IOException;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitClientAutoConfiguration;
import io.micrometer.observation.ObservationRegistry;
import io.micrometer.observation.tck.TestObservationRegistry;
import jakarta.servlet.Filter;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.http.client.autoconfigure.HttpClientAutoConfiguration;
import org.springframework.boot.http.client.autoconfigure.imperative.ImperativeHttpClientAutoConfiguration;
import org.springframework.boot.http.converter.autoconfigure.HttpMessageConvertersAutoConfiguration;
import org.springframework.boot.restclient.autoconfigure.RestClientAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.test.web.servlet.MockMvc;
import org.springframework.test.web.servlet.setup.MockMvcBuilders;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestClient;
import org.springframework.web.servlet.config.annotation.EnableWebMvc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.get;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.status;

/**
 * Contract revision 3: the {@code ratelimit.acquire} observation is the engine's, so a refusal by a web rule
 * and by an outbound rule is observed as the annotation's is ({@code AcquireObservationTests}): one
 * observation, {@code outcome} rejected, naming the bucket; a request or call granted at once makes none.
 */
class RefusalObservationTests {

	private final TestObservationRegistry observations = TestObservationRegistry.create();

	private PartnerServer partner;

	@BeforeEach
	void start() throws IOException {
		this.partner = new PartnerServer();
	}

	@AfterEach
	void stop() {
		this.partner.close();
	}

	@Test
	void anOutboundCallRefusedByItsRuleIsObservedAsRejected() {
		new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class,
					RateLimitClientAutoConfiguration.class, HttpClientAutoConfiguration.class,
					ImperativeHttpClientAutoConfiguration.class, HttpMessageConvertersAutoConfiguration.class,
					RestClientAutoConfiguration.class))
			.withBean(ObservationRegistry.class, () -> this.observations)
			.withPropertyValues("ratelimit.buckets.partner.rate=1", "ratelimit.buckets.partner.period=1h",
					"ratelimit.buckets.partner.limit=1", "ratelimit.buckets.partner.max-wait=0",
					"ratelimit.clients.rules[0].hosts=127.0.0.1", "ratelimit.clients.rules[0].bucket=partner")
			.run((context) -> {
				RestClient rest = context.getBean(RestClient.Builder.class).build();
				String url = this.partner.url("/v1/things");
				rest.get().uri(url).retrieve().toBodilessEntity();
				assertThat(this.observations).doesNotHaveAnyObservation();
				assertThatThrownBy(() -> rest.get().uri(url).retrieve().toBodilessEntity())
					.isInstanceOf(RateLimitExceededException.class);
				assertThat(this.observations).hasNumberOfObservationsEqualTo(1)
					.hasObservationWithNameEqualTo("ratelimit.acquire")
					.that()
					.hasLowCardinalityKeyValue("bucket", "partner")
					.hasLowCardinalityKeyValue("outcome", "rejected")
					.hasBeenStopped();
				assertThat(this.partner.received()).isEqualTo(1);
			});
	}

	@Test
	void aRequestRefusedByAWebRuleIsObservedAsRejected() {
		new WebApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withUserConfiguration(Api.class)
			.withBean(ObservationRegistry.class, () -> this.observations)
			.withPropertyValues("ratelimit.buckets.api.rate=1", "ratelimit.buckets.api.period=1h",
					"ratelimit.buckets.api.limit=1", "ratelimit.buckets.api.max-wait=0",
					"ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=api")
			.run((context) -> {
				@SuppressWarnings("unchecked")
				FilterRegistrationBean<Filter> filter = context.getBean(FilterRegistrationBean.class);
				MockMvc mvc = MockMvcBuilders.webAppContextSetup(context).addFilters(filter.getFilter()).build();
				mvc.perform(get("/api/items")).andExpect(status().isOk());
				assertThat(this.observations).doesNotHaveAnyObservation();
				mvc.perform(get("/api/items")).andExpect(status().isTooManyRequests());
				assertThat(this.observations).hasNumberOfObservationsEqualTo(1)
					.hasObservationWithNameEqualTo("ratelimit.acquire")
					.that()
					.hasLowCardinalityKeyValue("bucket", "api")
					.hasLowCardinalityKeyValue("outcome", "rejected")
					.hasBeenStopped();
			});
	}

	@Configuration(proxyBeanMethods = false)
	@EnableWebMvc
	static class Api {

		@Bean
		Items items() {
			return new Items();
		}
	}

	@RestController
	static class Items {

		@GetMapping("/api/items")
		String items() {
			return "items";
		}
	}
}
