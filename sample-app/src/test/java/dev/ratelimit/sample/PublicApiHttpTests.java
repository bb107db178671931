package dev.ratelimit.sample;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The web rule on {@code /api/public/**} (5 per second per client address, no annotation) over real
 * HTTP: 20 concurrent clients from one address get, in total, what the bucket allows, and every other
 * answer is a 429 with {@code Retry-After} and the IETF fields.
 */
@SpringBootTest(webEnvironment = WebEnvironment.RANDOM_PORT)
class PublicApiHttpTests {

	private static final int CLIENTS = 20;

	private static final Duration RUN = Duration.ofSeconds(20);

	private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

	@Value("${local.server.port}")
	private int port;

	@Test
	void twentyConcurrentClientsGetRateTimesElapsedPlusLimitAndEveryOtherAnswerIsA429WithTheFields()
			throws Exception {
		URI uri = URI.create("http://127.0.0.1:" + this.port + "/api/public/catalogue/tea");
		AtomicInteger granted = new AtomicInteger();
		AtomicInteger refused = new AtomicInteger();
		AtomicLong firstGrantSent = new AtomicLong(Long.MAX_VALUE);
		AtomicLong firstGrantReceived = new AtomicLong(Long.MAX_VALUE);
		AtomicLong lastGrantSent = new AtomicLong(Long.MIN_VALUE);
		AtomicLong lastGrantReceived = new AtomicLong(Long.MIN_VALUE);
		ConcurrentLinkedQueue<String> wrong = new ConcurrentLinkedQueue<>();
		long end = System.nanoTime() + RUN.toNanos();
		List<Thread> clients = new ArrayList<>();
		for (int i = 0; i < CLIENTS; i++) {
			Thread client = new Thread(() -> {
				while (System.nanoTime() < end) {
					long sent = System.nanoTime();
					HttpResponse<String> response;
					try {
						response = this.http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30)).build(),
								HttpResponse.BodyHandlers.ofString());
					}
					catch (Exception ex) {
						wrong.add(ex.toString());
						return;
					}
					long received = System.nanoTime();
					if (response.statusCode() == 200) {
						granted.incrementAndGet();
						firstGrantSent.accumulateAndGet(sent, Math::min);
						firstGrantReceived.accumulateAndGet(received, Math::min);
						lastGrantSent.accumulateAndGet(sent, Math::max);
						lastGrantReceived.accumulateAndGet(received, Math::max);
						check(response, false, wrong);
					}
					else if (response.statusCode() == 429) {
						refused.incrementAndGet();
						check(response, true, wrong);
					}
					else {
						wrong.add("status " + response.statusCode());
					}
				}
			}, "client-" + i);
			client.start();
			clients.add(client);
		}
		for (Thread client : clients) {
			client.join();
		}
		assertThat(wrong).isEmpty();
		assertThat(refused.get()).isPositive();
		// the server granted every 200 between the first one's sending and the last one's answer (the
		// outer window), and within the inner window (first answer to last sending) the bucket kept
		// granting, 20 clients keeping it busy
		double outer = (lastGrantReceived.get() - firstGrantSent.get()) / 1e9;
		double inner = Math.max(0, (lastGrantSent.get() - firstGrantReceived.get()) / 1e9);
		assertThat((double) granted.get()).as("200s in %.3f s (outer) / %.3f s (inner)", outer, inner)
			.isLessThanOrEqualTo(5 * outer + 5)
			.isGreaterThanOrEqualTo(0.99 * (5 * inner + 5));
	}

	/**
	 * Contract revision 3, and the sample as it ships: its endpoint is exposed over HTTP, and before an
	 * anonymous {@code POST {"mode":"shadow"}} turned its limiting off. Its writes are off unless
	 * {@code management.endpoint.ratelimits.access=unrestricted}.
	 */
	@Test
	void anAnonymousPostCannotTurnTheSamplesLimitingOff() throws Exception {
		URI uri = URI.create("http://127.0.0.1:" + this.port + "/actuator/ratelimits/public-per-ip");
		HttpResponse<String> post = this.http.send(HttpRequest.newBuilder(uri)
			.header("Content-Type", "application/json")
			.POST(HttpRequest.BodyPublishers.ofString("{\"mode\": \"shadow\"}"))
			.timeout(Duration.ofSeconds(30))
			.build(), HttpResponse.BodyHandlers.ofString());
		assertThat(post.statusCode()).isBetween(400, 499);
		HttpResponse<String> view = this.http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30)).build(),
				HttpResponse.BodyHandlers.ofString());
		assertThat(view.statusCode()).isEqualTo(200);
		assertThat(view.body()).contains("\"mode\":\"enforce\"");
	}

	/**
	 * The README's {@code curl localhost:8080/actuator/health/ratelimits}: Boot answers a component's
	 * health 404 unless components are shown, which the sample did not do.
	 */
	@Test
	void theRateLimitsHealthOfTheReadmeAnswers() throws Exception {
		URI uri = URI.create("http://127.0.0.1:" + this.port + "/actuator/health/ratelimits");
		HttpResponse<String> health = this.http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30)).build(),
				HttpResponse.BodyHandlers.ofString());
		assertThat(health.statusCode()).isEqualTo(200);
		assertThat(health.body()).contains("\"status\":\"UP\"");
	}

	private static void check(HttpResponse<String> response, boolean refusal, ConcurrentLinkedQueue<String> wrong) {
		String policy = response.headers().firstValue("RateLimit-Policy").orElse(null);
		String limit = response.headers().firstValue("RateLimit").orElse(null);
		if (!"\"public-per-ip\";q=5;w=1".equals(policy) || limit == null
				|| !limit.matches("\"public-per-ip\";r=[0-5];t=[01]")) {
			wrong.add("fields " + policy + " / " + limit);
		}
		if (refusal) {
			if (!response.headers().firstValue("Retry-After").orElse("").equals("1")) {
				wrong.add("Retry-After " + response.headers().firstValue("Retry-After"));
			}
			if (!response.body().contains("\"violated-policies\":[\"public-per-ip\"]")) {
				wrong.add("body " + response.body());
			}
		}
	}
}
