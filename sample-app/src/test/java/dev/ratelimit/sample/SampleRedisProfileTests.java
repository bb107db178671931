package dev.ratelimit.sample;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.jspecify.annotations.Nullable;
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
		return instance(redisPort);
	}

	private static ConfigurableApplicationContext instance(int port, String... more) {
		List<String> args = new ArrayList<>(List.of("--server.port=0", "--spring.data.redis.port=" + port,
				"--spring.datasource.url=jdbc:h2:mem:redis-profile-" + System.nanoTime() + ";DB_CLOSE_DELAY=-1"));
		args.addAll(List.of(more));
		return new SpringApplicationBuilder(SampleApplication.class).profiles("redis").run(args.toArray(String[]::new));
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
			// a call that Redis did not answer within its timeout while it answered others is load, not an
			// outage: that call alone is decided by the local policy (contract revision 3), so on a busy machine
			// each such call may add one grant; they are counted by the meter
			long timedOut = backendCalls(ports.get(0), "timeout") + backendCalls(ports.get(1), "timeout");
			// public-api: 2 per second, limit 2, one budget for both instances (each alone would allow as much)
			assertThat(granted).as("granted in %.2f s, %d calls timed out", elapsed, timedOut)
				.isLessThanOrEqualTo((int) (Math.floor(2 * elapsed + 2) + timedOut));
			assertThat(refused).isPositive();
			assertThat(status(ports.get(0), "/actuator/health")).isEqualTo(200);
			// what the README tells a user to read: each Redis bucket, with its state
			String health = body(ports.get(0), "/actuator/health/ratelimits");
			assertThat(health).contains("\"public-api\":\"up\"").contains("\"reports\":\"up\"");
		}
	}

	/**
	 * Issue #30: with {@code headers: ietf} (the sample's setting) and a Redis that accepts and never answers, a
	 * limited request waited for Redis twice: its call, then the peek for the headers. Counted by the meter, so
	 * the check holds however slow the machine: one request, one call to Redis (timed out), and the response still
	 * carries the IETF fields, from the policy's bucket.
	 */
	@Test
	void aLimitedRequestWaitsForASilentRedisOnceWithTheIetfHeaders() throws Exception {
		try (SilentServer silent = new SilentServer();
				ConfigurableApplicationContext app = instance(silent.port(),
						"--ratelimit.buckets.public-api.redis.timeout=300ms")) {
			int port = port(app);
			assertThat(status(port, "/actuator/health/liveness")).isIn(200, 404); // warm the web stack up
			assertThat(backendCalls(port)).as("Redis calls before the request").isZero();
			HttpResponse<Void> response = this.http.send(
					HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/api/quote"))
						.timeout(Duration.ofSeconds(30)).build(),
					HttpResponse.BodyHandlers.discarding());
			assertThat(response.statusCode()).as("the local policy (the default) grants the first call").isEqualTo(200);
			assertThat(response.headers().firstValue("RateLimit")).as("IETF fields on the response").isPresent();
			assertThat(backendCalls(port)).as("calls to the silent Redis for one request (the call, no peek)")
				.isEqualTo(1);
		}
	}

	/** The count of {@code ratelimit.backend.calls} for {@code public-api}, any outcome, from the metrics endpoint. */
	private long backendCalls(int port) throws Exception {
		return backendCalls(port, null);
	}

	/** The same, of one outcome ({@code ok}, {@code timeout}, {@code error}) when one is given. */
	private long backendCalls(int port, @Nullable String outcome) throws Exception {
		HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port
				+ "/actuator/metrics/ratelimit.backend.calls?tag=bucket:public-api"
				+ ((outcome != null) ? "&tag=outcome:" + outcome : "")))
			.timeout(Duration.ofSeconds(10)).build();
		HttpResponse<String> response = this.http.send(request, HttpResponse.BodyHandlers.ofString());
		if (response.statusCode() == 404) {
			return 0; // no call recorded yet: the meter has no series for the bucket
		}
		Matcher count = Pattern.compile("\\{\"statistic\":\"COUNT\",\"value\":([0-9.]+)\\}").matcher(response.body());
		assertThat(count.find()).as("a COUNT in %s", response.body()).isTrue();
		return (long) Double.parseDouble(count.group(1));
	}

	/** Accepts connections and never answers, holding them open until closed. */
	private static final class SilentServer implements AutoCloseable {

		private final ServerSocket socket;

		private final List<Socket> accepted = new CopyOnWriteArrayList<>();

		SilentServer() throws IOException {
			this.socket = new ServerSocket(0, 50, InetAddress.getByName("127.0.0.1"));
			Thread acceptor = new Thread(() -> {
				while (!this.socket.isClosed()) {
					try {
						this.accepted.add(this.socket.accept());
					}
					catch (IOException ex) {
						return; // closed
					}
				}
			}, "silent-redis");
			acceptor.setDaemon(true);
			acceptor.start();
		}

		int port() {
			return this.socket.getLocalPort();
		}

		@Override
		public void close() throws IOException {
			this.socket.close();
			for (Socket s : this.accepted) {
				s.close();
			}
		}
	}
}
