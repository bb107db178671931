package dev.ratelimit.spring.actuate;

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
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.web.servlet.MockMvc;
import org.springframework.test.web.servlet.request.MockHttpServletRequestBuilder;
import org.springframework.test.web.servlet.setup.MockMvcBuilders;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.WebApplicationContext;

import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.get;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.jsonPath;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.status;

/**
 * Contract, "Actuator endpoint ratelimits" (revision 2): {@code GET /actuator/ratelimits/{name}/{key}} is
 * the view of one key's bucket, 404 only "when that key has no bucket of its own now". A web rule with
 * {@code key: ip} keys an IPv6 client by its /64 prefix, and that key ({@code 2001:db8:1:2::/64}) holds a
 * slash: the endpoint's key takes the rest of the path, so the operator sees that key's bucket.
 */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.MOCK,
		properties = { "management.endpoints.web.exposure.include=ratelimits",
				"ratelimit.buckets.per-client.rate=1", "ratelimit.buckets.per-client.period=1h",
				"ratelimit.buckets.per-client.limit=5", "ratelimit.buckets.per-client.max-wait=0",
				"ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=per-client",
				"ratelimit.web.rules[0].key=ip" })
@DirtiesContext(classMode = DirtiesContext.ClassMode.AFTER_EACH_TEST_METHOD)
class KeyWithSlashesViewOverHttpTests {

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

	private static MockHttpServletRequestBuilder from(MockHttpServletRequestBuilder request, String address) {
		return request.with((r) -> {
			r.setRemoteAddr(address);
			return r;
		});
	}

	@Test
	void anIpv6ClientsKeyHasAViewOfItsOwn() throws Exception {
		this.mvc.perform(from(get("/api/items"), "2001:db8:1:2::1")).andExpect(status().isOk());
		// the rule made one key's bucket
		this.mvc.perform(get("/actuator/ratelimits/per-client")).andExpect(jsonPath("$.keys").value(1));
		// its key is "2001:db8:1:2::/64"
		this.mvc.perform(get("/actuator/ratelimits/per-client/2001:db8:1:2::/64"))
			.andExpect(status().isOk())
			.andExpect(jsonPath("$.available").value(4))
			.andExpect(jsonPath("$.keys").value(0));
	}

	@SpringBootConfiguration
	@EnableAutoConfiguration
	static class TestApplication {

		@Bean
		RateLimitClock testClock() {
			return NOW::get;
		}

		@Bean
		Api api() {
			return new Api();
		}
	}

	@RestController
	static class Api {

		@GetMapping("/api/items")
		String items() {
			return "items";
		}
	}
}
