package dev.ratelimit.redis;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisConnectionException;
import io.lettuce.core.RedisURI;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Following Sentinel's {@code +switch-master} is to stop writing to the old master at once, but
 * ScriptConnection.follow reopens through open(), which first calls SentinelWatch.watch(): that subscribes
 * again, blocking, on every sentinel not subscribed yet, while it holds the connect lock. A sentinel that
 * answers nothing (its host gone, often with the old master it sat beside) holds the reopening back by its
 * whole timeout (Spring Data's default command timeout is 60 s), at every switch and at every background
 * reconnect, and the buckets meanwhile fail every call through their failure policy ("Not connected").
 * Found in review of 2a3169e; the watch now subscribes without waiting.
 */
class SentinelWatchSilentSentinelTests {

	@Test
	void aSentinelThatAnswersNothingDoesNotHoldBackTheReopenAfterASwitch() throws Exception {
		List<Socket> held = new CopyOnWriteArrayList<>();
		try (ServerSocket silent = new ServerSocket(0)) {
			Thread acceptor = new Thread(() -> {
				try {
					for (;;) {
						held.add(silent.accept()); // accepts, never answers
					}
				}
				catch (IOException ex) {
					// closed
				}
			});
			acceptor.setDaemon(true);
			acceptor.start();
			RedisClient client = RedisClient.create();
			try {
				RedisURI sentinel = RedisURI.Builder.redis("127.0.0.1", silent.getLocalPort())
					.withTimeout(Duration.ofSeconds(30))
					.build();
				List<Long> opens = new CopyOnWriteArrayList<>();
				AtomicReference<Consumer<String>> switched = new AtomicReference<>();
				ScriptConnection connection = new ScriptConnection(() -> {
					opens.add(System.nanoTime());
					throw new RedisConnectionException("no data node in this test");
				}, () -> {
					throw new RedisConnectionException("no data node in this test");
				}, "Redis through Sentinel (master 'mymaster')", (onSwitch) -> {
					switched.set(onSwitch);
					return new SentinelWatch(client, List.of(sentinel), "mymaster", onSwitch);
				});
				try {
					int before = opens.size();
					long announced = System.nanoTime();
					switched.get().accept("10.0.0.2:6379"); // Sentinel: the master moved
					long deadline = announced + TimeUnit.SECONDS.toNanos(10);
					while (opens.size() == before && System.nanoTime() < deadline) {
						Thread.sleep(10);
					}
					assertThat(opens.size())
						.as("the connection asked for the new master within 10 s of the switch (sentinel timeout 30 s)")
						.isGreaterThan(before);
				}
				finally {
					connection.close();
				}
			}
			finally {
				client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
				for (Socket socket : held) {
					socket.close();
				}
			}
		}
	}
}
