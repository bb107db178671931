package dev.ratelimit.core;

import java.math.BigInteger;
import java.time.Duration;

/**
 * Exact integer arithmetic for rates: products of two longs are carried in 128 bits, so that
 * {@code elapsed * rate / period} stays exact for any idle time and any rate the builders accept.
 */
final class Arithmetic {

	private Arithmetic() {
	}

	/**
	 * {@code floor(a * b / c)} for {@code a >= 0, b > 0, c > 0}, exact, saturated at
	 * {@code Long.MAX_VALUE} when the quotient does not fit.
	 */
	static long mulDiv(long a, long b, long c) {
		long lo = a * b;
		if (Math.multiplyHigh(a, b) == 0 && lo >= 0) {
			return lo / c;
		}
		// a*b/c = (qa*c + ra)*b/c = qa*b + ra*b/c, and ra*b/c = ra*qb + ra*rb/c with ra, rb < c
		long qa = a / c;
		long ra = a % c;
		long qb = b / c;
		long rb = b % c;
		long whole;
		try {
			whole = Math.addExact(Math.multiplyExact(qa, b), Math.multiplyExact(ra, qb));
		}
		catch (ArithmeticException ex) {
			return Long.MAX_VALUE;
		}
		long small = ra * rb;
		long rest = (Math.multiplyHigh(ra, rb) == 0 && small >= 0) ? small / c
				: BigInteger.valueOf(ra).multiply(BigInteger.valueOf(rb)).divide(BigInteger.valueOf(c)).longValue();
		long sum = whole + rest;
		return (sum < 0) ? Long.MAX_VALUE : sum;
	}

	/**
	 * {@code ceil(a * b / c)} for {@code a >= 0, b > 0, c > 0}, saturated like {@link #mulDiv}.
	 */
	static long mulDivCeil(long a, long b, long c) {
		long floor = mulDiv(a, b, c);
		if (floor == Long.MAX_VALUE) {
			return floor;
		}
		// exact iff floor * c == a * b, compared in 128 bits
		long lo = a * b;
		long hi = Math.multiplyHigh(a, b);
		long flo = floor * c;
		long fhi = Math.multiplyHigh(floor, c);
		return (lo == flo && hi == fhi) ? floor : floor + 1;
	}

	static long gcd(long a, long b) {
		while (b != 0) {
			long t = a % b;
			a = b;
			b = t;
		}
		return a;
	}

	/**
	 * The period in nanoseconds, checked: positive and representable.
	 */
	static long periodNanos(Duration period, String argument) {
		if (period == null || period.isZero() || period.isNegative()) {
			throw new InvalidArgumentException(argument, period, Duration.ofNanos(1), Duration.ofNanos(Long.MAX_VALUE),
					argument + " must be a positive duration, was " + period);
		}
		try {
			return period.toNanos();
		}
		catch (ArithmeticException ex) {
			throw new InvalidArgumentException(argument, period, Duration.ofNanos(1), Duration.ofNanos(Long.MAX_VALUE),
					argument + " must be at most " + Duration.ofNanos(Long.MAX_VALUE)
					+ ", was " + period);
		}
	}
}
