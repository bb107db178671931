package dev.ratelimit.spring.actuate;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.RateLimitClock;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Bean;
import org.springframework.http.MediaType;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.web.servlet.MockMvc;
import org.springframework.test.web.servlet.setup.MockMvcBuilders;
import org.springframework.web.context.WebApplicationContext;

import static org.assertj.core.api.Assertions.assertThat;
import static org.hamcrest.Matchers.contains;
import static org.hamcrest.Matchers.containsString;
import static org.hamcrest.Matchers.equalTo;
import static org.hamcrest.Matchers.hasEntry;
import static org.hamcrest.Matchers.nullValue;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.delete;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.get;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.post;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.jsonPath;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.status;

/**
 * The endpoint over HTTP, through Boot's own endpoint handler mapping and JSON mapper: what an operator
 * really reads and sends.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.MOCK,
		properties = { "management.endpoints.web.exposure.include=ratelimits",
				"management.endpoint.ratelimits.access=unrestricted",
				"ratelimit.buckets.db-writes.rate=500", "ratelimit.buckets.db-writes.limit=100",
				"ratelimit.buckets.db-writes.capped-release=true", "ratelimit.buckets.feed.type=hybrid",
				"ratelimit.buckets.feed.rate=12000", "ratelimit.buckets.feed.burst-ratio=1.5" })
@DirtiesContext(classMode = DirtiesContext.ClassMode.AFTER_EACH_TEST_METHOD)
class RateLimitsEndpointWebTests {

	private static final AtomicLong NOW = new AtomicLong(1_000_000_000_000L);

	@Autowired
	private WebApplicationContext context;

	@Autowired
	@Qualifier("db-writes")
	private RateLimiter db;

	private MockMvc mvc;

	@BeforeEach
	void setUp() {
		this.mvc = MockMvcBuilders.webAppContextSetup(this.context).build();
	}

	@Test
	void showsEveryFieldOfEveryBucketInConfigurationOrder() throws Exception {
		this.db.acquire(3, Duration.ZERO);
		this.mvc.perform(get("/actuator/ratelimits"))
			.andExpect(status().isOk())
			.andExpect(jsonPath("$.buckets.keys()", contains("db-writes", "feed")))
			.andExpect(jsonPath("$.buckets.db-writes.type").value("shared"))
			.andExpect(jsonPath("$.buckets.db-writes.backend").value("local"))
			.andExpect(jsonPath("$.buckets.db-writes.rate").value(500))
			.andExpect(jsonPath("$.buckets.db-writes.period").value("PT1S"))
			.andExpect(jsonPath("$.buckets.db-writes.limit").value(100))
			.andExpect(jsonPath("$.buckets.db-writes.available").value(97))
			.andExpect(jsonPath("$.buckets.db-writes.deficiency").value(0))
			.andExpect(jsonPath("$.buckets.db-writes.waiting").value(0))
			.andExpect(jsonPath("$.buckets.db-writes.inFlight").value(3))
			.andExpect(jsonPath("$.buckets.db-writes.cappedRelease").value(true))
			.andExpect(jsonPath("$.buckets.db-writes.granted").value(1))
			.andExpect(jsonPath("$.buckets.db-writes.rejected").value(0))
			.andExpect(jsonPath("$.buckets.db-writes", hasEntry(equalTo("pools"), nullValue())))
			.andExpect(jsonPath("$.buckets.db-writes.behindSchedule").value("PT0S"))
			.andExpect(jsonPath("$.buckets.feed.type").value("hybrid"))
			.andExpect(jsonPath("$.buckets.feed.rate").value(12000))
			.andExpect(jsonPath("$.buckets.feed.period").value("PT1S"))
			.andExpect(jsonPath("$.buckets.feed.limit").value(12))
			.andExpect(jsonPath("$.buckets.feed.inFlight").value(0))
			.andExpect(jsonPath("$.buckets.feed.cappedRelease").value(false))
			.andExpect(jsonPath("$.buckets.feed.pools.active").value(12))
			.andExpect(jsonPath("$.buckets.feed.pools.burst").value(0))
			.andExpect(jsonPath("$.buckets.feed.pools.waiting").value(0))
			.andExpect(jsonPath("$.buckets.feed.behindSchedule").value("PT0S"));
	}

	@Test
	void showsOneBucketAndAnswers404ForAnUnknownName() throws Exception {
		this.mvc.perform(get("/actuator/ratelimits/feed"))
			.andExpect(status().isOk())
			.andExpect(jsonPath("$.type").value("hybrid"))
			.andExpect(jsonPath("$.pools.active").value(12));
		this.mvc.perform(get("/actuator/ratelimits/nope")).andExpect(status().isNotFound());
	}

	@Test
	void retunesABucketThatThenGrantsAtTheNewRate() throws Exception {
		this.db.acquire(100, Duration.ZERO).close();
		this.mvc
			.perform(post("/actuator/ratelimits/db-writes").contentType(MediaType.APPLICATION_JSON)
				.content("{\"rate\": 200, \"limit\": 50}"))
			.andExpect(status().isOk())
			.andExpect(jsonPath("$.rate").value(200))
			.andExpect(jsonPath("$.limit").value(50))
			.andExpect(jsonPath("$.period").value("PT1S"));
		NOW.addAndGet(Duration.ofMillis(100).toNanos());
		long granted = 0;
		while (this.db.tryAcquire(1)) {
			granted++;
		}
		// 100 ms at the new 200/s, not the old 500/s
		assertThat(granted).isEqualTo(20);
	}

	@Test
	void answers400WithTheConfigurationsMessageForAnInvalidValue() throws Exception {
		this.mvc
			.perform(post("/actuator/ratelimits/db-writes").contentType(MediaType.APPLICATION_JSON)
				.content("{\"rate\": -1}"))
			.andExpect(status().isBadRequest())
			// in the body: Boot's default error settings leave the message out of its error page
			.andExpect(jsonPath("$.message").value(containsString("ratelimit.buckets.db-writes.rate is -1")))
			.andExpect(jsonPath("$.message").value(containsString("a number > 0")));
		this.mvc
			.perform(post("/actuator/ratelimits/db-writes").contentType(MediaType.APPLICATION_JSON)
				.content("{\"limit\": 0}"))
			.andExpect(status().isBadRequest())
			.andExpect(jsonPath("$.message").value(containsString("limit")));
		this.mvc
			.perform(post("/actuator/ratelimits/nope").contentType(MediaType.APPLICATION_JSON)
				.content("{\"rate\": 5}"))
			.andExpect(status().isNotFound())
			.andExpect(jsonPath("$.message").value(containsString("No bucket named 'nope'")));
		this.mvc.perform(get("/actuator/ratelimits/db-writes")).andExpect(jsonPath("$.rate").value(500));
	}

	/**
	 * An operator who sent {@code {"limit": 2.5}} or {@code {"rate": "abc"}} got a bare 400 (Boot's
	 * error page, no message) instead of the reason the configuration would give.
	 */
	@Test
	void answers400WithAMessageForAFractionalLimitOrARateThatIsNotANumber() throws Exception {
		this.mvc
			.perform(post("/actuator/ratelimits/db-writes").contentType(MediaType.APPLICATION_JSON)
				.content("{\"limit\": 2.5}"))
			.andExpect(status().isBadRequest())
			.andExpect(jsonPath("$.message").value(containsString("ratelimit.buckets.db-writes.limit is 2.5")))
			.andExpect(jsonPath("$.message").value(containsString("a whole number >= 1")));
		this.mvc
			.perform(post("/actuator/ratelimits/db-writes").contentType(MediaType.APPLICATION_JSON)
				.content("{\"rate\": \"abc\"}"))
			.andExpect(status().isBadRequest())
			.andExpect(jsonPath("$.message").value(containsString("ratelimit.buckets.db-writes.rate is 'abc'")));
		this.mvc
			.perform(post("/actuator/ratelimits/db-writes").contentType(MediaType.APPLICATION_JSON)
				.content("{\"limit\": 40.0, \"rate\": \"250\"}"))
			.andExpect(status().isOk())
			.andExpect(jsonPath("$.limit").value(40))
			.andExpect(jsonPath("$.rate").value(250));
	}

	/**
	 * An operator who sent {@code {"rate": 250, "limt": 40}} got 200 with the rate changed and the
	 * misspelt limit silently dropped (the limit stayed 100), as for {@code {"rate": 250, "period": "1m"}}.
	 */
	@Test
	void answers400NamingAFieldThatARetuneDoesNotKnowAndChangesNothing() throws Exception {
		this.mvc
			.perform(post("/actuator/ratelimits/db-writes").contentType(MediaType.APPLICATION_JSON)
				.content("{\"rate\": 250, \"limt\": 40}"))
			.andExpect(status().isBadRequest())
			.andExpect(jsonPath("$.message").value(containsString("limt")))
			.andExpect(jsonPath("$.message").value(containsString("did you mean 'limit'")));
		this.mvc
			.perform(post("/actuator/ratelimits/db-writes").contentType(MediaType.APPLICATION_JSON)
				.content("{\"rate\": 250, \"period\": \"1m\"}"))
			.andExpect(status().isBadRequest())
			.andExpect(jsonPath("$.message").value(containsString("period")));
		this.mvc.perform(get("/actuator/ratelimits/db-writes"))
			.andExpect(jsonPath("$.rate").value(500))
			.andExpect(jsonPath("$.limit").value(100));
	}

	@Test
	void aKeyWithoutABucketOfItsOwnIs404() throws Exception {
		this.mvc.perform(get("/actuator/ratelimits/db-writes/alice")).andExpect(status().isNotFound());
		this.mvc.perform(get("/actuator/ratelimits/nope/alice")).andExpect(status().isNotFound());
		this.mvc.perform(get("/actuator/ratelimits/db-writes")).andExpect(jsonPath("$.keys").value(0));
	}

	@SpringBootConfiguration
	@EnableAutoConfiguration
	static class TestApplication {

		@Bean
		RateLimitClock testClock() {
			return NOW::get;
		}
	}

	@Test
	void aDeleteResetsTheBucketAnswering204And404ForAnUnknownName() throws Exception {
		this.db.acquire(100, Duration.ZERO).close();
		assertThat(this.db.tryAcquire(1)).isFalse();
		this.mvc.perform(delete("/actuator/ratelimits/db-writes")).andExpect(status().isNoContent());
		this.mvc.perform(get("/actuator/ratelimits/db-writes"))
			.andExpect(status().isOk())
			.andExpect(jsonPath("$.available").value(100))
			.andExpect(jsonPath("$.granted").value(1)) // counts are kept
			.andExpect(jsonPath("$.rejected").value(1));
		this.mvc.perform(delete("/actuator/ratelimits/nope"))
			.andExpect(status().isNotFound())
			.andExpect(jsonPath("$.message").value(containsString("No bucket named 'nope'")));
	}
}
