package dev.ratelimit.core;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.time.Duration;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.jspecify.annotations.Nullable;

/**
 * An exact rate: a whole number of tokens per period, held as the reduced fraction
 * {@code numerator / denominator} tokens per nanosecond, so that no remainder is ever rounded away
 * however often or seldom time is turned into tokens.
 *
 * <pre>{@code
 * Rate rate = Rate.of(new BigDecimal("2.5"), Duration.ofSeconds(1)); // 5 per PT2S
 * long due = rate.due(start, 0, now);                               // whole tokens earned since start
 * long at = rate.instantOf(start, 0, due + 1);                      // when the next one is earned
 * }</pre>
 *
 * <p>An <em>epoch</em> {@code (start, base)} turns time into a token count:
 * {@code due(t) = base + floor((t - start) * numerator / denominator)}. Both limiters of this package
 * count time this way, so that a greedy caller gets exactly the rate whatever the cadence of its calls;
 * the products are carried in 128 bits, so no argument overflows.
 *
 * <p>Instances are immutable and compare equal when they are the same rate ({@code 2.5} per second
 * equals {@code 5} per two seconds).
 */
public final class Rate {

	private static final Pattern DECIMAL = Pattern.compile("\\s*([0-9]+(?:\\.[0-9]+)?)\\s*([kKmMgG]?)\\s*");

	private static final String DECIMAL_FORM = "<number>[K|M|G] per second, e.g. \"2.5\", \"12000\" or \"12K\"";

	private static final long NANOS_PER_SECOND = 1_000_000_000L;

	private final long tokens;

	private final Duration period;

	private final long numerator;

	private final long denominator;

	/** The most nanoseconds whose tokens fit in a long, for a whole number of tokens per nanosecond. */
	private final long mostWholeNanos;

	private Rate(long tokens, Duration period, long periodNanos) {
		long g = Arithmetic.gcd(tokens, periodNanos);
		this.tokens = tokens;
		this.period = period;
		this.numerator = tokens / g;
		this.denominator = periodNanos / g;
		this.mostWholeNanos = Long.MAX_VALUE / this.numerator;
	}

	/**
	 * {@code tokens} per {@code period}.
	 *
	 * @param tokens whole tokens per period, {@code > 0}
	 * @param period the period, {@code > 0} and at most {@code Long.MAX_VALUE} nanoseconds (292 years)
	 * @return the rate
	 * @throws IllegalArgumentException naming {@code rate} or {@code period} when out of range
	 */
	public static Rate of(long tokens, Duration period) {
		long periodNanos = Arithmetic.periodNanos(period, "period");
		if (tokens <= 0) {
			throw new InvalidArgumentException("rate", tokens, 1L, null, "rate must be > 0 tokens per period, was " + tokens);
		}
		return new Rate(tokens, period, periodNanos);
	}

	/**
	 * {@code tokens} per second.
	 *
	 * @param tokens whole tokens per second, {@code > 0}
	 * @return the rate
	 */
	public static Rate perSecond(long tokens) {
		return of(tokens, Duration.ofSeconds(1));
	}

	/**
	 * A possibly fractional number of tokens per {@code period}, kept exact: {@code 2.5} per second is
	 * {@code 5} per two seconds.
	 *
	 * @param tokens tokens per period, {@code > 0}
	 * @param period the period, {@code > 0}
	 * @return the rate
	 * @throws IllegalArgumentException naming {@code rate} or {@code period} when out of range, or when
	 *         the rate has no exact form as whole tokens per a whole number of nanoseconds that fit in
	 *         63 bits
	 */
	public static Rate of(BigDecimal tokens, Duration period) {
		Arithmetic.periodNanos(period, "period");
		if (tokens == null || tokens.signum() <= 0) {
			throw new InvalidArgumentException("rate", tokens, null, null, "rate must be > 0 tokens per period, was " + tokens);
		}
		BigDecimal stripped = tokens.stripTrailingZeros();
		int scale = Math.max(stripped.scale(), 0);
		BigInteger whole = stripped.movePointRight(scale).toBigIntegerExact();
		if (scale == 0) {
			if (whole.bitLength() > 62) {
				throw new InvalidArgumentException("rate", tokens, null, BigDecimal.valueOf(1L << 62),
						"rate must be at most 2^62 tokens per period, was " + tokens);
			}
			return of(whole.longValueExact(), period);
		}
		BigInteger nanos = BigInteger.valueOf(period.getSeconds())
			.multiply(BigInteger.valueOf(NANOS_PER_SECOND))
			.add(BigInteger.valueOf(period.getNano()))
			.multiply(BigInteger.TEN.pow(scale));
		BigInteger gcd = whole.gcd(nanos);
		BigInteger wholeTokens = whole.divide(gcd);
		BigInteger periodNanos = nanos.divide(gcd);
		if (wholeTokens.bitLength() > 62 || periodNanos.bitLength() > 62) {
			throw new InvalidArgumentException("rate", tokens, null, null, "rate " + tokens.toPlainString() + " per " + period
					+ " has no exact form in whole tokens per whole nanoseconds; give it with fewer digits");
		}
		long p = periodNanos.longValueExact();
		return new Rate(wholeTokens.longValueExact(), Duration.ofNanos(p), p);
	}

