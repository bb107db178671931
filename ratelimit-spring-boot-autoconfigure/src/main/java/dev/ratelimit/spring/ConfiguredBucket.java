package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.time.Duration;

import dev.ratelimit.core.RateLimiter;

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
	 * Retunes the limiter: {@code updateRate} (the time that passed is counted at the old rate first) and
	 * {@code updateLimit}; waiters keep their place.
	 */
	@Override
	public synchronized void update(BigDecimal rate, Long limit) {
		BucketDefinition current = this.definition;
		BucketDefinition next;
		try {
			next = current.withRateAndLimit(rate, limit);
		}
		catch (RateLimitConfigurationException ex) {
			throw new IllegalArgumentException(ex.getMessage(), ex);
		}
		if (rate != null) {
			this.limiter.updateRate(next.exactRate().tokens(), next.exactRate().period());
		}
		if (limit != null) {
			this.limiter.updateLimit(limit);
		}
		this.definition = next;
	}

	@Override
	public String toString() {
		return "RegisteredBucket[" + name() + ", " + type() + ", " + rate() + " per " + period() + "]";
	}
}
