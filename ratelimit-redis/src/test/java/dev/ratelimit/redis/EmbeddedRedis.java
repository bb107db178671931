package dev.ratelimit.redis;

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
final class EmbeddedRedis implements AutoCloseable {

	private final int port;

	private RedisServer server;

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
		LettuceConnectionFactory factory = new LettuceConnectionFactory(
				new RedisStandaloneConfiguration("127.0.0.1", this.port),
				LettuceClientConfiguration.builder().commandTimeout(Duration.ofMillis(500)).build());
		factory.afterPropertiesSet();
		factory.start();
		return factory;
	}

	@Override
	public void close() {
		stop();
	}
}