	/**
	 * A rate per second in the form {@code <number>[K|M|G]}: a whole or decimal number of tokens per
	 * second, with an optional {@code K} (thousand), {@code M} (million) or {@code G} (billion) suffix.
	 *
	 * @param spec the rate, e.g. {@code "2.5"}, {@code "12000"} or {@code "12K"}
	 * @return the rate
	 * @throws IllegalArgumentException showing the accepted form, for anything else
	 */
	public static Rate parse(@Nullable String spec) {
		Matcher m = (spec != null) ? DECIMAL.matcher(spec) : null;
		if (m == null || !m.matches()) {
			throw new InvalidArgumentException("rate", spec, null, null, "Invalid rate \"" + spec + "\": expected " + DECIMAL_FORM);
		}
		BigDecimal value = perSecond(m.group(1), m.group(2));
		if (value.signum() <= 0) {
			throw new InvalidArgumentException("rate", spec, null, null,
					"Invalid rate \"" + spec + "\": the rate must be > 0; expected " + DECIMAL_FORM);
		}
		try {
			return of(value, Duration.ofSeconds(1));
		}
		catch (IllegalArgumentException ex) {
			InvalidArgumentException invalid = new InvalidArgumentException("rate", spec, null, null,
					"Invalid rate \"" + spec + "\": " + ex.getMessage());
			invalid.initCause(ex);
			throw invalid;
		}
	}

	/**
	 * A decimal number with an optional {@code K}, {@code M} or {@code G} suffix, as both spec forms of
	 * this package write rates per second.
	 */
	static BigDecimal perSecond(String digits, String suffix) {
		return new BigDecimal(digits).multiply(switch (suffix.toUpperCase(Locale.ROOT)) {
			case "K" -> BigDecimal.valueOf(1_000L);
			case "M" -> BigDecimal.valueOf(1_000_000L);
			case "G" -> BigDecimal.valueOf(NANOS_PER_SECOND);
			default -> BigDecimal.ONE;
		});
	}

	/**
	 * Whole tokens per {@link #period()}.
	 *
	 * @return the tokens, {@code > 0}
	 */
	public long tokens() {
		return this.tokens;
	}

	/**
	 * The period of {@link #tokens()}.
	 *
	 * @return the period, {@code > 0}
	 */
	public Duration period() {
		return this.period;
	}

	/**
	 * The numerator of the reduced tokens-per-nanosecond fraction.
	 *
	 * @return the numerator, {@code > 0}
	 */
	public long numerator() {
		return this.numerator;
	}

	/**
	 * The denominator of the reduced tokens-per-nanosecond fraction.
	 *
	 * @return the denominator, {@code > 0}
	 */
	public long denominator() {
		return this.denominator;
	}

	/**
	 * The same rate as a reduced fraction of tokens per {@code unit}, e.g. per microsecond for a
	 * backend whose clock counts microseconds.
	 *
	 * @param unit the time unit, {@code > 0}
	 * @return {@code {numerator, denominator}}, reduced
	 * @throws IllegalArgumentException when either does not fit in 62 bits
	 */
	public long[] per(Duration unit) {
		long unitNanos = Arithmetic.periodNanos(unit, "unit");
		BigInteger num = BigInteger.valueOf(this.numerator).multiply(BigInteger.valueOf(unitNanos));
		BigInteger den = BigInteger.valueOf(this.denominator);
		BigInteger g = num.gcd(den);
		num = num.divide(g);
		den = den.divide(g);
		if (num.bitLength() > 62 || den.bitLength() > 62) {
			throw new InvalidArgumentException("unit", unit, null, null, "rate " + this + " has no exact form in tokens per " + unit);
		}
		return new long[] { num.longValueExact(), den.longValueExact() };
	}

	/**
	 * Whole tokens earned in {@code nanos}: {@code floor(nanos * numerator / denominator)}.
	 *
	 * @param nanos a duration in nanoseconds; {@code <= 0} earns nothing
	 * @return the tokens, saturated at {@code Long.MAX_VALUE}
	 */
	public long tokensIn(long nanos) {
		if (nanos <= 0) {
			return 0;
		}
		if (this.denominator == 1) {
			return (nanos <= this.mostWholeNanos) ? nanos * this.numerator : Long.MAX_VALUE; // (one compare: the hot path)
		}
		return Arithmetic.mulDiv(nanos, this.numerator, this.denominator);
	}

