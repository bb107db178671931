package dev.ratelimit.redis;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;

import io.lettuce.core.AbstractRedisClient;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisNoScriptException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.cluster.RedisClusterClient;
import io.lettuce.core.cluster.api.StatefulRedisClusterConnection;
import io.lettuce.core.cluster.api.async.RedisClusterAsyncCommands;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

/**
 * One asynchronous Lettuce connection that runs the bucket script for every bucket of an application:
 * a call costs no thread while it waits for Redis (the caller keeps the future and decides how long to
 * wait), and Lettuce pipelines the calls of every bucket on the one connection.
 *
 * <p>The connection is opened, and the script loaded, when the connection is made (at start-up when
 * the auto-configuration makes it). When Redis cannot be reached then, the application starts
 * anyway: calls fail at once (and their buckets apply their failure policy) while one background
 * attempt at a time tries again, asked for by the calls themselves, so the buckets come back by
 * themselves. Once open, Lettuce reconnects the connection by itself.
 *
 * <p>It is made from the application's {@link LettuceConnectionFactory} (the client Spring Boot
 * configures by default), with its client, and so with its address, credentials, TLS and cluster
 * settings; a Jedis connection factory is refused with a message that says so.
 */
final class ScriptConnection implements AutoCloseable {

	private static final Log logger = LogFactory.getLog(ScriptConnection.class);

	private final Supplier<StatefulConnection<String, String>> connector;

	private final Supplier<StatefulRedisPubSubConnection<String, String>> pubSubConnector;

	/** What each channel's message runs: a bucket's wake-up of its capped waiters. */
	private final Map<String, Runnable> subscriptions = new ConcurrentHashMap<>();

	private volatile @Nullable StatefulRedisPubSubConnection<String, String> pubSub;

	private final String description;

	private final AtomicBoolean connecting = new AtomicBoolean();

	private volatile @Nullable StatefulConnection<String, String> connection;

	private volatile @Nullable RedisClusterAsyncCommands<String, String> commands;

	private volatile @Nullable String connectError;

	private volatile boolean closed;

	ScriptConnection(Supplier<StatefulConnection<String, String>> connector,
			Supplier<StatefulRedisPubSubConnection<String, String>> pubSubConnector, String description) {
		this.connector = connector;
		this.pubSubConnector = pubSubConnector;
		this.description = description;
		connect();
	}

	/**
	 * A connection on the client of a Lettuce connection factory.
	 *
	 * @param factory the application's connection factory
	 * @return the connection, open if Redis answered
	 * @throws IllegalArgumentException when the factory is not Lettuce's
	 */
	static ScriptConnection of(RedisConnectionFactory factory) {
		if (!(factory instanceof LettuceConnectionFactory lettuce)) {
			throw new IllegalArgumentException("The redis backend of ratelimit needs Lettuce (Spring Boot's default"
					+ " Redis client) for calls that hold no thread while they wait; the RedisConnectionFactory is a "
					+ factory.getClass().getName() + ". Use spring-boot-starter-data-redis without excluding Lettuce.");
		}
		if (!lettuce.isRunning()) {
			lettuce.start();
		}
		AbstractRedisClient client = lettuce.getRequiredNativeClient();
		if (client instanceof RedisClusterClient cluster) {
			return new ScriptConnection(() -> cluster.connect(StringCodec.UTF8),
					() -> cluster.connectPubSub(StringCodec.UTF8), describe(lettuce));
		}
		if (client instanceof RedisClient redis) {
			return new ScriptConnection(() -> redis.connect(StringCodec.UTF8), () -> redis.connectPubSub(StringCodec.UTF8),
					describe(lettuce));
		}
		throw new IllegalArgumentException("Unsupported Lettuce client " + client.getClass().getName());
	}

	private static String describe(LettuceConnectionFactory factory) {
		return (factory.getClusterConfiguration() != null) ? "a Redis Cluster"
				: (factory.getSentinelConfiguration() != null) ? "Redis through Sentinel"
						: "Redis at " + factory.getHostName() + ":" + factory.getPort();
	}

	/**
	 * Runs the bucket script on one key: {@code EVALSHA}, and {@code EVAL} when the server does not
	 * know the script (a restarted or failed-over server).
	 *
	 * @param keys the bucket's keys
	 * @param arguments the script's arguments
	 * @return the reply, completed by Lettuce's event loop; failed at once when not connected
	 */
	CompletableFuture<List<Object>> run(String[] keys, String[] arguments) {
		RedisClusterAsyncCommands<String, String> async = this.commands;
		if (async == null) {
			connectInBackground();
			String error = this.connectError;
			return CompletableFuture.failedFuture(new IllegalStateException("Not connected to " + this.description
					+ ((error != null) ? ": " + error : "")));
		}
		CompletableFuture<List<Object>> reply = async
			.<List<Object>>evalsha(BucketScript.SHA1, ScriptOutputType.MULTI, keys, arguments)
			.toCompletableFuture();
		return reply.exceptionallyCompose((ex) -> isNoScript(ex)
				? async.<List<Object>>eval(BucketScript.SOURCE, ScriptOutputType.MULTI, keys, arguments)
					.toCompletableFuture()
				: CompletableFuture.failedFuture(ex));
	}

	private static boolean isNoScript(Throwable ex) {
		Throwable cause = (ex instanceof CompletionException && ex.getCause() != null) ? ex.getCause() : ex;
		return cause instanceof RedisNoScriptException;
	}

