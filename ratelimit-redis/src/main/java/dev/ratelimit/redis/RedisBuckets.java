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

	/**
	 * The settings of each plan of a bucket used with a key (contract revision 3, "Plans"), by bucket name and
	 * plan, shared by the keys' buckets on that plan.
	 */
	private final Map<String, Map<String, TemplateTune>> planTunes = new ConcurrentHashMap<>();

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
	 * Builds the bucket of one key on a plan (contract revision 3, "Plans"), on the shared connection: its
	 * calls pass the plan's settings in force, which a retune of the plan through any instance changes
	 * ({@link #retunePlan}). The bucket itself (the template) must have been built first.
	 *
	 * @param builder the plan's settings (the connection is set here); those of its record are the first
	 *        given for the plan here
	 * @param key the key whose bucket this is, not empty
	 * @param plan the plan's name
	 * @return the bucket
	 * @throws IllegalStateException when the bucket itself has not been built here
	 */
	public RedisTokenBucket buildForPlan(RedisTokenBucketBuilder builder, String key, String plan) {
		String name = builder.bucketName();
		if (name == null || key.isEmpty()) {
			throw new IllegalArgumentException("The bucket of a key on a plan needs the bucket's name and a key");
		}
		builder.connection(connection());
		builder.batches(this.batches);
		builder.perKey(key);
		return builder.tune(planTune(builder, name, plan)).build();
	}

	/**
	 * Moves the bucket of one key, built here, to the settings of another plan, or of the bucket itself for
	 * {@code null}, from its next call on, keeping its tokens up to the new limit
	 * ({@link RedisTokenBucket#followPlan}).
	 *
	 * @param bucket a key's bucket built by {@link #build} or {@link #buildForPlan}
	 * @param builder the plan's settings, used when the plan has no record here yet
	 * @param plan the plan, or {@code null} for the bucket's own settings
	 */
	public void follow(RedisTokenBucket bucket, RedisTokenBucketBuilder builder, @Nullable String plan) {
		TemplateTune template = this.tunes.get(bucket.name());
		if (template == null) {
			return; // (not built here: nothing else to follow)
		}
		bucket.followPlan((plan != null) ? planTune(builder, bucket.name(), plan) : template);
	}

	/**
	 * Retunes one plan for every instance (contract revision 3, "Plans"): the plan's record in Redis takes the
	 * new settings (what is not given stays as in force), and every key on that plan, on every instance, calls
	 * with them within a second (on this instance, from its next call on).
	 *
	 * @param configured the plan's settings as configured (its record is made from them the first time)
	 * @param plan the plan
	 * @param rate the new rate, or {@code null} to keep it
	 * @param limit the new limit, or {@code null} to keep it
	 * @throws dev.ratelimit.core.BackendUnavailableException when Redis does not answer
	 * @throws IllegalArgumentException naming what the settings cannot be
	 */
	public void retunePlan(RedisTokenBucketBuilder configured, String plan, dev.ratelimit.core.@Nullable Rate rate,
			@Nullable Long limit) {
		String name = configured.bucketName();
		if (name == null) {
			throw new IllegalArgumentException("A plan's retune needs the bucket's name");
		}
		TemplateTune tune = planTune(configured, name, plan);
		BucketScript.Settings next = tune.current();
		if (limit != null) {
			next = next.withLimit(limit, name);
		}
		if (rate != null) {
			next = next.withRate(rate, name);
		}
		tune.retunePlan(next);
	}

	/** The record of a plan (made the first time from {@code builder}'s settings). */
	private TemplateTune planTune(RedisTokenBucketBuilder builder, String name, String plan) {
		TemplateTune template = this.tunes.get(name);
		if (template == null) {
			throw new IllegalStateException("Rate limit bucket '" + name + "' must be built before its keys on plan '"
					+ plan + "'");
		}
		return this.planTunes.computeIfAbsent(name, (unused) -> new ConcurrentHashMap<>())
			.computeIfAbsent(plan, (unused) -> TemplateTune.ofPlan(template, plan, builder.settings(name)));
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