	/**
	 * Whether {@code nanos} earn a whole number of tokens, with no fraction of the next one.
	 *
	 * @param nanos a duration in nanoseconds
	 * @return {@code true} when {@code nanos * numerator} is a multiple of {@code denominator} (always
	 *         for a rate of a whole number of tokens per nanosecond, and for {@code nanos <= 0})
	 */
	public boolean isWhole(long nanos) {
		if (this.denominator == 1 || nanos <= 0) {
			return true;
		}
		return Arithmetic.mulDiv(nanos, this.numerator, this.denominator) == Arithmetic.mulDivCeil(nanos,
				this.numerator, this.denominator);
	}

	/**
	 * The fraction of the next token earned in {@code nanos}, as its numerator over
	 * {@link #denominator()}: {@code nanos * numerator mod denominator}. Two durations that earn the
	 * same whole tokens earn the next one in the same order as their fractions, smallest last.
	 *
	 * @param nanos a duration in nanoseconds, {@code >= 0}, earning fewer than {@code 2^63} tokens
	 * @return {@code 0..denominator - 1}
	 */
	long fractionIn(long nanos) {
		if (this.denominator == 1 || nanos <= 0) {
			return 0;
		}
		// exact in the low 64 bits: the true difference lies in 0..denominator - 1
		return nanos * this.numerator - Arithmetic.mulDiv(nanos, this.numerator, this.denominator) * this.denominator;
	}

	/**
	 * The shortest time in which {@code tokens} whole tokens are earned:
	 * {@code ceil(tokens * denominator / numerator)} nanoseconds.
	 *
	 * @param tokens tokens; {@code <= 0} takes no time
	 * @return nanoseconds, saturated at {@code Long.MAX_VALUE}
	 */
	public long nanosFor(long tokens) {
		return (tokens <= 0) ? 0 : Arithmetic.mulDivCeil(tokens, this.denominator, this.numerator);
	}

	/**
	 * The time still needed, {@code elapsed} nanoseconds into an epoch, until {@code tokens} whole
	 * tokens are earned since its start: {@code ceil(tokens * denominator / numerator) - elapsed},
	 * exact in 128 bits even when the first term alone does not fit in 64.
	 *
	 * @param tokens tokens since the epoch's start
	 * @param elapsed nanoseconds since the epoch's start, {@code >= 0}
	 * @return nanoseconds, {@code >= 0}, saturated at {@code Long.MAX_VALUE}
	 */
	public long nanosUntil(long tokens, long elapsed) {
		long at = nanosFor(tokens);
		if (at != Long.MAX_VALUE) {
			return Math.max(0, at - Math.max(elapsed, 0));
		}
		BigInteger num = BigInteger.valueOf(this.numerator);
		BigInteger exact = BigInteger.valueOf(tokens).multiply(BigInteger.valueOf(this.denominator))
			.add(num.subtract(BigInteger.ONE))
			.divide(num)
			.subtract(BigInteger.valueOf(Math.max(elapsed, 0)));
		return (exact.bitLength() <= 63) ? Math.max(0, exact.longValue()) : Long.MAX_VALUE;
	}

	/**
	 * The token count of the epoch {@code (start, base)} at {@code now}:
	 * {@code base + floor((now - start) * rate)}; an instant before {@code start} counts {@code base}.
	 * Instants are compared by difference, so a clock that wraps is fine.
	 *
	 * @param start the epoch's start, in nanoseconds of the limiter's clock
	 * @param base the count at {@code start}
	 * @param now the instant
	 * @return the count at {@code now} (wrapping like the rovers it is compared with)
	 */
	public long due(long start, long base, long now) {
		return base + tokensIn(now - start);
	}

	/**
	 * The first instant at which the epoch {@code (start, base)} counts {@code target}.
	 *
	 * @param start the epoch's start
	 * @param base the count at {@code start}
	 * @param target the count wanted (compared with {@code base} by difference)
	 * @return the instant; {@code start} when {@code target} is reached already
	 */
	public long instantOf(long start, long base, long target) {
		return start + nanosFor(target - base);
	}

	@Override
	public boolean equals(@Nullable Object other) {
		return (other instanceof Rate that) && this.numerator == that.numerator
				&& this.denominator == that.denominator;
	}

	@Override
	public int hashCode() {
		return Long.hashCode(this.numerator) * 31 + Long.hashCode(this.denominator);
	}

	@Override
	public String toString() {
		return this.tokens + " per " + this.period;
	}
}
