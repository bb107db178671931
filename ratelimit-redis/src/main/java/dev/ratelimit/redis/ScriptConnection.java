package dev.ratelimit.redis;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.Function;
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
import io.lettuce.core.event.connection.ConnectionActivatedEvent;
import io.lettuce.core.event.connection.ReconnectFailedEvent;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;
import reactor.core.Disposable;

import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.data.redis.connection.RedisSentinelConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

/**
 * One asynchronous Lettuce connection that runs the bucket script for every bucket of an application:
 * a call costs no thread while it waits for Redis (the caller keeps the future and decides how long to
 * wait), and Lettuce pipelines the calls of every bucket on the one connection.
 *
 * <p>The connection is opened, and the script loaded, on a thread of its own as soon as the connection
 * is made (at start-up when the auto-configuration makes it): nothing waits for it, so neither the
 * start-up nor a caller waits for a Redis that accepts connections and answers nothing (a call made while
 * it is being opened waits for it within the call's own timeout, its bucket's timeout being "connecting
 * included"). When Redis cannot be reached, the application starts anyway: calls fail at once (and their
 * buckets apply their failure policy) while one background attempt at a time tries again, asked for by
 * the calls themselves, so the buckets come back by themselves. Once open, Lettuce reconnects the
 * connection by itself. The connection for wake-ups is opened on a thread of its own too.
 *
 * <p>It is made from the application's {@link LettuceConnectionFactory} (the client Spring Boot
 * configures by default), with its client, and so with its address, credentials, TLS and cluster
 * settings; a Jedis connection factory is refused with a message that says so.
 *
 * <p>Through Sentinel, Lettuce asks Sentinel for the master only when it (re)connects, so the connection
 * also follows Sentinel's announcement that the master moved ({@link SentinelWatch}): after a manual
 * {@code SENTINEL FAILOVER} the old master answers for some seconds more, and what the buckets would
 * write there is lost when it resyncs as a replica. On the announcement both connections (the script's
 * and the wake-ups') are closed and opened again, on a thread of their own.
 */
final class ScriptConnection implements AutoCloseable {

	private static final Log logger = LogFactory.getLog(ScriptConnection.class);

	/**
	 * How long nothing must have been answered on the connection for a call's timeout to count towards a
	 * switch ({@link FailureDetector.Answers}): longer than a busy machine keeps Lettuce's thread from
	 * reading replies.
	 */
	private static final long MIN_SILENCE_NANOS = TimeUnit.SECONDS.toNanos(2);

	/** The longest the start-up waits for the connection to open. */
	private static final long OPEN_WAIT_MILLIS = 2000;

	/** The longest {@link #close()} waits for the connections to close. */
	private static final long CLOSE_MILLIS = 2000;

	private final Supplier<StatefulConnection<String, String>> connector;

	private final Supplier<StatefulRedisPubSubConnection<String, String>> pubSubConnector;

	/** What each channel's message runs: a bucket's wake-up of its capped waiters. */
	private final Map<String, Runnable> subscriptions = new ConcurrentHashMap<>();

	private volatile @Nullable StatefulRedisPubSubConnection<String, String> pubSub;

	private final String description;

	private final AtomicBoolean connecting = new AtomicBoolean();

	/** Completes when the attempt under way opens the connection (or fails): calls made meanwhile wait for it. */
	private volatile CompletableFuture<RedisClusterAsyncCommands<String, String>> opened = new CompletableFuture<>();

	/** Whether the connection has been open once: calls that time out before that waited for it, not for Redis. */
	private volatile boolean everOpen;

	private final AtomicBoolean openingPubSub = new AtomicBoolean();

	/** When Redis last answered on this connection: a timeout amid answers is load ({@link FailureDetector}). */
	private final FailureDetector.Answers answers;

	/** {@link #MIN_SILENCE_NANOS} on a real connection; none on a fake one (tests, on a clock of their own). */
	private final long minSilenceNanos;

	/** Lettuce's last failure to reconnect the connection (its event bus says it), for the cause a timeout names. */
	private volatile @Nullable String lostBecause;

