package dev.ratelimit.benchmarks.redis;

import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;

import dev.ratelimit.redis.RedisTokenBucket;
import io.github.bucket4j.Bandwidth;
import io.github.bucket4j.BucketConfiguration;
import io.github.bucket4j.distributed.BucketProxy;
import io.github.bucket4j.redis.lettuce.Bucket4jLettuce;
import io.github.bucket4j.redis.lettuce.cas.LettuceBasedProxyManager;
import io.lettuce.core.RedisClient;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import redis.embedded.RedisServer;

import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

/**
 * One hot key on a local Redis, hammered from 1, 8 and 32 threads with the try call: acquisitions per
 * second, latency per acquisition (p50, p99), Redis calls per grant, and tokens granted against what the
 * bucket allows ({@code rate * elapsed + limit}), for two buckets: (a) a rate above the demand (10,000,000 per
 * second, limit 1,000,000: every call granted) and (b) a bucket hammered far above its rate (100 per second,
 * limit 100). Ours without batches (one Lua script per call, on one asynchronous connection) and with
 * {@code batch: auto} (contract revision 3: tokens taken several at a time, granted locally), against
 * Bucket4j's Lettuce backend (read, compute, compare-and-set), a Spring Cloud Gateway-style script (one call
 * per request: tokens and timestamp in two keys, written here), and the floor: our script called with
 * Lettuce's synchronous {@code EVALSHA} and nothing around it. All in one run.
 *
 * <p>Usage: {@code java -cp benchmarks.jar dev.ratelimit.benchmarks.redis.RedisHotKey [seconds]}
 */
public final class RedisHotKey {

	private static final int[] THREADS = { 1, 8, 32 };

	/** The two buckets: {name, rate per second, limit, A, B (the rate as A tokens per B microseconds)}. */
	private static final Object[][] BUCKETS = { { "(a) 10,000,000/s, limit 1,000,000", 10_000_000L, 1_000_000L, "10", "1" },
			{ "(b) 100/s, limit 100", 100L, 100L, "1", "10000" } };

	/** Latencies kept per thread; calls beyond it are counted but not sampled. */
	private static final int SAMPLES = 1 << 18;

	/**
	 * One call per request, in the shape of Spring Cloud Gateway's limiter (written for this benchmark): the
	 * tokens and the time of the last refill in two keys, refilled by the elapsed time, one token taken.
	 */
	private static final String ONE_CALL_SCRIPT = """
			local rate, capacity = tonumber(ARGV[1]), tonumber(ARGV[2])
			local clock = redis.call('TIME')
			local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
			local ttl = math.max(1, math.floor(2 * capacity / rate))
			local tokens = tonumber(redis.call('GET', KEYS[1])) or capacity
			local stamp = tonumber(redis.call('GET', KEYS[2])) or 0
			tokens = math.min(capacity, tokens + math.max(0, now - stamp) * rate)
			local allowed = 0
			if tokens >= 1 then
			  tokens = tokens - 1
			  allowed = 1
			end
			redis.call('SETEX', KEYS[1], ttl, tostring(tokens))
			redis.call('SETEX', KEYS[2], ttl, tostring(now))
			return allowed
			""";

	private RedisHotKey() {
	}

