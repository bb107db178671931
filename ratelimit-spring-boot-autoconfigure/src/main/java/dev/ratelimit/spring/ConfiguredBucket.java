package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.ToLongFunction;

import dev.ratelimit.core.RateLimiter;
import org.jspecify.annotations.Nullable;

/**
 * A configured bucket and its limiter; {@link #update} retunes the limiter in place.
 */
final class ConfiguredBucket implements RegisteredBucket {

	private final RateLimiter limiter;

	private final @Nullable BucketMaker maker;

	private volatile BucketDefinition definition;

	private volatile @Nullable KeyedBuckets keyed;

	private final List<Consumer<KeyedBuckets>> whenKeyed = new ArrayList<>();

	private volatile @Nullable ToLongFunction<@Nullable Object> heldBack;

	private final BucketStats stats;

	ConfiguredBucket(BucketDefinition definition, RateLimiter limiter, @Nullable BucketMaker maker, BucketStats stats) {
		this.definition = definition;
		this.limiter = limiter;
		this.maker = maker;
		this.stats = stats;
	}

	@Override
	public BucketStats stats() {
		return this.stats;
	}

	@Override
	public KeyedBuckets keyed() {
		KeyedBuckets keys = this.keyed;
		if (keys == null) {
			synchronized (this) {
				keys = this.keyed;
				if (keys == null) {
					keys = makeKeyed();
					this.keyed = keys;
					for (Consumer<KeyedBuckets> action : this.whenKeyed) {
						action.accept(keys);
					}
				}
			}
		}
		return keys;
	}

	private KeyedBuckets makeKeyed() {
		BucketDefinition template = this.definition;
		String name = template.name();
		if (this.maker == null) {
			throw new IllegalStateException("Bucket '" + name + "' was not made by the starter: it has no per-key buckets");
		}
		BucketDefinitions.checkUsableWithKey(template, "a key");
		BucketMaker make = this.maker;
		return new KeyedBuckets(template.keysMax(), (key) -> make.createForKey(this.definition, key),
				this::bringUpToDate);
	}

	/** Brings a key's bucket made from an older definition to the template's settings (K4). */
	private void bringUpToDate(RateLimiter bucket) {
		BucketDefinition current = this.definition;
		if (current instanceof BucketDefinition.Quota quota) {
			bucket.updateLimit(quota.limit()); // (a quota has no rate)
			return;
		}
		bucket.updateRate(current.exactRate().tokens(), current.exactRate().period());
		if (current instanceof BucketDefinition.Shared shared) {
			bucket.updateLimit(shared.limit());
		}
		else if (current instanceof BucketDefinition.Hybrid hybrid && hybrid.limit() != null) {
			bucket.updateLimit(hybrid.limit());
		}
	}

	@Override
	public void reset() {
		this.limiter.reset();
		KeyedBuckets keys = this.keyed;
		if (keys != null) {
			keys.reset();
		}
	}

	@Override
	public long heldBackTo(@Nullable Object key) {
		ToLongFunction<@Nullable Object> level = this.heldBack;
		return (level != null) ? level.applyAsLong(key) : Long.MAX_VALUE;
	}

	@Override
	public void holdBackBy(ToLongFunction<@Nullable Object> level) {
		this.heldBack = level;
	}

	@Override
	public void whenKeyed(Consumer<KeyedBuckets> action) {
		KeyedBuckets keys;
		synchronized (this) {
			keys = this.keyed;
			if (keys == null) {
				this.whenKeyed.add(action);
				return;
			}
		}
		action.accept(keys);
	}

	@Override
	public int keys() {
		KeyedBuckets keys = this.keyed;
		return (keys != null) ? keys.size() : 0;
	}

	@Override
	public String name() {
		return this.definition.name();
	}

	@Override
	public String type() {
		return this.definition.type().value();
	}

	@Override
	public String backend() {
		return this.definition.backend().value();
	}

	@Override
	public BigDecimal rate() {
		return this.definition.rate();
	}

	@Override
	public Duration period() {
		return this.definition.period();
	}

	@Override
	public Duration maxWait() {
		return this.definition.maxWait();
	}

	@Override
	public RateLimiter limiter() {
		return this.limiter;
	}

	/**
	 * The definition in force, changed by {@link #update}.
	 *
	 * @return the definition
	 */
	BucketDefinition definition() {
		return this.definition;
	}

	/**
	 * Retunes the limiter: {@code updateLimit} and {@code updateRate} (the time that passed is counted
	 * at the old rate first); waiters keep their place. The limiter checks the values (one place per
	 * rule); a refusal changes nothing and is said in the configuration's words.
	 */
	@Override
	public synchronized void update(@Nullable BigDecimal rate, @Nullable Long limit) {
		BucketDefinition current = this.definition;
		BucketDefinition next;
		try {
			next = current.withRateAndLimit(rate, limit);
		}
		catch (RateLimitConfigurationException ex) {
			throw new IllegalArgumentException(ex.getMessage(), ex);
		}
		// the limit to put back if the rate is refused after the limit changed (a snapshot only then)
		long before = (limit != null && rate != null) ? (long) this.limiter.snapshot().limit() : 0;
		try {
			if (limit != null) {
				this.limiter.updateLimit(limit);
			}
			if (rate != null) {
				this.limiter.updateRate(next.exactRate().tokens(), next.exactRate().period());
			}
		}
		catch (IllegalArgumentException ex) {
			if (before >= 1 && limit != before) {
				this.limiter.updateLimit(before);
			}
			throw new IllegalArgumentException(CoreArguments.translate(next, ex).getMessage(), ex);
		}
		this.definition = next;
		KeyedBuckets keys = this.keyed;
		if (keys != null) {
			keys.retuned();
		}
	}

	@Override
	public String toString() {
		return "RegisteredBucket[" + name() + ", " + type() + ", " + rate() + " per " + period() + "]";
	}
}
