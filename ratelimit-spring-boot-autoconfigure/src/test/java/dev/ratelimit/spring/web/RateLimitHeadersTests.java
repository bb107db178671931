package dev.ratelimit.spring.web;

import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.spring.BucketStatsFactory;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.WebHeaders;
import jakarta.servlet.Filter;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.ProblemDetail;
import org.springframework.mock.web.MockFilterChain;
import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.mock.web.MockHttpServletResponse;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowableOfType;

/**
 * Hand-picked cases of the IETF fields and {@code violated-policies} that
 * {@link RateLimitHeadersModelTests} found wrong.
 */
class RateLimitHeadersTests {

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	/** Nanoseconds the clock moves when a bucket counts a refusal: between the refusal and the 429's fields. */
	private final AtomicLong onRefusal = new AtomicLong();

	private MockHttpServletResponse send(Filter filter, String path) throws Exception {
		return send(filter, path, null);
	}

	private MockHttpServletResponse send(Filter filter, String path, String user) throws Exception {
		MockHttpServletResponse response = new MockHttpServletResponse();
		MockHttpServletRequest request = new MockHttpServletRequest("GET", path);
		if (user != null) {
			request.addHeader("X-User", user);
		}
		filter.doFilter(request, response, new MockFilterChain());
		return response;
	}

	/**
	 * Counts as usual, and moves the fake clock by {@link #onRefusal} when a refusal is counted: that is
	 * after the bucket refused and before the 429's fields are read, where a token may arrive.
	 */
	private BucketStatsFactory clockMovingOnRefusal() {
		return (bucket) -> {
			StatsRecorder counts = StatsRecorder.concurrent();
			return new StatsRecorder() {

				@Override
				public void recordGranted(long waitedNanos) {
					counts.recordGranted(waitedNanos);
				}

				@Override
				public void recordRejected() {
					counts.recordRejected();
					RateLimitHeadersTests.this.now.addAndGet(RateLimitHeadersTests.this.onRefusal.get());
				}

				@Override
				public long granted() {
					return counts.granted();
				}

				@Override
				public long rejected() {
					return counts.rejected();
				}
			};
		};
	}

	/**
	 * {@code per-user} (1 per second, limit 3) has room for one key: alice's. bob, who comes while
	 * alice's bucket is not full, shares the overflow bucket; his fourth call is refused by it, and the
	 * 429 gives the overflow bucket's level (empty, full in 3 s), not the template's (always full, since
	 * keyed calls never take from it).
	 */
	@Test
	void a429ByTheOverflowBucketGivesTheOverflowBucketsLevel() {
		new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withUserConfiguration(QuoteConfiguration.class)
			.withBean(RateLimitClock.class, () -> this.now::get)
			.withPropertyValues("ratelimit.buckets.per-user.rate=1", "ratelimit.buckets.per-user.limit=3",
					"ratelimit.buckets.per-user.max-wait=0", "ratelimit.buckets.per-user.keys.max=1",
					"ratelimit.buckets.quote.rate=2", "ratelimit.buckets.quote.limit=2",
					"ratelimit.buckets.quote.max-wait=0")
			.run((context) -> {
				QuoteService service = context.getBean(QuoteService.class);
				RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
				service.perUser("alice");
				for (int i = 0; i < 3; i++) {
					service.perUser("bob"); // the overflow bucket
				}
				RateLimitExceededException refusal = catchThrowableOfType(RateLimitExceededException.class,
						() -> service.perUser("bob"));
				assertThat(refusal.getKey()).isEqualTo("bob");
				var response = new RateLimitExceptionHandler(false, WebHeaders.IETF, () -> registry)
					.handleRateLimitExceeded(refusal);
				assertThat(response.getHeaders().getFirst("RateLimit")).isEqualTo("\"per-user\";r=0;t=3");
				assertThat(response.getHeaders().getFirst("Retry-After")).isEqualTo("1");
			});
	}

