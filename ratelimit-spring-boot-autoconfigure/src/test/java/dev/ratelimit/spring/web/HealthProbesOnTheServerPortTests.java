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
 * Contract, "Web rules" (revision 2): "Actuator paths are never limited by rules." Boot's Kubernetes probes
 * served on the application's port ({@code management.endpoint.health.probes.add-additional-paths: true}
 * maps the health groups at {@code /livez} and {@code /readyz}) are the actuator's health endpoint, but
 * ActuatorPaths knows only the base path and the exposed endpoints' paths: a rule for every path answers the
 * kubelet's liveness probe 429, and Kubernetes restarts the pod. Found in review of 34fabdd.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.MOCK,
		properties = { "management.endpoint.health.probes.enabled=true",
				"management.endpoint.health.probes.add-additional-paths=true",
				"management.endpoints.web.exposure.include=health", "ratelimit.buckets.api.rate=1",
				"ratelimit.buckets.api.period=1h", "ratelimit.buckets.api.limit=1", "ratelimit.buckets.api.max-wait=0",
				"ratelimit.web.rules[0].paths=/**", "ratelimit.web.rules[0].bucket=api" })
class HealthProbesOnTheServerPortTests {

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
	void theLivenessProbeOnTheServerPortIsNeverLimited() throws Exception {
		for (int i = 0; i < 3; i++) {
			int status = this.mvc.perform(get("/livez")).andReturn().getResponse().getStatus();
			assertThat(status).as("GET /livez, call %d", i + 1).isEqualTo(200);
		}
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
