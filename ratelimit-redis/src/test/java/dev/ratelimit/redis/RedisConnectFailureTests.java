package dev.ratelimit.redis;

import java.io.IOException;
import java.net.ServerSocket;
import java.time.Duration;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;
import redis.embedded.RedisServer;

import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * What a user sees when the application starts while Redis is not there, or refuses the application's
 * password: the start-up WARN and the buckets' health say why, and a bucket that has never reached Redis
 * is not said up. Found trying the sample as a user would against a real {@code redis-server}.
 */
class RedisConnectFailureTests {

	/**
	 * Seen with the sample (spring.data.redis.password=wrong, requirepass s3cret): the one WARN at start-up,
	 * and every bucket's health detail later, say "RedisConnectionException: Unable to connect to
	 * localhost/&lt;unresolved&gt;:17101", exactly what they say when nothing listens on the port. The cause,
	 * "WRONGPASS invalid username-password pair", appears only in Spring's own "Redis health check failed"
	 * stack trace. A user reads "Unable to connect" and looks at the network.
	 */
	@Test
	void aWrongPasswordIsSaidAsSuch() throws Exception {
		int port = freePort();
		RedisServer server = RedisServer.builder().port(port).bind("127.0.0.1").setting("save \"\"")
			.setting("appendonly no").setting("requirepass s3cret").build();
		server.start();
		ListAppender<ILoggingEvent> log = new ListAppender<>();
		Logger logger = (Logger) LoggerFactory.getLogger(ScriptConnection.class);
		log.start();
		logger.addAppender(log);
		RedisStandaloneConfiguration configuration = new RedisStandaloneConfiguration("127.0.0.1", port);
		configuration.setPassword("wrong");
		LettuceConnectionFactory factory = new LettuceConnectionFactory(configuration,
				LettuceClientConfiguration.builder().commandTimeout(Duration.ofSeconds(2)).build());
		factory.afterPropertiesSet();
		factory.start();
		try {
			RedisTokenBucket bucket = RedisTokenBucket.builder().name("auth").connectionFactory(factory)
				.rate(10, Duration.ofSeconds(1)).limit(10).timeout(Duration.ofSeconds(2)).build();
			// (a timeout long enough for the handshake on a machine with every core busy: at 100 ms it was cut
			// before Redis said WRONGPASS, and the WARN said the connection closed)
			for (int i = 0; i < 5; i++) {
				bucket.tryAcquire(1);
			}
			String warned = log.list.stream().filter((e) -> e.getLevel() == Level.WARN)
				.map(ILoggingEvent::getFormattedMessage).findFirst().orElse("");
			assertThat(warned).as("the start-up WARN").containsIgnoringCase("WRONGPASS");
			assertThat(bucket.health()).as("the bucket's health detail").containsIgnoringCase("WRONGPASS");
		}
		finally {
			logger.detachAppender(log);
			factory.destroy();
			server.stop();
		}
	}

	/**
	 * Seen with the sample started while nothing listens on its Redis port: the start-up WARN says the
	 * buckets cannot connect, yet /actuator/health lists every Redis bucket "up" (and
	 * ratelimit.backend.up is 1) until each bucket has had four failed calls: a bucket that is never or
	 * rarely called (the sample's reports) says "up" for as long as nobody calls it, though Redis never
	 * answered once.
	 */
	@Test
	void aBucketMadeWhileRedisIsNotThereIsNotSaidUp() throws Exception {
		int port = freePort(); // nothing listens
		LettuceConnectionFactory factory = new LettuceConnectionFactory(
				new RedisStandaloneConfiguration("127.0.0.1", port), LettuceClientConfiguration.builder().build());
		factory.afterPropertiesSet();
		factory.start();
		try {
			RedisTokenBucket bucket = RedisTokenBucket.builder().name("absent").connectionFactory(factory)
				.rate(10, Duration.ofSeconds(1)).limit(10).timeout(Duration.ofMillis(100)).build();
			assertThat(bucket.isUp()).as("ratelimit.backend.up before any call, Redis never reached").isFalse();
			assertThat(bucket.health()).startsWith("down: not connected to Redis at 127.0.0.1:" + port)
				.contains("Unable to connect");
		}
		finally {
			factory.destroy();
		}
	}

	private static int freePort() throws IOException {
		try (ServerSocket socket = new ServerSocket(0)) {
			return socket.getLocalPort();
		}
	}
}