	/**
	 * A refusal of a key's bucket that the application copied (its own exception layer, or one that
	 * crossed a JVM boundary: no limiter in it) names the key as text; the key is a number
	 * ({@code #id}). The 429 gives that key's bucket (empty, full in 3 s), found by the key's text as it
	 * was before the refusal carried its limiter; not the overflow bucket, which the key never used.
	 */
	@Test
	void a429ForACopiedRefusalOfANumericKeyGivesThatKeysBucket() {
		new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withUserConfiguration(QuoteConfiguration.class)
			.withBean(RateLimitClock.class, () -> this.now::get)
			.withPropertyValues("ratelimit.buckets.per-user.rate=1", "ratelimit.buckets.per-user.limit=3",
					"ratelimit.buckets.per-user.max-wait=0", "ratelimit.buckets.quote.rate=2",
					"ratelimit.buckets.quote.limit=2", "ratelimit.buckets.quote.max-wait=0")
			.run((context) -> {
				QuoteService service = context.getBean(QuoteService.class);
				RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
				for (int i = 0; i < 3; i++) {
					service.perId(42L);
				}
				RateLimitExceededException refusal = catchThrowableOfType(RateLimitExceededException.class,
						() -> service.perId(42L));
				RateLimitExceededException copied = new RateLimitExceededException(refusal.getBucket(),
						refusal.getKey(), refusal.getCost(), refusal.getRetryAfter(), refusal.getMessage());
				assertThat(copied.getKey()).isEqualTo("42");
				var response = new RateLimitExceptionHandler(false, WebHeaders.IETF, () -> registry)
					.handleRateLimitExceeded(copied);
				assertThat(response.getHeaders().getFirst("RateLimit")).isEqualTo("\"per-user\";r=0;t=3");
			});
	}

	/**
	 * The same through a web rule keyed by a header. alice takes 1 token; 0.5 s later bob empties the
	 * overflow bucket and is refused by it; the clock moves 0.5 s between the refusal and the fields,
	 * so alice's bucket is full (idle: it may be dropped) when they are read, and the overflow bucket
	 * holds half a token, full in 2.5 s. The fields give the overflow bucket's level, and reading it
	 * makes no bucket for bob (which would be full: {@code r=3;t=0}).
	 */
	@Test
	void a429ByTheOverflowBucketOfAWebRuleGivesItsLevelWithoutMakingABucketForTheKey() {
		new WebApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withBean(RateLimitClock.class, () -> this.now::get)
			.withBean(BucketStatsFactory.class, this::clockMovingOnRefusal)
			.withPropertyValues("ratelimit.web.headers=ietf", "ratelimit.buckets.per-user.rate=1",
					"ratelimit.buckets.per-user.limit=3", "ratelimit.buckets.per-user.max-wait=0",
					"ratelimit.buckets.per-user.keys.max=1", "ratelimit.web.rules[0].paths=/api/**",
					"ratelimit.web.rules[0].bucket=per-user", "ratelimit.web.rules[0].key=header:X-User")
			.run((context) -> {
				@SuppressWarnings("unchecked")
				Filter filter = context.getBean(FilterRegistrationBean.class).getFilter();
				RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
				assertThat(send(filter, "/api/x", "alice").getHeader("RateLimit")).isEqualTo("\"per-user\";r=2;t=1");
				this.now.addAndGet(500_000_000L);
				for (int i = 0; i < 3; i++) {
					assertThat(send(filter, "/api/x", "bob").getStatus()).isEqualTo(200);
				}
				this.onRefusal.set(500_000_000L);
				MockHttpServletResponse response = send(filter, "/api/x", "bob");
				assertThat(response.getStatus()).isEqualTo(429);
				assertThat(response.getHeader("RateLimit")).isEqualTo("\"per-user\";r=0;t=3");
				assertThat(response.getHeader("Retry-After")).isEqualTo("1");
				assertThat(registry.get("per-user").keyed().find("bob")).isNull();
			});
	}

	/**
	 * {@code quote} (2 per second, limit 2) refuses a third request; the clock moves between the refusal
	 * and the fields. At the refusal fewer tokens than the cost were there, so the 429 says 0 left, and
	 * a {@code t} no shorter than {@code Retry-After} (a refusing bucket is not full), however far the
	 * clock moved: 0.6 s (1.2 tokens by then) or 1 s (full by then).
	 */
	@Test
	void a429NeverSaysTokensAreLeftNorThatTheBucketIsFull() {
		new WebApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withBean(RateLimitClock.class, () -> this.now::get)
			.withBean(BucketStatsFactory.class, this::clockMovingOnRefusal)
			.withPropertyValues("ratelimit.web.headers=ietf", "ratelimit.buckets.quote.rate=2",
					"ratelimit.buckets.quote.limit=2", "ratelimit.buckets.quote.max-wait=0",
					"ratelimit.web.rules[0].paths=/api/quote", "ratelimit.web.rules[0].bucket=quote")
			.run((context) -> {
				@SuppressWarnings("unchecked")
				Filter filter = context.getBean(FilterRegistrationBean.class).getFilter();
				for (long moved : new long[] { 600_000_000L, 1_000_000_000L }) {
					this.now.addAndGet(60_000_000_000L);
					this.onRefusal.set(0);
					send(filter, "/api/quote");
					send(filter, "/api/quote");
					this.onRefusal.set(moved);
					MockHttpServletResponse response = send(filter, "/api/quote");
					assertThat(response.getStatus()).isEqualTo(429);
					assertThat(response.getHeader("Retry-After")).isEqualTo("1");
					assertThat(response.getHeader("RateLimit")).as("moved %d ns", moved).isEqualTo("\"quote\";r=0;t=1");
				}
			});
	}

