package dev.ratelimit.spring.client;

import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimitPlanResolver;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.actuate.RateLimitsEndpoint;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitClientAutoConfiguration;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.http.client.autoconfigure.HttpClientAutoConfiguration;
import org.springframework.boot.http.client.autoconfigure.imperative.ImperativeHttpClientAutoConfiguration;
import org.springframework.boot.http.client.autoconfigure.reactive.ReactiveHttpClientAutoConfiguration;
import org.springframework.boot.http.codec.autoconfigure.CodecsAutoConfiguration;
import org.springframework.boot.http.converter.autoconfigure.HttpMessageConvertersAutoConfiguration;
import org.springframework.boot.restclient.RestTemplateBuilder;
import org.springframework.boot.restclient.autoconfigure.RestClientAutoConfiguration;
import org.springframework.boot.restclient.autoconfigure.RestTemplateAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.webclient.autoconfigure.WebClientAutoConfiguration;
import org.springframework.context.ApplicationContext;
import org.springframework.http.ResponseEntity;
import org.springframework.web.client.ResponseErrorHandler;
import org.springframework.web.client.RestClient;
import org.springframework.web.client.support.RestClientAdapter;
import org.springframework.web.reactive.function.client.WebClient;
import org.springframework.web.service.annotation.GetExchange;
import org.springframework.web.service.invoker.HttpServiceProxyFactory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;

/**
 * The outbound rules over real HTTP (a partner on 127.0.0.1 that counts what reaches it), for each client
 * made on the auto-configured builders: RestClient, RestTemplate, WebClient, and an HTTP interface client
 * on RestClient. Buckets and pauses run on a fake clock; HTTP dates on a fixed wall clock.
 */
class OutboundRulesHttpTests {

	private static final Instant WALL = Instant.parse("2026-11-28T07:00:00Z");

	enum Client {

		REST_CLIENT, REST_TEMPLATE, WEB_CLIENT, HTTP_INTERFACE

	}

	/** The partner's resource as an HTTP interface. */
	interface Partner {

		@GetExchange("/v1/things")
		ResponseEntity<String> things();
	}

	/** One GET, whatever the status; a refusal or a connection error thrown as the client throws it. */
	@FunctionalInterface
	interface Caller {

		int get(String url);
	}

