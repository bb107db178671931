package dev.ratelimit.core;

import java.time.Duration;
import java.util.function.LongSupplier;

import org.jspecify.annotations.Nullable;

/**
 * What the builders of every limiter share: the name, the rate, the limit, the clock and the statistics.
 *
 * @param <B> the concrete builder, returned by every setter
 */
public abstract class RateLimiterBuilder<B extends RateLimiterBuilder<B>> {

	/** The default clock; monotonic within a JVM. */
	static final LongSupplier NANO_TIME = System::nanoTime;

	@Nullable String name;

	long tokens;

	@Nullable Duration period;

	LongSupplier clock = NANO_TIME;

	StatsRecorder stats = StatsRecorder.disabled();

	@Nullable Long limit;

	/**
	 * For the builders of this package and of backend modules (whose limiters take the same name, rate,
	 * clock and statistics).
	 */
	protected RateLimiterBuilder() {
	}

	/**
	 * Names the limiter; the name is carried by {@link RateLimitExceededException}.
	 *
	 * @param name the name, may be {@code null}
	 * @return this builder
	 */
	public B name(@Nullable String name) {
		this.name = name;
		return self();
	}

	/**
	 * The rate: {@code tokens} (for the pacer: operations) per {@code period}, both {@code > 0}.
	 *
	 * @param tokens tokens per period
	 * @param period the period
	 * @return this builder
	 */
	public B rate(long tokens, Duration period) {
		this.tokens = tokens;
		this.period = period;
		return self();
	}

	/**
	 * The rate.
	 *
	 * @param rate the rate
	 * @return this builder
	 */
	public B rate(Rate rate) {
		return rate(rate.tokens(), rate.period());
	}

	/**
	 * The most the limiter banks, {@code 1..2^50}: tokens for a bucket, operations in the active pool for
	 * the pacer (the largest claim is 2^50 too: a limiter whose full contents could not be taken at once
	 * is a trap). Each limiter documents its default; {@code build()} fails naming {@code limit} for one
	 * out of range, given or by default.
	 *
	 * @param limit the limit
	 * @return this builder
	 */
	public B limit(long limit) {
		this.limit = limit;
		return self();
	}

	/**
	 * The nanosecond clock; default {@code System::nanoTime}.
	 *
	 * @param nanoClock the clock
	 * @return this builder
	 */
	public B clock(LongSupplier nanoClock) {
		if (nanoClock == null) {
			throw new InvalidArgumentException("clock", null, null, null, "clock must not be null");
		}
		this.clock = nanoClock;
		return self();
	}

	/**
	 * Where granted and refused calls are counted; default {@link StatsRecorder#disabled()}.
	 *
	 * @param stats the recorder
	 * @return this builder
	 */
	public B stats(StatsRecorder stats) {
		if (stats == null) {
			throw new InvalidArgumentException("stats", null, null, null, "stats must not be null");
		}
		this.stats = stats;
		return self();
	}

	/**
	 * The name given.
	 *
	 * @return the name, or {@code null}
	 */
	protected final @Nullable String limiterName() {
		return this.name;
	}

	/**
	 * The rate given, checked.
	 *
	 * @return the rate
	 * @throws IllegalArgumentException naming the argument when it is missing or out of range
	 */
	protected final Rate limiterRate() {
		return rate();
	}

	/**
	 * The clock given.
	 *
	 * @return the clock
	 */
	protected final LongSupplier limiterClock() {
		return this.clock;
	}

	/**
	 * The statistics recorder given.
	 *
	 * @return the recorder
	 */
	protected final StatsRecorder limiterStats() {
		return this.stats;
	}

	/**
	 * The limit given.
	 *
	 * @return the limit, or {@code null} for the limiter's default
	 */
	protected final @Nullable Long limiterLimit() {
		return this.limit;
	}

	/** The rate given, checked. */
	Rate rate() {
		if (this.period == null && this.tokens == 0) {
			throw new InvalidArgumentException("rate", null, null, null, "rate must be set: rate(tokens, period) with both > 0");
		}
		return Rate.of(this.tokens, this.period);
	}

	@SuppressWarnings("unchecked")
	private B self() {
		return (B) this;
	}
}
