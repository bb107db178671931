package dev.ratelimit.spring.actuate;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

import com.fasterxml.jackson.annotation.JsonInclude;
import dev.ratelimit.core.Rate;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.BucketDefinition;
import dev.ratelimit.spring.RegisteredBucket;
import org.jspecify.annotations.Nullable;

/**
 * A bucket as the {@code ratelimits} endpoint shows it, from one consistent snapshot. Every field is
 * always present; {@code pools} is {@code null} for shared buckets and serialized as such.
 *
 * @param type {@code shared}, {@code hybrid} or {@code quota}
 * @param backend {@code local} or {@code redis}
 * @param rate tokens per period, as configured (or as retuned, through this instance or, for a Redis
 *        bucket, through any); a quota: its limit
 * @param period the period, ISO-8601; a quota: the length of the running calendar period
 * @param limit shared: the most tokens banked; hybrid: the active pool in operations
 * @param available tokens a caller could take now without waiting; for a bucket used with a key (its
 *        {@code keys} above 0), what a new key's bucket starts with (its limit: a key's bucket starts
 *        full), not the template's own bucket, which keyed calls never take from
 * @param deficiency tokens claimed by waiting callers but not yet there
 * @param waiting callers waiting now
 * @param inFlight tokens taken by calls that have not released them (capped release)
 * @param cappedRelease whether tokens return only when calls complete
 * @param granted calls let through since start
 * @param rejected calls refused since start
 * @param pools hybrid: the pool levels in operations; shared: {@code null}
 * @param behindSchedule hybrid: how far callers are behind, ISO-8601; shared: {@code PT0S}
 * @param mode {@code enforce}, or {@code shadow} when the bucket decides without holding calls back
 *        (its own mode, or {@code ratelimit.mode: shadow}); a key's bucket shows its template's
 * @param keys keys with a bucket of their own now (0 for a bucket never used with a key, and in the
 *        view of one key's bucket)
 * @param resetsAt quotas: the next boundary of the calendar, when the allowance is there again
 *        (ISO-8601 instant); {@code null} for every other bucket, serialized as such
 * @param shadowRejected calls the bucket would have refused in shadow mode, which ran (the meter's
 *        {@code outcome=shadow-rejected}); 0 when none; in a key's view, the bucket's (every key's calls),
 *        as {@code granted} and {@code rejected}
 * @param plan contract revision 3: in a key's view, the plan whose settings the key's bucket has;
 *        {@code null} for the bucket's own settings (no plan, an empty or unlisted one), and in a bucket's
 *        view
 * @param plans contract revision 3: the bucket's plans with their settings in force (retunes included),
 *        in configuration order; empty without plans
 * @param keysLoad contract revision 3: how full the store of the bucket's keys is, 0 to 1 (the share of
 *        the bytes its {@code keys.memory} gives live keys, in use; the same in the view of one key's
 *        bucket); 0 for a bucket never used with a key
 */
