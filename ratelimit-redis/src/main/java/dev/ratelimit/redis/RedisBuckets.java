package dev.ratelimit.redis;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;

import org.jspecify.annotations.Nullable;

import org.springframework.data.redis.connection.RedisConnectionFactory;

/**
 * The Redis buckets of one application: one connection for all of them (opened with the first bucket,
 * in the background), and for each bucket name one set of settings in force, shared by the bucket, its
 * overflow bucket and the buckets of its keys, whichever builder they are made from later (after a
 * retune, new keys' buckets may be made from the retuned settings; the configuration a retune applies
 * to stays the one the first bucket of that name was made with).
 *
 * <pre>
 * RedisBuckets buckets = new RedisBuckets(connectionFactory);
 * RedisTokenBucket orders = buckets.build(RedisTokenBucket.builder().name("orders").rate(10, Duration.ofSeconds(1)),
 *         null, (first) -&gt; { });
 * ...
 * buckets.close(); // closes the connection
 * </pre>
 */
public final class RedisBuckets implements AutoCloseable {

	private final RedisConnectionFactory connectionFactory;

	private @Nullable ScriptConnection connection;

	/** The settings of each bucket (by name) shared with its overflow bucket and its keys' buckets. */
	private final Map<String, TemplateTune> tunes = new ConcurrentHashMap<>();

	/** The batches (contract revision 3) that hold tokens now: given back at close. */
	private final java.util.Set<RedisBatch> batches = ConcurrentHashMap.newKeySet();

	/**
	 * Buckets on the application's connection factory.
	 *
	 * @param connectionFactory a Lettuce connection factory
	 */
	public RedisBuckets(RedisConnectionFactory connectionFactory) {
		this.connectionFactory = connectionFactory;
	}

	/**
	 * Builds a bucket on the shared connection that shares the settings in force of every bucket of that
	 * name made here.
	 *
	 * @param builder the bucket's settings (the connection is set here)
	 * @param key {@code null} for the bucket itself, the empty string for its overflow bucket, else the key
	 *        whose bucket this is
	 * @param first told the bucket when it is the first of its name made here (its mode is the name's:
	 *        {@link RedisTokenBucket#onModeChange}, {@link RedisTokenBucket#switchMode})
	 * @return the bucket
	 */
	public RedisTokenBucket build(RedisTokenBucketBuilder builder, @Nullable String key,
			Consumer<RedisTokenBucket> first) {
		builder.connection(connection());
		builder.batches(this.batches);
		if (key != null) {
			builder.perKey(key);
		}
		String name = builder.bucketName();
		TemplateTune tune = (name != null) ? this.tunes.get(name) : null;
		if (tune != null) {
			return builder.tune(tune).build();
		}
		synchronized (this.tunes) {
			tune = (name != null) ? this.tunes.get(name) : null;
			if (tune != null) {
				return builder.tune(tune).build();
			}
			// no bucket of that name made here first: this one's settings start it
			RedisTokenBucket made = builder.build();
			first.accept(made);
			this.tunes.put(made.name(), made.tune());
			return made;
		}
	}

	/**
	 * Builds a calendar quota on the shared connection (its settings are its own: a quota has no retune
	 * record).
	 *
	 * @param builder the quota's settings (the connection is set here)
	 * @param key {@code null} for the bucket itself, the empty string for its overflow bucket, else the key
	 * @return the quota
	 */
	public RedisCalendarQuota buildQuota(RedisCalendarQuota.Builder builder, @Nullable String key) {
		return builder.connection(connection()).perKey(key).build();
	}

	/**
	 * The gate of a bucket's outbound calls (or of one key's bucket), in Redis beside the bucket, on the
	 * buckets' connection.
	 *
	 * @param keyPrefix the bucket's key prefix
	 * @param bucket the bucket's name
	 * @param key the key of a key's bucket, or {@code null} for the bucket itself
	 * @param timeout the longest a call of the gate waits for Redis (the bucket's timeout)
	 * @return the gate
	 */
	public RedisServerGate gate(String keyPrefix, String bucket, @Nullable String key, Duration timeout) {
		return new RedisServerGate(connection(), RedisServerGate.key(keyPrefix, bucket, key), bucket, timeout, null,
				RedisServerGate.KEEP_MICROS);
	}

	/** One connection for every bucket, opened with the first (in the background: nothing waits for it). */
	private synchronized ScriptConnection connection() {
		ScriptConnection open = this.connection;
		if (open == null) {
			open = ScriptConnection.of(this.connectionFactory);
			this.connection = open;
		}
		return open;
	}

	/**
	 * Gives the unspent tokens of the buckets' batches back (each waits at most its timeout), then closes the
	 * connection, and waits (briefly) until it is closed: before the connection factory shuts
	 * its client down.
	 */
	@Override
	public synchronized void close() {
		for (RedisBatch batch : java.util.List.copyOf(this.batches)) {
			batch.close(); // the unspent tokens of every batch go back first (contract revision 3)
		}
		ScriptConnection open = this.connection;
		if (open != null) {
			open.close();
		}
	}
}
