package dev.ratelimit.redis;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.redis.autoconfigure.RateLimitRedisAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * A "Redis" that accepts connections and never answers (a hung server, a proxy with nothing behind it):
 * {@code timeout} is the longest a call waits for Redis, connecting included, for every policy, from a
 * cold start and after; and the application starts, and closes, without waiting for it. The bounds below
 * are seconds where the promise is 100 ms, so that they hold on a machine with every core busy; the
 * defects they catch waited a minute (Lettuce's default command timeout).
 */
class SilentRedisTests {

	/** Far above the 2 s a bucket waits for its connection to open, far below the minute it used to wait. */
	private static final Duration BOUND = Duration.ofSeconds(10);

	/**
	 * The longest a call may take against the 100 ms timeout: ten timeouts (the slowest seen with every core
	 * busy was 0.3 s), below the 2 s a wait for the connection's opening would take, far below the minute a
	 * caller used to wait.
	 */
	private static final Duration CALL_BOUND = Duration.ofSeconds(1);

	private final SilentServer server = new SilentServer();

	private final List<LettuceConnectionFactory> factories = new CopyOnWriteArrayList<>();

	@AfterEach
	void close() {
		this.factories.forEach(LettuceConnectionFactory::destroy);
		this.server.close();
	}

	/** A client as Spring Boot makes it by default: Lettuce waits up to a minute for a command's reply. */
	private LettuceConnectionFactory factory() {
		LettuceConnectionFactory factory = new LettuceConnectionFactory(
				new RedisStandaloneConfiguration("127.0.0.1", this.server.port()));
		factory.afterPropertiesSet();
		factory.start();
		this.factories.add(factory);
		return factory;
	}

	private static Duration timed(ThrowingRunnable call) throws Exception {
		long start = System.nanoTime();
		call.run();
		return Duration.ofNanos(System.nanoTime() - start);
	}

	@Test
	void aSilentServerHoldsNoCallerPastItsTimeoutForAnyPolicyFromAColdStartAndAfter() throws Exception {
		for (RedisTokenBucket.OnFailure policy : RedisTokenBucket.OnFailure.values()) {
			RedisTokenBucket[] made = new RedisTokenBucket[1];
			assertThat(timed(() -> made[0] = RedisTokenBucket.builder().name("silent-" + policy)
				.connectionFactory(factory()).rate(1, Duration.ofHours(1)).limit(1000)
				.timeout(Duration.ofMillis(100)).onFailure(policy).build()))
				.as("%s: made", policy).isLessThan(BOUND);
			RedisTokenBucket bucket = made[0];
			boolean lets = policy != RedisTokenBucket.OnFailure.DENY;
			// the first calls, while the connection is being opened, and the calls after them
			for (int i = 0; i < 5; i++) {
				assertThat(timed(() -> assertThat(bucket.tryAcquire(1)).isEqualTo(lets)))
					.as("%s: tryAcquire %d", policy, i).isLessThan(CALL_BOUND);
				assertThat(timed(() -> {
					if (lets) {
						bucket.acquire(1, Duration.ofSeconds(30)).close();
					}
					else {
						assertThatThrownBy(() -> bucket.acquire(1, Duration.ofSeconds(30)))
							.isInstanceOf(RateLimitExceededException.class);
					}
				})).as("%s: acquire %d", policy, i).isLessThan(CALL_BOUND);
			}
			assertThat(timed(bucket::snapshot)).as("%s: snapshot", policy).isLessThan(CALL_BOUND);
			assertThat(bucket.isUp()).as("%s: up while nothing answers", policy).isFalse();
		}
	}

	@Test
	void anApplicationStartsAndClosesPromptlyAgainstASilentServer() throws Exception {
		ApplicationContextRunner runner = new ApplicationContextRunner()
			.withConfiguration(AutoConfigurations.of(DataRedisAutoConfiguration.class, RateLimitAutoConfiguration.class,
					RateLimitRedisAutoConfiguration.class))
			.withPropertyValues("spring.data.redis.host=127.0.0.1", "spring.data.redis.port=" + this.server.port(),
					"ratelimit.buckets.hung.backend=redis", "ratelimit.buckets.hung.rate=10",
					"ratelimit.buckets.hung.redis.timeout=100ms", "ratelimit.buckets.hung.redis.on-failure=deny");
		long[] started = new long[1];
		Duration whole = timed(() -> runner.run((context) -> {
			started[0] = System.nanoTime();
			assertThat(context).hasNotFailed();
			RateLimiter bucket = context.getBean("hung", RateLimiter.class);
			assertThat(timed(() -> assertThat(bucket.tryAcquire(1)).isFalse())).isLessThan(CALL_BOUND);
		}));
		// (the start-up waited a minute before, 67 to 76 s in all: a busy machine makes the context slow to start)
		assertThat(whole).as("started, called once and closed").isLessThan(BOUND.multipliedBy(5));
		assertThat(Duration.ofNanos(System.nanoTime() - started[0])).as("called once and closed").isLessThan(BOUND);
	}

	@FunctionalInterface
	interface ThrowingRunnable {

		void run() throws Exception;
	}

	/** Accepts connections on 127.0.0.1 and never reads or writes a byte. */
	static final class SilentServer implements AutoCloseable {

		private final ServerSocket socket;

		private final List<Socket> accepted = new CopyOnWriteArrayList<>();

		SilentServer() {
			try {
				this.socket = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
			}
			catch (IOException ex) {
				throw new UncheckedIOException(ex);
			}
			Thread acceptor = new Thread(() -> {
				while (!this.socket.isClosed()) {
					try {
						this.accepted.add(this.socket.accept());
					}
					catch (IOException ex) {
						// closed
					}
				}
			}, "silent-redis");
			acceptor.setDaemon(true);
			acceptor.start();
		}

		int port() {
			return this.socket.getLocalPort();
		}

		@Override
		public void close() {
			try {
				this.socket.close();
				for (Socket open : this.accepted) {
					open.close();
				}
			}
			catch (IOException ex) {
				throw new UncheckedIOException(ex);
			}
		}
	}
}
