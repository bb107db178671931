package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.time.Duration;

import dev.ratelimit.core.RateLimiter;
import org.jspecify.annotations.Nullable;

/**
 * A configured bucket and its limiter; {@link #update} retunes the limiter in place.
 */
final class ConfiguredBucket implements RegisteredBucket {

	private final RateLimiter limiter;

	private volatile BucketDefinition definition;

	ConfiguredBucket(BucketDefinition definition, RateLimiter limiter) {
		this.definition = definition;
		this.limiter = limiter;
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
		long before = (long) this.limiter.snapshot().limit();
		try {
			if (limit != null) {
				this.limiter.updateLimit(limit);
			}
			if (rate != null) {
				this.limiter.updateRate(next.exactRate().tokens(), next.exactRate().period());
			}
		}
		catch (IllegalArgumentException ex) {
			if (limit != null && limit != before && before >= 1) {
				this.limiter.updateLimit(before);
			}
			throw new IllegalArgumentException(CoreArguments.translate(next, ex).getMessage(), ex);
		}
		this.definition = next;
	}

	@Override
	public String toString() {
		return "RegisteredBucket[" + name() + ", " + type() + ", " + rate() + " per " + period() + "]";
	}
}
