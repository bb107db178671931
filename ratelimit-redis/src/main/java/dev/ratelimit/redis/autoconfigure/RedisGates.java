package dev.ratelimit.redis.autoconfigure;

import java.util.function.Supplier;

import dev.ratelimit.redis.RedisBuckets;
import dev.ratelimit.redis.RedisServerGate;
import dev.ratelimit.spring.BucketDefinition;
import dev.ratelimit.spring.BucketDefinitions;
import dev.ratelimit.spring.RegisteredBucket;
import dev.ratelimit.spring.client.Gate;
import dev.ratelimit.spring.client.SharedGates;
import org.jspecify.annotations.Nullable;

/**
 * The outbound rules' gates of Redis buckets, in Redis beside each bucket ({@link RedisServerGate}), so
 * that a pause or a lowering that one instance heard holds back every instance's next call (contract
 * revision 3, "Outbound calls"). Pauses and resets run on Redis's clock: the buckets' clock readings the
 * rules give are used only as differences. A gate Redis does not answer holds nothing back.
 */
final class RedisGates implements SharedGates {

	private final RedisBuckets buckets;

	private final Supplier<BucketDefinitions> definitions;

	RedisGates(RedisBuckets buckets, Supplier<BucketDefinitions> definitions) {
		this.buckets = buckets;
		this.definitions = definitions;
	}

	@Override
	public @Nullable Gate gate(RegisteredBucket bucket, @Nullable Object key) {
		if (!"redis".equals(bucket.backend())
				|| !(this.definitions.get().get(bucket.name()) instanceof BucketDefinition.Shared shared)) {
			return null;
		}
		return new Stored(this.buckets.gate(shared.redis().getKeyPrefix(), bucket.name(),
				(key != null) ? String.valueOf(key) : null, shared.redis().getTimeout()));
	}

	/** A gate in Redis, as the rules ask it. */
	record Stored(RedisServerGate gate) implements Gate {

		@Override
		public long delay(long cost, long now) {
			return this.gate.delay(cost);
		}

		@Override
		public long tryPass(long cost, long now) {
			return this.gate.tryPass(cost);
		}

		@Override
		public void unpass(long mark, long cost) {
			this.gate.unpass(mark, cost);
		}

		@Override
		public void done(long mark, long cost, long now) {
			this.gate.done(mark, cost);
		}

		@Override
		public void pause(long until, long now) {
			this.gate.pause(until - now);
		}

		@Override
		public void lower(long remaining, long mark, long reset, long now) {
			this.gate.lower(remaining, mark, reset - now);
		}

		@Override
		public long level(long now) {
			return this.gate.level();
		}
	}
}
