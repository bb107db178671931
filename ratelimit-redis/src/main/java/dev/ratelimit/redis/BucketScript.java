package dev.ratelimit.redis;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.core.Rate;

/**
 * The bucket's script protocol: the Lua source ({@code bucket.lua}, documented in the module's
 * README for services in other languages), its SHA-1 for {@code EVALSHA}, the arguments of each mode
 * and the reply.
 *
 * <p>The script keeps the bucket in integers: the rate is exactly {@code A} tokens per {@code B}
 * microseconds (reduced), and the remainder of a token is kept in units of {@code 1/B}. Lua numbers
 * are doubles, exact below 2^53; {@link Settings} refuses a limit, a cost or a max-wait whose
 * products with {@code A} or {@code B} could reach {@link #MAX_EXACT}, so the script's arithmetic is
 * exact for every call it is given.
 */
final class BucketScript {

	/** The largest product the script computes, with room below 2^53 for the sums of a few of them. */
	static final long MAX_EXACT = 1L << 50;

	static final String SOURCE = load("dev/ratelimit/redis/bucket.lua");

	static final String SHA1 = sha1(SOURCE);

	private BucketScript() {
	}

	/** What a call asks of the script. */
	enum Mode {

		/** Take {@code n} tokens, waiting at most {@code maxwait}, or refuse. */
		ACQUIRE("acquire"),
		/** Give {@code n} tokens back (a claim given up); capped: also out of flight. */
		REFUND("refund"),
		/** Capped release of {@code n} tokens. */
		RELEASE("release"),
		/** Bank the time that passed (before a change of rate). */
		SYNC("sync"),
		/** Read the level without writing. */
		PEEK("peek");

		final String argument;

		Mode(String argument) {
			this.argument = argument;
		}
	}

	/**
	 * The rate as {@code a} tokens per {@code b} microseconds, reduced, with the bucket's limit and
	 * whether its release is capped: what every call sends.
	 */
	record Settings(Rate rate, long limit, boolean capped, long a, long b) {

		static Settings of(Rate rate, long limit, boolean capped, String bucket) {
			if (limit < 1) {
				throw new IllegalArgumentException("limit must be >= 1, was " + limit);
			}
			long[] perMicro = rate.per(Duration.ofNanos(1000));
			long a = perMicro[0];
			long b = perMicro[1];
			if (a >= MAX_EXACT || b >= MAX_EXACT / limit) {
				throw new IllegalArgumentException("Redis bucket '" + bucket + "': limit " + limit + " with " + rate
						+ " is too fine for exact arithmetic in Redis (Lua numbers are doubles, exact below 2^53); use"
						+ " a coarser period or a smaller limit");
			}
			return new Settings(rate, limit, capped, a, b);
		}

		/** The largest cost a call may ask for: its tokens in units of {@code 1/b} stay exact. */
		long maxCost() {
			return MAX_EXACT / this.b;
		}

		/**
		 * A max-wait in whole microseconds, at most what keeps the debt of the waiting callers exact
		 * (the script never lets a caller wait longer than this, so nothing is lost by the bound).
		 */
		long maxWaitMicros(long budgetNanos) {
			long micros = TimeUnit.NANOSECONDS.toMicros(budgetNanos);
			return Math.min(micros, MAX_EXACT / this.a);
		}

		Settings withRate(Rate next, String bucket) {
			return of(next, this.limit, this.capped, bucket);
		}

		Settings withLimit(long next, String bucket) {
			return of(this.rate, next, this.capped, bucket);
		}

		String[] arguments(Mode mode, long n, long maxWaitMicros) {
			return new String[] { Long.toString(this.a), Long.toString(this.b), Long.toString(this.limit),
					Long.toString(n), Long.toString(maxWaitMicros), this.capped ? "1" : "0", mode.argument };
		}
	}

	/**
	 * The script's answer.
	 *
	 * @param code 1 granted after {@code waitMicros}, 0 refused ({@code waitMicros} is what was needed),
	 *        2 capped and waiting for releases (nothing taken), 3 any other mode
	 * @param waitMicros see {@code code}
	 * @param level tokens available (negative: claimed by waiting callers)
	 * @param remainder credit units short of the next token
	 * @param inFlight capped tokens not released
	 */
	record Reply(long code, long waitMicros, long level, long remainder, long inFlight) {

		static final long REFUSED = 0;

		static final long GRANTED = 1;

		static final long AWAITING_RELEASE = 2;

		static Reply of(List<?> values) {
			if (values == null || values.size() != 5) {
				throw new IllegalStateException("Unexpected reply from the bucket script: " + values);
			}
			return new Reply(number(values.get(0)), number(values.get(1)), number(values.get(2)),
					number(values.get(3)), number(values.get(4)));
		}

		private static long number(Object value) {
			if (value instanceof Number number) {
				return number.longValue();
			}
			throw new IllegalStateException("Unexpected value in a reply from the bucket script: " + value);
		}

		boolean granted() {
			return this.code == GRANTED;
		}
	}

	private static String load(String resource) {
		try (InputStream in = BucketScript.class.getClassLoader().getResourceAsStream(resource)) {
			if (in == null) {
				throw new IllegalStateException("Missing " + resource + " on the class path");
			}
			return new String(in.readAllBytes(), StandardCharsets.UTF_8);
		}
		catch (IOException ex) {
			throw new UncheckedIOException(ex);
		}
	}

	private static String sha1(String text) {
		try {
			return HexFormat.of()
				.formatHex(MessageDigest.getInstance("SHA-1").digest(text.getBytes(StandardCharsets.UTF_8)));
		}
		catch (NoSuchAlgorithmException ex) {
			throw new IllegalStateException(ex);
		}
	}
}
