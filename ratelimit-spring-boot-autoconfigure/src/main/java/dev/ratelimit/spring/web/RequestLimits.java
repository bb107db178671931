package dev.ratelimit.spring.web;

import java.util.List;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.RegisteredBucket;
import dev.ratelimit.spring.engine.Limit;
import dev.ratelimit.spring.engine.Limits;
import org.jspecify.annotations.Nullable;

/**
 * The buckets of a fixed set of web rules and their costs: the engine's {@link Limits}, which take
 * from them together exactly as from the buckets of a method with several {@code @RateLimited}: from
 * every bucket or from none, in a fixed order, one wait for the longest, the longest-waiting refusing
 * bucket named, capped buckets released together.
 */
final class RequestLimits {

	private final Limits limits;

	private final long[] costs;

	/**
	 * Creates the limits of a set of rules.
	 *
	 * @param buckets the rules' buckets, in the order they are claimed
	 * @param costs each rule's cost
	 * @param keyed whether each rule has a key (then each request gives one, see {@link #acquire})
	 */
	RequestLimits(List<RegisteredBucket> buckets, long[] costs, boolean[] keyed) {
		Limit[] limits = new Limit[buckets.size()];
		for (int i = 0; i < limits.length; i++) {
			RegisteredBucket bucket = buckets.get(i);
			limits[i] = Limit.of(bucket, keyed[i], false);
		}
		this.limits = Limits.of(limits);
		this.costs = costs.clone();
	}

	/**
	 * How many buckets.
	 *
	 * @return the count
	 */
	int size() {
		return this.limits.size();
	}

	/**
	 * The name of a bucket.
	 *
	 * @param i its position
	 * @return the name
	 */
	String bucket(int i) {
		return this.limits.limit(i).bucket();
	}

	/**
	 * The cost of a bucket's rule.
	 *
	 * @param i its position
	 * @return the tokens the rule takes
	 */
	long cost(int i) {
		return this.costs[i];
	}

	/**
	 * Takes every bucket's tokens, waiting at most each bucket's max-wait (parking the thread).
	 *
	 * @param keys each bucket's key, {@code null} for a rule without a key
	 * @return the permit, to close when the response completes
	 * @throws dev.ratelimit.core.RateLimitExceededException when refused; nothing is kept
	 * @throws InterruptedException when interrupted while waiting; nothing is kept
	 */
	Permit acquire(@Nullable Object[] keys) throws InterruptedException {
		return this.limits.acquire(this.costs, keys);
	}

	/**
	 * Takes every bucket's tokens when they are all there now; otherwise takes nothing.
	 *
	 * @param keys each bucket's key, {@code null} for a rule without a key
	 * @return the permit, or {@code null} when the request must claim and wait ({@link #reserve})
	 */
	@Nullable Permit takeNow(@Nullable Object[] keys) {
		return this.limits.takeNow(this.costs, keys);
	}

	/**
	 * Claims every bucket's tokens without waiting: the non-blocking path.
	 *
	 * @param keys each bucket's key, {@code null} for a rule without a key
	 * @return the claim, to poll until ready, then turn into a permit, or cancel
	 * @throws dev.ratelimit.core.RateLimitExceededException when refused at once; nothing is kept
	 */
	Reservation reserve(@Nullable Object[] keys) {
		return this.limits.reserve(this.costs, keys);
	}

	/**
	 * The state of one bucket, for the request's key.
	 *
	 * @param i the bucket's position
	 * @param key its key, or {@code null}
	 * @return the snapshot
	 */
	RateLimiterSnapshot snapshot(int i, @Nullable Object key) {
		return this.limits.snapshot(i, key);
	}
}
