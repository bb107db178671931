package dev.ratelimit.sample;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import redis.embedded.RedisServer;
import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.web.server.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;
import static org.assertj.core.api.Assertions.within;

/**
 * The Grafana dashboard against a real Prometheus (Debian's {@code prometheus} package; skipped with a
 * message when it is not installed): the sample runs on its redis profile (so that the Redis backend's
 * meters exist), a Prometheus of the test's own scrapes it every second while the sample's load driver
 * runs, and every query of every panel of {@code docs/grafana/ratelimit-dashboard.json} is evaluated
 * through Prometheus' HTTP API with the dashboard's variables substituted as Grafana does. Each returns
 * series, except the one marked in {@link #EXPECTED_EMPTY}; and the granted rate of the dashboard, over
 * a window from an idle scrape before the load to an idle scrape after it, agrees with the endpoint's
 * granted counts.
 */
class GrafanaDashboardPrometheusTests {

	/**
	 * The one query expected to return no series, and why: the meter {@code ratelimit.client.throttled}
	 * comes with the outbound rules (issue #33), and the sample has no outbound rule. Its panel stays on
	 * the dashboard; when the meter and a rule are there, its series show and this mark may go.
	 */
	private static final Map<String, String> EXPECTED_EMPTY = Map.of("ratelimit_client_throttled_total",
			"the meter ratelimit.client.throttled comes with the outbound rules (issue #33)");

	private static final String GRANTED_PANEL = "Granted calls per second";

	private static final Duration PATIENCE = Duration.ofSeconds(30);

	private static final JsonMapper JSON = JsonMapper.builder().build();

	private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

	@TempDir
	Path work;

	private RedisServer redis;

	private ConfigurableApplicationContext sample;

	private Process prometheus;

	private Path prometheusLog;

	@AfterEach
	void stopEverything() throws InterruptedException {
		if (this.prometheus != null) {
			this.prometheus.destroy();
			if (!this.prometheus.waitFor(10, TimeUnit.SECONDS)) {
				this.prometheus.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
			}
		}
		if (this.sample != null) {
			this.sample.close();
		}
		if (this.redis != null) {
			this.redis.stop();
		}
	}

	@Test
	void everyPanelQueryReturnsSeriesAndTheGrantedRateAgreesWithTheEndpoint() throws Exception {
		Optional<Path> binary = findPrometheus();
		Assumptions.assumeTrue(binary.isPresent(), "Prometheus is not installed: the Debian package 'prometheus'"
				+ " (apt-get install -y prometheus) runs this test; .ci/run installs it");

		int redisPort = freePort();
		this.redis = RedisServer.builder().port(redisPort).bind("127.0.0.1").setting("save \"\"")
			.setting("appendonly no").build();
		this.redis.start();
		this.sample = new SpringApplicationBuilder(SampleApplication.class).profiles("redis")
			.run("--server.port=0", "--server.address=127.0.0.1", "--spring.data.redis.port=" + redisPort,
					"--spring.datasource.url=jdbc:h2:mem:grafana-" + System.nanoTime() + ";DB_CLOSE_DELAY=-1");
		String app = "http://127.0.0.1:" + ((WebServerApplicationContext) this.sample).getWebServer().getPort();
		String prom = startPrometheus(binary.get(), app);

		// wait for the first scrape, and take the buckets as the dashboard's variable does
		Map<String, Long> before = granted(app);
		awaitScrapeAfter(prom, System.currentTimeMillis());
		JsonNode bucketValues = get(prom + "/api/v1/label/bucket/values?match[]="
				+ encode("ratelimit_calls_total")).get("data");
		List<String> buckets = new ArrayList<>();
		bucketValues.forEach((value) -> buckets.add(value.asString()));
		assertThat(buckets).as("the bucket variable's values").containsExactlyInAnyOrderElementsOf(before.keySet());

		// idle before: a scrape after the endpoint was read sees the same counts
		long first = awaitScrapeAfter(prom, System.currentTimeMillis());
		assertThat(grantedAt(prom, first)).as("the counter at an idle scrape equals the endpoint's count")
			.isEqualTo(before);

		HttpResponse<String> load = send(HttpRequest.newBuilder(URI.create(app + "/load?seconds=5"))
			.POST(HttpRequest.BodyPublishers.noBody()));
		assertThat(load.statusCode()).as(load.body()).isEqualTo(200);
		Map<String, Long> after = settledGranted(app);
		// idle after: the last scrape of the window comes after the counts settled
		long last = awaitScrapeAfter(prom, System.currentTimeMillis());

		// the window [first, last] of scrapes, 1 ms wider so that the scrape at first is inside it
		String window = (last - first + 1) + "ms";
		Map<String, String> variables = Map.of("bucket", "(" + String.join("|", buckets) + ")", "instance", ".*",
				"__rate_interval", window);
		List<String> failures = new ArrayList<>();
		GrafanaDashboard.Query grantedQuery = null;
		for (GrafanaDashboard.Query query : GrafanaDashboard.load().queries()) {
			String expr = GrafanaDashboard.substitute(query.expr(), variables);
			JsonNode result = query(prom, expr, last);
			Optional<String> expectedEmpty = EXPECTED_EMPTY.keySet().stream().filter(query.expr()::contains).findFirst();
			if (expectedEmpty.isPresent()) {
				System.out.println("Expected empty (" + EXPECTED_EMPTY.get(expectedEmpty.get()) + "): " + query + " -> "
						+ result.size() + " series");
				continue;
			}
			if (result.isEmpty()) {
				failures.add(query + ": no series");
			}
			else if (!anyValue(result, (value) -> !value.isNaN() && !value.isInfinite())) {
				failures.add(query + ": only NaN or infinite values: " + result);
			}
			if (query.panel().equals(GRANTED_PANEL)) {
				grantedQuery = query;
				String samples = query(prom, "ratelimit_calls_total{outcome=\"granted\"}[" + window + "]", last).toString();
				assertGrantedRateAgrees(result, before, after, (last - first + 1) / 1000.0,
						"window " + first + ".." + last + ", samples " + samples);
			}
		}
		assertThat(failures).as("dashboard queries evaluated at the scrape after the load").isEmpty();
		assertThat(grantedQuery).as("the dashboard's panel '%s'", GRANTED_PANEL).isNotNull();
	}

