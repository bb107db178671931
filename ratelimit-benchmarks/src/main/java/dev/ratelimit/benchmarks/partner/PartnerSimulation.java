package dev.ratelimit.benchmarks.partner;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.redis.autoconfigure.RateLimitRedisAutoConfiguration;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RegisteredBucket;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitClientAutoConfiguration;
import dev.ratelimit.spring.client.ClientRules;
import dev.ratelimit.spring.client.RateLimitClientInterceptor;
import redis.embedded.RedisServer;

import org.springframework.context.annotation.AnnotationConfigApplicationContext;
import org.springframework.core.env.MapPropertySource;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.web.client.RestClient;

/**
 * The simulated partner of issue #33 ("How it is shown"): a local HTTP API that enforces its own limit
 * ({@link SimulatedPartner}: a token bucket, 429 with {@code Retry-After} and the IETF field, its rate
 * halved half-way through the run), called by several instances of an application (one application
 * context each) that share one Redis bucket configured 20 % above the partner's starting rate, through
 * {@code RestClient}s with an outbound rule on that bucket; each instance runs a few threads that call
 * as fast as the rule lets them. The run is made with listening and without, and prints, per instance,
 * the 429s of each minute (and those after its first) and the share of the partner's allowance used.
 *
 * <pre>
 * java -cp ratelimit-benchmarks/target/benchmarks.jar dev.ratelimit.benchmarks.partner.PartnerSimulation
 *     [--minutes=10] [--seconds=N] [--instances=4] [--threads=4] [--rate=20] [--listen=both|true|false]
 * </pre>
 * Not a JMH benchmark: one run of wall-clock time (10 minutes by default, each way).
 */
public final class PartnerSimulation {

	/** What a run is made of. */
	public record Options(Duration run, int instances, int threads, double partnerRate, boolean listen) {
	}

	/** What a run measured, at the partner. */
	public record Result(Options options, long[][] throttled, long[] firstThrottled, long granted, double allowance,
			long refused, double seconds, String rates, String halves) {

		/** The share of the partner's allowance used. */
		public double used() {
			return this.granted / this.allowance;
		}

		/** An instance's 429s after its first. */
		public long throttledAfterFirst(int instance) {
			long sum = 0;
			for (long n : this.throttled[instance]) {
				sum += n;
			}
			return Math.max(0, sum - 1);
		}
	}

	private PartnerSimulation() {
	}

	public static void main(String[] args) throws Exception {
		Map<String, String> given = new HashMap<>();
		for (String arg : args) {
			int eq = arg.indexOf('=');
			if (!arg.startsWith("--") || eq < 0) {
				throw new IllegalArgumentException("Arguments are --name=value: --minutes, --seconds, --instances, "
						+ "--threads, --rate, --listen (both, true or false); got '" + arg + "'");
			}
			given.put(arg.substring(2, eq), arg.substring(eq + 1));
		}
		Duration run = given.containsKey("seconds") ? Duration.ofSeconds(Long.parseLong(given.get("seconds")))
				: Duration.ofMinutes(Long.parseLong(given.getOrDefault("minutes", "10")));
		int instances = Integer.parseInt(given.getOrDefault("instances", "4"));
		int threads = Integer.parseInt(given.getOrDefault("threads", "4"));
		double rate = Double.parseDouble(given.getOrDefault("rate", "20"));
		String listen = given.getOrDefault("listen", "both");
		int port = freePort();
		RedisServer redis = RedisServer.builder().port(port).bind("127.0.0.1").setting("save \"\"")
			.setting("appendonly no").build();
		redis.start();
		try {
			List<Result> results = new ArrayList<>();
			for (String way : listen.equals("both") ? List.of("true", "false") : List.of(listen)) {
				results.add(run(new Options(run, instances, threads, rate, Boolean.parseBoolean(way)), port));
			}
			for (Result result : results) {
				print(result);
			}
		}
		finally {
			redis.stop();
		}
	}

	/**
	 * One run: the partner, the instances (each its own context on the Redis at {@code redisPort}), their
	 * threads calling until the run's end.
	 *
	 * @param options the run
	 * @param redisPort a Redis on 127.0.0.1
	 * @return what the partner counted
	 */
	public static Result run(Options options, int redisPort) throws IOException, InterruptedException {
		int minutes = (int) Math.max(1, (options.run().toSeconds() + 59) / 60);
		String prefix = "partner-" + System.nanoTime() + ":";
		List<AnnotationConfigApplicationContext> contexts = new ArrayList<>();
		try {
			for (int i = 0; i < options.instances(); i++) {
				contexts.add(instance(options, redisPort, prefix)); // started before the partner's clock runs
			}
			return run(options, contexts, minutes);
		}
		finally {
			contexts.forEach(AnnotationConfigApplicationContext::close);
		}
	}

