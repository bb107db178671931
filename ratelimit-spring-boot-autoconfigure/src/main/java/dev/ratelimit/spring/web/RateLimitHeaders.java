package dev.ratelimit.spring.web;

import java.math.BigDecimal;
import java.math.RoundingMode;
import java.time.Duration;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.engine.KeyedBucketExceeded;

import org.jspecify.annotations.Nullable;

/**
 * The IETF draft's rate-limit fields (draft-ietf-httpapi-ratelimit-headers):
 * {@code RateLimit-Policy: "<bucket>";q=<limit>;w=<seconds for limit tokens>} and
 * {@code RateLimit: "<bucket>";r=<tokens left>;t=<seconds until full>}, for the bucket closest to
 * refusing: the fewest tokens left, and on a tie the longest time until full. Seconds are whole,
 * rounded up; tokens left are whole, rounded down. For a calendar quota (revision 3), {@code t} is the
 * time until its next boundary and {@code w} the length of the running calendar period.
 *
 * <p>On a 429 the fields describe the refusing bucket as it was when it refused ({@link #atRefusal}):
 * they are read from a snapshot taken after the refusal, and a token may have arrived in between (or
 * the bucket may be full again), but at the refusal it held fewer tokens than the call's cost. So a
 * 429 says {@code r} at most cost &minus; 1 (0 for a call of one token; the cost of a web request is
 * what all its rules naming the refusing bucket ask of it), and {@code t} at least the
 * {@code Retry-After} seconds (whole, rounded up, at least 1): a bucket that refused a cost within its
 * limit is not full, and it is full no sooner than it holds the cost. (A cost above the limit is
 * refused by a full bucket as well; its {@code t} is left as read.) {@code Retry-After} itself is the
 * refusal's wait, as the bucket computed it at the refusal.
 */
public final class RateLimitHeaders {

	/** The policy field's name. */
	public static final String POLICY = "RateLimit-Policy";

	/** The field's name. */
	public static final String LIMIT = "RateLimit";

	/**
	 * The request (or exchange) attribute under which a web rule leaves the {@link Level} of the fields it
	 * set, so that an annotated controller method compares its own with the exact level, not with the
	 * whole seconds the field carries.
	 */
	static final String LEVEL_ATTRIBUTE = RateLimitHeaders.class.getName() + ".level";

	private RateLimitHeaders() {
	}

	/**
	 * One bucket's level as the fields give it.
	 *
	 * @param bucket the bucket
	 * @param quota the limit ({@code q})
	 * @param window seconds for {@code quota} tokens at the rate ({@code w})
	 * @param remaining tokens left ({@code r})
	 * @param reset seconds until full ({@code t}): {@code untilFull} rounded up to a whole second
	 * @param untilFull how long until full, exactly (counting the part of the next token already made):
	 *        on a tie of {@code remaining}, the level longer until full is the closer to refusing
	 */
	public record Level(String bucket, long quota, long window, long remaining, long reset, Duration untilFull) {

		/**
		 * The {@code RateLimit-Policy} value.
		 *
		 * @return the value
		 */
		public String policy() {
			return "\"" + this.bucket + "\";q=" + this.quota + ";w=" + this.window;
		}

		/**
		 * The {@code RateLimit} value.
		 *
		 * @return the value
		 */
		public String limit() {
			return "\"" + this.bucket + "\";r=" + this.remaining + ";t=" + this.reset;
		}

		/** Whether this level is closer to refusing than {@code other}. */
		boolean closerThan(@Nullable Level other) {
			if (other == null) {
				return true;
			}
			if (this.remaining != other.remaining) {
				return this.remaining < other.remaining;
			}
			return this.untilFull.compareTo(other.untilFull) > 0;
		}
	}

	/**
	 * The level of a bucket from its snapshot.
	 *
	 * @param bucket the bucket
	 * @param s its snapshot
	 * @return the level
	 */
	public static Level level(String bucket, RateLimiterSnapshot s) {
		// tokens * period / rate, in seconds, rounded up: exact (no rounded per-token interval)
		BigDecimal perPeriod = BigDecimal.valueOf(s.rate()).multiply(BigDecimal.valueOf(1_000_000_000L));
		BigDecimal period = BigDecimal.valueOf(s.period().toNanos());
		BigDecimal limit = new BigDecimal(s.limit());
		long window = seconds(limit.multiply(period), perPeriod);
		// a quota (revision 3): t is the time until its next boundary, whatever it holds, and w the running
		// calendar period's length (its rate is its limit per that period, so the window above is that)
		Duration untilFull = (s.resetsAt() != null) ? s.untilReset() : s.untilFull();
		long reset = untilFull.getSeconds() + ((untilFull.getNano() > 0) ? 1 : 0);
		return new Level(bucket, (long) s.limit(), window, (long) Math.floor(s.available()), reset, untilFull);
	}