	/** Rate times window is the granted delta; both are exact up to the 1 ms that the window is wider. */
	private static void assertGrantedRateAgrees(JsonNode result, Map<String, Long> before, Map<String, Long> after,
			double windowSeconds, String samples) {
		Map<String, Double> rates = new TreeMap<>();
		for (JsonNode series : result) {
			rates.put(series.get("metric").get("bucket").asString(), Double.parseDouble(series.get("value").get(1).asString()));
		}
		assertThat(rates.keySet()).containsExactlyInAnyOrderElementsOf(after.keySet());
		long grantedDuringLoad = 0;
		for (Map.Entry<String, Double> rate : rates.entrySet()) {
			long delta = after.get(rate.getKey()) - before.get(rate.getKey());
			grantedDuringLoad += delta;
			double endpointRate = delta / windowSeconds;
			assertThat(rate.getValue()).as("granted rate of %s (the endpoint granted %d in %.3f s; %s)", rate.getKey(),
					delta, windowSeconds, samples).isCloseTo(endpointRate, within(endpointRate * 0.05));
		}
		assertThat(grantedDuringLoad).as("calls granted during the load").isPositive();
	}

	private static boolean anyValue(JsonNode result, Predicate<Double> test) {
		for (JsonNode series : result) {
			if (series.has("value") && test.test(Double.parseDouble(series.get("value").get(1).asString()))) {
				return true;
			}
		}
		return false;
	}

	private static Optional<Path> findPrometheus() {
		String path = Optional.ofNullable(System.getenv("PATH")).orElse("") + File.pathSeparator + "/usr/bin";
		return Stream.of(path.split(File.pathSeparator))
			.filter((dir) -> !dir.isEmpty())
			.map((dir) -> Path.of(dir, "prometheus"))
			.filter(Files::isExecutable)
			.findFirst();
	}

