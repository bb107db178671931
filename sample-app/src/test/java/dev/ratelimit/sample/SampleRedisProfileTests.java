package dev.ratelimit.sample;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.List;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import redis.embedded.RedisServer;

import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Two instances of the sample on its redis profile, as the README starts them, sharing the public
 * API's budget through a real Redis, driven over HTTP.
 */
class SampleRedisProfileTests {

	private static RedisServer redis;

	private static int redisPort;

	private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

	@BeforeAll
	static void startRedis() {
		try (ServerSocket socket = new ServerSocket(0)) {
			redisPort = socket.getLocalPort();
		}
		catch (IOException ex) {
			throw new UncheckedIOException(ex);
		}
		redis = RedisServer.builder().port(redisPort).bind("127.0.0.1").setting("save \"\"")
			.setting("appendonly no").build();
		redis.start();
	}

	@AfterAll
	static void stopRedis() {
		redis.stop();
	}

	private static ConfigurableApplicationContext instance() {
		return new SpringApplicationBuilder(SampleApplication.class).profiles("redis")
			.run("--server.port=0", "--spring.data.redis.port=" + redisPort,
					"--spring.datasource.url=jdbc:h2:mem:redis-profile-" + System.nanoTime() + ";DB_CLOSE_DELAY=-1");
	}

	private static int port(ConfigurableApplicationContext context) {
		return ((WebServerApplicationContext) context).getWebServer().getPort();
	}

	private int status(int port, String path) throws Exception {
		HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
			.timeout(Duration.ofSeconds(10))
			.build();
		return this.http.send(request, HttpResponse.BodyHandlers.discarding()).statusCode();
	}

	private String body(int port, String path) throws Exception {
		HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
			.timeout(Duration.ofSeconds(10))
			.build();
		return this.http.send(request, HttpResponse.BodyHandlers.ofString()).body();
	}

	@Test
	void twoInstancesShareThePublicApiBudget() throws Exception {
		try (ConfigurableApplicationContext first = instance(); ConfigurableApplicationContext second = instance()) {
			List<Integer> ports = List.of(port(first), port(second));
			for (int port : ports) {
				// the first request of an instance sets up its web stack, which on a busy machine takes a second
				// or more: the budget would refill meanwhile and nothing be refused
				assertThat(status(port, "/actuator/health")).isEqualTo(200);
			}
			int granted = 0;
			int refused = 0;
			long start = System.nanoTime();
			long end = start + Duration.ofMillis(1500).toNanos();
			// at least 1.5 s, and at least 20 calls however slow the machine: more than the shared budget
			// allows unless each call takes close to half a second
			for (int i = 0; System.nanoTime() < end || i < 20; i++) {
				int status = status(ports.get(i % 2), "/api/quote");
				if (status == 200) {
					granted++;
				}
				else {
					assertThat(status).isEqualTo(429);
					refused++;
				}
			}
			double elapsed = (System.nanoTime() - start) / 1e9;
			// public-api: 2 per second, limit 2, one budget for both instances (each alone would allow as much)
			assertThat(granted).isLessThanOrEqualTo((int) Math.floor(2 * elapsed + 2));
			assertThat(refused).isPositive();
			assertThat(status(ports.get(0), "/actuator/health")).isEqualTo(200);
			// what the README tells a user to read: each Redis bucket, with its state
			String health = body(ports.get(0), "/actuator/health/ratelimits");
			assertThat(health).contains("\"public-api\":\"up\"").contains("\"reports\":\"up\"");
		}
	}
}