	/** The subscription to Lettuce's reconnect failures, ended on close. */
	private volatile @Nullable Disposable lostEvents;

	/** Whether the connection is to a Redis Cluster, whose nodes answer each for itself. */
	private final boolean cluster;

	/** Whether the connections open on threads of their own (else on the caller's: fakes in tests). */
	private final boolean inBackground;

	private volatile @Nullable StatefulConnection<String, String> connection;

	private volatile @Nullable RedisClusterAsyncCommands<String, String> commands;

	private volatile @Nullable String connectError;

	private volatile boolean closed;

	/** Held while the connection is opened, so that a switch of master and a connect attempt take turns. */
	private final Object connectLock = new Object();

	private final @Nullable SentinelWatch watch;

	/** The last master address Sentinel announced, so that the same switch said by several is followed once. */
	private final AtomicReference<@Nullable String> announced = new AtomicReference<>();

	/** The master address the connection was last reopened on after an announced switch. */
	private volatile @Nullable String followed;

	ScriptConnection(Supplier<StatefulConnection<String, String>> connector,
			Supplier<StatefulRedisPubSubConnection<String, String>> pubSubConnector, String description) {
		this(connector, pubSubConnector, description, null);
	}

	/** A connection opened now, on this thread (for tests: a fake connector answers at once). */
	ScriptConnection(Supplier<StatefulConnection<String, String>> connector,
			Supplier<StatefulRedisPubSubConnection<String, String>> pubSubConnector, String description,
			@Nullable Function<Consumer<String>, SentinelWatch> watchOf) {
		this(connector, pubSubConnector, description, watchOf, false, false);
	}

	/**
	 * A connection, opened now.
	 *
	 * @param connector opens the script connection (through Sentinel: asks Sentinel for the master)
	 * @param pubSubConnector opens the connection for wake-ups
	 * @param description the server as the log and the health say it
	 * @param watchOf makes the watch of master switches given what to run on one, or {@code null} when
	 * Redis is not reached through Sentinel
	 * @param cluster whether the connection is to a Redis Cluster
	 * @param inBackground whether it is opened on a thread of its own (else on this one, before this returns)
	 */
	private ScriptConnection(Supplier<StatefulConnection<String, String>> connector,
			Supplier<StatefulRedisPubSubConnection<String, String>> pubSubConnector, String description,
			@Nullable Function<Consumer<String>, SentinelWatch> watchOf, boolean cluster, boolean inBackground) {
		this.connector = connector;
		this.pubSubConnector = pubSubConnector;
		this.description = description;
		this.cluster = cluster;
		this.inBackground = inBackground;
		this.minSilenceNanos = inBackground ? MIN_SILENCE_NANOS : 0;
		this.answers = new FailureDetector.Answers(this::opening, this::lost, this.minSilenceNanos);
		this.watch = (watchOf != null) ? watchOf.apply(this::masterSwitched) : null;
		if (inBackground) {
			connectInBackground();
			awaitOpen();
		}
		else if (this.connecting.compareAndSet(false, true)) {
			connectOnce();
		}
	}

	/**
	 * When Redis last answered for a bucket's failure detector: one for the whole connection to one server;
	 * on a Redis Cluster each detector's own (a node that answers says nothing of another).
	 *
	 * @return the answers
	 */
	FailureDetector.Answers answers() {
		return this.cluster ? new FailureDetector.Answers(this::opening, this::lost, this.minSilenceNanos)
				: this.answers;
	}

	/**
	 * Why the connection is lost, while Lettuce reconnects it: its last failure to reconnect (connection
	 * refused, a wrong password), as Lettuce's event bus said it, or that it closed.
	 *
	 * @return the cause, or {@code null} while the connection is open (or was never opened)
	 */
	@Nullable String lost() {
		if (!reconnecting()) {
			return null;
		}
		String cause = this.lostBecause;
		return (cause != null) ? cause : "the connection closed, Lettuce reconnects it";
	}

