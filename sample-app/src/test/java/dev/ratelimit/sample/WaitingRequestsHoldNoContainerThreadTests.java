package dev.ratelimit.sample;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import dev.ratelimit.core.RateLimiter;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.context.ApplicationContext;
import org.springframework.test.annotation.DirtiesContext;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Contract revision 3, web rules: in Spring MVC a request that waits for its tokens does not hold a
 * servlet container thread, so waits on one rule cannot starve the other endpoints. Tomcat has two
 * threads here; eight requests wait on a rule (one token every 30 s, max-wait 300 s) at once, which
 * only requests that hold no thread can do (a parked thread each would let two wait, the others queued
 * in Tomcat), and meanwhile an endpoint without a rule answers. Failed on the code before: the bucket
 * never saw more than two waiting, and the unlimited endpoint got no thread.
 */
@SpringBootTest(webEnvironment = WebEnvironment.RANDOM_PORT,
		properties = { "server.tomcat.threads.max=2", "server.tomcat.threads.min-spare=1",
				"ratelimit.buckets.slow-lane.rate=1", "ratelimit.buckets.slow-lane.period=30s",
				"ratelimit.buckets.slow-lane.limit=1", "ratelimit.buckets.slow-lane.max-wait=300s",
				"ratelimit.web.rules[0].paths=/api/public/**", "ratelimit.web.rules[0].bucket=slow-lane" })
@DirtiesContext
class WaitingRequestsHoldNoContainerThreadTests {

	private static final int WAITING = 8;

	private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

	@Value("${local.server.port}")
	private int port;

	@Autowired
	private ApplicationContext context;

	@Test
	void eightRequestsWaitOnTwoThreadsAndAnUnlimitedEndpointStillAnswers() throws Exception {
		URI limited = URI.create("http://127.0.0.1:" + this.port + "/api/public/catalogue/tea");
		assertThat(send(limited).statusCode()).isEqualTo(200); // the one token
		RateLimiter lane = this.context.getBean("slow-lane", RateLimiter.class);
		List<CompletableFuture<HttpResponse<String>>> waiting = new ArrayList<>();
		for (int i = 0; i < WAITING; i++) {
			waiting.add(this.http.sendAsync(HttpRequest.newBuilder(limited).timeout(Duration.ofMinutes(3)).build(),
					HttpResponse.BodyHandlers.ofString()));
		}
		Awaitility.await()
			.atMost(Duration.ofSeconds(25))
			.pollInterval(Duration.ofMillis(20))
			.until(() -> lane.snapshot().waiting() == WAITING);
		HttpResponse<String> health = send(URI.create("http://127.0.0.1:" + this.port + "/actuator/health"));
		assertThat(health.statusCode()).isEqualTo(200);
		assertThat(waiting).noneMatch(CompletableFuture::isDone); // the next token is seconds away
	}

	private HttpResponse<String> send(URI uri) throws Exception {
		return this.http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofSeconds(30)).build(),
				HttpResponse.BodyHandlers.ofString());
	}
}