	/**
	 * The same for an annotated method, whose 429 is answered after the refusal: by then the bucket is
	 * full again.
	 */
	@Test
	void a429OfAnAnnotatedMethodNeverSaysTokensAreLeft() {
		new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withUserConfiguration(QuoteConfiguration.class)
			.withBean(RateLimitClock.class, () -> this.now::get)
			.withPropertyValues("ratelimit.buckets.per-user.rate=1", "ratelimit.buckets.per-user.limit=3",
					"ratelimit.buckets.per-user.max-wait=0", "ratelimit.buckets.per-user.keys.max=1",
					"ratelimit.buckets.quote.rate=2", "ratelimit.buckets.quote.limit=2",
					"ratelimit.buckets.quote.max-wait=0")
			.run((context) -> {
				QuoteService service = context.getBean(QuoteService.class);
				RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
				service.quote(2);
				RateLimitExceededException refusal = catchThrowableOfType(RateLimitExceededException.class,
						() -> service.quote(2));
				this.now.addAndGet(1_000_000_000L);
				var response = new RateLimitExceptionHandler(false, WebHeaders.IETF, () -> registry)
					.handleRateLimitExceeded(refusal);
				// cost 2: at most 1 left at the refusal; the wait was 1 s
				assertThat(response.getHeaders().getFirst("RateLimit")).isEqualTo("\"quote\";r=1;t=1");
				assertThat(response.getHeaders().getFirst("Retry-After")).isEqualTo("1");
			});
	}

	@Test
	void violatedPoliciesListsEveryRefusingBucketOfAWebRequest() {
		new WebApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withBean(RateLimitClock.class, () -> this.now::get)
			.withPropertyValues("ratelimit.web.headers=ietf", "ratelimit.buckets.a.rate=1", "ratelimit.buckets.a.limit=1",
					"ratelimit.buckets.a.max-wait=0", "ratelimit.buckets.b.rate=1", "ratelimit.buckets.b.limit=1",
					"ratelimit.buckets.b.max-wait=0", "ratelimit.buckets.c.rate=1", "ratelimit.buckets.c.limit=5",
					"ratelimit.buckets.c.max-wait=0", "ratelimit.web.rules[0].paths=/api/**",
					"ratelimit.web.rules[0].bucket=a", "ratelimit.web.rules[0].cost=2",
					"ratelimit.web.rules[1].paths=/api/**", "ratelimit.web.rules[1].bucket=b",
					"ratelimit.web.rules[1].cost=3", "ratelimit.web.rules[2].paths=/api/**",
					"ratelimit.web.rules[2].bucket=c")
			.run((context) -> {
				@SuppressWarnings("unchecked")
				Filter filter = context.getBean(FilterRegistrationBean.class).getFilter();
				MockHttpServletResponse response = send(filter, "/api/x");
				assertThat(response.getStatus()).isEqualTo(429);
				// b's wait (2 s) is the longest: it is named; a (1 s) refuses too; c does not
				assertThat(response.getContentAsString()).contains("\"bucket\":\"b\"")
					.contains("\"violated-policies\":[\"a\",\"b\"]");
				assertThat(response.getHeader("Retry-After")).isEqualTo("2");
			});
	}

	@Test
	void violatedPoliciesListsEveryRefusingBucketOfAnAnnotatedMethod() {
		new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withUserConfiguration(ServiceConfiguration.class)
			.withBean(RateLimitClock.class, () -> this.now::get)
			.withPropertyValues("ratelimit.buckets.a.rate=1", "ratelimit.buckets.a.limit=1",
					"ratelimit.buckets.a.max-wait=0", "ratelimit.buckets.b.rate=1", "ratelimit.buckets.b.limit=1",
					"ratelimit.buckets.b.max-wait=0")
			.run((context) -> {
				Service service = context.getBean(Service.class);
				RateLimitExceededException refusal = catchThrowableOfType(RateLimitExceededException.class,
						() -> service.both(2, 3));
				assertThat(refusal.getBucket()).isEqualTo("b");
				ProblemDetail problem = new RateLimitExceptionHandler(false, WebHeaders.IETF, () -> null)
					.handleRateLimitExceeded(refusal)
					.getBody();
				assertThat(problem.getProperties()).containsEntry("violated-policies", List.of("a", "b"));
				// one refusing bucket: only it
				refusal = catchThrowableOfType(RateLimitExceededException.class, () -> service.both(1, 3));
				problem = new RateLimitExceptionHandler(false, WebHeaders.IETF, () -> null)
					.handleRateLimitExceeded(refusal)
					.getBody();
				assertThat(problem.getProperties()).containsEntry("violated-policies", List.of("b"));
			});
	}

