package dev.ratelimit.sample;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The API sold by plan ({@code /api/v1/**}, contract revision 3, "Plans" and "Calendar quotas") over real
 * HTTP: a free key and a pro key get their plans' limits (bursts of 5 and of 50, at 100 and 1,000 per
 * hour), each request also counted in the key's monthly quota, and the endpoint shows the plans, each
 * key's plan and when its quota resets.
 */
@SpringBootTest(webEnvironment = WebEnvironment.RANDOM_PORT)
class ApiPlansHttpTests {

	private static final JsonMapper JSON = JsonMapper.builder().build();

	private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

	@Value("${local.server.port}")
	private int port;

	private HttpResponse<String> get(String path, String apiKey, String plan) throws Exception {
		HttpRequest.Builder request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + this.port + path))
			.timeout(Duration.ofSeconds(30))
			.header("X-Api-Key", apiKey);
		if (plan != null) {
			request.header("X-Plan", plan);
		}
		return this.http.send(request.build(), HttpResponse.BodyHandlers.ofString());
	}

	private JsonNode json(String path) throws Exception {
		HttpResponse<String> response = this.http.send(
				HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + this.port + path)).build(),
				HttpResponse.BodyHandlers.ofString());
		assertThat(response.statusCode()).as(path).isEqualTo(200);
		return JSON.readTree(response.body());
	}

	/** The statuses of {@code calls} quick requests with one key and plan. */
	private List<Integer> burst(String apiKey, String plan, int calls) throws Exception {
		List<Integer> statuses = new ArrayList<>();
		for (int i = 0; i < calls; i++) {
			HttpResponse<String> response = get("/api/v1/forecast/berlin", apiKey, plan);
			statuses.add(response.statusCode());
			if (response.statusCode() == 429) {
				assertThat(response.headers().firstValue("Retry-After")).isPresent();
				assertThat(JSON.readTree(response.body()).get("bucket").asString()).isEqualTo("api-by-plan");
			}
		}
		return statuses;
	}

	/** What {@code rate} per hour adds over {@code nanos}, rounded up: the tokens a bucket may have gained. */
	private static long refill(long rate, long nanos) {
		return (rate * nanos + Duration.ofHours(1).toNanos() - 1) / Duration.ofHours(1).toNanos();
	}

	@Test
	void aFreeKeyAndAProKeyGetTheirPlansLimits() throws Exception {
		Instant monthEnds = Instant.parse(json("/actuator/ratelimits/api-monthly").get("resetsAt").asString());
		long start = System.nanoTime();
		List<Integer> free = burst("key-free", null, 10);
		List<Integer> pro = burst("key-pro", "pro", 60);
		long elapsed = System.nanoTime() - start;
		// a full bucket grants its burst at once; beyond it, no more than the rate adds (exact upper bounds)
		assertThat(free.subList(0, 5)).containsOnly(200);
		assertThat(free.stream().filter((status) -> status == 200).count()).as("free: bursts of 5 at 100 per hour")
			.isLessThanOrEqualTo(5 + refill(100, elapsed));
		assertThat(free).contains(429);
		assertThat(pro.subList(0, 50)).containsOnly(200);
		long proGranted = pro.stream().filter((status) -> status == 200).count();
		assertThat(proGranted).as("pro: bursts of 50 at 1,000 per hour").isLessThanOrEqualTo(50 + refill(1000, elapsed));
		assertThat(pro).contains(429);

		JsonNode bucket = json("/actuator/ratelimits/api-by-plan");
		assertThat(bucket.get("plans").propertyNames()).containsExactly("pro", "enterprise");
		assertThat(bucket.get("plans").get("pro").get("limit").asLong()).isEqualTo(50);
		JsonNode proKey = json("/actuator/ratelimits/api-by-plan/key-pro");
		assertThat(proKey.get("plan").asString()).isEqualTo("pro");
		assertThat(proKey.get("limit").asLong()).isEqualTo(50);
		assertThat(json("/actuator/ratelimits/api-by-plan/key-free").get("plan").isNull()).isTrue();

		// the monthly quota beside the rate: the pro key's calls that ran, of its plan's 100,000
		JsonNode quota = json("/actuator/ratelimits/api-monthly/key-pro");
		assertThat(quota.get("type").asString()).isEqualTo("quota");
		assertThat(quota.get("plan").asString()).isEqualTo("pro");
		assertThat(quota.get("limit").asLong()).isEqualTo(100_000);
		if (Instant.parse(quota.get("resetsAt").asString()).equals(monthEnds)) {
			// (no month's end between the calls and the view: checked, not assumed)
			assertThat(quota.get("available").asLong()).isEqualTo(100_000 - proGranted);
		}
		assertThat(json("/actuator/ratelimits/api-monthly/key-free").get("limit").asLong()).isEqualTo(1000);
	}
}
