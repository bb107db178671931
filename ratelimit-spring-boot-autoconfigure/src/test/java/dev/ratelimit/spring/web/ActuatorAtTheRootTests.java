package dev.ratelimit.spring.web;

import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.spring.RateLimitClock;
import jakarta.servlet.Filter;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.test.web.servlet.MockMvc;
import org.springframework.test.web.servlet.setup.MockMvcBuilders;
import org.springframework.web.context.WebApplicationContext;

import static org.assertj.core.api.Assertions.assertThat;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.get;

/**
 * Contract, "Web rules" (revision 2): "Actuator paths are never limited by rules." Here the application
 * serves its actuator at the root ({@code management.endpoints.web.base-path: /}, which Boot allows) and
 * limits every path with one rule. Found by an auditor: the rule filter exempted the base path, which at the
 * root is nothing, so a load balancer's {@code GET /health} was answered 429. Each exposed endpoint's path is
 * exempt now, and only those.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.MOCK,
		properties = { "management.endpoints.web.base-path=/", "management.endpoints.web.exposure.include=health",
				"ratelimit.buckets.api.rate=1", "ratelimit.buckets.api.period=1h", "ratelimit.buckets.api.limit=1",
				"ratelimit.buckets.api.max-wait=0", "ratelimit.web.rules[0].paths=/**",
				"ratelimit.web.rules[0].bucket=api" })
class ActuatorAtTheRootTests {

	private static final AtomicLong NOW = new AtomicLong(1_000_000_000_000L);

	@Autowired
	private WebApplicationContext context;

	private MockMvc mvc;

	@BeforeEach
	@SuppressWarnings("unchecked")
	void setUp() {
		FilterRegistrationBean<Filter> filter = this.context.getBean("rateLimitFilter", FilterRegistrationBean.class);
		this.mvc = MockMvcBuilders.webAppContextSetup(this.context).addFilters(filter.getFilter()).build();
	}

	@Test
	void theActuatorServedAtTheRootIsNeverLimitedByARuleForEveryPath() throws Exception {
		for (int i = 0; i < 3; i++) {
			int status = this.mvc.perform(get("/health")).andReturn().getResponse().getStatus();
			assertThat(status).as("GET /health, call %d", i + 1).isEqualTo(200);
		}
		// the application's own paths stay limited: one call an hour
		assertThat(this.mvc.perform(get("/orders")).andReturn().getResponse().getStatus()).isEqualTo(404);
		assertThat(this.mvc.perform(get("/orders")).andReturn().getResponse().getStatus()).isEqualTo(429);
		assertThat(this.mvc.perform(get("/healthy")).andReturn().getResponse().getStatus()).isEqualTo(429);
	}

	@SpringBootConfiguration
	@EnableAutoConfiguration
	static class TestApplication {

		@Bean
		RateLimitClock testClock() {
			return NOW::get;
		}
	}
}