	private void connectInBackground() {
		if (!this.closed && this.connecting.compareAndSet(false, true)) {
			Thread thread = new Thread(this::connectOnce, "ratelimit-redis-connect");
			thread.setDaemon(true);
			thread.start();
		}
	}

	private void connect() {
		if (this.connecting.compareAndSet(false, true)) {
			connectOnce();
		}
	}

	private void connectOnce() {
		try {
			StatefulConnection<String, String> opened = this.connector.get();
			RedisClusterAsyncCommands<String, String> async = asyncCommands(opened);
			async.scriptLoad(BucketScript.SOURCE);
			this.connection = opened;
			this.commands = async;
			this.connectError = null;
			if (!this.subscriptions.isEmpty()) {
				openPubSub();
			}
			if (this.closed) {
				close();
			}
		}
		catch (RuntimeException ex) {
			String error = describe(ex);
			if (this.connectError == null) {
				logger.warn("Rate limit buckets on Redis cannot connect to " + this.description + " (" + error
						+ "); they apply their on-failure policy and connect when Redis answers");
			}
			this.connectError = error;
		}
		finally {
			this.connecting.set(false);
		}
	}

	/**
	 * A failure to connect as the log and the health say it: Lettuce's exception, and the first cause that
	 * says something else (its "Unable to connect to host:port" is the same for a server that is not there
	 * and one that refuses the password: the cause tells them apart).
	 */
	static String describe(Throwable ex) {
		String said = ex.getClass().getSimpleName() + ": " + ex.getMessage();
		String message = String.valueOf(ex.getMessage());
		for (Throwable cause = ex.getCause(); cause != null && cause != cause.getCause(); cause = cause.getCause()) {
			if (cause.getMessage() != null && !message.contains(cause.getMessage())) {
				return said + " (" + cause.getClass().getSimpleName() + ": " + cause.getMessage() + ")";
			}
		}
		return said;
	}

	/**
	 * Whether the connection, once open, is being reconnected by Lettuce now (its calls wait in Lettuce's
	 * buffer until it is open again). A connection never opened is not: calls try to open it.
	 *
	 * @return whether Lettuce is reconnecting it
	 */
	boolean reconnecting() {
		StatefulConnection<String, String> open = this.connection;
		return open != null && !this.closed && !open.isOpen();
	}

	/**
	 * Why the connection is not open, while it is not (never opened: Redis was not there, or refused the
	 * application, when the connection was made, and no background attempt has succeeded since).
	 *
	 * @return the reason, or {@code null} once the connection is open
	 */
	@Nullable String notConnected() {
		if (this.commands != null || this.closed) {
			return null;
		}
		String error = this.connectError;
		return "not connected to " + this.description + ((error != null) ? ": " + error : "");
	}

	private static RedisClusterAsyncCommands<String, String> asyncCommands(StatefulConnection<String, String> opened) {
		if (opened instanceof StatefulRedisClusterConnection<String, String> cluster) {
			return cluster.async();
		}
		return ((StatefulRedisConnection<String, String>) opened).async();
	}

	/**
	 * Runs {@code action} whenever a message comes on {@code channel} (Lettuce subscribes again by
	 * itself after a reconnect). Best effort: a bucket that misses a message still asks again later.
	 *
	 * @param channel the channel
	 * @param action what to run, on Lettuce's thread: quick
	 */
	synchronized void subscribe(String channel, Runnable action) {
		this.subscriptions.put(channel, action);
		StatefulRedisPubSubConnection<String, String> open = this.pubSub;
		if (open != null) {
			open.async().subscribe(channel);
		}
		else if (this.commands != null) {
			openPubSub();
		}
	}

	/**
	 * Stops running {@code action} on {@code channel}'s messages, and unsubscribes from it, unless another
	 * action has been subscribed to it since.
	 *
	 * @param channel the channel
	 * @param action what {@link #subscribe} was given
	 */
	synchronized void unsubscribe(String channel, Runnable action) {
		if (this.subscriptions.remove(channel, action)) {
			StatefulRedisPubSubConnection<String, String> open = this.pubSub;
			if (open != null) {
				open.async().unsubscribe(channel);
			}
		}
	}

	/** Opens the connection for wake-ups, the first time a bucket asks for them. */
	private synchronized void openPubSub() {
		if (this.pubSub != null) {
			return;
		}
		try {
			StatefulRedisPubSubConnection<String, String> open = this.pubSubConnector.get();
			open.addListener(new RedisPubSubAdapter<>() {

				@Override
				public void message(String channel, String message) {
					Runnable action = ScriptConnection.this.subscriptions.get(channel);
					if (action != null) {
						action.run();
					}
				}
			});
			if (!this.subscriptions.isEmpty()) {
				open.async().subscribe(this.subscriptions.keySet().toArray(String[]::new));
			}
			this.pubSub = open;
		}
		catch (RuntimeException ex) {
			logger.warn("Rate limit buckets on Redis cannot subscribe to wake-ups on " + this.description + " ("
					+ ex.getMessage() + "); capped waiters ask again at intervals instead");
		}
	}

	@Override
	public void close() {
		this.closed = true;
		StatefulConnection<String, String> open = this.connection;
		if (open != null) {
			this.commands = null;
			this.connection = null;
			open.closeAsync();
		}
		StatefulRedisPubSubConnection<String, String> subscribed = this.pubSub;
		if (subscribed != null) {
			this.pubSub = null;
			subscribed.closeAsync();
		}
	}

	@Override
	public String toString() {
		return "ScriptConnection to " + this.description;
	}
}