	private String startPrometheus(Path binary, String app) throws Exception {
		int port = freePort();
		Path config = this.work.resolve("prometheus.yml");
		Files.writeString(config, """
				global:
				  scrape_interval: 1s
				  scrape_timeout: 1s
				  evaluation_interval: 1s
				scrape_configs:
				  - job_name: sample
				    metrics_path: /actuator/prometheus
				    static_configs:
				      - targets: ["%s"]
				""".formatted(URI.create(app).getAuthority()));
		this.prometheusLog = this.work.resolve("prometheus.log");
		this.prometheus = new ProcessBuilder(binary.toString(), "--config.file=" + config,
				"--storage.tsdb.path=" + this.work.resolve("data"), "--web.listen-address=127.0.0.1:" + port,
				"--log.level=warn")
			.redirectErrorStream(true)
			.redirectOutput(this.prometheusLog.toFile())
			.start();
		String prom = "http://127.0.0.1:" + port;
		long deadline = System.nanoTime() + PATIENCE.toNanos();
		while (System.nanoTime() < deadline) {
			if (!this.prometheus.isAlive()) {
				fail("Prometheus exited with " + this.prometheus.exitValue() + ": " + Files.readString(this.prometheusLog));
			}
			try {
				if (send(HttpRequest.newBuilder(URI.create(prom + "/-/ready"))).statusCode() == 200) {
					return prom;
				}
			}
			catch (IOException ex) {
				// not listening yet
			}
			Thread.sleep(100);
		}
		return fail("Prometheus was not ready within " + PATIENCE + ": " + Files.readString(this.prometheusLog));
	}

	/**
	 * Waits for a successful scrape of the sample that started after {@code millis} (so the sample's
	 * counters were read after it) and answers its timestamp, as Prometheus stored it with the samples.
	 */
	private long awaitScrapeAfter(String prom, long millis) throws Exception {
		long deadline = System.nanoTime() + PATIENCE.toNanos();
		while (System.nanoTime() < deadline) {
			// a range vector gives the samples' own timestamps (timestamp() of an expression gives the query's)
			JsonNode result = query(prom, "up{job=\"sample\"}[10s]", System.currentTimeMillis());
			if (!result.isEmpty()) {
				JsonNode values = result.get(0).get("values");
				JsonNode latest = values.get(values.size() - 1);
				long scraped = Math.round(latest.get(0).asDouble() * 1000);
				if (scraped > millis && "1".equals(latest.get(1).asString())) {
					return scraped;
				}
			}
			Thread.sleep(200);
		}
		return fail("No successful scrape of the sample after " + millis + " within " + PATIENCE + ": "
				+ Files.readString(this.prometheusLog));
	}

	private Map<String, Long> grantedAt(String prom, long millis) throws Exception {
		Map<String, Long> granted = new TreeMap<>();
		for (JsonNode series : query(prom, "ratelimit_calls_total{job=\"sample\", outcome=\"granted\"}", millis)) {
			granted.put(series.get("metric").get("bucket").asString(),
					(long) Double.parseDouble(series.get("value").get(1).asString()));
		}
		return granted;
	}

	private JsonNode query(String prom, String expr, long millis) throws Exception {
		JsonNode answer = get(prom + "/api/v1/query?query=" + encode(expr) + "&time=" + (millis / 1000) + "."
				+ String.format("%03d", millis % 1000));
		assertThat(answer.get("status").asString()).as("Prometheus' answer to %s: %s", expr, answer).isEqualTo("success");
		return answer.get("data").get("result");
	}

	private Map<String, Long> granted(String app) throws Exception {
		Map<String, Long> granted = new TreeMap<>();
		JsonNode buckets = get(app + "/actuator/ratelimits").get("buckets");
		for (String name : buckets.propertyNames()) {
			granted.put(name, buckets.get(name).get("granted").asLong());
		}
		return granted;
	}

	/** The endpoint's counts once the load's last calls are counted (two reads alike, 200 ms apart). */
	private Map<String, Long> settledGranted(String app) throws Exception {
		Map<String, Long> previous = granted(app);
		long deadline = System.nanoTime() + PATIENCE.toNanos();
		while (System.nanoTime() < deadline) {
			Thread.sleep(200);
			Map<String, Long> now = granted(app);
			if (now.equals(previous)) {
				return now;
			}
			previous = now;
		}
		return fail("The endpoint's counts kept moving after the load: " + previous);
	}

	private JsonNode get(String uri) throws Exception {
		HttpResponse<String> response = send(HttpRequest.newBuilder(URI.create(uri)));
		assertThat(response.statusCode()).as("GET %s: %s", uri, response.body()).isEqualTo(200);
		return JSON.readTree(response.body());
	}

	private HttpResponse<String> send(HttpRequest.Builder request) throws IOException, InterruptedException {
		return this.http.send(request.timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
	}

	private static String encode(String value) {
		return URLEncoder.encode(value, StandardCharsets.UTF_8);
	}

	private static int freePort() {
		try (ServerSocket socket = new ServerSocket(0)) {
			return socket.getLocalPort();
		}
		catch (IOException ex) {
			throw new UncheckedIOException(ex);
		}
	}
}
