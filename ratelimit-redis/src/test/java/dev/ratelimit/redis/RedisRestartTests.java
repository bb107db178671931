package dev.ratelimit.redis;

import java.io.IOException;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.core.Permit;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import org.junit.jupiter.api.Test;
import redis.embedded.RedisServer;

import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A single Redis restarted while capped calls are in flight, found trying the sample against a real
 * {@code redis-server}: nothing stays stuck when Redis forgets its state, and the cap holds when it keeps
 * it (the README says what the cap can and cannot hold across a restart).
 */
class RedisRestartTests {

	/**
	 * A capped bucket with a lease; Redis restarted without persistence (its leases and queue lost) while an
	 * instance holds every token and another waits: nothing is stuck. The waiter is let go, releases of
	 * leases Redis forgot change nothing, and in flight is 0 once every permit is closed. (The cap does not
	 * hold across such a restart: the calls in flight are not in Redis any more. The README says so.)
	 */
	@Test
	void aCappedBucketAcrossARestartThatLosesItsStateLeavesNothingStuck() throws Exception {
		try (EmbeddedRedis redis = new EmbeddedRedis()) {
			RedisTokenBucket holder = capped(redis, "capped-lost");
			RedisTokenBucket other = capped(redis, "capped-lost");
			Permit a = holder.acquire(1, Duration.ZERO);
			Permit b = holder.acquire(1, Duration.ZERO);
			CompletableFuture<Permit> waiter = CompletableFuture.supplyAsync(() -> {
				try {
					return other.acquire(1, Duration.ofSeconds(30));
				}
				catch (InterruptedException ex) {
					throw new IllegalStateException(ex);
				}
			});
			// the waiter holds its ticket in Redis (waits for a release) before Redis goes
			long queued = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
			while (other.snapshot().waiting() == 0 && System.nanoTime() < queued) {
				Thread.sleep(10);
			}
			assertThat(other.snapshot().waiting()).as("the waiter, waiting").isEqualTo(1);
			assertThat(waiter).isNotDone();
			redis.stop();
			Thread.sleep(300);
			redis.start(); // empty
			Permit c = waiter.get(35, TimeUnit.SECONDS); // let go, not stuck
			awaitUp(other);
			boolean extra = other.tryAcquire(1);
			a.close();
			b.close();
			c.close();
			if (extra) {
				other.release(1);
			}
			awaitInFlight(other, 0);
			assertThat(other.snapshot().inFlight()).as("in flight after every permit closed").isZero();
		}
	}

	/**
	 * The same with persistence (appendonly, fsync always): the leases and the queue survive the restart,
	 * so the cap holds and the releases after the restart free the tokens.
	 */
	@Test
	void aCappedBucketAcrossARestartThatKeepsItsState() throws Exception {
		int port = freePort();
		Path dir = Files.createTempDirectory("redis-restart-aof");
		RedisServer server = persistent(port, dir);
		server.start();
		LettuceConnectionFactory factory = new LettuceConnectionFactory(
				new RedisStandaloneConfiguration("127.0.0.1", port), LettuceClientConfiguration.builder().build());
		factory.afterPropertiesSet();
		factory.start();
		try {
			RedisTokenBucket holder = RedisTokenBucket.builder().name("capped-kept").connectionFactory(factory)
				.rate(1_000_000, Duration.ofSeconds(1)).limit(2).cappedRelease(true).lease(Duration.ofMinutes(1))
				.timeout(Duration.ofSeconds(1)).build();
			Permit a = holder.acquire(1, Duration.ZERO);
			Permit b = holder.acquire(1, Duration.ZERO);
			RedisClient admin = RedisClient.create("redis://127.0.0.1:" + port);
			try (StatefulRedisConnection<String, String> c = admin.connect()) {
				try {
					c.sync().shutdown(true); // SHUTDOWN SAVE
				}
				catch (RuntimeException expected) {
					// the connection goes away
				}
			}
			admin.shutdown();
			Thread.sleep(300);
			server = persistent(port, dir);
			server.start();
			awaitUp(holder);
			double inFlight = holder.snapshot().inFlight();
			boolean third = holder.tryAcquire(1);
			a.close();
			b.close();
			awaitInFlight(holder, 0);
			double after = holder.snapshot().inFlight();
			assertThat(inFlight).isEqualTo(2.0);
			assertThat(third).isFalse();
			assertThat(after).isZero();
		}
		finally {
			factory.destroy();
			server.stop();
		}
	}

	private static RedisServer persistent(int port, Path dir) throws IOException {
		return RedisServer.builder().port(port).bind("127.0.0.1").setting("save \"\"").setting("appendonly yes")
			.setting("appendfsync always").setting("dir " + dir).build();
	}

	private static RedisTokenBucket capped(EmbeddedRedis redis, String name) {
		return RedisTokenBucket.builder().name(name).connectionFactory(redis.connectionFactory())
			.rate(1_000_000, Duration.ofSeconds(1)).limit(2).cappedRelease(true).lease(Duration.ofMinutes(1))
			.timeout(Duration.ofMillis(100)).build();
	}

	private static void awaitUp(RedisTokenBucket bucket) throws InterruptedException {
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(40);
		while (System.nanoTime() < deadline) {
			bucket.snapshot();
			if (bucket.isUp()) {
				return;
			}
			Thread.sleep(50);
		}
	}

	/** Releases go out without waiting for their answer: wait (at most 10 s) until Redis has them. */
	private static void awaitInFlight(RedisTokenBucket bucket, double inFlight) throws InterruptedException {
		long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
		while (bucket.snapshot().inFlight() != inFlight && System.nanoTime() < deadline) {
			Thread.sleep(20);
		}
	}

	private static int freePort() throws IOException {
		try (ServerSocket socket = new ServerSocket(0)) {
			return socket.getLocalPort();
		}
	}
}
