package dev.ratelimit.spring.actuate;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.RateLimitClock;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.http.MediaType;
import org.springframework.test.web.servlet.MockMvc;
import org.springframework.test.web.servlet.setup.MockMvcBuilders;
import org.springframework.web.context.WebApplicationContext;

import static org.assertj.core.api.Assertions.assertThat;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.delete;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.get;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.post;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.jsonPath;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.status;

/**
 * Contract revision 3: the endpoint's write operations can turn limiting off, so an application that
 * exposes the endpoint without {@code management.endpoint.ratelimits.access: unrestricted} can read it
 * but not retune a bucket, switch its mode or reset it. (With the property, {@link RateLimitsEndpointWebTests}.)
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.MOCK,
		properties = { "management.endpoints.web.exposure.include=ratelimits", "ratelimit.buckets.db-writes.rate=500",
				"ratelimit.buckets.db-writes.limit=100" })
class EndpointWritesAreReadOnlyByDefaultTests {

	@Autowired
	private WebApplicationContext context;

	private MockMvc mvc;

	@Autowired
	@Qualifier("db-writes")
	private RateLimiter bucket;

	@BeforeEach
	void setUp() {
		this.mvc = MockMvcBuilders.webAppContextSetup(this.context).build();
	}

	@Test
	void anExposedEndpointIsReadOnlyUnlessItsAccessIsUnrestricted() throws Exception {
		this.mvc.perform(get("/actuator/ratelimits/db-writes")).andExpect(status().isOk());
		this.mvc
			.perform(post("/actuator/ratelimits/db-writes").contentType(MediaType.APPLICATION_JSON)
				.content("{\"mode\": \"shadow\"}"))
			.andExpect(status().is4xxClientError());
		this.mvc
			.perform(post("/actuator/ratelimits/db-writes").contentType(MediaType.APPLICATION_JSON)
				.content("{\"rate\": 1}"))
			.andExpect(status().is4xxClientError());
		this.mvc.perform(get("/actuator/ratelimits/db-writes"))
			.andExpect(status().isOk())
			.andExpect(jsonPath("$.mode").value("enforce"))
			.andExpect(jsonPath("$.rate").value(500));
	}

	@Test
	void aResetIsNotReachableUnlessTheAccessIsUnrestricted() throws Exception {
		assertThat(this.bucket.tryAcquire(100)).isTrue();
		this.mvc.perform(delete("/actuator/ratelimits/db-writes")).andExpect(status().is4xxClientError());
		this.mvc.perform(get("/actuator/ratelimits/db-writes"))
			.andExpect(status().isOk())
			.andExpect(jsonPath("$.available").value(0)); // not reset
	}

	@SpringBootConfiguration
	@EnableAutoConfiguration
	static class Config {

		@Bean
		RateLimitClock clock() {
			return () -> 1_000_000_000_000L; // time stands still: a bucket emptied stays empty
		}

	}

}