@JsonInclude(JsonInclude.Include.ALWAYS)
public record BucketView(String type, String backend, BigDecimal rate, String period, Number limit, Number available,
		Number deficiency, int waiting, Number inFlight, boolean cappedRelease, long granted, long rejected,
		@Nullable Pools pools, String behindSchedule, String mode, int keys, @Nullable String resetsAt,
		long shadowRejected, @Nullable String plan, Map<String, PlanView> plans, double keysLoad) {

	/**
	 * One plan's settings, as the bucket's view lists them.
	 *
	 * @param rate tokens per period for the keys on the plan
	 * @param period the period, ISO-8601
	 * @param limit the most tokens a key on the plan banks (hybrid: its active pool; quota: its tokens per
	 *        calendar period)
	 * @param maxWait the longest a call of a key on the plan waits, ISO-8601
	 */
	public record PlanView(BigDecimal rate, String period, Number limit, String maxWait) {
	}

	/**
	 * The pacer's pools, in operations.
	 *
	 * @param active schedule time ready to be granted
	 * @param burst schedule time recovered from the backlog
	 * @param waiting schedule time that passed unclaimed
	 */
	public record Pools(Number active, Number burst, Number waiting) {
	}

	/**
	 * The view of a bucket now.
	 *
	 * @param bucket the bucket
	 * @return its view
	 */
	public static BucketView of(RegisteredBucket bucket) {
		int keys = bucket.keys();
		BucketView view = of(bucket, bucket.limiter(), keys, null);
		if (keys == 0) {
			return view;
		}
		// a keyed template: what an operator asks is what a new key gets, a full bucket at the limit in
		// force (retunes included); the template's own bucket is never taken from by keyed calls
		return new BucketView(view.type, view.backend, view.rate, view.period, view.limit, view.limit,
				view.deficiency, view.waiting, view.inFlight, view.cappedRelease, view.granted, view.rejected,
				view.pools, view.behindSchedule, view.mode, keys, view.resetsAt, view.shadowRejected, null, view.plans,
				view.keysLoad);
	}

	/**
	 * The view of a bucket's limiter, or of one of its keys' buckets.
	 *
	 * @param bucket the bucket, for its settings as configured
	 * @param limiter the limiter shown: the bucket's, or a key's
	 * @param keys the keys count to show
	 * @return its view
	 */
	public static BucketView of(RegisteredBucket bucket, RateLimiter limiter, int keys) {
		return of(bucket, limiter, keys, null, null);
	}

	/**
	 * The view of a bucket's limiter, or of one of its keys' buckets; {@code available} is at most the level
	 * the servers' answers to outbound calls leave it (contract revision 3: 0 while paused).
	 *
	 * @param bucket the bucket, for its settings as configured
	 * @param limiter the limiter shown: the bucket's, or a key's
	 * @param keys the keys count to show
	 * @param key the key whose bucket {@code limiter} is, or {@code null} for the bucket itself
	 * @return its view
	 */
	public static BucketView of(RegisteredBucket bucket, RateLimiter limiter, int keys, @Nullable Object key) {
		return of(bucket, limiter, keys, key, null);
	}

	/**
	 * The view of one key's bucket with the plan it follows (contract revision 3, "Plans").
	 *
	 * @param bucket the bucket, for its settings as configured
	 * @param limiter the limiter shown: the bucket's, or a key's
	 * @param keys the keys count to show
	 * @param key the key whose bucket {@code limiter} is, or {@code null} for the bucket itself
	 * @param plan the plan of the key whose bucket is shown, or {@code null}
	 * @return its view
	 */
	public static BucketView of(RegisteredBucket bucket, RateLimiter limiter, int keys, @Nullable Object key,
			@Nullable String plan) {
		RateLimiterSnapshot s = limiter.snapshot();
		RateLimiterSnapshot.Pools p = s.pools();
		Pools pools = (p != null) ? new Pools(number(p.active()), number(p.burst()), number(p.waiting())) : null;
		BigDecimal rate = bucket.rate();
		Duration period = bucket.period();
		if (s.resetsAt() != null) {
			// a quota: its limit per the running calendar period (a day of 23 hours is PT23H)
			rate = BigDecimal.valueOf(s.rate());
			period = s.period();
		}
		else if (!Rate.of(s.rate(), s.period()).equals(Rate.of(rate, period))) {
			// retuned elsewhere (a Redis bucket retuned through another instance): show the rate in effect
			rate = BigDecimal.valueOf(s.rate());
			period = s.period();
		}
		double available = Math.min(s.available(), (double) bucket.heldBackTo(key));
		return new BucketView(bucket.type(), bucket.backend(), rate, period.toString(),
				number(s.limit()), number(available), number(s.deficiency()), s.waiting(), number(s.inFlight()),
				s.cappedRelease(), s.granted(), s.rejected(), pools, s.behindSchedule().toString(),
				bucket.stats().mode().value(), keys, (s.resetsAt() != null) ? s.resetsAt().toString() : null,
				bucket.stats().shadowRejected(), plan, plans(bucket), bucket.keysLoad());
	}

	/** The bucket's plans with their settings in force, in configuration order. */
	private static Map<String, PlanView> plans(RegisteredBucket bucket) {
		Map<String, BucketDefinition> plans = bucket.plans();
		if (plans.isEmpty()) {
			return Map.of();
		}
		Map<String, PlanView> views = new LinkedHashMap<>();
		plans.forEach((name, settings) -> views.put(name, new PlanView(settings.rate(), settings.period().toString(),
				limitOf(settings), settings.maxWait().toString())));
		return Collections.unmodifiableMap(views);
	}

	private static Number limitOf(BucketDefinition settings) {
		if (settings instanceof BucketDefinition.Shared shared) {
			return shared.limit();
		}
		if (settings instanceof BucketDefinition.Quota quota) {
			return quota.limit();
		}
		Long limit = ((BucketDefinition.Hybrid) settings).limit();
		return (limit != null) ? limit : 0; // (a hybrid bucket with plans always sets its limit)
	}

	/**
	 * Whole numbers as integers, others to 12 significant digits: the pacer's pools are sums and
	 * differences of doubles, and an operator reads a burst pool of 0.4, not 0.3999999999999999.
	 */
	static Number number(double value) {
		long whole = (long) value;
		if (whole == value && Math.abs(value) < 0x1p53) {
			return whole;
		}
		if (!Double.isFinite(value)) {
			return value;
		}
		double shown = new BigDecimal(value).round(SHOWN).doubleValue();
		long wholeShown = (long) shown;
		return (wholeShown == shown && Math.abs(shown) < 0x1p53) ? (Number) wholeShown : (Number) shown;
	}

	private static final java.math.MathContext SHOWN = new java.math.MathContext(12);
}