	public static void main(String[] args) throws Exception {
		double seconds = (args.length > 0) ? Double.parseDouble(args[0]) : 5;
		int port;
		try (ServerSocket socket = new ServerSocket(0)) {
			port = socket.getLocalPort();
		}
		RedisServer server = RedisServer.builder().port(port).bind("127.0.0.1").setting("save \"\"")
			.setting("appendonly no").build();
		server.start();
		try {
			LettuceConnectionFactory factory = new LettuceConnectionFactory(
					new RedisStandaloneConfiguration("127.0.0.1", port),
					LettuceClientConfiguration.builder().commandTimeout(Duration.ofSeconds(5)).build());
			factory.afterPropertiesSet();
			factory.start();
			RedisClient rawClient = RedisClient.create("redis://127.0.0.1:" + port);
			StatefulRedisConnection<String, String> raw = rawClient.connect();
			String script = new String(RedisHotKey.class.getClassLoader()
				.getResourceAsStream("dev/ratelimit/redis/bucket.lua")
				.readAllBytes(), StandardCharsets.UTF_8);
			String sha = raw.sync().scriptLoad(script);
			String oneCallSha = raw.sync().scriptLoad(ONE_CALL_SCRIPT);
			for (Object[] bucket : BUCKETS) {
				String title = (String) bucket[0];
				long rate = (Long) bucket[1];
				long limit = (Long) bucket[2];
				System.out.println();
				System.out.println("### " + title);
				System.out.println();
				System.out.println("| limiter | threads | calls/s | p50 (us) | p99 (us) | Redis calls per grant | granted / allowed |");
				System.out.println("|---|---:|---:|---:|---:|---:|---:|");
				BucketConfiguration configuration = BucketConfiguration.builder()
					.addLimit(Bandwidth.builder().capacity(limit).refillGreedy(rate, Duration.ofSeconds(1)).build())
					.build();
				String[] floorArgs = { (String) bucket[3], (String) bucket[4], Long.toString(limit), "1", "0", "0",
						"acquire", "", "60000000" };
				for (int threads : THREADS) {
					String round = rate + "-" + threads;
					RedisTokenBucket none = RedisTokenBucket.builder().name("hot-none-" + round).connectionFactory(factory)
						.rate(rate, Duration.ofSeconds(1)).limit(limit).timeout(Duration.ofSeconds(2))
						.onFailure(RedisTokenBucket.OnFailure.DENY).build();
					RedisTokenBucket auto = RedisTokenBucket.builder().name("hot-auto-" + round).connectionFactory(factory)
						.rate(rate, Duration.ofSeconds(1)).limit(limit).timeout(Duration.ofSeconds(2))
						.onFailure(RedisTokenBucket.OnFailure.DENY).batch("auto").build();
					AtomicLong noneCalls = new AtomicLong();
					none.onCall((outcome, nanos) -> noneCalls.incrementAndGet());
					AtomicLong autoCalls = new AtomicLong();
					auto.onCall((outcome, nanos) -> autoCalls.incrementAndGet());
					// a client of its own for each round, as each limiter has
					RedisClient client = RedisClient.create("redis://127.0.0.1:" + port);
					LettuceBasedProxyManager<byte[]> proxies = Bucket4jLettuce.casBasedBuilder(client).build();
					BucketProxy bucket4j = proxies.builder()
						.build(("hot-bucket4j-" + round).getBytes(StandardCharsets.UTF_8), () -> configuration);
					String[] keys = { "floor{hot-" + round + "}", "floor{hot-" + round + "}:retuned",
							"floor{hot-" + round + "}:leases", "floor{hot-" + round + "}:queue" };
					String[] oneCallKeys = { "scg{" + round + "}.tokens", "scg{" + round + "}.timestamp" };
					String[] oneCallArgs = { Long.toString(rate), Long.toString(limit) };
					run("raw Lettuce EVALSHA of the same script (floor)", threads, rate, limit, null, () -> {
						List<Long> reply = raw.sync().evalsha(sha, ScriptOutputType.MULTI, keys, floorArgs);
						return reply.get(0) == 1L;
					}, seconds);
					run("ratelimit-redis, batch: none", threads, rate, limit, noneCalls, () -> none.tryAcquire(1), seconds);
					run("ratelimit-redis, batch: auto", threads, rate, limit, autoCalls, () -> auto.tryAcquire(1), seconds);
					auto.close();
					run("Bucket4j Lettuce (CAS)", threads, rate, limit, null, () -> bucket4j.tryConsume(1), seconds);
					run("one call per request (Spring Cloud Gateway-style script)", threads, rate, limit, null, () -> {
						Long reply = raw.sync().evalsha(oneCallSha, ScriptOutputType.INTEGER, oneCallKeys, oneCallArgs);
						return reply == 1L;
					}, seconds);
					client.shutdown();
				}
			}
			raw.close();
			rawClient.shutdown();
			factory.destroy();
		}
		finally {
			server.stop();
		}
		System.exit(0);
	}

	/**
	 * One round.
	 *
	 * @param redisCalls the limiter's Redis calls, counted as they are made, or {@code null}: one per call
	 */
	private static void run(String name, int threadCount, long rate, long limit, AtomicLong redisCalls,
			BooleanSupplier tryAcquire, double seconds) throws InterruptedException {
		long callsBefore = (redisCalls != null) ? redisCalls.get() : 0;
		// each round's bucket is new, so it starts full: what it allows is rate * elapsed + limit (draining
		// it first would never end for a caller slower than the rate)
		AtomicLong calls = new AtomicLong();
		AtomicLong granted = new AtomicLong();
		List<long[]> latencies = new ArrayList<>();
		long start = System.nanoTime();
		long end = start + (long) (seconds * 1e9);
		List<Thread> threads = new ArrayList<>();
		for (int i = 0; i < threadCount; i++) {
			long[] samples = new long[SAMPLES];
			latencies.add(samples);
			Thread thread = new Thread(() -> {
				long mine = 0;
				long ok = 0;
				long now = System.nanoTime();
				while (now < end) {
					if (tryAcquire.getAsBoolean()) {
						ok++;
					}
					long after = System.nanoTime();
					if (mine < SAMPLES) {
						samples[(int) mine] = after - now;
					}
					mine++;
					now = after;
				}
				calls.addAndGet(mine);
				granted.addAndGet(ok);
			});
			thread.start();
			threads.add(thread);
		}
		for (Thread thread : threads) {
			thread.join();
		}
		double elapsed = (System.nanoTime() - start) / 1e9;
		double allowed = rate * elapsed + limit;
		long[] all = merge(latencies, calls.get());
		long made = (redisCalls != null) ? redisCalls.get() - callsBefore : calls.get();
		System.out.printf(Locale.ROOT, "| %s | %d | %,.0f | %.2f | %.2f | %.4f | %.4f |%n", name, threadCount,
				calls.get() / elapsed, percentile(all, 0.50) / 1e3, percentile(all, 0.99) / 1e3,
				(double) made / Math.max(1, granted.get()), granted.get() / allowed);
	}

	private static long[] merge(List<long[]> latencies, long total) {
		long[] all = new long[(int) Math.min(total, (long) SAMPLES * latencies.size())];
		int at = 0;
		for (long[] samples : latencies) {
			for (long sample : samples) {
				if (sample > 0 && at < all.length) {
					all[at++] = sample;
				}
			}
		}
		long[] used = Arrays.copyOf(all, at);
		Arrays.sort(used);
		return used;
	}

	private static double percentile(long[] sorted, double p) {
		return (sorted.length == 0) ? 0 : sorted[(int) Math.min(sorted.length - 1, Math.round(p * (sorted.length - 1)))];
	}
}
