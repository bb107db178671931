package dev.ratelimit.sample;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Contract, "Web rules" (revision 2): "Actuator paths are never limited by rules." The sample on a real
 * server with its DispatcherServlet under {@code spring.mvc.servlet.path: /app}, which puts the actuator at
 * {@code /app/actuator}, and one rule on every path. Found by an auditor: the rule filter exempted
 * {@code management.endpoints.web.base-path} under the context path only, so {@code /app/actuator/health} was
 * limited; the dispatcher servlet's path is counted now.
 */
@SpringBootTest(webEnvironment = WebEnvironment.RANDOM_PORT,
		properties = { "spring.mvc.servlet.path=/app", "ratelimit.web.rules[0].paths=/**",
				"ratelimit.web.rules[0].bucket=public-api" })
class ActuatorUnderTheServletPathTests {

	private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

	@Value("${local.server.port}")
	private int port;

	private int get(String path) throws Exception {
		HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + this.port + path))
			.timeout(Duration.ofSeconds(30))
			.GET()
			.build();
		return this.http.send(request, HttpResponse.BodyHandlers.ofString()).statusCode();
	}

	@Test
	void theActuatorUnderTheDispatcherServletsPathIsNeverLimited() throws Exception {
		// public-api: 2 per second, limit 2, max-wait 0
		for (int i = 0; i < 5; i++) {
			assertThat(get("/app/actuator/health")).as("GET /app/actuator/health, call %d", i + 1).isEqualTo(200);
		}
	}
}