	/**
	 * The bucket makes 2 tokens per 3 s: 1.2 s after it was emptied it holds 0.8 of a token, and is full
	 * (2 tokens) 1.8 s later, so {@code t=2} (counting whole tokens, 0, would say 3).
	 */
	@Test
	void tIsTheTimeUntilFullCountingThePartOfTheNextTokenAlreadyMade() {
		new WebApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withBean(RateLimitClock.class, () -> this.now::get)
			.withPropertyValues("ratelimit.web.headers=ietf", "ratelimit.buckets.slow.rate=2",
					"ratelimit.buckets.slow.period=3s", "ratelimit.buckets.slow.limit=2",
					"ratelimit.buckets.slow.max-wait=0", "ratelimit.web.rules[0].paths=/take",
					"ratelimit.web.rules[0].bucket=slow", "ratelimit.web.rules[0].cost=2",
					"ratelimit.web.rules[1].paths=/peek", "ratelimit.web.rules[1].bucket=slow",
					"ratelimit.web.rules[1].cost=0")
			.run((context) -> {
				@SuppressWarnings("unchecked")
				Filter filter = context.getBean(FilterRegistrationBean.class).getFilter();
				assertThat(send(filter, "/take").getHeader("RateLimit")).isEqualTo("\"slow\";r=0;t=3");
				this.now.addAndGet(1_200_000_000L);
				assertThat(send(filter, "/peek").getHeader("RateLimit")).isEqualTo("\"slow\";r=0;t=2");
			});
	}

	/**
	 * After the request, {@code a} (8 per second) and {@code b} (3 per second) both hold 2 of 5 tokens:
	 * a tie on tokens left; {@code a} is full in 0.375 s, {@code b} in 1 s, so the fields describe
	 * {@code b} (the rounded {@code t}, 1 and 1, would not tell them apart).
	 */
	@Test
	void onATieOfTokensLeftTheFieldsDescribeTheBucketLongestUntilFull() {
		new WebApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withBean(RateLimitClock.class, () -> this.now::get)
			.withPropertyValues("ratelimit.web.headers=ietf", "ratelimit.buckets.a.rate=8", "ratelimit.buckets.a.limit=5",
					"ratelimit.buckets.a.max-wait=0", "ratelimit.buckets.b.rate=3", "ratelimit.buckets.b.limit=5",
					"ratelimit.buckets.b.max-wait=0", "ratelimit.web.rules[0].paths=/x", "ratelimit.web.rules[0].bucket=a",
					"ratelimit.web.rules[0].cost=3", "ratelimit.web.rules[1].paths=/x", "ratelimit.web.rules[1].bucket=b",
					"ratelimit.web.rules[1].cost=3")
			.run((context) -> {
				@SuppressWarnings("unchecked")
				Filter filter = context.getBean(FilterRegistrationBean.class).getFilter();
				MockHttpServletResponse response = send(filter, "/x");
				assertThat(response.getHeader("RateLimit-Policy")).isEqualTo("\"b\";q=5;w=2");
				assertThat(response.getHeader("RateLimit")).isEqualTo("\"b\";r=2;t=1");
			});
	}

	@Configuration(proxyBeanMethods = false)
	static class ServiceConfiguration {

		@Bean
		Service service() {
			return new Service();
		}
	}

	static class Service {

		@RateLimited(value = "a", cost = "#n")
		@RateLimited(value = "b", cost = "#m")
		public void both(long n, long m) {
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class QuoteConfiguration {

		@Bean
		QuoteService quoteService() {
			return new QuoteService();
		}
	}

	static class QuoteService {

		@RateLimited(value = "per-user", key = "#user")
		public void perUser(String user) {
		}

		@RateLimited(value = "per-user", key = "#id")
		public void perId(long id) {
		}

		@RateLimited(value = "quote", cost = "#n")
		public void quote(long n) {
		}
	}
}
