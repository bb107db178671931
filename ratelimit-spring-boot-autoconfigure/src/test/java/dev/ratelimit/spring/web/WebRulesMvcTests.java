package dev.ratelimit.spring.web;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimitConfigurationException;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.assertj.AssertableWebApplicationContext;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.mock.web.MockAsyncContext;
import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.test.web.servlet.MockMvc;
import org.springframework.test.web.servlet.MvcResult;
import org.springframework.test.web.servlet.request.MockHttpServletRequestBuilder;
import org.springframework.test.web.servlet.setup.MockMvcBuilders;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.config.annotation.EnableWebMvc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.hamcrest.Matchers.contains;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.asyncDispatch;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.get;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.head;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.post;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.content;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.header;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.jsonPath;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.request;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.status;

/**
 * Web rules in Spring MVC (contract revision 2, "Web rules"), through the auto-configured filter and
 * MockMvc, on a fake clock.
 */
class WebRulesMvcTests {

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	private final WebApplicationContextRunner runner = new WebApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(ShopConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withPropertyValues("ratelimit.buckets.api.rate=1", "ratelimit.buckets.api.period=1h",
				"ratelimit.buckets.api.limit=2", "ratelimit.buckets.api.max-wait=0",
				"ratelimit.buckets.special.rate=1", "ratelimit.buckets.special.period=1h",
				"ratelimit.buckets.special.limit=1", "ratelimit.buckets.special.max-wait=0",
				"ratelimit.buckets.per-client.rate=1", "ratelimit.buckets.per-client.period=1h",
				"ratelimit.buckets.per-client.limit=1", "ratelimit.buckets.per-client.max-wait=0",
				"ratelimit.buckets.five.rate=5", "ratelimit.buckets.five.limit=5", "ratelimit.buckets.five.max-wait=0",
				"ratelimit.buckets.paced.rate=10", "ratelimit.buckets.paced.limit=1",
				"ratelimit.buckets.paced.max-wait=1s", "ratelimit.buckets.concurrent.rate=1000000",
				"ratelimit.buckets.concurrent.limit=1", "ratelimit.buckets.concurrent.capped-release=true",
				"ratelimit.buckets.concurrent.max-wait=0");

	private static MockMvc mvc(AssertableWebApplicationContext context) {
		@SuppressWarnings("unchecked")
		FilterRegistrationBean<Filter> filter = context.getBean(FilterRegistrationBean.class);
		return MockMvcBuilders.webAppContextSetup(context).addFilters(filter.getFilter()).build();
	}

	private static MockHttpServletRequestBuilder from(MockHttpServletRequestBuilder request, String address) {
		return request.with((r) -> {
			r.setRemoteAddr(address);
			return r;
		});
	}

	/**
	 * Contract revision 3, "Plans": a rule's {@code plan}, in the forms of a key, gives each key its plan's
	 * settings; a request without the header, or with an unlisted plan, gets the bucket's own; a key whose
	 * plan changes takes the new plan's settings at once (a downgrade caps what it had).
	 */
	@Test
	void aRulesPlanGivesEachKeyItsPlansSettings() throws Exception {
		this.runner.withPropertyValues("ratelimit.buckets.tiered.rate=1", "ratelimit.buckets.tiered.period=1h",
				"ratelimit.buckets.tiered.limit=2", "ratelimit.buckets.tiered.max-wait=0",
				"ratelimit.buckets.tiered.plans.pro.limit=5", "ratelimit.web.rules[0].paths=/api/**",
				"ratelimit.web.rules[0].bucket=tiered", "ratelimit.web.rules[0].key=header:X-Api-Key",
				"ratelimit.web.rules[0].plan=header:X-Plan").run((context) -> {
					MockMvc mvc = mvc(context);
					for (int i = 0; i < 5; i++) {
						mvc.perform(get("/api/items").header("X-Api-Key", "a").header("X-Plan", "pro"))
							.andExpect(status().isOk());
					}
					mvc.perform(get("/api/items").header("X-Api-Key", "a").header("X-Plan", "pro"))
						.andExpect(status().isTooManyRequests());
					for (String plan : new String[] { null, "gold" }) {
						String key = (plan != null) ? "c" : "b";
						for (int i = 0; i < 2; i++) {
							mvc.perform(plan != null ? get("/api/items").header("X-Api-Key", key).header("X-Plan", plan)
									: get("/api/items").header("X-Api-Key", key)).andExpect(status().isOk());
						}
						mvc.perform(plan != null ? get("/api/items").header("X-Api-Key", key).header("X-Plan", plan)
								: get("/api/items").header("X-Api-Key", key)).andExpect(status().isTooManyRequests());
					}
					// d upgrades after 1 call: it keeps its 1 token left and gets pro's limit, filling at the rate
					mvc.perform(get("/api/items").header("X-Api-Key", "d")).andExpect(status().isOk());
					mvc.perform(get("/api/items").header("X-Api-Key", "d").header("X-Plan", "pro"))
						.andExpect(status().isOk());
					mvc.perform(get("/api/items").header("X-Api-Key", "d").header("X-Plan", "pro"))
						.andExpect(status().isTooManyRequests());
					dev.ratelimit.spring.KeyedBuckets keys = context.getBean(dev.ratelimit.spring.RateLimiterRegistry.class)
						.get("tiered")
						.keyed();
					assertThat(keys.findEntry("a").plan()).isEqualTo("pro");
					assertThat(keys.findEntry("a").limiter().snapshot().limit()).isEqualTo(5);
					assertThat(keys.findEntry("c").plan()).isNull();
				});
	}

	@Test
	void onlyMatchingPathsAndMethodsAreLimitedAndARefusalIsThe429OfAnAnnotatedMethod() throws Exception {
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].methods=POST",
				"ratelimit.web.rules[0].bucket=api").run((context) -> {
					MockMvc mvc = mvc(context);
					for (int i = 0; i < 5; i++) {
						mvc.perform(get("/api/items")).andExpect(status().isOk());
						mvc.perform(post("/other")).andExpect(status().isOk());
					}
					mvc.perform(post("/api/items")).andExpect(status().isOk());
					mvc.perform(post("/api/items")).andExpect(status().isOk());
					mvc.perform(post("/api/items"))
						.andExpect(status().isTooManyRequests())
						.andExpect(header().string("Retry-After", "3600"))
						.andExpect(header().doesNotExist("RateLimit"))
						.andExpect(content().contentType("application/problem+json"))
						.andExpect(jsonPath("$.status").value(429))
						.andExpect(jsonPath("$.bucket").value("api"))
						.andExpect(jsonPath("$.title").value("Too Many Requests"))
						// as an annotated method's 429, which Spring writes without the default type
						.andExpect(jsonPath("$.type").doesNotExist())
						.andExpect(jsonPath("$.violated-policies").doesNotExist());
					assertThat(context.getBean("api", RateLimiter.class).snapshot().rejected()).isEqualTo(1);
				});
	}

	/**
	 * Found by an auditor: Spring MVC answers HEAD with the GET handler, so a rule for GET let every HEAD
	 * request run the limited handler unlimited. A rule for GET covers HEAD too.
	 */
	@Test
	void aRuleForGetLimitsHeadWhichRunsTheSameHandler() throws Exception {
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].methods=GET",
				"ratelimit.web.rules[0].bucket=api").run((context) -> {
					MockMvc mvc = mvc(context);
					mvc.perform(head("/api/items")).andExpect(status().isOk());
					mvc.perform(get("/api/items")).andExpect(status().isOk());
					mvc.perform(head("/api/items")).andExpect(status().isTooManyRequests());
					mvc.perform(post("/api/items")).andExpect(status().isOk()); // not a GET rule's
				});
	}

	@Test
	void everyMatchingRuleAppliesAllOrNothing() throws Exception {
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=api",
				"ratelimit.web.rules[1].paths=/api/special/**", "ratelimit.web.rules[1].bucket=special")
			.run((context) -> {
				MockMvc mvc = mvc(context);
				mvc.perform(get("/api/special/x")).andExpect(status().isOk());
				// special is empty: refused naming it, and api keeps its token
				mvc.perform(get("/api/special/x"))
					.andExpect(status().isTooManyRequests())
					.andExpect(jsonPath("$.bucket").value("special"));
				assertThat(context.getBean("api", RateLimiter.class).snapshot().available()).isEqualTo(1);
				mvc.perform(get("/api/items")).andExpect(status().isOk());
				mvc.perform(get("/api/items")).andExpect(status().isTooManyRequests());
			});
	}

	@Test
	void ipKeysGiveEachClientItsOwnBucketAndIpv6ClientsAreKeyedByTheirSlash64() throws Exception {
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=per-client",
				"ratelimit.web.rules[0].key=ip").run((context) -> {
					MockMvc mvc = mvc(context);
					mvc.perform(from(get("/api/items"), "192.0.2.1")).andExpect(status().isOk());
					mvc.perform(from(get("/api/items"), "192.0.2.1")).andExpect(status().isTooManyRequests());
					mvc.perform(from(get("/api/items"), "192.0.2.2")).andExpect(status().isOk());
					mvc.perform(from(get("/api/items"), "2001:db8:1:2::1")).andExpect(status().isOk());
					// the same /64: the same client
					mvc.perform(from(get("/api/items"), "2001:db8:1:2:ffff::9")).andExpect(status().isTooManyRequests());
					mvc.perform(from(get("/api/items"), "2001:db8:1:3::1")).andExpect(status().isOk());
				});
	}

	@Test
	void headerPrincipalAndExpressionKeys() throws Exception {
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/api/items", "ratelimit.web.rules[0].bucket=per-client",
				"ratelimit.web.rules[0].key=header:X-Api-Key", "ratelimit.web.rules[1].paths=/api/me",
				"ratelimit.web.rules[1].bucket=per-client", "ratelimit.web.rules[1].key=principal",
				"ratelimit.web.rules[2].paths=/api/tenants/*", "ratelimit.web.rules[2].bucket=per-client",
				"ratelimit.web.rules[2].key=#request.getParameter('tenant')").run((context) -> {
					MockMvc mvc = mvc(context);
					mvc.perform(get("/api/items").header("X-Api-Key", "k1")).andExpect(status().isOk());
					mvc.perform(get("/api/items").header("X-Api-Key", "k1")).andExpect(status().isTooManyRequests());
					mvc.perform(get("/api/items").header("X-Api-Key", "k2")).andExpect(status().isOk());
					// no header: every such request shares the key ""
					mvc.perform(get("/api/items")).andExpect(status().isOk());
					mvc.perform(get("/api/items")).andExpect(status().isTooManyRequests());
					mvc.perform(get("/api/me").principal(() -> "alice")).andExpect(status().isOk());
					mvc.perform(get("/api/me").principal(() -> "alice")).andExpect(status().isTooManyRequests());
					mvc.perform(get("/api/me").principal(() -> "bob")).andExpect(status().isOk());
					mvc.perform(get("/api/tenants/x").param("tenant", "acme")).andExpect(status().isOk());
					mvc.perform(get("/api/tenants/x").param("tenant", "acme")).andExpect(status().isTooManyRequests());
					mvc.perform(get("/api/tenants/x").param("tenant", "globex")).andExpect(status().isOk());
				});
	}

	@Test
	void aRequestThatMustWaitWaitsUpToTheBucketsMaxWait() throws Exception {
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=paced")
			.run((context) -> {
				MockMvc mvc = mvc(context);
				mvc.perform(get("/api/items")).andExpect(status().isOk());
				CompletableFuture<Integer> waiting = CompletableFuture
					.supplyAsync(() -> statusOf(mvc, get("/api/items")));
				RateLimiter paced = context.getBean("paced", RateLimiter.class);
				Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> paced.snapshot().waiting() == 1);
				assertThat(waiting).isNotDone();
				this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(100));
				assertThat(waiting.get(5, TimeUnit.SECONDS)).isEqualTo(200);
			});
	}

	@Test
	void aCappedBucketPerClientBoundsItsConcurrentRequestsAsyncResponsesIncluded() throws Exception {
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=concurrent",
				"ratelimit.web.rules[0].key=ip").run((context) -> {
					MockMvc mvc = mvc(context);
					ShopController shop = context.getBean(ShopController.class);
					MvcResult slow = mvc.perform(from(get("/api/slow"), "192.0.2.1"))
						.andExpect(request().asyncStarted())
						.andReturn();
					// the slow response is still running: the client's one request in flight is taken
					mvc.perform(from(get("/api/items"), "192.0.2.1")).andExpect(status().isTooManyRequests());
					mvc.perform(from(get("/api/items"), "192.0.2.2")).andExpect(status().isOk());
					shop.pending().complete("done");
					mvc.perform(asyncDispatch(slow)).andExpect(status().isOk());
					this.now.addAndGet(TimeUnit.MILLISECONDS.toNanos(1)); // the rate gives the released token back
					Awaitility.await().atMost(Duration.ofSeconds(5)).untilAsserted(
							() -> mvc.perform(from(get("/api/items"), "192.0.2.1")).andExpect(status().isOk()));
				});
	}

	@Test
	void actuatorPathsAreNeverLimited() throws Exception {
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/**", "ratelimit.web.rules[0].bucket=special")
			.run((context) -> {
				MockMvc mvc = mvc(context);
				for (int i = 0; i < 3; i++) {
					assertThat(statusOf(mvc, get("/actuator/health"))).isNotEqualTo(429);
				}
				assertThat(context.getBean("special", RateLimiter.class).snapshot().available()).isEqualTo(1);
				mvc.perform(get("/api/items")).andExpect(status().isOk());
				mvc.perform(get("/api/items")).andExpect(status().isTooManyRequests());
			});
	}

	@Test
	void ietfHeadersGiveTheBucketClosestToRefusingWithExactValues() throws Exception {
		this.runner.withPropertyValues("ratelimit.web.headers=ietf", "ratelimit.web.rules[0].paths=/api/**",
				"ratelimit.web.rules[0].bucket=five").run((context) -> {
					MockMvc mvc = mvc(context);
					mvc.perform(get("/api/items"))
						.andExpect(status().isOk())
						.andExpect(header().string("RateLimit-Policy", "\"five\";q=5;w=1"))
						.andExpect(header().string("RateLimit", "\"five\";r=4;t=1"));
					for (int i = 0; i < 4; i++) {
						mvc.perform(get("/api/items")).andExpect(status().isOk());
					}
					mvc.perform(get("/api/items"))
						.andExpect(status().isTooManyRequests())
						.andExpect(header().string("Retry-After", "1"))
						.andExpect(header().string("RateLimit-Policy", "\"five\";q=5;w=1"))
						.andExpect(header().string("RateLimit", "\"five\";r=0;t=1"))
						.andExpect(jsonPath("$.violated-policies", contains("five")));
					// annotated controller methods carry the fields too, for the closest of their buckets
					mvc.perform(get("/annotated"))
						.andExpect(status().isOk())
						.andExpect(header().string("RateLimit", "\"special\";r=0;t=3600"));
					mvc.perform(get("/annotated"))
						.andExpect(status().isTooManyRequests())
						.andExpect(header().string("Retry-After", "3600"))
						.andExpect(header().string("RateLimit-Policy", "\"special\";q=1;w=3600"))
						.andExpect(jsonPath("$.violated-policies", contains("special")));
					// and so do those answering with a CompletionStage
					MvcResult async = mvc.perform(get("/annotated-async")).andExpect(request().asyncStarted()).andReturn();
					mvc.perform(asyncDispatch(async))
						.andExpect(status().isOk())
						.andExpect(header().string("RateLimit", "\"per-client\";r=0;t=3600"));
				});
	}

	@Test
	void headersNoneSendsNoRateLimitHeaderAtAll() throws Exception {
		this.runner.withPropertyValues("ratelimit.web.headers=none", "ratelimit.web.rules[0].paths=/api/**",
				"ratelimit.web.rules[0].bucket=api").run((context) -> {
					MockMvc mvc = mvc(context);
					mvc.perform(get("/api/items")).andExpect(header().doesNotExist("RateLimit"));
					mvc.perform(get("/api/items")).andExpect(status().isOk());
					mvc.perform(get("/api/items"))
						.andExpect(status().isTooManyRequests())
						.andExpect(header().doesNotExist("Retry-After"));
					mvc.perform(get("/annotated")).andExpect(status().isOk());
					mvc.perform(get("/annotated"))
						.andExpect(status().isTooManyRequests())
						.andExpect(header().doesNotExist("Retry-After"));
				});
	}

	@Test
	void aShadowBucketNeverAnswers429AndStillSendsItsFields() throws Exception {
		this.runner.withPropertyValues("ratelimit.buckets.special.mode=shadow", "ratelimit.web.headers=ietf",
				"ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=special").run((context) -> {
					MockMvc mvc = mvc(context);
					for (int i = 0; i < 3; i++) {
						mvc.perform(get("/api/items"))
							.andExpect(status().isOk())
							.andExpect(header().string("RateLimit", "\"special\";r=0;t=3600"));
					}
				});
	}

	@Test
	void aRuleThatIsNotValidFailsStartUpNamingItsIndexAndProperty() {
		assertStartUpFails("ratelimit.web.rules[0].bucket=api", "ratelimit.web.rules[0].paths");
		assertStartUpFails("ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket");
		assertStartUpFails(new String[] { "ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=nope" },
				"ratelimit.web.rules[0].bucket 'nope'");
		assertStartUpFails(new String[] { "ratelimit.web.rules[0].paths=/api/**/x", "ratelimit.web.rules[0].bucket=api" },
				"ratelimit.web.rules[0].paths[0]");
		assertStartUpFails(new String[] { "ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=api",
				"ratelimit.web.rules[0].key=client" }, "ratelimit.web.rules[0].key 'client'");
		assertStartUpFails(new String[] { "ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=api",
				"ratelimit.web.rules[0].key=#request.(" }, "ratelimit.web.rules[0].key");
	}

	/**
	 * Found by a user: {@code methods: [GTE]} started, and every GET then passed unlimited; {@code kye: ip}
	 * in a rule started, and the rule became one budget for every client; {@code ratelimit.web.header: none}
	 * and {@code ratelimit.exectuor.max-threads} were ignored. Each now fails start-up naming the property
	 * and what was meant; a method of one's own that is no near miss is accepted.
	 */
	@Test
	void aMisspeltMethodOrPropertyOutsideTheBucketsFailsStartUpSayingWhatWasMeant() {
		assertStartUpFails(new String[] { "ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=api",
				"ratelimit.web.rules[0].methods=GTE" }, "has 'GTE', which is not an HTTP method; did you mean GET?");
		assertStartUpFails(new String[] { "ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=api",
				"ratelimit.web.rules[0].kye=ip" },
				"ratelimit.web.rules[0].kye (\"ratelimit.web.rules[0].kye\" from property source \"test\") is not a"
						+ " ratelimit property; did you mean ratelimit.web.rules[0].key?");
		assertStartUpFails("ratelimit.web.header=none", "did you mean ratelimit.web.headers?");
		assertStartUpFails("ratelimit.exectuor.max-threads=4", "did you mean ratelimit.executor.max-threads?");
		assertStartUpFails("ratelimit.mode=shdow", "ratelimit.mode is 'shdow'");
		assertStartUpFails("ratelimit.web.headers=ietf2", "Set ratelimit.web.headers to ietf, retry-after or none");
		this.runner.withPropertyValues("ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=api",
				"ratelimit.web.rules[0].methods=PROPFIND,get", "ratelimit.web.headers=retry-after",
				"ratelimit.executor.max-threads=4")
			.run((context) -> assertThat(context).hasNotFailed());
	}

	private void assertStartUpFails(String property, String message) {
		assertStartUpFails(new String[] { property }, message);
	}

	private void assertStartUpFails(String[] properties, String message) {
		this.runner.withPropertyValues(properties).run((context) -> {
			assertThat(context).hasFailed();
			Throwable failure = context.getStartupFailure();
			while (failure != null && !(failure instanceof RateLimitConfigurationException)) {
				failure = failure.getCause();
			}
			assertThat(failure).as(String.join(", ", properties)).isNotNull().hasMessageContaining(message);
		});
	}

	/**
	 * The status of a request; one that waits for its tokens holds no thread (contract revision 3): the
	 * filter puts it in asynchronous mode and dispatches it again once the tokens are there, which is done
	 * here as the container would (MockMvc runs no dispatch by itself), or it is answered while waiting.
	 */
	private static int statusOf(MockMvc mvc, MockHttpServletRequestBuilder request) {
		try {
			MvcResult result = mvc.perform(request).andReturn();
			MockHttpServletRequest sent = result.getRequest();
			if (!sent.isAsyncStarted()) {
				return result.getResponse().getStatus();
			}
			MockAsyncContext async = (MockAsyncContext) sent.getAsyncContext();
			Awaitility.await()
				.atMost(Duration.ofSeconds(30))
				.until(() -> async.getDispatchedPath() != null || !sent.isAsyncStarted());
			if (async.getDispatchedPath() == null) {
				return result.getResponse().getStatus(); // answered while waiting (a refusal)
			}
			return mvc.perform((servletContext) -> {
				sent.setDispatcherType(DispatcherType.ASYNC);
				sent.setAsyncStarted(false);
				return sent;
			}).andReturn().getResponse().getStatus();
		}
		catch (Exception ex) {
			throw new IllegalStateException(ex);
		}
	}

	@Configuration(proxyBeanMethods = false)
	@EnableWebMvc
	static class ShopConfiguration {

		@Bean
		ShopController shopController() {
			return new ShopController();
		}
	}

	@RestController
	static class ShopController {

		final CompletableFuture<String> pending = new CompletableFuture<>();

		@GetMapping({ "/api/items", "/api/special/x", "/api/me", "/api/tenants/{id}" })
		public String items() {
			return "items";
		}

		@PostMapping({ "/api/items", "/other" })
		public String post() {
			return "posted";
		}

		@GetMapping("/api/slow")
		public CompletableFuture<String> slow() {
			return this.pending;
		}

		public CompletableFuture<String> pending() {
			return this.pending;
		}

		@GetMapping("/annotated")
		@RateLimited("special")
		public String annotated() {
			return "annotated";
		}

		@GetMapping("/annotated-async")
		@RateLimited("per-client")
		public CompletableFuture<String> annotatedAsync() {
			return CompletableFuture.completedFuture("async");
		}

		@GetMapping("/actuator/{name}")
		public String actuator(@PathVariable String name) {
			return name;
		}
	}
}
