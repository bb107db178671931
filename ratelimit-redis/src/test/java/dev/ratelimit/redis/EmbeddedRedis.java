package dev.ratelimit.redis;

import java.util.ArrayList;
import java.util.List;

import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import org.jspecify.annotations.Nullable;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.time.Duration;

import redis.embedded.RedisServer;

import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

/**
 * A real Redis server from the embedded-redis artifact, on a free loopback port, without persistence.
 */
final class EmbeddedRedis implements AutoCloseable, AfterAllCallback {

	private final int port;

	private RedisServer server;

	private final List<LettuceConnectionFactory> factories = new ArrayList<>();

	private @Nullable RedisClient adminClient;

	private @Nullable StatefulRedisConnection<String, String> adminConnection;

	EmbeddedRedis() {
		this.port = freePort();
		start();
	}

	private static int freePort() {
		try (ServerSocket socket = new ServerSocket(0)) {
			return socket.getLocalPort();
		}
		catch (IOException ex) {
			throw new UncheckedIOException(ex);
		}
	}

	int port() {
		return this.port;
	}

	void start() {
		this.server = RedisServer.builder()
			.port(this.port)
			.bind("127.0.0.1")
			.setting("save \"\"")
			.setting("appendonly no")
			.build();
		this.server.start();
	}

	void stop() {
		this.server.stop();
	}

	/** A client of its own: a separate connection, as another instance of the application has. */
	LettuceConnectionFactory connectionFactory() {
		return connectionFactory(Duration.ofMillis(500));
	}

	/**
	 * A client of its own whose commands Lettuce gives up on after {@code commandTimeout} (Spring Boot's
	 * default is a minute: a reply that comes after the bucket's own timeout still reaches the bucket).
	 */
	LettuceConnectionFactory connectionFactory(Duration commandTimeout) {
		LettuceConnectionFactory factory = new LettuceConnectionFactory(
				new RedisStandaloneConfiguration("127.0.0.1", this.port),
				LettuceClientConfiguration.builder().commandTimeout(commandTimeout).build());
		factory.afterPropertiesSet();
		factory.start();
		this.factories.add(factory);
		return factory;
	}

	/** Commands of a client of the tests' own, to look at and stall the server. */
	synchronized RedisCommands<String, String> admin() {
		if (this.adminConnection == null) {
			this.adminClient = RedisClient.create("redis://127.0.0.1:" + this.port);
			this.adminConnection = this.adminClient.connect();
		}
		return this.adminConnection.sync();
	}

	/** As a test class's extension ({@code @RegisterExtension static}): stopped after its tests. */
	@Override
	public void afterAll(ExtensionContext context) {
		close();
	}

	/** Stops the server after closing every client made here. */
	@Override
	public void close() {
		if (this.adminConnection != null) {
			this.adminConnection.close();
			this.adminClient.shutdown();
		}
		this.factories.forEach(LettuceConnectionFactory::destroy);
		stop();
	}
}
