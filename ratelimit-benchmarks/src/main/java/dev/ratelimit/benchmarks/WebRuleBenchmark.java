package dev.ratelimit.benchmarks;

import java.util.Map;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import jakarta.servlet.Filter;
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

import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.env.MapPropertySource;
import org.springframework.mock.web.MockServletContext;
import org.springframework.test.web.servlet.MockMvc;
import org.springframework.test.web.servlet.setup.MockMvcBuilders;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.context.support.AnnotationConfigWebApplicationContext;
import org.springframework.web.servlet.config.annotation.EnableWebMvc;

/**
 * What a web rule adds to a request (issue #16 asks for under 2 us): the same MockMvc request to a
 * trivial controller with no rule ({@code noRule}) and through the rate-limit filter with a rule that
 * never refuses ({@code rule}), keyed or not, with the IETF headers or without. The difference of the
 * two scores is the filter's cost.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 2, jvmArgsAppend = { "-Xms512m", "-Xmx512m" })
@State(Scope.Benchmark)
public class WebRuleBenchmark {

	/** The rule's key: none, ip or a header. */
	@Param({ "none", "ip" })
	public String key;

	/** {@code ratelimit.web.headers}. */
	@Param({ "retry-after", "ietf" })
	public String headers;

	private AnnotationConfigWebApplicationContext context;

	private MockMvc plain;

	private MockMvc limited;

	@Setup(Level.Trial)
	public void setUp() {
		this.context = new AnnotationConfigWebApplicationContext();
		this.context.setServletContext(new MockServletContext());
		Map<String, Object> properties = new java.util.HashMap<>(Map.of("ratelimit.buckets.web.rate", "1000000000",
				"ratelimit.buckets.web.limit", "1000000000", "ratelimit.web.rules[0].paths", "/api/**",
				"ratelimit.web.rules[0].bucket", "web", "ratelimit.web.headers", this.headers));
		if (!this.key.equals("none")) {
			properties.put("ratelimit.web.rules[0].key", this.key);
		}
		this.context.getEnvironment().getPropertySources().addFirst(new MapPropertySource("bench", properties));
		this.context.register(RateLimitAutoConfiguration.class, Web.class);
		this.context.refresh();
		this.plain = MockMvcBuilders.webAppContextSetup(this.context).build();
		@SuppressWarnings("unchecked")
		FilterRegistrationBean<Filter> filter = this.context.getBean(FilterRegistrationBean.class);
		this.limited = MockMvcBuilders.webAppContextSetup(this.context).addFilters(filter.getFilter()).build();
	}

	@TearDown(Level.Trial)
	public void tearDown() {
		this.context.close();
	}

	@Benchmark
	public int noRule() throws Exception {
		return this.plain.perform(org.springframework.test.web.servlet.request.MockMvcRequestBuilders.get("/api/item"))
			.andReturn()
			.getResponse()
			.getStatus();
	}

	@Benchmark
	public int rule() throws Exception {
		return this.limited.perform(org.springframework.test.web.servlet.request.MockMvcRequestBuilders.get("/api/item"))
			.andReturn()
			.getResponse()
			.getStatus();
	}

	/** A controller that costs next to nothing. */
	@Configuration(proxyBeanMethods = false)
	@EnableWebMvc
	public static class Web {

		@Bean
		public Item item() {
			return new Item();
		}
	}

	/** The guarded endpoint. */
	@RestController
	public static class Item {

		@GetMapping("/api/item")
		public String item() {
			return "item";
		}
	}
}
