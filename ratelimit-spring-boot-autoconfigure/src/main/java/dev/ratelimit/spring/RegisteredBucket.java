package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.ToLongFunction;

import dev.ratelimit.core.RateLimiter;
import org.jspecify.annotations.Nullable;

/**
 * A bucket of the application as it was configured, with the limiter that enforces it.
 */
public interface RegisteredBucket {

	/**
	 * The bucket's name, the key under {@code ratelimit.buckets}.
	 *
	 * @return the name
	 */
	String name();

	/**
	 * The kind of limiter.
	 *
	 * @return {@code "shared"} (the rover bucket) or {@code "hybrid"} (the pacer)
	 */
	String type();

	/**
	 * Where the bucket's state lives.
	 *
	 * @return {@code "local"} or {@code "redis"}
	 */
	String backend();

	/**
	 * The rate as configured (possibly fractional), in tokens per {@link #period()}.
	 *
	 * @return the configured rate
	 */
	BigDecimal rate();

	/**
	 * The period of the rate as configured.
	 *
	 * @return the configured period
	 */
	Duration period();

	/**
	 * The longest a caller waits for tokens when its annotation does not say otherwise.
	 *
	 * @return the bucket's max-wait, {@link Duration#ZERO} for never
	 */
	Duration maxWait();

	/**
	 * The bucket's statistics and mode (contract revision 2: shadow mode), shared by every limiter of
	 * the bucket. For a limiter bean the application defined itself, the mode only.
	 *
	 * @return the statistics
	 */
	BucketStats stats();

	/**
	 * The limiter that enforces the bucket (the bean named after the bucket).
	 *
	 * @return the limiter
	 */
	RateLimiter limiter();

	/**
	 * Changes the bucket in place, keeping its state and its waiters: the period stays as configured.
	 * Values are checked as the configuration checks them.
	 *
	 * @param rate the new rate per {@link #period()}, or {@code null} to keep it
	 * @param limit the new limit, or {@code null} to keep it
	 * @throws IllegalArgumentException with the message the configuration would give, naming the
	 *         bucket, the property and the accepted values; nothing is changed then
	 */
	void update(BigDecimal rate, Long limit);

	/**
	 * Puts the bucket back to full (contract revision 3): its limiter ({@link RateLimiter#reset()}) and, for a
	 * bucket used with keys, every key's bucket, which is dropped (one still in use is made full and dropped
	 * once idle), and the overflow bucket.
	 *
	 * @throws dev.ratelimit.core.BackendUnavailableException when the bucket's backend does not answer
	 */
	default void reset() {
		limiter().reset();
	}

	/**
	 * The bucket's plans (contract revision 3, "Plans"): each plan's settings in force, the bucket's
	 * where the plan sets none, retunes included.
	 *
	 * @return the plans by name, in configuration order; empty for a bucket without plans
	 */
	default Map<String, BucketDefinition> plans() {
		return Map.of();
	}

	/**
	 * The plans whose keys' calls are in shadow mode (a plan's {@code mode: shadow}, contract revision 3,
	 * "Plans"), whatever the bucket's own mode.
	 *
	 * @return the plans' names; empty for none
	 */
	default java.util.Set<String> shadowPlans() {
		return java.util.Set.of();
	}

	/**
	 * The application's {@link RateLimitPlanResolver}, for a bucket with plans whose call does not name
	 * a plan itself (contract revision 3, "Plans"). Looked up once, when a front end resolves its calls.
	 *
	 * @return the resolver, or {@code null} when the application defines none or the bucket has no plans
	 */
	default @org.jspecify.annotations.Nullable RateLimitPlanResolver planResolver() {
		return null;
	}

	/**
	 * Retunes one plan (contract revision 3, "Plans"): every key's bucket on that plan, and no other,
	 * takes the new settings as of now, keeping its tokens as a retune does.
	 *
	 * @param plan the plan's name
	 * @param rate the new rate per the plan's period, or {@code null} to keep it
	 * @param limit the new limit, or {@code null} to keep it
	 * @throws IllegalArgumentException naming the bucket and the plan when the bucket has no such plan, or
	 *         with the message the configuration would give; nothing is changed then
	 */
	default void update(String plan, BigDecimal rate, Long limit) {
		throw new IllegalArgumentException("Bucket '" + name() + "' has no plans");
	}

	/**
	 * The buckets of this bucket's keys, made on first use of the bucket with a key.
	 *
	 * @return the per-key buckets
	 * @throws RateLimitConfigurationException when the bucket cannot be used with a key
	 */
	KeyedBuckets keyed();

	/**
	 * Keys with a bucket of their own now.
	 *
	 * @return the count, 0 for a bucket never used with a key
	 */
	int keys();

	/**
	 * How full the store of this bucket's keys is (revision 3): the share of {@code keys.memory} in use.
	 *
	 * @return {@code 0..1}, 0 for a bucket never used with a key
	 */
	default double keysLoad() {
		return 0;
	}

	/**
	 * Runs {@code action} with the per-key buckets once the bucket is used with a key (at once if it
	 * already is): how the meters of keyed buckets are bound.
	 *
	 * @param action what to run
	 */
	void whenKeyed(Consumer<KeyedBuckets> action);

	/**
	 * The level something outside the bucket holds its calls to now (contract revision 3: what the servers
	 * answered to outbound calls: {@code 0} while paused, the lowered level while lowered), for the views'
	 * {@code available}.
	 *
	 * @param key the key, or {@code null} for the bucket itself
	 * @return the level, {@code Long.MAX_VALUE} when nothing holds the bucket back
	 */
	default long heldBackTo(@Nullable Object key) {
		return Long.MAX_VALUE;
	}

	/**
	 * Sets what holds the bucket's calls back beyond its own tokens (the outbound rules' gates), read by
	 * {@link #heldBackTo(Object)}. Replaces the one set before.
	 *
	 * @param level the level per key ({@code null} for the bucket itself)
	 */
	default void holdBackBy(ToLongFunction<@Nullable Object> level) {
		throw new UnsupportedOperationException("bucket '" + name() + "' cannot be held back");
	}
}
