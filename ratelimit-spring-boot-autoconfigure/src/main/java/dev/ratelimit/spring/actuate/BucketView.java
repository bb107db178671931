package dev.ratelimit.spring.actuate;

import java.math.BigDecimal;
import java.time.Duration;

import com.fasterxml.jackson.annotation.JsonInclude;
import dev.ratelimit.core.Rate;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.RegisteredBucket;

/**
 * A bucket as the {@code ratelimits} endpoint shows it, from one consistent snapshot. Every field is
 * always present; {@code pools} is {@code null} for shared buckets and serialized as such.
 *
 * @param type {@code shared} or {@code hybrid}
 * @param backend {@code local} or {@code redis}
 * @param rate tokens per period, as configured (or as retuned, through this instance or, for a Redis
 *        bucket, through any)
 * @param period the period, ISO-8601
 * @param limit shared: the most tokens banked; hybrid: the active pool in operations
 * @param available tokens a caller could take now without waiting
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
 * @param keysLoad revision 3: how full the store of the bucket's keys is, 0 to 1 (the share of its
 *        {@code keys.memory} in use; the same in the view of one key's bucket); 0 for a bucket never used
 *        with a key
 */
@JsonInclude(JsonInclude.Include.ALWAYS)
public record BucketView(String type, String backend, BigDecimal rate, String period, Number limit, Number available,
		Number deficiency, int waiting, Number inFlight, boolean cappedRelease, long granted, long rejected,
		Pools pools, String behindSchedule, String mode, int keys, double keysLoad) {

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
		return of(bucket, bucket.limiter(), bucket.keys());
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
		RateLimiterSnapshot s = limiter.snapshot();
		RateLimiterSnapshot.Pools p = s.pools();
		Pools pools = (p != null) ? new Pools(number(p.active()), number(p.burst()), number(p.waiting())) : null;
		BigDecimal rate = bucket.rate();
		Duration period = bucket.period();
		if (!Rate.of(s.rate(), s.period()).equals(Rate.of(rate, period))) {
			// retuned elsewhere (a Redis bucket retuned through another instance): show the rate in effect
			rate = BigDecimal.valueOf(s.rate());
			period = s.period();
		}
		return new BucketView(bucket.type(), bucket.backend(), rate, period.toString(),
				number(s.limit()), number(s.available()), number(s.deficiency()), s.waiting(), number(s.inFlight()),
				s.cappedRelease(), s.granted(), s.rejected(), pools, s.behindSchedule().toString(),
				bucket.stats().mode().value(), keys, bucket.keysLoad());
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