	/**
	 * A refusing bucket's level read after the refusal, as it was at the refusal: {@code r} at most the
	 * refused cost &minus; 1, {@code t} (and the exact time until full) at least the refusal's wait, so at
	 * least the {@code Retry-After} seconds and never 0. A cost above the bucket's limit is refused by a
	 * full bucket too: then only {@code r} is bounded.
	 *
	 * @param level the level read after the refusal
	 * @param refusal the refusal (the named bucket's wait)
	 * @param cost the tokens the call asked of the refusing bucket: the refusal's cost, or with several
	 *        claims of one request on that bucket (several rules naming it), all of them
	 * @return the level the 429 gives
	 */
	static Level atRefusal(Level level, RateLimitExceededException refusal, long cost) {
		long remaining = Math.min(level.remaining(), Math.max(cost - 1, 0));
		if (cost > level.quota()) {
			// more than the bucket holds: a full bucket refuses it, and then it is full (t=0 is true)
			return (remaining == level.remaining()) ? level
					: new Level(level.bucket(), level.quota(), level.window(), remaining, level.reset(), level.untilFull());
		}
		Duration wait = refusal.getRetryAfter();
		Duration untilFull = (level.untilFull().compareTo(wait) < 0) ? wait : level.untilFull();
		long reset = Math.max(level.reset(), TooManyRequests.retryAfterSeconds(wait));
		if (remaining == level.remaining() && reset == level.reset() && untilFull == level.untilFull()) {
			return level;
		}
		return new Level(level.bucket(), level.quota(), level.window(), remaining, reset, untilFull);
	}

	private static final Pattern REMAINING = Pattern.compile(";r=([0-9]+);t=([0-9]+)");

	/**
	 * The level a {@code RateLimit} value already on a response gives (a web rule's), to compare with.
	 *
	 * @param value the field's value, or {@code null}
	 * @return its level (remaining and reset only), or {@code null} when there is none
	 */
	private static @Nullable Level parse(@Nullable String value) {
		if (value == null) {
			return null;
		}
		Matcher matcher = REMAINING.matcher(value);
		if (!matcher.find()) {
			return null;
		}
		long reset = Long.parseLong(matcher.group(2));
		return new Level("", 0, 0, Long.parseLong(matcher.group(1)), reset, Duration.ofSeconds(reset));
	}

	/**
	 * The bucket closest to refusing of a request's rules, after it took its tokens.
	 *
	 * @param limits the rules' buckets
	 * @param keys each bucket's key
	 * @return its level
	 */
	static Level closest(RequestLimits limits, @Nullable Object[] keys) {
		Level closest = null;
		for (int i = 0; i < limits.size(); i++) {
			closest = closer(closest, level(limits.bucket(i), limits.snapshot(i, keys[i])));
		}
		return closest;
	}

	/**
	 * The refusing bucket's level, for a 429's fields. The contract gives the fields of "the bucket
	 * closest to refusing"; on a 429 that is read as the bucket that refused (the one the problem detail
	 * names, whose wait was longest), so that the fields say why the request was refused and agree with
	 * {@code Retry-After}, even when another of the request's buckets has fewer tokens left but enough
	 * for its own cost. For a keyed rule, the bucket that refused: the key's own, or the overflow bucket
	 * (never a bucket made for the key just to read it).
	 *
	 * @param limits the rules' buckets
	 * @param keys each bucket's key
	 * @param refusal the refusal, naming the bucket
	 * @return its level, or {@code null} when it is none of them
	 */
	static @Nullable Level refusing(RequestLimits limits, @Nullable Object[] keys, RateLimitExceededException refusal) {
		for (int i = 0; i < limits.size(); i++) {
			if (limits.bucket(i).equals(refusal.getBucket())) {
				RateLimiter refusedBy = KeyedBucketExceeded.refusedBy(refusal);
				Level level = level(limits.bucket(i),
						(refusedBy != null) ? refusedBy.snapshot() : limits.snapshot(i, keys[i]));
				// every claim of the request on that bucket with that key: the earlier ones took their
				// tokens before the refusing one found too few
				long asked = 0;
				for (int j = 0; j < limits.size(); j++) {
					if (limits.bucket(j).equals(refusal.getBucket()) && Objects.equals(
							(keys[j] != null) ? String.valueOf(keys[j]) : null, refusal.getKey())) {
						asked += limits.cost(j);
					}
				}
				return atRefusal(level, refusal, Math.max(asked, refusal.getCost()));
			}
		}
		return null;
	}

	/**
	 * What an annotated controller method's response gets: the level of the closest of its buckets,
	 * unless the response already carries one (a web rule's) closer still.
	 *
	 * @param buckets the buckets' names
	 * @param levels their states
	 * @param rule the level a web rule of the request left ({@link #LEVEL_ATTRIBUTE}), or {@code null}
	 * @param present the {@code RateLimit} value already on the response, or {@code null}: read when no
	 *        rule left its level (its {@code t} is whole seconds, so a tie is decided on them)
	 * @return the level to send, or {@code null} to leave the response as it is
	 */
	static @Nullable Level toSend(String[] buckets, RateLimiterSnapshot[] levels, @Nullable Object rule,
			@Nullable String present) {
		Level closest = null;
		for (int i = 0; i < buckets.length; i++) {
			closest = closer(closest, level(buckets[i], levels[i]));
		}
		Level other = (rule instanceof Level level) ? level : parse(present);
		return closest.closerThan(other) ? closest : null;
	}

	/**
	 * The closer to refusing of two levels.
	 *
	 * @param a a level, or {@code null}
	 * @param b another
	 * @return the closer one
	 */
	public static Level closer(@Nullable Level a, Level b) {
		return b.closerThan(a) ? b : a;
	}

	private static long seconds(BigDecimal numerator, BigDecimal denominator) {
		return numerator.divide(denominator, 0, RoundingMode.CEILING).longValueExact();
	}
}
