package dev.ratelimit.sample;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The whole application on a random port, driven over HTTP as a user would; as an operator who turned
 * the endpoint's writes on ({@code management.endpoint.ratelimits.access=unrestricted}), which the
 * sample leaves off.
 */
@SpringBootTest(webEnvironment = WebEnvironment.RANDOM_PORT,
		properties = "management.endpoint.ratelimits.access=unrestricted")
class SampleApplicationTests {

	private static final JsonMapper JSON = JsonMapper.builder().build();

	private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

	@Value("${local.server.port}")
	private int port;

	private HttpResponse<String> send(String method, String path, String body) throws Exception {
		HttpRequest.Builder request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + this.port + path))
			.timeout(Duration.ofSeconds(30));
		if (body != null) {
			request.header("Content-Type", "application/json");
		}
		request.method(method, (body != null) ? HttpRequest.BodyPublishers.ofString(body)
				: HttpRequest.BodyPublishers.noBody());
		return this.http.send(request.build(), HttpResponse.BodyHandlers.ofString());
	}

	private JsonNode json(String method, String path) throws Exception {
		HttpResponse<String> response = send(method, path, null);
		assertThat(response.statusCode()).as(path).isEqualTo(200);
		return JSON.readTree(response.body());
	}

	/** Before: HTTP 500 (the bucket's IllegalArgumentException) for a batch of 11 on a limit of 10. */
	@Test
	void aBatchLargerThanTheCappedLimitIsABadRequestNamingTheBucket() throws Exception {
		long before = json("GET", "/actuator/ratelimits/db-writes").get("granted").asLong();
		HttpResponse<String> response = send("POST", "/orders/batch",
				"[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\",\"i\",\"j\",\"k\"]");
		assertThat(response.statusCode()).isEqualTo(400);
		assertThat(JSON.readTree(response.body()).get("detail").asString()).contains("db-writes")
			.contains("at most the limit (10)");
		assertThat(json("GET", "/actuator/ratelimits/db-writes").get("granted").asLong()).isEqualTo(before);
	}

	@Test
	void writesAreLimitedToTheConfiguredRate() throws Exception {
		long before = json("GET", "/actuator/ratelimits/db-writes").get("granted").asLong();
		AtomicInteger ok = new AtomicInteger();
		long start = System.nanoTime();
		long end = start + Duration.ofMillis(1500).toNanos();
		List<Thread> clients = new ArrayList<>();
		for (int i = 0; i < 4; i++) {
			Thread client = new Thread(() -> {
				while (System.nanoTime() < end) {
					try {
						if (send("POST", "/orders?item=book", null).statusCode() == 200) {
							ok.incrementAndGet();
						}
					}
					catch (Exception ex) {
						return;
					}
				}
			});
			client.start();
			clients.add(client);
		}
		for (Thread client : clients) {
			client.join();
		}
		double elapsed = (System.nanoTime() - start) / 1e9;
		// 50 per second with bursts of 10: never more than rate * elapsed + limit
		assertThat((double) ok.get()).isLessThanOrEqualTo(50 * elapsed + 10 + 4).isGreaterThan(50 * elapsed * 0.7);
		JsonNode bucket = json("GET", "/actuator/ratelimits/db-writes");
		assertThat(bucket.get("granted").asLong() - before).isEqualTo(ok.get());
		assertThat(bucket.get("inFlight").asLong()).isZero();
	}

	@Test
	void answersTooManyRequestsWithRetryAfterAndAProblemDetail() throws Exception {
		HttpResponse<String> refused = null;
		for (int i = 0; i < 10 && refused == null; i++) {
			HttpResponse<String> response = send("GET", "/api/quote", null);
			if (response.statusCode() == 429) {
				refused = response;
			}
		}
		assertThat(refused).as("a 429 within 10 quick calls at 2 per second").isNotNull();
		assertThat(refused.headers().firstValue("Retry-After")).hasValue("1");
		assertThat(refused.headers().firstValue("Content-Type")).hasValueSatisfying(
				(type) -> assertThat(type).startsWith("application/problem+json"));
		JsonNode problem = JSON.readTree(refused.body());
		assertThat(problem.get("status").asInt()).isEqualTo(429);
		assertThat(problem.get("bucket").asString()).isEqualTo("public-api");
	}

	@Test
	void theEndpointShowsEveryBucketWithEveryField() throws Exception {
		JsonNode buckets = json("GET", "/actuator/ratelimits").get("buckets");
		assertThat(buckets.propertyNames()).containsExactly("db-writes", "partner-api", "partner-daily", "reports",
				"per-user", "public-api", "login-failures", "public-per-ip", "api-by-plan", "api-monthly",
				"search-rollout");
		assertThat(buckets.get("partner-daily").get("type").asString()).isEqualTo("quota");
		assertThat(buckets.get("partner-daily").get("resetsAt").isNull()).isFalse();
		JsonNode db = buckets.get("db-writes");
		assertThat(db.get("type").asString()).isEqualTo("shared");
		assertThat(db.get("cappedRelease").asBoolean()).isTrue();
		assertThat(db.get("limit").asLong()).isEqualTo(10);
		assertThat(db.has("pools")).isTrue();
		assertThat(db.get("pools").isNull()).isTrue();
		assertThat(db.get("behindSchedule").asString()).isEqualTo("PT0S");
		JsonNode partner = buckets.get("partner-api");
		assertThat(partner.get("type").asString()).isEqualTo("hybrid");
		assertThat(partner.get("pools").has("active")).isTrue();
		assertThat(Duration.parse(partner.get("behindSchedule").asString())).isPositive();
		assertThat(send("GET", "/actuator/ratelimits/nope", null).statusCode()).isEqualTo(404);
	}

	@Test
	void eachUserHasABudgetOfTheirOwnAndTheEndpointShowsIt() throws Exception {
		int alice = 0;
		for (int i = 0; i < 6; i++) {
			HttpResponse<String> response = send("GET", "/api/users/alice/quote", null);
			if (response.statusCode() == 200) {
				alice++;
			}
			else {
				assertThat(response.statusCode()).isEqualTo(429);
				assertThat(response.body()).doesNotContain("\"key\""); // keys stay out of the answer by default
			}
		}
		// 3 at once and 1 per second after: six quick calls get 3 or 4 (if a second passed meanwhile)
		assertThat(alice).isBetween(3, 4);
		assertThat(send("GET", "/api/users/bob/quote", null).statusCode()).isEqualTo(200);
		assertThat(json("GET", "/actuator/ratelimits/per-user").get("keys").asInt()).isEqualTo(2);
		JsonNode bob = json("GET", "/actuator/ratelimits/per-user/bob");
		assertThat(bob.get("limit").asLong()).isEqualTo(3);
		assertThat(bob.get("available").asLong()).isEqualTo(2);
		assertThat(send("GET", "/actuator/ratelimits/per-user/nobody", null).statusCode()).isEqualTo(404);
	}

	@Test
	void onlyFailedLoginsCountAndAfterFiveTheUserIsRefused() throws Exception {
		for (int i = 0; i < 10; i++) {
			assertThat(send("POST", "/login?user=carol&password=secret", null).body()).contains("\"ok\":true");
		}
		for (int i = 0; i < 5; i++) {
			HttpResponse<String> failed = send("POST", "/login?user=carol&password=guess", null);
			assertThat(failed.statusCode()).isEqualTo(200);
			assertThat(failed.body()).contains("\"ok\":false");
		}
		HttpResponse<String> locked = send("POST", "/login?user=carol&password=secret", null);
		assertThat(locked.statusCode()).isEqualTo(429);
		assertThat(JSON.readTree(locked.body()).get("bucket").asString()).isEqualTo("login-failures");
		// each user has a budget of their own
		assertThat(send("POST", "/login?user=dave&password=secret", null).statusCode()).isEqualTo(200);
	}

	@Test
	void aShadowBucketNeverRefusesAndCountsWhatItWouldHaveRefused() throws Exception {
		String meter = "/actuator/metrics/ratelimit.calls?tag=bucket:search-rollout&tag=outcome:shadow-rejected";
		double before = json("GET", meter).get("measurements").get(0).get("value").asDouble();
		// slowed to one search per 1000 s, so that what it would refuse does not depend on the machine's speed
		assertThat(send("POST", "/actuator/ratelimits/search-rollout", "{\"rate\": 0.001}").statusCode()).isEqualTo(200);
		try {
			for (int i = 0; i < 20; i++) {
				assertThat(send("GET", "/api/search?q=tolstoy", null).statusCode()).isEqualTo(200);
			}
			JsonNode bucket = json("GET", "/actuator/ratelimits/search-rollout");
			assertThat(bucket.get("mode").asString()).isEqualTo("shadow");
			assertThat(bucket.get("rejected").asLong()).isZero();
			// at most 5 (the limit) of the 20 had their token
			assertThat(json("GET", meter).get("measurements").get(0).get("value").asDouble() - before)
				.isGreaterThanOrEqualTo(15);
		}
		finally {
			send("POST", "/actuator/ratelimits/search-rollout", "{\"rate\": 5}");
		}
	}

	@Test
	void thePartnerCallTakesFromBothOfItsBuckets() throws Exception {
		long daily = json("GET", "/actuator/ratelimits/partner-daily").get("granted").asLong();
		assertThat(json("GET", "/shipping/Oslo").get("cents").asLong()).isNotZero();
		assertThat(json("GET", "/actuator/ratelimits/partner-daily").get("granted").asLong()).isGreaterThan(daily);
	}

	@Test
	void theEndpointRetunesABucketAndRejectsWhatTheConfigurationWould() throws Exception {
		HttpResponse<String> changed = send("POST", "/actuator/ratelimits/reports", "{\"rate\": 8, \"limit\": 4}");
		assertThat(changed.statusCode()).isEqualTo(200);
		JsonNode view = JSON.readTree(changed.body());
		assertThat(view.get("rate").asInt()).isEqualTo(8);
		assertThat(view.get("limit").asInt()).isEqualTo(4);
		assertThat(send("POST", "/actuator/ratelimits/reports", "{\"rate\": -1}").statusCode()).isEqualTo(400);
		assertThat(send("POST", "/actuator/ratelimits/reports", "{\"rate\": 5, \"limit\": 5}").statusCode())
			.isEqualTo(200);
	}

	@Test
	void theMetersCountWhatTheBucketsDid() throws Exception {
		send("GET", "/shipping/Lyon", null);
		send("POST", "/orders/batch", "[\"a\", \"b\", \"c\"]");
		JsonNode calls = json("GET", "/actuator/metrics/ratelimit.calls?tag=bucket:partner-api&tag=outcome:granted");
		assertThat(calls.get("measurements").get(0).get("value").asDouble()).isGreaterThanOrEqualTo(1);
		json("GET", "/actuator/metrics/ratelimit.tokens.available?tag=bucket:db-writes");
		json("GET", "/actuator/metrics/ratelimit.pool.level?tag=bucket:partner-api&tag=pool:waiting");
		json("GET", "/actuator/metrics/ratelimit.wait?tag=bucket:db-writes");
		String prometheus = send("GET", "/actuator/prometheus", null).body();
		assertThat(prometheus).contains("ratelimit_calls_total{bucket=\"partner-api\",outcome=\"granted\"}");
	}

	@Test
	void theAsynchronousReportCompletesOnceItsTokenIsThere() throws Exception {
		HttpResponse<String> report = send("GET", "/reports/sales", null);
		assertThat(report.statusCode()).isEqualTo(200);
		assertThat(report.body()).startsWith("Report sales:");
	}

	@Test
	void theLoadDriverPushesEveryBucketAndReportsWhatHappened() throws Exception {
		JsonNode result = json("POST", "/load?seconds=1");
		assertThat(result.propertyNames()).contains("db-writes", "partner-api", "public-api", "reports");
		assertThat(result.get("public-api").get("rejected").asLong()).isPositive();
		assertThat(send("POST", "/load?seconds=600", null).statusCode()).isEqualTo(400);
	}
}
