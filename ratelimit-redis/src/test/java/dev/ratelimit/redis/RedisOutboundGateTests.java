package dev.ratelimit.redis;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;

import com.sun.net.httpserver.HttpServer;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.redis.autoconfigure.RateLimitRedisAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitClientAutoConfiguration;
import dev.ratelimit.spring.client.ClientRules;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration;
import org.springframework.boot.http.client.autoconfigure.HttpClientAutoConfiguration;
import org.springframework.boot.http.client.autoconfigure.imperative.ImperativeHttpClientAutoConfiguration;
import org.springframework.boot.restclient.autoconfigure.RestClientAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.web.client.RestClient;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Two instances of an application (two contexts) whose RestClient calls to a partner take from one Redis
 * bucket: what the partner answers to one instance holds back the other's next call (contract revision 3,
 * "on a Redis bucket the pause and the lowering are written to the bucket's hash"). The partner is a
 * local HTTP server that counts what reaches it; pauses and resets run on Redis's clock.
 */
class RedisOutboundGateTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();

	private HttpServer partner;

	/** When each request reached the partner (nanoTime). */
	private final List<Long> arrivals = new CopyOnWriteArrayList<>();

	private final Deque<Map<String, String>> answers = new ArrayDeque<>();

	private final Deque<Integer> statuses = new ArrayDeque<>();

	@BeforeEach
	void start() throws IOException {
		this.partner = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
		this.partner.createContext("/", (exchange) -> {
			this.arrivals.add(System.nanoTime());
			int status;
			Map<String, String> headers;
			synchronized (this.answers) {
				Integer scripted = this.statuses.poll();
				status = (scripted != null) ? scripted : 200;
				headers = (scripted != null) ? this.answers.poll() : Map.of();
			}
			headers.forEach((name, value) -> exchange.getResponseHeaders().add(name, value));
			byte[] body = "ok".getBytes(StandardCharsets.UTF_8);
			exchange.sendResponseHeaders(status, body.length);
			try (OutputStream out = exchange.getResponseBody()) {
				out.write(body);
			}
		});
		this.partner.start();
	}

	@AfterEach
	void stop() {
		this.partner.stop(0);
	}

	private void answer(int status, Map<String, String> headers) {
		synchronized (this.answers) {
			this.statuses.add(status);
			this.answers.add(headers);
		}
	}

	private String url() {
		return "http://127.0.0.1:" + this.partner.getAddress().getPort() + "/v1/things";
	}

	private static ApplicationContextRunner instance(String prefix, String maxWait) {
		return new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(DataRedisAutoConfiguration.class, RateLimitAutoConfiguration.class,
					RateLimitRedisAutoConfiguration.class, RateLimitClientAutoConfiguration.class,
					HttpClientAutoConfiguration.class, ImperativeHttpClientAutoConfiguration.class,
					RestClientAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + redis.port(),
					"ratelimit.buckets.partner-api.backend=redis", "ratelimit.buckets.partner-api.rate=1000",
					"ratelimit.buckets.partner-api.limit=1000", "ratelimit.buckets.partner-api.max-wait=" + maxWait,
					"ratelimit.buckets.partner-api.redis.key-prefix=" + prefix,
					"ratelimit.buckets.partner-api.redis.timeout=2s", "ratelimit.clients.rules[0].hosts[0]=127.0.0.1",
					"ratelimit.clients.rules[0].bucket=partner-api");
	}

	/** Runs two instances together (the first stays open while the second starts). */
	private static void twoInstances(String prefix, String maxWait, InstancesBody body) {
		instance(prefix, maxWait).run((a) -> {
			assertThat(a).hasNotFailed();
			instance(prefix, maxWait).run((b) -> {
				assertThat(b).hasNotFailed();
				body.run(a.getSourceApplicationContext(), b.getSourceApplicationContext());
			});
		});
	}

	@FunctionalInterface
	interface InstancesBody {

		void run(ConfigurableApplicationContext a, ConfigurableApplicationContext b) throws Exception;
	}

	private static RestClient client(ConfigurableApplicationContext context) {
		return context.getBean(RestClient.Builder.class).build();
	}

	private int get(RestClient client) {
		return client.get().uri(url()).exchange((request, response) -> {
			response.getBody().readAllBytes();
			return response.getStatusCode().value();
		});
	}

	@Test
	void a429WithRetryAfterAnsweredToOneInstanceRefusesTheOthersNextCallWithoutSendingIt() {
		twoInstances("pause:", "0s", (a, b) -> {
			RestClient first = client(a);
			RestClient second = client(b);
			answer(429, Map.of("Retry-After", "30"));
			assertThat(get(first)).isEqualTo(429);
			RateLimitExceededException refused = (RateLimitExceededException) org.assertj.core.api.Assertions
				.catchThrowable(() -> get(second));
			assertThat(refused).as("refused by the pause A heard").isNotNull();
			assertThat(refused.getRetryAfter()).isGreaterThan(Duration.ofSeconds(20))
				.isLessThanOrEqualTo(Duration.ofSeconds(30));
			assertThat(this.arrivals).as("nothing reached the partner but A's call").hasSize(1);
			assertThatThrownBy(() -> get(first)).as("nor A's next").isInstanceOf(RateLimitExceededException.class);
			assertThat(this.arrivals).hasSize(1);
			assertThat(b.getBean(ClientRules.class).level("partner-api", null)).as("B's view: paused").isZero();
			assertThat(redis.admin().exists("pause:{partner-api}:gate")).isEqualTo(1);
		});
	}

	@Test
	void aPauseHeardByOneInstanceMakesTheOthersCallWaitWhenItsMaxWaitAllows() {
		twoInstances("wait:", "10s", (a, b) -> {
			answer(429, Map.of("Retry-After", "1"));
			assertThat(get(client(a))).isEqualTo(429);
			long answered = System.nanoTime();
			assertThat(get(client(b))).as("B's call, sent after the pause").isEqualTo(200);
			assertThat(this.arrivals).hasSize(2);
			// the pause runs on Redis's clock from when A's answer was written: B's call reached the partner
			// no earlier than a second after A's answer arrived (less the time between the two, at most)
			assertThat(this.arrivals.get(1) - this.arrivals.get(0)).as("B's call waited for the pause")
				.isGreaterThanOrEqualTo(Duration.ofMillis(1000).toNanos() - (answered - this.arrivals.get(0)));
		});
	}

	@Test
	void theIetfFieldHeardByOneInstanceCapsTheOthersCallsUntilTheReset() {
		twoInstances("lower:", "0s", (a, b) -> {
			answer(200, Map.of("RateLimit", "\"default\";r=1;t=30"));
			assertThat(get(client(a))).isEqualTo(200);
			ClientRules rules = b.getBean(ClientRules.class);
			assertThat(rules.level("partner-api", null)).as("B's view: one left").isEqualTo(1);
			RestClient second = client(b);
			assertThat(get(second)).as("the one the partner said remains").isEqualTo(200);
			assertThat(rules.level("partner-api", null)).isZero();
			List<Throwable> refusals = new ArrayList<>();
			for (int i = 0; i < 3; i++) {
				refusals.add(org.assertj.core.api.Assertions.catchThrowable(() -> get(second)));
			}
			assertThat(refusals).allSatisfy((refusal) -> assertThat(refusal)
				.isInstanceOf(RateLimitExceededException.class));
			assertThat(this.arrivals).as("A's call and B's first").hasSize(2);
			assertThatThrownBy(() -> get(client(a))).as("A is capped too").isInstanceOf(RateLimitExceededException.class);
			assertThat(this.arrivals).hasSize(2);
		});
	}
}