	/** Hears Lettuce's failures to reconnect (on the client's event bus). */
	private ScriptConnection hearingReconnects(AbstractRedisClient client) {
		this.lostEvents = client.getResources()
			.eventBus()
			.get()
			.filter((event) -> event instanceof ReconnectFailedEvent || event instanceof ConnectionActivatedEvent)
			.subscribe((event) -> this.lostBecause = (event instanceof ReconnectFailedEvent failed)
					? describe(failed.getCause()) : null, (error) -> {
						// the client's resources shut down: nothing more to hear
					});
		return this;
	}

	/**
	 * Waits for the first attempt to open the connection, at most {@value #OPEN_WAIT_MILLIS} ms: the calls
	 * right after start-up find it open when Redis answers, and a Redis that accepts connections and answers
	 * nothing holds the start-up that long, not Lettuce's minute.
	 */
	private void awaitOpen() {
		try {
			this.opened.get(OPEN_WAIT_MILLIS, TimeUnit.MILLISECONDS);
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
		}
		catch (ExecutionException | TimeoutException ex) {
			// not open (yet): calls wait for it within their timeout, or fail and apply their policy
		}
	}

	/** Whether the connection has never been open and an attempt to open it is under way. */
	private boolean opening() {
		return !this.everOpen && this.connecting.get();
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
					() -> cluster.connectPubSub(StringCodec.UTF8), describe(lettuce), null, true, true)
				.hearingReconnects(client);
		}
		RedisSentinelConfiguration sentinel = lettuce.getSentinelConfiguration();
		if (client instanceof RedisClient redis && sentinel != null) {
			String master = sentinel.getRequiredMaster().getName();
			return new ScriptConnection(() -> redis.connect(StringCodec.UTF8), () -> redis.connectPubSub(StringCodec.UTF8),
					describe(lettuce), (onSwitch) -> new SentinelWatch(redis,
							SentinelWatch.uris(sentinel, lettuce.getClientConfiguration()), master, onSwitch), false, true).hearingReconnects(client);
		}
		if (client instanceof RedisClient redis) {
			return new ScriptConnection(() -> redis.connect(StringCodec.UTF8), () -> redis.connectPubSub(StringCodec.UTF8),
					describe(lettuce), null, false, true).hearingReconnects(client);
		}
		throw new IllegalArgumentException("Unsupported Lettuce client " + client.getClass().getName());
	}

	private static String describe(LettuceConnectionFactory factory) {
		RedisSentinelConfiguration sentinel = factory.getSentinelConfiguration();
		return (factory.getClusterConfiguration() != null) ? "a Redis Cluster"
				: (sentinel != null) ? "Redis through Sentinel (master '" + sentinel.getRequiredMaster().getName() + "')"
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
		return run(BucketScript.SHA1, BucketScript.SOURCE, keys, arguments);
	}

	/**
	 * Runs a script of the module ({@code bucket.lua}, {@code gate.lua}, the calendar quota's {@code quota.lua}) on one key, as
	 * {@link #run(String[], String[])} runs the bucket's.
	 *
	 * @param sha1 the script's SHA-1
	 * @param source the script
	 * @param keys its keys
	 * @param arguments its arguments
	 * @return the reply, completed by Lettuce's event loop; failed at once when not connected
	 */
	CompletableFuture<List<Object>> run(String sha1, String source, String[] keys, String[] arguments) {
		RedisClusterAsyncCommands<String, String> async = this.commands;
		if (async != null) {
			return run(async, sha1, source, keys, arguments);
		}
		if (opening()) {
			// the first attempt is under way: the call waits for it (its caller, at most its timeout)
			return this.opened.thenCompose((open) -> run(open, sha1, source, keys, arguments));
		}
		connectInBackground();
		String error = this.connectError;
		return CompletableFuture.failedFuture(new IllegalStateException("Not connected to " + this.description
				+ ((error != null) ? ": " + error : "")));
	}

	private static CompletableFuture<List<Object>> run(RedisClusterAsyncCommands<String, String> async, String sha1,
			String source, String[] keys, String[] arguments) {
		CompletableFuture<List<Object>> reply = async
			.<List<Object>>evalsha(sha1, ScriptOutputType.MULTI, keys, arguments)
			.toCompletableFuture();
		return reply.exceptionallyCompose((ex) -> isNoScript(ex)
				? async.<List<Object>>eval(source, ScriptOutputType.MULTI, keys, arguments)
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

	private void connectOnce() {
		try {
			synchronized (this.connectLock) {
				if (this.commands == null && !this.closed) {
					open();
				}
			}
		}
		finally {
			this.connecting.set(false);
		}
	}

	/**
	 * Opens the script connection (and the wake-ups' when buckets asked for them), after starting the
	 * subscriptions to master switches not made yet (first, so that a switch made while the master is
	 * looked up is heard as soon as they are open; they are not waited for, so that a sentinel that answers
	 * nothing holds nothing back). Called holding {@link #connectLock}.
	 *
	 * @return whether the connection is open
	 */
	private boolean open() {
		SentinelWatch sentinels = this.watch;
		if (sentinels != null) {
			sentinels.watch();
		}
		try {
			StatefulConnection<String, String> opened = this.connector.get();
			RedisClusterAsyncCommands<String, String> async = asyncCommands(opened);
			async.scriptLoad(BucketScript.SOURCE);
			this.connection = opened;
			this.connectError = null;
			if (this.inBackground) {
				this.answers.heard(System.nanoTime()); // the handshake was answered (the buckets' default clock)
			}
			// the calls that waited for the connection go first, then those that find it open
			this.opened.complete(async);
			this.commands = async;
			this.everOpen = true;
			if (!this.subscriptions.isEmpty()) {
				openPubSubInBackground();
			}
			if (this.closed) {
				close();
			}
			return true;
		}
		catch (RuntimeException ex) {
			String error = describe(ex);
			if (this.connectError == null) {
				logger.warn("Rate limit buckets on Redis cannot connect to " + this.description + " (" + error
						+ "); they apply their on-failure policy and connect when Redis answers");
			}
			this.connectError = error;
			// the calls that waited for this attempt fail with its error; the next attempt has a future of its own
			CompletableFuture<RedisClusterAsyncCommands<String, String>> failed = this.opened;
			this.opened = new CompletableFuture<>();
			failed.completeExceptionally(new IllegalStateException("Not connected to " + this.description + ": " + error));
			return false;
		}
	}

	/**
	 * Sentinel announced that our master moved to {@code address}: the connections are reopened on a
	 * thread of their own (this runs on Lettuce's event loop, which must not wait for a connect). The
	 * same switch announced by several sentinels is followed once.
	 */
	private void masterSwitched(String address) {
		if (this.closed || address.equals(this.announced.getAndSet(address))) {
			return;
		}
		Thread thread = new Thread(() -> follow(address), "ratelimit-redis-follow-master");
		thread.setDaemon(true);
		thread.start();
	}

	/**
	 * Closes both connections and opens them again, which asks Sentinel for the master. The old ones are
	 * closed first, so that nothing more is written to the old master: calls in flight on them fail or
	 * time out, and calls made until the new one is open fail at once, each through its bucket's
	 * failure policy.
	 */
	private void follow(String address) {
		synchronized (this.connectLock) {
			if (this.closed) {
				return;
			}
			closeConnections();
			if (open() && !this.closed) {
				this.followed = address;
				logger.info("Rate limit buckets on " + this.description + " moved to the new master at " + address
						+ ", as Sentinel announced");
			}
		}
	}

	/** The master address the connection was reopened on after Sentinel's last switch (for tests). */
	@Nullable String followedMaster() {
		return this.followed;
	}

	/**
	 * A failure to connect as the log and the health say it: Lettuce's exception, and the deepest cause
	 * that says something more. Lettuce's "Unable to connect to host:port" is the same for a server that
	 * is not there and one that refuses the password, and through Sentinel the sentinel's own answer
	 * ({@code NOAUTH}, {@code WRONGPASS}) is two levels down, under "Cannot connect Redis Sentinel at
	 * ...": the deepest cause tells them apart. A cause whose message is already in the one above it
	 * (Netty's "Connection refused" under "Connection refused: /host:port") adds nothing.
	 */
	static String describe(Throwable ex) {
		String said = ex.getClass().getSimpleName() + ": " + ex.getMessage();
		String above = String.valueOf(ex.getMessage());
		Throwable deepest = null;
		int depth = 0;
		for (Throwable cause = ex.getCause(); cause != null && depth < 20; cause = cause.getCause(), depth++) {
			String message = cause.getMessage();
			if (message != null && !above.contains(message)) {
				deepest = cause;
				above = message;
			}
			if (cause == cause.getCause()) {
				break;
			}
		}
		return (deepest != null) ? said + " (" + deepest.getClass().getSimpleName() + ": " + deepest.getMessage() + ")"
				: said;
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
			if (this.inBackground) {
				openPubSubInBackground();
			}
			else {
				openPubSub();
			}
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

	/**
	 * Opens the connection for wake-ups, the first time a bucket asks for them, on a thread of its own: a
	 * Redis that accepts connections and answers nothing holds no caller (capped waiters ask again at
	 * intervals meanwhile).
	 */
	private void openPubSubInBackground() {
		if (!this.closed && this.pubSub == null && this.openingPubSub.compareAndSet(false, true)) {
			Thread thread = new Thread(() -> {
				try {
					openPubSub();
				}
				finally {
					this.openingPubSub.set(false);
				}
			}, "ratelimit-redis-connect-wake-ups");
			thread.setDaemon(true);
			thread.start();
		}
	}

	private void openPubSub() {
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
			synchronized (this) {
				// under the lock subscribe() takes: a channel added meanwhile is subscribed here or there
				if (this.closed) {
					// opened while the application closed: the client may have closed it already, and a second
					// close would log "Connection is already closed"
					if (open.isOpen()) {
						open.closeAsync();
					}
					return;
				}
				this.pubSub = open;
				if (!this.subscriptions.isEmpty()) {
					open.async().subscribe(this.subscriptions.keySet().toArray(String[]::new));
				}
			}
		}
		catch (RuntimeException ex) {
			logger.warn("Rate limit buckets on Redis cannot subscribe to wake-ups on " + this.description + " ("
					+ ex.getMessage() + "); capped waiters ask again at intervals instead");
		}
	}

	/**
	 * Closes the connections and waits until they are closed (at most {@value #CLOSE_MILLIS} ms): the
	 * application's connection factory closes its client after this, and a connection still closing then
	 * would be closed twice ("Connection is already closed"). Closing needs no answer from Redis.
	 */
	@Override
	public void close() {
		this.closed = true;
		SentinelWatch sentinels = this.watch;
		if (sentinels != null) {
			sentinels.close();
		}
		this.opened.completeExceptionally(new IllegalStateException("Closed: " + this));
		Disposable events = this.lostEvents;
		if (events != null) {
			events.dispose();
		}
		try {
			closeConnections().get(CLOSE_MILLIS, TimeUnit.MILLISECONDS);
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
		}
		catch (ExecutionException | TimeoutException ex) {
			// closed as far as it goes: nothing more is sent on it
		}
	}

	/**
	 * Closes the script connection and the wake-ups' (on close, and before reopening on a new master).
	 *
	 * @return completes when both are closed
	 */
	private CompletableFuture<Void> closeConnections() {
		StatefulConnection<String, String> open = this.connection;
		this.commands = null;
		this.connection = null;
		CompletableFuture<Void> script = (open != null) ? orDone(open.closeAsync()) : CompletableFuture.completedFuture(null);
		StatefulRedisPubSubConnection<String, String> subscribed;
		synchronized (this) {
			subscribed = this.pubSub;
			this.pubSub = null;
		}
		CompletableFuture<Void> wakeUps = (subscribed != null) ? orDone(subscribed.closeAsync())
				: CompletableFuture.completedFuture(null);
		return CompletableFuture.allOf(script, wakeUps);
	}

	private static CompletableFuture<Void> orDone(@Nullable CompletableFuture<Void> closing) {
		return (closing != null) ? closing : CompletableFuture.completedFuture(null);
	}

	@Override
	public String toString() {
		return "ScriptConnection to " + this.description;
	}
}
