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
 * second, latency per acquisition (p50, p99), and tokens granted against what the bucket allows
 * ({@code rate * elapsed + limit}). Ours (one Lua script per call, on one asynchronous connection)
 * against Bucket4j's Lettuce backend (read, compute, compare-and-set) and against the floor: the same
 * script called with Lettuce's synchronous {@code EVALSHA} and nothing around it. All in one run.
 *
 * <p>Usage: {@code java -cp benchmarks.jar dev.ratelimit.benchmarks.redis.RedisHotKey [seconds]}
 */
public final class RedisHotKey {

	private static final int[] THREADS = { 1, 8, 32 };

	private static final long RATE = 10_000;

	private static final long LIMIT = 100;

	/** Latencies kept per thread; calls beyond it are counted but not sampled. */
	private static final int SAMPLES = 1 << 18;

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
			BucketConfiguration configuration = BucketConfiguration.builder()
				.addLimit(Bandwidth.builder().capacity(LIMIT).refillGreedy(RATE, Duration.ofSeconds(1)).build())
				.build();
			RedisClient rawClient = RedisClient.create("redis://127.0.0.1:" + port);
			StatefulRedisConnection<String, String> raw = rawClient.connect();
			String script = new String(RedisHotKey.class.getClassLoader()
				.getResourceAsStream("dev/ratelimit/redis/bucket.lua")
				.readAllBytes(), StandardCharsets.UTF_8);
			String sha = raw.sync().scriptLoad(script);
			// 10,000 per second is 1 token per 100 microseconds: A = 1, B = 100
			String[] floorKeys = { "floor{hot}", "floor{hot}:retuned", "floor{hot}:leases", "floor{hot}:queue" };
			String[] floorArgs = { "1", "100", Long.toString(LIMIT), "1", "0", "0", "acquire", "", "60000000" };
			System.out.println("| limiter | threads | calls/s | p50 (us) | p99 (us) | granted / allowed |");
			System.out.println("|---|---:|---:|---:|---:|---:|");
			for (int threads : THREADS) {
				RedisTokenBucket ours = RedisTokenBucket.builder().name("hot-" + threads).connectionFactory(factory)
					.rate(RATE, Duration.ofSeconds(1)).limit(LIMIT).timeout(Duration.ofSeconds(2))
					.onFailure(RedisTokenBucket.OnFailure.DENY).build();
				// a client of its own for each round, as each limiter has
				RedisClient client = RedisClient.create("redis://127.0.0.1:" + port);
				LettuceBasedProxyManager<byte[]> proxies = Bucket4jLettuce.casBasedBuilder(client).build();
				BucketProxy bucket4j = proxies.builder().build(("hot-bucket4j-" + threads).getBytes(StandardCharsets.UTF_8),
						() -> configuration);
				floorKeys[0] = "floor{hot-" + threads + "}";
				String[] keys = floorKeys.clone();
				run("raw Lettuce EVALSHA of the same script (floor)", threads, () -> {
					List<Long> reply = raw.sync().evalsha(sha, ScriptOutputType.MULTI, keys, floorArgs);
					return reply.get(0) == 1L;
				}, seconds);
				run("ratelimit-redis", threads, () -> ours.tryAcquire(1), seconds);
				run("Bucket4j Lettuce (CAS)", threads, () -> bucket4j.tryConsume(1), seconds);
				client.shutdown();
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

	private static void run(String name, int threadCount, BooleanSupplier tryAcquire, double seconds)
			throws InterruptedException {
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
		double allowed = RATE * elapsed + LIMIT;
		long[] all = merge(latencies, calls.get());
		System.out.printf(Locale.ROOT, "| %s | %d | %,.0f | %.0f | %.0f | %.4f |%n", name, threadCount,
				calls.get() / elapsed, percentile(all, 0.50) / 1e3, percentile(all, 0.99) / 1e3,
				granted.get() / allowed);
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
