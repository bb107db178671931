package dev.ratelimit.spring.web;

import java.time.Instant;
import java.time.InstantSource;
import java.time.LocalDateTime;
import java.time.ZoneId;
import java.util.concurrent.atomic.AtomicReference;

import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import jakarta.servlet.Filter;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.assertj.AssertableWebApplicationContext;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.test.web.servlet.MockMvc;
import org.springframework.test.web.servlet.setup.MockMvcBuilders;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

import static org.hamcrest.Matchers.contains;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.get;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.header;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.jsonPath;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.status;

/**
 * A calendar quota behind a web rule (contract revision 3): the 429's {@code Retry-After} is the time
 * until the boundary, and the IETF fields give {@code t} as that time and {@code w} as the running
 * calendar period's length, on the wall clock of the application's {@link InstantSource} bean.
 */
class QuotaWebRulesMvcTests {

	private static final ZoneId BERLIN = ZoneId.of("Europe/Berlin");

	private final AtomicReference<Instant> now = new AtomicReference<>(berlin("2026-10-25T22:00:00"));

	private final WebApplicationContextRunner runner = new WebApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(ApiConfiguration.class)
		.withBean(InstantSource.class, () -> this.now::get)
		.withPropertyValues("ratelimit.buckets.daily.type=quota", "ratelimit.buckets.daily.limit=2",
				"ratelimit.buckets.daily.calendar=day", "ratelimit.buckets.daily.zone=Europe/Berlin",
				"ratelimit.buckets.daily.max-wait=0", "ratelimit.web.headers=ietf",
				"ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=daily");

	private static Instant berlin(String local) {
		return LocalDateTime.parse(local).atZone(BERLIN).toInstant();
	}

	private static MockMvc mvc(AssertableWebApplicationContext context) {
		@SuppressWarnings("unchecked")
		FilterRegistrationBean<Filter> filter = context.getBean(FilterRegistrationBean.class);
		return MockMvcBuilders.webAppContextSetup(context).addFilters(filter.getFilter()).build();
	}

	@Test
	void aRefusalSaysTheTimeUntilMidnightAndTheFieldsTheDaysLength() {
		this.runner.run((context) -> {
			MockMvc mvc = mvc(context);
			// 22:00 on the day of the change to winter time: 25 hours long, 2 hours left
			mvc.perform(get("/api/items"))
				.andExpect(status().isOk())
				.andExpect(header().string("RateLimit-Policy", "\"daily\";q=2;w=90000"))
				.andExpect(header().string("RateLimit", "\"daily\";r=1;t=7200"));
			this.now.set(berlin("2026-10-25T23:59:58.5"));
			mvc.perform(get("/api/items"))
				.andExpect(status().isOk())
				.andExpect(header().string("RateLimit", "\"daily\";r=0;t=2"));
			mvc.perform(get("/api/items"))
				.andExpect(status().isTooManyRequests())
				.andExpect(header().string("Retry-After", "2"))
				.andExpect(header().string("RateLimit", "\"daily\";r=0;t=2"))
				.andExpect(jsonPath("$.violated-policies", contains("daily")));
			this.now.set(berlin("2026-10-26T00:00:00"));
			mvc.perform(get("/api/items"))
				.andExpect(status().isOk())
				.andExpect(header().string("RateLimit-Policy", "\"daily\";q=2;w=86400"))
				.andExpect(header().string("RateLimit", "\"daily\";r=1;t=86400"));
		});
	}

	@Configuration(proxyBeanMethods = false)
	static class ApiConfiguration {

		@Bean
		ApiController apiController() {
			return new ApiController();
		}
	}

	@RestController
	static class ApiController {

		@GetMapping("/api/items")
		public String items() {
			return "items";
		}
	}
}
