package dev.ratelimit.spring.actuate;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import com.fasterxml.jackson.annotation.JsonInclude;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.BucketMode;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RegisteredBucket;
import dev.ratelimit.spring.autoconfigure.RateLimitEndpointAutoConfiguration;
import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class RateLimitsEndpointTests {

	private static final AtomicLong NOW = new AtomicLong(1_000_000_000_000L);

	/** What Boot's endpoint JSON mapper does: leave out nulls unless told otherwise. */
	private static final JsonMapper ENDPOINT_JSON = JsonMapper.builder()
		.changeDefaultPropertyInclusion((inclusion) -> inclusion.withValueInclusion(JsonInclude.Include.NON_NULL)
			.withContentInclusion(JsonInclude.Include.NON_NULL))
		.build();

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class, RateLimitEndpointAutoConfiguration.class))
		.withUserConfiguration(ClockConfiguration.class)
		.withPropertyValues("management.endpoints.web.exposure.include=ratelimits",
				"ratelimit.buckets.db-writes.rate=500", "ratelimit.buckets.db-writes.limit=100",
				"ratelimit.buckets.db-writes.capped-release=true", "ratelimit.buckets.feed.type=hybrid",
				"ratelimit.buckets.feed.rate=12000", "ratelimit.buckets.feed.burst-ratio=1.5");

	@Test
	void showsEveryBucketWithEveryFieldInConfigurationOrder() {
		this.runner.run((context) -> {
			RateLimitsEndpoint endpoint = context.getBean(RateLimitsEndpoint.class);
			JsonNode json = ENDPOINT_JSON.valueToTree(endpoint.buckets());
			assertThat(json.get("buckets").propertyNames()).containsExactly("db-writes", "feed");
			JsonNode db = json.get("buckets").get("db-writes");
			assertThat(db.propertyNames()).containsExactlyInAnyOrder("type", "backend", "rate", "period", "limit",
					"available", "deficiency", "waiting", "inFlight", "cappedRelease", "granted", "rejected", "pools",
					"behindSchedule", "mode", "keys", "resetsAt",
					"shadowRejected", "plan", "plans", "keysLoad");
			assertThat(db.get("plan").isNull()).isTrue(); // (a key's view names its plan; serialized, not omitted)
			assertThat(db.get("plans").isObject() && db.get("plans").isEmpty()).as("plans: {} without plans").isTrue();
			assertThat(db.get("mode").asString()).isEqualTo("enforce");
			assertThat(db.get("type").asString()).isEqualTo("shared");
			assertThat(db.get("backend").asString()).isEqualTo("local");
			assertThat(db.get("rate").asInt()).isEqualTo(500);
			assertThat(db.get("period").asString()).isEqualTo("PT1S");
			assertThat(db.get("limit").asLong()).isEqualTo(100);
			assertThat(db.get("available").asLong()).isEqualTo(100);
			assertThat(db.get("deficiency").asLong()).isZero();
			assertThat(db.get("waiting").asInt()).isZero();
			assertThat(db.get("inFlight").asLong()).isZero();
			assertThat(db.get("cappedRelease").asBoolean()).isTrue();
			assertThat(db.get("granted").asLong()).isZero();
			assertThat(db.get("rejected").asLong()).isZero();
			assertThat(db.get("pools").isNull()).isTrue();
			assertThat(db.get("resetsAt").isNull()).isTrue(); // (quotas only; serialized, not omitted)
			assertThat(db.get("behindSchedule").asString()).isEqualTo("PT0S");
			JsonNode feed = json.get("buckets").get("feed");
			assertThat(feed.get("type").asString()).isEqualTo("hybrid");
			assertThat(feed.get("limit").asLong()).isEqualTo(12);
			assertThat(feed.get("pools").get("active").asLong()).isEqualTo(12);
			assertThat(feed.get("pools").get("burst").asLong()).isZero();
			assertThat(feed.get("pools").get("waiting").asLong()).isZero();
			assertThat(feed.get("cappedRelease").asBoolean()).isFalse();
		});
	}

	@Test
	void showsCallsInFlightAndTimeBehindSchedule() {
		this.runner.run((context) -> {
			RateLimitsEndpoint endpoint = context.getBean(RateLimitsEndpoint.class);
			RateLimiter db = context.getBean("db-writes", RateLimiter.class);
			db.acquire(3, Duration.ZERO);
			BucketView view = endpoint.bucket("db-writes");
			assertThat(view.inFlight()).isEqualTo(3L);
			assertThat(view.available()).isEqualTo(97L);
			assertThat(view.granted()).isEqualTo(1);
			NOW.addAndGet(Duration.ofSeconds(2).toNanos());
			BucketView feed = endpoint.bucket("feed");
			// 2 s idle, less the 0.5 ms (6 operations) the burst pool recovered at ratio 1.5
			assertThat(feed.behindSchedule()).isEqualTo("PT1.9995S");
			assertThat(feed.pools().waiting()).isEqualTo(24_000L - 6L);
		});
	}

	/**
	 * Issue #30: a keyed bucket's view showed its template's own bucket, which keyed calls never take from
	 * ({@code available: 3} beside {@code keys: 2}, and after a retune still the old figure); what an
	 * operator asks is what a new key gets. Shadow refusals were in the meter only.
	 */
	@Test
	void aKeyedBucketsViewShowsWhatANewKeysBucketStartsWithAndEveryViewCountsShadowRefusals() {
		this.runner
			.withPropertyValues("ratelimit.buckets.per-user.rate=1", "ratelimit.buckets.per-user.limit=3",
					"ratelimit.buckets.per-user.max-wait=0")
			.run((context) -> {
				RateLimitsEndpoint endpoint = context.getBean(RateLimitsEndpoint.class);
				RegisteredBucket bucket = context.getBean(RateLimiterRegistry.class).find("per-user").orElseThrow();
				assertThat(endpoint.bucket("per-user").shadowRejected()).isZero();
				for (String key : new String[] { "alice", "bob" }) {
					KeyedBuckets.Entry entry = bucket.keyed().pin(key);
					assertThat(entry.limiter().tryAcquire("alice".equals(key) ? 3 : 1)).isTrue();
					entry.unpin();
				}
				endpoint.update("per-user", null, 5L, null);
				BucketView view = endpoint.bucket("per-user");
				assertThat(view.keys()).isEqualTo(2);
				assertThat(view.limit().longValue()).isEqualTo(5);
				assertThat(view.available().longValue()).as("a new key's bucket starts full, at the limit in force")
					.isEqualTo(5);
				assertThat(endpoint.key("per-user", "alice").available().longValue()).isZero();
				bucket.stats().mode(BucketMode.SHADOW);
				bucket.stats().refused();
				bucket.stats().refused();
				assertThat(endpoint.bucket("per-user").shadowRejected()).isEqualTo(2);
				assertThat(endpoint.key("per-user", "bob").shadowRejected()).isEqualTo(2);
				assertThat(endpoint.bucket("db-writes").shadowRejected()).isZero();
			});
	}

	@Test
	void answersNullForAnUnknownBucketWhichIsA404() {
		this.runner.run((context) -> assertThat(context.getBean(RateLimitsEndpoint.class).bucket("nope")).isNull());
	}

	@Test
	void retunesABucketInPlaceAndItGrantsAtTheNewRate() {
		this.runner.run((context) -> {
			RateLimitsEndpoint endpoint = context.getBean(RateLimitsEndpoint.class);
			RateLimiter db = context.getBean("db-writes", RateLimiter.class);
			db.acquire(100, Duration.ZERO).close();
			BucketView view = endpoint.update("db-writes", new BigDecimal("200"), 50L, null);
			assertThat(view.rate()).isEqualByComparingTo("200");
			assertThat(view.limit()).isEqualTo(50L);
			NOW.addAndGet(Duration.ofMillis(100).toNanos());
			long granted = 0;
			while (db.tryAcquire(1)) {
				granted++;
			}
			// 100 ms at the new 200/s, not the old 500/s
			assertThat(granted).isEqualTo(20);
		});
	}

	@Test
	void rejectsWhatTheConfigurationWouldRejectWithItsMessage() {
		this.runner.run((context) -> {
			RateLimitsEndpoint endpoint = context.getBean(RateLimitsEndpoint.class);
			assertThatThrownBy(() -> endpoint.update("db-writes", new BigDecimal("-1"), null, null))
				.isInstanceOf(InvalidEndpointRequestException.class)
				.hasMessageContaining("ratelimit.buckets.db-writes.rate is -1")
				.hasMessageContaining("a number > 0");
			assertThatThrownBy(() -> endpoint.update("db-writes", null, 0L, null))
				.isInstanceOf(InvalidEndpointRequestException.class)
				.hasMessageContaining("limit");
			assertThatThrownBy(() -> endpoint.update("nope", BigDecimal.ONE, null, null))
				.isInstanceOf(InvalidEndpointRequestException.class)
				.hasMessageContaining("db-writes, feed");
			assertThat(endpoint.bucket("db-writes").rate()).isEqualByComparingTo("500");
		});
	}

	@Test
	void backsOffWithoutTheActuator() {
		this.runner.withClassLoader(new FilteredClassLoader("org.springframework.boot.actuate"))
			.run((context) -> assertThat(context).hasNotFailed().doesNotHaveBean(RateLimitsEndpoint.class));
	}

	@Test
	void isNotThereUnlessExposed() {
		this.runner.withPropertyValues("management.endpoints.web.exposure.include=health")
			.run((context) -> assertThat(context).doesNotHaveBean(RateLimitsEndpoint.class));
	}

	@Test
	void backsOffWhenTheEndpointIsDisabled() {
		this.runner.withPropertyValues("management.endpoint.ratelimits.access=NONE")
			.run((context) -> assertThat(context).doesNotHaveBean(RateLimitsEndpoint.class));
	}

	@Configuration(proxyBeanMethods = false)
	static class ClockConfiguration {

		@Bean
		RateLimitClock testClock() {
			return NOW::get;
		}
	}

	/** Found by a user: the sample's partner-api showed "burst":0.3999999999999999. */
	@Test
	void figuresThatAreNotWholeAreShownAsAnOperatorReadsThem() {
		assertThat(BucketView.number(1.4 - 1.0)).isEqualTo(0.4);
		assertThat(BucketView.number(181.58)).isEqualTo(181.58);
		assertThat(BucketView.number(0.1 + 0.2)).isEqualTo(0.3);
		assertThat(BucketView.number(2.9999999999999996)).isEqualTo(3L);
		assertThat(BucketView.number(97)).isEqualTo(97L);
		assertThat(BucketView.number(1e-7 / 3)).isEqualTo(3.33333333333e-8);
	}
}