	private final AtomicLong clock = new AtomicLong(TimeUnit.SECONDS.toNanos(1));

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class,
				RateLimitClientAutoConfiguration.class, HttpClientAutoConfiguration.class,
				ImperativeHttpClientAutoConfiguration.class, ReactiveHttpClientAutoConfiguration.class,
				HttpMessageConvertersAutoConfiguration.class, CodecsAutoConfiguration.class,
				RestClientAutoConfiguration.class, RestTemplateAutoConfiguration.class,
				WebClientAutoConfiguration.class))
		.withBean(RateLimitClock.class, () -> this.clock::get)
		.withBean(InstantSource.class, () -> InstantSource.fixed(WALL))
		.withBean(MeterRegistry.class, SimpleMeterRegistry::new);

	private PartnerServer partner;

	@BeforeEach
	void start() throws IOException {
		this.partner = new PartnerServer();
	}

	@AfterEach
	void stop() {
		this.partner.close();
	}

	private ApplicationContextRunner rule(String bucket, String... bucketProperties) {
		String[] properties = new String[bucketProperties.length + 2];
		for (int i = 0; i < bucketProperties.length; i++) {
			properties[i] = "ratelimit.buckets." + bucket + "." + bucketProperties[i];
		}
		properties[bucketProperties.length] = "ratelimit.clients.rules[0].hosts=127.0.0.1";
		properties[bucketProperties.length + 1] = "ratelimit.clients.rules[0].bucket=" + bucket;
		return this.runner.withPropertyValues(properties);
	}

	static Caller caller(ApplicationContext context, Client client) {
		return switch (client) {
			case REST_CLIENT -> {
				RestClient rest = context.getBean(RestClient.Builder.class)
					.defaultStatusHandler((status) -> true, (request, response) -> {
					})
					.build();
				yield (url) -> rest.get().uri(url).retrieve().toEntity(String.class).getStatusCode().value();
			}
			case REST_TEMPLATE -> {
				var template = context.getBean(RestTemplateBuilder.class).errorHandler(new ResponseErrorHandler() {
					@Override
					public boolean hasError(org.springframework.http.client.ClientHttpResponse response) {
						return false;
					}
				}).build();
				yield (url) -> template.getForEntity(url, String.class).getStatusCode().value();
			}
			case WEB_CLIENT -> {
				WebClient web = context.getBean(WebClient.Builder.class).build();
				yield (url) -> web.get()
					.uri(url)
					.exchangeToMono((response) -> response.toEntity(String.class))
					.block(Duration.ofSeconds(30))
					.getStatusCode()
					.value();
			}
			case HTTP_INTERFACE -> {
				RestClient rest = context.getBean(RestClient.Builder.class)
					.defaultStatusHandler((status) -> true, (request, response) -> {
					})
					.build();
				yield (url) -> {
					RestClient based = rest.mutate().baseUrl(url.substring(0, url.indexOf("/v1/things"))).build();
					Partner partner = HttpServiceProxyFactory.builderFor(RestClientAdapter.create(based))
						.build()
						.createClient(Partner.class);
					return partner.things().getStatusCode().value();
				};
			}
		};
	}

	@ParameterizedTest
	@EnumSource(Client.class)
	void refusesWithoutSendingWhenTheWaitWouldBeLongerThanMaxWait(Client client) {
		rule("partner", "rate=1", "period=1h", "limit=1", "max-wait=0").run((context) -> {
			Caller caller = caller(context, client);
			String url = this.partner.url("/v1/things");
			assertThat(caller.get(url)).isEqualTo(200);
			Throwable refused = catchThrowable(() -> caller.get(url));
			assertThat(refused).isExactlyInstanceOf(RateLimitExceededException.class);
			assertThat(((RateLimitExceededException) refused).getBucket()).isEqualTo("partner");
			assertThat(this.partner.received()).isEqualTo(1);
		});
	}

	/**
	 * Contract revision 3, "Plans": an outbound rule has no plan of its own; a keyed rule on a bucket with
	 * plans gets each key's plan from the {@link RateLimitPlanResolver} bean. Before, the keys of an
	 * outbound rule always had the template's settings. (The HTTP interface client calls one fixed URL: the
	 * key here is the URL's query.)
	 */
	@ParameterizedTest
	@EnumSource(value = Client.class, names = { "REST_CLIENT", "REST_TEMPLATE", "WEB_CLIENT" })
	void aKeyedRuleOnABucketWithPlansTakesEachKeysPlanFromTheResolver(Client client) {
		List<String> asked = new java.util.concurrent.CopyOnWriteArrayList<>();
		rule("partner", "rate=1", "period=1h", "limit=2", "max-wait=0", "plans.pro.limit=5")
			.withPropertyValues("ratelimit.clients.rules[0].key=#request.getURI().getQuery()")
			.withBean(RateLimitPlanResolver.class, () -> (bucket, key) -> {
				asked.add(bucket + ":" + key);
				return String.valueOf(key).startsWith("pro") ? "pro" : null;
			})
			.run((context) -> {
				Caller caller = caller(context, client);
				assertThat(sentOf(caller, this.partner.url("/v1/things?free-1"), 10)).as("free: the template's limit")
					.isEqualTo(2);
				assertThat(sentOf(caller, this.partner.url("/v1/things?pro-1"), 10)).as("pro: its plan's limit")
					.isEqualTo(5);
				assertThat(this.partner.received()).isEqualTo(7);
				assertThat(asked).contains("partner:free-1", "partner:pro-1");
				RateLimitsEndpoint endpoint = new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
				assertThat(endpoint.key("partner", "pro-1").plan()).isEqualTo("pro");
				assertThat(endpoint.key("partner", "free-1").plan()).isNull();
			});
	}

	/** Calls until one is refused (at most {@code times}); the calls sent. */
	private static int sentOf(Caller caller, String url, int times) {
		int sent = 0;
		for (int i = 0; i < times; i++) {
			try {
				caller.get(url);
				sent++;
			}
			catch (RateLimitExceededException ex) {
				return sent;
			}
		}
		return sent;
	}

	@ParameterizedTest
	@EnumSource(Client.class)
	void waitsForTokensBeforeSending(Client client) {
		rule("partner", "rate=1", "period=1s", "limit=1", "max-wait=10s").run((context) -> {
			Caller caller = caller(context, client);
			String url = this.partner.url("/v1/things");
			assertThat(caller.get(url)).isEqualTo(200);
			CompletableFuture<Integer> second = onItsOwnThread(() -> caller.get(url));
			awaitWaiting(context, "partner");
			assertThat(this.partner.received()).isEqualTo(1);
			this.clock.addAndGet(TimeUnit.SECONDS.toNanos(1));
			assertThat(second.get(30, TimeUnit.SECONDS)).isEqualTo(200);
			assertThat(this.partner.received()).isEqualTo(2);
		});
	}

	/**
	 * Runs a call on a thread of its own. Not on the common pool: on 2 cores it has one worker, and on
	 * JDK 25 a WebClient call (the JDK HttpClient connector) blocked on that worker never got its response
	 * (with or without a rule: a plain WebClient does the same), so CI on 25 hung here.
	 */
	private static CompletableFuture<Integer> onItsOwnThread(java.util.function.IntSupplier call) {
		CompletableFuture<Integer> result = new CompletableFuture<>();
		Thread thread = new Thread(() -> {
			try {
				result.complete(call.getAsInt());
			}
			catch (Throwable ex) {
				result.completeExceptionally(ex);
			}
		}, "outbound-caller");
		thread.setDaemon(true);
		thread.start();
		return result;
	}

	/** The endpoint's {@code available} for a bucket. */
	private static long available(ApplicationContext context, String bucket) {
		RateLimitsEndpoint endpoint = new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class));
		return endpoint.bucket(bucket).available().longValue();
	}

	private static void awaitWaiting(ApplicationContext context, String bucket) throws InterruptedException {
		RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
		while (registry.get(bucket).limiter().snapshot().waiting() == 0) {
			assertThat(System.nanoTime() - deadline).as("a caller waiting").isNegative();
			Thread.sleep(5);
		}
	}

	@ParameterizedTest
	@EnumSource(Client.class)
	void releasesCappedTokensOnceTheBodyIsRead(Client client) {
		rule("partner", "rate=1", "period=1s", "limit=1", "capped-release=true", "max-wait=0").run((context) -> {
			Caller caller = caller(context, client);
			String url = this.partner.url("/v1/things");
			for (int i = 0; i < 3; i++) {
				assertThat(caller.get(url)).isEqualTo(200);
				assertThat(context.getBean(RateLimiterRegistry.class).get("partner").limiter().snapshot().inFlight())
					.isZero();
				this.clock.addAndGet(TimeUnit.SECONDS.toNanos(1)); // the rate's token; the in-flight one came back
			}
			assertThat(this.partner.received()).isEqualTo(3);
		});
	}

	@ParameterizedTest
	@EnumSource(Client.class)
	void releasesCappedTokensAfterAConnectionError(Client client) throws IOException {
		int closedPort;
		try (ServerSocket socket = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
			closedPort = socket.getLocalPort();
		}
		String nowhere = "http://127.0.0.1:" + closedPort + "/v1/things";
		rule("partner", "rate=1", "period=1s", "limit=1", "capped-release=true", "max-wait=0").run((context) -> {
			Caller caller = caller(context, client);
			for (int i = 0; i < 2; i++) {
				Throwable failed = catchThrowable(() -> caller.get(nowhere));
				assertThat(failed).isNotNull().isNotInstanceOf(RateLimitExceededException.class);
				assertThat(context.getBean(RateLimiterRegistry.class).get("partner").limiter().snapshot().inFlight())
					.isZero();
				this.clock.addAndGet(TimeUnit.SECONDS.toNanos(1));
			}
			assertThat(caller.get(this.partner.url("/v1/things"))).isEqualTo(200);
		});
	}

	@ParameterizedTest
	@EnumSource(Client.class)
	void a429WithRetryAfterInSecondsPausesTheBucket(Client client) {
		pausesOn(client, 429, "30", Duration.ofSeconds(30));
	}

	@ParameterizedTest
	@EnumSource(Client.class)
	void a503WithRetryAfterAsAnHttpDatePausesTheBucket(Client client) {
		String date = DateTimeFormatter.RFC_1123_DATE_TIME.format(WALL.plusSeconds(40).atOffset(ZoneOffset.UTC));
		pausesOn(client, 503, date, Duration.ofSeconds(40));
	}

	private void pausesOn(Client client, int status, String retryAfter, Duration pause) {
		rule("partner", "rate=100", "period=1s", "max-wait=0").run((context) -> {
			Caller caller = caller(context, client);
			String url = this.partner.url("/v1/things");
			this.partner.answer(status, Map.of("Retry-After", retryAfter));
			assertThat(caller.get(url)).isEqualTo(status);
			RateLimitExceededException refused = (RateLimitExceededException) catchThrowable(() -> caller.get(url));
			assertThat(refused).isNotNull();
			assertThat(refused.getBucket()).isEqualTo("partner");
			assertThat(refused.getRetryAfter()).isEqualTo(pause);
			assertThat(this.partner.received()).isEqualTo(1);
			assertThat(available(context, "partner")).as("the endpoint's available while paused").isZero();
			assertThat(new RateLimitsEndpoint(context.getBean(RateLimiterRegistry.class)).bucket("partner").rejected())
				.as("the refusal by the pause, counted").isEqualTo(1);
			assertThat(context.getBean(MeterRegistry.class)
				.counter("ratelimit.client.throttled", "bucket", "partner", "status", String.valueOf(status))
				.count()).isEqualTo(1);
			this.clock.addAndGet(pause.toNanos() - 1);
			assertThatThrownBy(() -> caller.get(url)).isInstanceOf(RateLimitExceededException.class);
			this.clock.addAndGet(1);
			assertThat(caller.get(url)).isEqualTo(200);
			assertThat(this.partner.received()).isEqualTo(2);
		});
	}

	@ParameterizedTest
	@EnumSource(Client.class)
	void aPausedCallWaitsWhenItsMaxWaitAllows(Client client) {
		rule("partner", "rate=100", "period=1s", "max-wait=1m").run((context) -> {
			Caller caller = caller(context, client);
			String url = this.partner.url("/v1/things");
			this.partner.answer(429, Map.of("Retry-After", "30"));
			assertThat(caller.get(url)).isEqualTo(429);
			CompletableFuture<Integer> paused = onItsOwnThread(() -> caller.get(url));
			Thread.sleep(100);
			assertThat(paused).isNotDone();
			assertThat(this.partner.received()).isEqualTo(1);
			this.clock.addAndGet(TimeUnit.SECONDS.toNanos(30));
			assertThat(paused.get(30, TimeUnit.SECONDS)).isEqualTo(200);
			assertThat(this.partner.received()).isEqualTo(2);
		});
	}

	@ParameterizedTest
	@EnumSource(Client.class)
	void theIetfFieldLowersTheBucketUntilItsReset(Client client) {
		lowersOn(client, Map.of("RateLimit", "\"default\";r=1;t=30"));
	}

	@ParameterizedTest
	@EnumSource(Client.class)
	void xRateLimitRemainingAndResetLowerTheBucketUntilTheReset(Client client) {
		lowersOn(client, Map.of("X-RateLimit-Remaining", "1", "X-RateLimit-Reset", "30"));
	}

	@ParameterizedTest
	@EnumSource(Client.class)
	void anEpochResetLowersTheBucketUntilThatInstant(Client client) {
		lowersOn(client, Map.of("X-RateLimit-Remaining", "1", "X-RateLimit-Reset",
				String.valueOf(WALL.plusSeconds(30).getEpochSecond())));
	}

	@ParameterizedTest
	@EnumSource(Client.class)
	void openAiStyleFieldsLowerTheBucketUntilTheReset(Client client) {
		lowersOn(client, Map.of("x-ratelimit-remaining-requests", "1", "x-ratelimit-reset-requests", "30s"));
	}

	/** The server says 1 remains for 30 s: one more call goes, the next is refused until the reset. */
	private void lowersOn(Client client, Map<String, String> fields) {
		rule("partner", "rate=100", "period=1s", "max-wait=0").run((context) -> {
			Caller caller = caller(context, client);
			String url = this.partner.url("/v1/things");
			this.partner.answer(200, fields);
			assertThat(caller.get(url)).isEqualTo(200);
			assertThat(context.getBean(ClientRules.class).level("partner", null)).isEqualTo(1);
			assertThat(available(context, "partner")).as("the endpoint's available, lowered").isEqualTo(1);
			assertThat(caller.get(url)).isEqualTo(200);
			RateLimitExceededException refused = (RateLimitExceededException) catchThrowable(() -> caller.get(url));
			assertThat(refused).isNotNull();
			assertThat(refused.getRetryAfter()).isEqualTo(Duration.ofSeconds(30));
			assertThat(this.partner.received()).isEqualTo(2);
			assertThat(available(context, "partner")).as("the endpoint's available, lowered").isZero();
			this.clock.addAndGet(TimeUnit.SECONDS.toNanos(30));
			assertThat(available(context, "partner")).as("the endpoint's available after the reset").isEqualTo(100);
			assertThat(caller.get(url)).isEqualTo(200);
			assertThat(this.partner.received()).isEqualTo(3);
		});
	}
}
