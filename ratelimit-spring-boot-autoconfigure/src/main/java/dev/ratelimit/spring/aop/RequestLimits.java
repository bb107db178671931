package dev.ratelimit.spring.aop;

import java.util.List;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.RegisteredBucket;
import org.jspecify.annotations.Nullable;

/**
 * The buckets of a fixed set of web rules, taken from together exactly as the buckets of a method
 * with several {@code @RateLimited} are: from every bucket or from none, in a fixed order, one wait for
 * the longest, the longest-waiting refusing bucket named, capped buckets released together. For the
 * starter's web filters.
 */
public final class RequestLimits {

	private final Limit[] limits;

	private final long[] costs;

	private final InvocationPlan plan;

	/**
	 * Creates the limits of a set of rules.
	 *
	 * @param buckets the rules' buckets, in the order they are claimed
	 * @param costs each rule's cost
	 * @param keyed whether each rule has a key (then each request gives one, see {@link #acquire})
	 */
	public RequestLimits(List<RegisteredBucket> buckets, long[] costs, boolean[] keyed) {
		this.limits = new Limit[buckets.size()];
		for (int i = 0; i < this.limits.length; i++) {
			this.limits[i] = Limit.forRule(buckets.get(i), costs[i], keyed[i]);
		}
		this.costs = costs.clone();
		this.plan = InvocationPlan.of(this.limits);
	}

	/**
	 * How many buckets.
	 *
	 * @return the count
	 */
	public int size() {
		return this.limits.length;
	}

	/**
	 * The name of a bucket.
	 *
	 * @param i its position
	 * @return the name
	 */
	public String bucket(int i) {
		return this.limits[i].bucket;
	}

	/**
	 * The cost of a bucket's rule.
	 *
	 * @param i its position
	 * @return the tokens the rule takes
	 */
	public long cost(int i) {
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
	public Permit acquire(@Nullable Object[] keys) throws InterruptedException {
		return this.plan.acquire(this.costs, keys);
	}

	/**
	 * Claims every bucket's tokens without waiting: the non-blocking path.
	 *
	 * @param keys each bucket's key, {@code null} for a rule without a key
	 * @return the claim, to poll until ready, then turn into a permit, or cancel
	 * @throws dev.ratelimit.core.RateLimitExceededException when refused at once; nothing is kept
	 */
	public Reservation reserve(@Nullable Object[] keys) {
		return this.plan.reserve(this.costs, keys);
	}

	/**
	 * The state of one bucket, for the request's key.
	 *
	 * @param i the bucket's position
	 * @param key its key, or {@code null}
	 * @return the snapshot
	 */
	public RateLimiterSnapshot snapshot(int i, @Nullable Object key) {
		return this.limits[i].snapshot(key);
	}
}
