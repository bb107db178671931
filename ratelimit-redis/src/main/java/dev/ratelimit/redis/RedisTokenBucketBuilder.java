package dev.ratelimit.redis;

import java.time.Duration;
import java.util.function.LongSupplier;

import dev.ratelimit.core.Rate;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.core.TokenBucketBuilder;
import dev.ratelimit.redis.RedisTokenBucket.OnFailure;
import org.jspecify.annotations.Nullable;

import org.springframework.data.redis.connection.RedisConnectionFactory;

/**
 * Builds a {@link RedisTokenBucket}. The name and the connection factory are required; the limit
 * defaults to one period's tokens, as for a local bucket.
 */
public final class RedisTokenBucketBuilder extends TokenBucketBuilder<RedisTokenBucketBuilder> {

	@Nullable RedisConnectionFactory connectionFactory;

	@Nullable ScriptConnection connection;

	String keyPrefix = "ratelimit:";

	Duration timeout = Duration.ofMillis(100);

	OnFailure onFailure = OnFailure.LOCAL;

	Duration lease = Duration.ofMinutes(1);

	@Nullable String perKey;

	@Nullable TemplateTune tune;

	@Nullable String batch;

	Duration batchHold = Duration.ofMillis(100);

	java.util.Set<RedisBatch> batches = java.util.concurrent.ConcurrentHashMap.newKeySet();

	RedisTokenBucketBuilder() {
	}

	/**
	 * Capped release: how long a call's tokens are held at most; tokens not released within it (the
	 * instance died, the release was lost) come back, and a release after that changes nothing.
	 * Default 1 minute: longer than any guarded call should take.
	 *
	 * @param lease at least 1 ms
	 * @return this builder
	 */
	public RedisTokenBucketBuilder lease(Duration lease) {
		this.lease = lease;
		return this;
	}

	/**
	 * Batches (contract revision 3): {@code none} (the default: one Redis call per grant), {@code auto} (as many
	 * tokens at a time as this instance's callers took in the last {@link #batchHold}, at least 1, at most half
	 * the limit) or a whole number from 1 to the limit; not with capped release.
	 *
	 * @param batch {@code none}, {@code auto} or a whole number
	 * @return this builder
	 */
	public RedisTokenBucketBuilder batch(String batch) {
		this.batch = batch;
		return this;
	}

	/**
	 * The longest this instance keeps tokens of a batch unused before it gives them back; default 100 ms.
	 *
	 * @param batchHold a positive duration
	 * @return this builder
	 */
	public RedisTokenBucketBuilder batchHold(Duration batchHold) {
		this.batchHold = batchHold;
		return this;
	}

	/** The batches of the buckets of one backend, given back when it closes. */
	RedisTokenBucketBuilder batches(java.util.Set<RedisBatch> batches) {
		this.batches = batches;
		return this;
	}

	/**
	 * The Redis connection factory; the bucket opens one asynchronous connection on its Lettuce client.
	 *
	 * @param connectionFactory the application's Lettuce connection factory
	 * @return this builder
	 */
	public RedisTokenBucketBuilder connectionFactory(RedisConnectionFactory connectionFactory) {
		this.connectionFactory = connectionFactory;
		return this;
	}

	/**
	 * Makes the bucket of one key of the named bucket (contract revision 2): its hash is
	 * {@code <key-prefix>{<bucket>:<key>}}; an empty key makes the overflow bucket shared by keys
	 * without room, {@code <key-prefix>{<bucket>}:overflow}.
	 */
	RedisTokenBucketBuilder perKey(String key) {
		this.perKey = key;
		return this;
	}

	/**
	 * The settings of the template shared by its buckets on this instance (its own, its overflow
	 * bucket's and its keys'); without it the bucket has settings of its own, from this builder.
	 */
	RedisTokenBucketBuilder tune(TemplateTune tune) {
		this.tune = tune;
		return this;
	}

	/** The connection shared by the buckets of one backend. */
	RedisTokenBucketBuilder connection(ScriptConnection connection) {
		this.connection = connection;
		return this;
	}

	/**
	 * The prefix of the bucket's key; default {@code ratelimit:}.
	 *
	 * @param keyPrefix the prefix
	 * @return this builder
	 */
	public RedisTokenBucketBuilder keyPrefix(String keyPrefix) {
		this.keyPrefix = keyPrefix;
		return this;
	}

	/**
	 * The longest a call waits for Redis, connecting included; default 100 ms.
	 *
	 * @param timeout a positive duration
	 * @return this builder
	 */
	public RedisTokenBucketBuilder timeout(Duration timeout) {
		this.timeout = timeout;
		return this;
	}

	/**
	 * What a call does when Redis does not answer; default {@link OnFailure#LOCAL}.
	 *
	 * @param onFailure the policy
	 * @return this builder
	 */
	public RedisTokenBucketBuilder onFailure(OnFailure onFailure) {
		this.onFailure = onFailure;
		return this;
	}

	/**
	 * Builds the bucket, opening its connection when it was given a connection factory.
	 *
	 * @return the bucket
	 * @throws IllegalArgumentException naming the argument that is missing or out of range
	 */
	public RedisTokenBucket build() {
		String name = limiterName();
		if (name == null || name.isEmpty()) {
			throw new IllegalArgumentException("name must not be empty: it names the bucket's key");
		}
		ScriptConnection shared = this.connection;
		if (shared == null) {
			if (this.connectionFactory == null) {
				throw new IllegalArgumentException("connectionFactory of Redis bucket '" + name + "' must be set");
			}
			shared = ScriptConnection.of(this.connectionFactory);
		}
		return new RedisTokenBucket(this, name, shared);
	}

	Rate rate() {
		return limiterRate();
	}

	/** The settings this builder gives, checked (a plan's record is made from them: {@link RedisBuckets}). */
	BucketScript.Settings settings(String name) {
		Rate rate = rate();
		return BucketScript.Settings.of(rate, limit(rate), capped(), this.lease, name);
	}

	long limit(Rate rate) {
		return checkedLimit(rate);
	}

	boolean capped() {
		return isCappedRelease();
	}

	LongSupplier clock() {
		return limiterClock();
	}

	@Nullable String bucketName() {
		return limiterName();
	}

	StatsRecorder bucketStats() {
		return limiterStats();
	}
}
