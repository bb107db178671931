package dev.ratelimit.benchmarks;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitClientAutoConfiguration;
import dev.ratelimit.spring.client.ClientRules;
import dev.ratelimit.spring.client.RateLimitClientInterceptor;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.core.env.MapPropertySource;
import org.springframework.http.HttpStatus;
import org.springframework.http.client.ClientHttpRequestFactory;
import org.springframework.mock.http.client.MockClientHttpRequest;
import org.springframework.mock.http.client.MockClientHttpResponse;
import org.springframework.web.client.RestClient;

/**
 * What an outbound rule adds to a call that needs no wait (issue #33 asks for under 1 us): the same
 * {@code RestClient} GET against an in-memory request factory (no network, a fixed 200 with a short
 * body) without the rule ({@code noRule}) and through {@link RateLimitClientInterceptor} with a rule that
 * never refuses ({@code rule}), keyed by host or not, listening (the answer's headers are read) or not.
 * The difference of the two scores is the rule's cost.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 2, jvmArgsAppend = { "-Xms512m", "-Xmx512m" })
@State(Scope.Benchmark)
public class OutboundRuleBenchmark {

	/** The rule's key: none or host. */
	@Param({ "none", "host" })
	public String key;

	/** {@code ratelimit.clients.listen}. */
	@Param({ "true", "false" })
	public String listen;

	private AnnotationConfigApplicationContext context;

	private RestClient plain;

	private RestClient limited;

	@Setup(Level.Trial)
	public void setUp() {
		this.context = new AnnotationConfigApplicationContext();
		Map<String, Object> properties = new HashMap<>(Map.of("ratelimit.buckets.partner.rate", "1000000000",
				"ratelimit.buckets.partner.limit", "1000000000", "ratelimit.clients.rules[0].hosts", "api.partner.com",
				"ratelimit.clients.rules[0].bucket", "partner", "ratelimit.clients.listen", this.listen));
		if (!this.key.equals("none")) {
			properties.put("ratelimit.clients.rules[0].key", this.key);
		}
		this.context.getEnvironment().getPropertySources().addFirst(new MapPropertySource("bench", properties));
		this.context.register(RateLimitAutoConfiguration.class, RateLimitClientAutoConfiguration.class);
		this.context.refresh();
		ClientHttpRequestFactory answers = (uri, method) -> {
			MockClientHttpRequest request = new MockClientHttpRequest(method, uri);
			MockClientHttpResponse response = new MockClientHttpResponse("ok".getBytes(StandardCharsets.UTF_8),
					HttpStatus.OK);
			// the server answers with its fields on every call (listening reads them) and never runs out
			response.getHeaders().set("RateLimit", "\"default\";r=1000000000;t=1");
			request.setResponse(response);
			return request;
		};
		this.plain = RestClient.builder().requestFactory(answers).build();
		this.limited = RestClient.builder()
			.requestFactory(answers)
			.requestInterceptor(new RateLimitClientInterceptor(this.context.getBean(ClientRules.class)))
			.build();
	}

	@TearDown(Level.Trial)
	public void tearDown() {
		this.context.close();
	}

	@Benchmark
	public String noRule() {
		return this.plain.get().uri("https://api.partner.com/v1/things").retrieve().body(String.class);
	}

	@Benchmark
	public String rule() {
		return this.limited.get().uri("https://api.partner.com/v1/things").retrieve().body(String.class);
	}
}
