package dev.ratelimit.benchmarks.redis;

import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
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
import redis.embedded.RedisServer;

import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

/**
 * One hot key on a local Redis, hammered from 8 threads with the try call: acquisitions per second,
 * and tokens granted against what the bucket allows ({@code rate * elapsed + limit}). Ours (one Lua
 * script per call) against Bucket4j's Lettuce backend (read, compute, compare-and-set), in one run.
 *
 * <p>Usage: {@code java -cp benchmarks.jar dev.ratelimit.benchmarks.redis.RedisHotKey [seconds]}
 */
public final class RedisHotKey {

	private static final int THREADS = 8;

	private static final long RATE = 10_000;

	private static final long LIMIT = 100;

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
			RedisTokenBucket ours = RedisTokenBucket.builder().name("hot").connectionFactory(factory)
				.rate(RATE, Duration.ofSeconds(1)).limit(LIMIT).timeout(Duration.ofSeconds(2))
				.onFailure(RedisTokenBucket.OnFailure.DENY).build();
			RedisClient client = RedisClient.create("redis://127.0.0.1:" + port);
			LettuceBasedProxyManager<byte[]> proxies = Bucket4jLettuce.casBasedBuilder(client).build();
			BucketConfiguration configuration = BucketConfiguration.builder()
				.addLimit(Bandwidth.builder().capacity(LIMIT).refillGreedy(RATE, Duration.ofSeconds(1)).build())
				.build();
			BucketProxy bucket4j = proxies.builder().build("hot-bucket4j".getBytes(StandardCharsets.UTF_8),
					() -> configuration);
			System.out.println("| limiter | threads | calls/s | granted | allowed (rate * elapsed + limit) | granted / allowed |");
			System.out.println("|---|---:|---:|---:|---:|---:|");
			run("ratelimit-redis (Lua, 1 round trip)", () -> ours.tryAcquire(1), seconds);
			run("Bucket4j Lettuce (CAS)", () -> bucket4j.tryConsume(1), seconds);
			client.shutdown();
			factory.destroy();
		}
		finally {
			server.stop();
		}
		System.exit(0);
	}

	private static void run(String name, BooleanSupplier tryAcquire, double seconds) throws InterruptedException {
		// start from an empty bucket, so that what is granted is the rate alone plus nothing banked
		while (tryAcquire.getAsBoolean()) {
			Thread.onSpinWait();
		}
		AtomicLong calls = new AtomicLong();
		AtomicLong granted = new AtomicLong();
		long start = System.nanoTime();
		long end = start + (long) (seconds * 1e9);
		List<Thread> threads = new ArrayList<>();
		for (int i = 0; i < THREADS; i++) {
			Thread thread = new Thread(() -> {
				long mine = 0;
				long ok = 0;
				while (System.nanoTime() < end) {
					mine++;
					if (tryAcquire.getAsBoolean()) {
						ok++;
					}
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
		System.out.printf(Locale.ROOT, "| %s | %d | %,.0f | %,d | %,.0f | %.4f |%n", name, THREADS, calls.get() / elapsed,
				granted.get(), allowed, granted.get() / allowed);
	}
}
