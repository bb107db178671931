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
 * Behind a proxy ({@code server.forward-headers-strategy: framework}), a web rule's {@code ip} key is the
 * client's address the proxy forwards, not the proxy's: two clients behind one proxy have a budget each. An
 * auditor found no test of it; the rule filter runs after Spring's forwarded-header filter, which rewrites
 * the request's remote address. The sample on a real server, with its {@code public-per-ip} bucket at one
 * call an hour so that no token comes back during the test, however busy the machine.
 */
@SpringBootTest(webEnvironment = WebEnvironment.RANDOM_PORT,
		properties = { "server.forward-headers-strategy=framework", "ratelimit.buckets.public-per-ip.rate=1",
				"ratelimit.buckets.public-per-ip.period=1h", "ratelimit.buckets.public-per-ip.limit=1" })
class ForwardedClientAddressTests {

	private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

	@Value("${local.server.port}")
	private int port;

	private int getFrom(String client) throws Exception {
		HttpRequest request = HttpRequest
			.newBuilder(URI.create("http://127.0.0.1:" + this.port + "/api/public/catalogue/tea"))
			.header("X-Forwarded-For", client)
			.timeout(Duration.ofSeconds(30))
			.GET()
			.build();
		return this.http.send(request, HttpResponse.BodyHandlers.discarding()).statusCode();
	}

	@Test
	void eachForwardedClientHasABudgetOfItsOwn() throws Exception {
		assertThat(getFrom("203.0.113.7")).isEqualTo(200);
		assertThat(getFrom("203.0.113.7")).as("the same client again: its one call an hour is spent").isEqualTo(429);
		assertThat(getFrom("198.51.100.9")).as("another client behind the same proxy").isEqualTo(200);
		assertThat(getFrom("2001:db8:1:2::1")).as("an IPv6 client").isEqualTo(200);
		assertThat(getFrom("2001:db8:1:2::2")).as("the same /64").isEqualTo(429);
	}
}