	private static Result run(Options options, List<AnnotationConfigApplicationContext> contexts, int minutes)
			throws IOException, InterruptedException {
		AtomicLong refused = new AtomicLong();
		try (SimulatedPartner partner = new SimulatedPartner(options.partnerRate(), options.run().toNanos(),
				options.instances(), minutes)) {
			List<Thread> threads = new ArrayList<>();
			long end = partner.start() + options.run().toNanos();
			for (int i = 0; i < options.instances(); i++) {
				AnnotationConfigApplicationContext context = contexts.get(i);
				RestClient client = RestClient.builder()
					.requestInterceptor(new RateLimitClientInterceptor(context.getBean(ClientRules.class)))
					.build();
				String instance = String.valueOf(i);
				for (int t = 0; t < options.threads(); t++) {
					Thread thread = new Thread(() -> {
						while (System.nanoTime() - end < 0) {
							try {
								client.get().uri(partner.url()).header("X-Instance", instance).exchange((request, response) -> {
									response.getBody().readAllBytes();
									return response.getStatusCode().value();
								});
							}
							catch (RateLimitExceededException ex) {
								refused.incrementAndGet(); // nothing was sent: wait a little, as a caller would
								sleep(Math.min(ex.getRetryAfter().toMillis(), 20));
							}
							catch (RuntimeException ex) {
								sleep(20);
							}
						}
					}, "partner-client-" + i + "-" + t);
					threads.add(thread);
				}
			}
			// the bucket's rate in force every 5 s, as the Redis bucket holds it (a back-off lowers it)
			RegisteredBucket bucket = contexts.get(0).getBean(RateLimiterRegistry.class).get("partner-api");
			StringBuilder rates = new StringBuilder();
			Thread sampler = new Thread(() -> {
				for (long at = partner.start(); System.nanoTime() - end < 0; at += 5_000_000_000L) {
					RateLimiterSnapshot snapshot = bucket.limiter().snapshot();
					rates.append(String.format(Locale.ROOT, " %.0fs:%.1f/%d", (at - partner.start()) / 1e9,
							snapshot.rate() * 1e9 / snapshot.period().toNanos(), (long) snapshot.limit()));
					sleep(Math.max(1, (at + 5_000_000_000L - System.nanoTime()) / 1_000_000));
				}
			}, "partner-rates");
			threads.forEach(Thread::start);
			sampler.start();
			for (Thread thread : threads) {
				thread.join();
			}
			sampler.join();
			long now = System.nanoTime();
			return new Result(options, partner.throttled(), partner.firstThrottled(), partner.granted(),
					partner.allowance(now), refused.get(), (now - partner.start()) / 1e9, rates.toString(), partner.halves(now));
		}
	}

	private static AnnotationConfigApplicationContext instance(Options options, int redisPort, String prefix) {
		AnnotationConfigApplicationContext context = new AnnotationConfigApplicationContext();
		Map<String, Object> properties = new HashMap<>();
		properties.put("ratelimit.buckets.partner-api.backend", "redis");
		// 20 % above the partner's starting rate, a second's burst
		properties.put("ratelimit.buckets.partner-api.rate", String.valueOf(Math.round(options.partnerRate() * 1.2)));
		properties.put("ratelimit.buckets.partner-api.limit", String.valueOf(Math.round(options.partnerRate() * 1.2)));
		properties.put("ratelimit.buckets.partner-api.max-wait", "2s");
		properties.put("ratelimit.buckets.partner-api.redis.key-prefix", prefix);
		properties.put("ratelimit.clients.rules[0].hosts[0]", "127.0.0.1");
		properties.put("ratelimit.clients.rules[0].bucket", "partner-api");
		properties.put("ratelimit.clients.listen", String.valueOf(options.listen()));
		context.getEnvironment().getPropertySources().addFirst(new MapPropertySource("partner", properties));
		LettuceConnectionFactory factory = new LettuceConnectionFactory(
				new RedisStandaloneConfiguration("127.0.0.1", redisPort));
		context.registerBean(RedisConnectionFactory.class, () -> factory);
		context.register(RateLimitAutoConfiguration.class, RateLimitRedisAutoConfiguration.class,
				RateLimitClientAutoConfiguration.class);
		context.refresh();
		return context;
	}

	private static void print(Result result) {
		Options options = result.options();
		System.out.printf(Locale.ROOT, "%nlisten: %s, %d instances x %d threads, partner %.1f/s then %.1f/s, bucket %d/s,"
				+ " %.0f s%n", options.listen(), options.instances(), options.threads(), options.partnerRate(),
				options.partnerRate() / 2, Math.round(options.partnerRate() * 1.2), result.seconds());
		StringBuilder header = new StringBuilder("| instance |");
		StringBuilder rule = new StringBuilder("|---|");
		for (int m = 0; m < result.throttled()[0].length; m++) {
			header.append(" 429s min ").append(m + 1).append(" |");
			rule.append("---|");
		}
		header.append(" first 429 at | 429s after the first, per minute after it |");
		rule.append("---|---|");
		System.out.println(header);
		System.out.println(rule);
		for (int i = 0; i < result.throttled().length; i++) {
			StringBuilder row = new StringBuilder("| " + i + " |");
			for (long n : result.throttled()[i]) {
				row.append(' ').append(n).append(" |");
			}
			long first = result.firstThrottled()[i];
			double after = (first < 0) ? 0 : result.seconds() - first / 1e9;
			row.append(first < 0 ? " none |" : String.format(Locale.ROOT, " %.1f s |", first / 1e9));
			row.append(String.format(Locale.ROOT, " %d (%.2f/min) |", result.throttledAfterFirst(i),
					(after > 0) ? result.throttledAfterFirst(i) * 60 / after : 0.0));
			System.out.println(row);
		}
		System.out.printf(Locale.ROOT, "granted %d of an allowance of %.0f: %.1f %% used; %d calls refused before sending%n",
				result.granted(), result.allowance(), 100 * result.used(), result.refused());
		System.out.println("the bucket's rate/s and limit every 5 s:" + result.rates());
		System.out.println(result.halves());
	}

	private static void sleep(long millis) {
		try {
			TimeUnit.MILLISECONDS.sleep(Math.max(1, millis));
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
		}
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
