package dev.ratelimit.redis;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.Consumer;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.codec.StringCodec;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.data.redis.connection.RedisNode;
import org.springframework.data.redis.connection.RedisPassword;
import org.springframework.data.redis.connection.RedisSentinelConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;

/**
 * Hears Sentinel say that the master moved ({@code +switch-master}), for a {@link ScriptConnection} that
 * reaches Redis through Sentinel.
 *
 * <p>Why: a Lettuce connection made through Sentinel asks Sentinel for the master only when it
 * (re)connects. After a manual {@code SENTINEL FAILOVER} the old master stays up and keeps answering
 * until Sentinel turns it into a replica (and drops its clients) some seconds later, so a connection
 * that only waits for that drop writes to a server whose writes the resync then throws away. Sentinel
 * announces the switch on its {@code +switch-master} channel as soon as it is made; every sentinel
 * announces it, so the watch subscribes on each one and one that is down does not make it deaf.
 *
 * <p>Each subscription is a Lettuce pub/sub connection of its own to one sentinel, with the sentinels'
 * credentials (not the data nodes'), opened without waiting for it; Lettuce reconnects it and subscribes
 * again by itself when the sentinel drops it. A sentinel that cannot be reached when the watch starts is
 * tried again at each {@link #watch()}, that is at each connect attempt of the script connection.
 */
final class SentinelWatch implements AutoCloseable {

	/** The channel on which a sentinel says {@code <master> <old ip> <old port> <new ip> <new port>}. */
	static final String SWITCH_MASTER = "+switch-master";

	private static final Log logger = LogFactory.getLog(SentinelWatch.class);

	private final RedisClient client;

	private final List<RedisURI> sentinels;

	private final String master;

	private final Consumer<String> onSwitch;

	/** The subscription on each sentinel, by the sentinel's index; {@code null} until one is open. */
	private final AtomicReferenceArray<@Nullable StatefulRedisPubSubConnection<String, String>> subscribed;

	/** Whether a failure to subscribe on each sentinel has been logged since it last succeeded (1). */
	private final AtomicIntegerArray warned;

	/** Whether an attempt to subscribe on each sentinel is under way (1). */
	private final AtomicIntegerArray attempting;

	private volatile boolean closed;

	/**
	 * A watch, not started: {@link #watch()} subscribes.
	 *
	 * @param client the application's Lettuce client (its resources and options)
	 * @param sentinels the sentinels, with their credentials
	 * @param master the name of the master the buckets use
	 * @param onSwitch what to run with the new master's {@code host:port} when Sentinel switches it, on
	 * Lettuce's event loop: it must not block
	 */
	SentinelWatch(RedisClient client, List<RedisURI> sentinels, String master, Consumer<String> onSwitch) {
		this.client = client;
		this.sentinels = List.copyOf(sentinels);
		this.master = master;
		this.onSwitch = onSwitch;
		this.subscribed = new AtomicReferenceArray<>(this.sentinels.size());
		this.warned = new AtomicIntegerArray(this.sentinels.size());
		this.attempting = new AtomicIntegerArray(this.sentinels.size());
	}

	/**
	 * The sentinels of a Spring Data configuration as Lettuce URIs, with the sentinels' username and
	 * password, and the TLS settings and timeout of the client configuration (as Spring Data's own
	 * connection factory applies them to the sentinels).
	 *
	 * @param sentinel the sentinel configuration
	 * @param client the client configuration
	 * @return one URI per sentinel
	 */
	static List<RedisURI> uris(RedisSentinelConfiguration sentinel, LettuceClientConfiguration client) {
		List<RedisURI> uris = new ArrayList<>();
		RedisPassword password = sentinel.getSentinelPassword();
		for (RedisNode node : sentinel.getSentinels()) {
			RedisURI.Builder builder = RedisURI.Builder.redis(node.getRequiredHost(), node.getRequiredPort())
				.withSsl(client.isUseSsl()).withVerifyPeer(client.getVerifyMode()).withStartTls(client.isStartTls())
				.withTimeout(client.getCommandTimeout());
			String username = sentinel.getSentinelUsername();
			if (password.isPresent() && username != null) {
				builder.withAuthentication(username, password.get());
			}
			else if (password.isPresent()) {
				builder.withPassword(password.get());
			}
			uris.add(builder.build());
		}
		return uris;
	}

	/**
	 * Starts subscribing on every sentinel not subscribed on yet, without waiting: a sentinel that accepts
	 * connections and answers nothing (its host gone with the old master it sat beside) must not hold back
	 * the connect or the reopen after a switch by its whole timeout. At most one attempt per sentinel is
	 * under way at a time; one that fails is tried again at the next call.
	 */
	void watch() {
		for (int i = 0; i < this.sentinels.size() && !this.closed; i++) {
			if (this.subscribed.get(i) != null || !this.attempting.compareAndSet(i, 0, 1)) {
				continue;
			}
			int index = i;
			RedisURI sentinel = this.sentinels.get(i);
			try {
				this.client.connectPubSubAsync(StringCodec.UTF8, sentinel).whenComplete((open, failed) -> {
					if (failed != null) {
						attemptFailed(index, failed);
						return;
					}
					open.addListener(new RedisPubSubAdapter<>() {

						@Override
						public void message(String channel, String message) {
							if (SWITCH_MASTER.equals(channel)) {
								switched(message);
							}
						}
					});
					open.async().subscribe(SWITCH_MASTER).whenComplete((ok, notSubscribed) -> {
						if (notSubscribed != null) {
							open.closeAsync();
							attemptFailed(index, notSubscribed);
							return;
						}
						this.subscribed.set(index, open);
						this.warned.set(index, 0);
						this.attempting.set(index, 0);
						if (this.closed && this.subscribed.compareAndSet(index, open, null)) {
							open.closeAsync();
						}
					});
				});
			}
			catch (RuntimeException ex) {
				attemptFailed(index, ex);
			}
		}
	}

	private void attemptFailed(int index, Throwable ex) {
		this.attempting.set(index, 0);
		if (this.warned.compareAndSet(index, 0, 1)) {
			RedisURI sentinel = this.sentinels.get(index);
			logger.warn("Rate limit buckets on Redis cannot subscribe to master switches (" + SWITCH_MASTER
					+ ") on the sentinel at " + sentinel.getHost() + ":" + sentinel.getPort() + " ("
					+ ScriptConnection.describe(ex)
					+ "); tried again when the buckets next connect, the other sentinels announce switches too");
		}
	}

	private void switched(String message) {
		String[] said = message.split(" ");
		if (said.length >= 5 && said[0].equals(this.master)) {
			this.onSwitch.accept(said[3] + ":" + said[4]);
		}
	}

	@Override
	public void close() {
		this.closed = true;
		for (int i = 0; i < this.subscribed.length(); i++) {
			StatefulRedisPubSubConnection<String, String> open = this.subscribed.getAndSet(i, null);
			if (open != null) {
				open.closeAsync();
			}
		}
	}
}
