package dev.ratelimit.spring.aop;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The exact token bucket the model tests check the application against: level {@code a / den} tokens
 * (negative when owed), growing by {@code num / den} tokens a nanosecond up to the limit (a full bucket
 * earns no part of the next token); the line of waiting claims, and of charges (a charge has no caller:
 * nobody waits for it, those behind it pay it); (capped) the tokens in flight; and its counts as the
 * meters should show them. Claims are served in order: a claim is covered by time when the level plus the
 * tokens claimed behind it is at least 0; capped, it is also within the limit when the tokens in flight
 * plus the claims up to and including it are at most the limit.
 *
 * <p>Read by {@link AsyncSingleBucketModelTests} (retunes, charges, keys' buckets) and
 * {@link SeveralBucketsPollModelTests} (several buckets a call, shadow counts in its own subclass).
 */
class ReferenceBucket {

	private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

	/** A call as the bucket sees it: what the trace names it by. */
	interface Caller {

		long id();

	}

	/** A claim in line: a waiting call's, or a charge ({@code caller} null). */
	record Claim(Caller caller, long tokens) {
	}

	final String name;

	BigInteger num;

	BigInteger den;

	BigInteger full;

	long limit;

	final boolean capped;

	BigInteger a;

	long time;

	long inFlight;

	/** Claims of waiting calls and charges, in line order. */
	final List<Claim> queue = new ArrayList<>();

	long granted;

	long rejected;

	long waits;

	long waited;

	/**
	 * A full bucket at {@code now}: {@code tokens} tokens every {@code periodNanos} nanoseconds (a rate in
	 * tenths per second is tenths every ten seconds).
	 */
	ReferenceBucket(String name, long tokens, long periodNanos, long limit, boolean capped, long now) {
		this.name = name;
		setRate(tokens, periodNanos);
		this.limit = limit;
		this.full = BigInteger.valueOf(limit).multiply(this.den);
		this.capped = capped;
		this.a = this.full;
		this.time = now;
	}

	private void setRate(long tokens, long periodNanos) {
		BigInteger r = BigInteger.valueOf(tokens);
		BigInteger p = BigInteger.valueOf(periodNanos);
		BigInteger g = r.gcd(p);
		this.num = r.divide(g);
		this.den = p.divide(g);
	}

	/**
	 * A retune of the rate: the time that passed counts under the old rate, the part of a token earned
	 * under it is dropped (the level goes down to a whole number of tokens), the new rate applies from now.
	 */
	void updateRate(long tokens, long periodNanos) {
		BigInteger[] qr = this.a.divideAndRemainder(this.den);
		BigInteger whole = (qr[1].signum() < 0) ? qr[0].subtract(BigInteger.ONE) : qr[0];
		setRate(tokens, periodNanos);
		this.a = whole.multiply(this.den);
		this.full = BigInteger.valueOf(this.limit).multiply(this.den);
	}

	/** A retune of the limit: the excess above a smaller one is dropped; capped, the ceiling follows. */
	void updateLimit(long limit) {
		this.limit = limit;
		this.full = BigInteger.valueOf(limit).multiply(this.den);
		this.a = this.a.min(this.full);
	}

	void advance(long now) {
		if (now > this.time) {
			this.a = this.a.add(this.num.multiply(BigInteger.valueOf(now - this.time))).min(this.full);
			this.time = now;
		}
	}

	BigInteger scaled(long n) {
		return BigInteger.valueOf(n).multiply(this.den);
	}

	long ceilDiv(BigInteger missing) {
		BigInteger[] qr = missing.divideAndRemainder(this.num);
		return (qr[1].signum() == 0 ? qr[0] : qr[0].add(BigInteger.ONE)).longValueExact();
	}

	/** Nanoseconds until a whole interval of {@code tokens} tokens. */
	long interval(long tokens) {
		return ceilDiv(scaled(tokens));
	}

	/** The wait by time of a new claim of {@code n} at the end of the line. */
	long newWait(long n) {
		if (n == 0) {
			return 0;
		}
		BigInteger missing = scaled(n).subtract(this.a);
		return (missing.signum() <= 0) ? 0 : ceilDiv(missing);
	}

	/** Capped: whether a new claim of {@code n} is within the limit (in flight and claimed included). */
	boolean fits(long n) {
		return !this.capped || this.inFlight + claimed(this.queue.size()) + n <= this.limit;
	}

	/** The tokens claimed by the first {@code upTo} entries of the line (charges are not claims). */
	private long claimed(int upTo) {
		long claimed = 0;
		for (int i = 0; i < upTo; i++) {
			if (this.queue.get(i).caller() != null) {
				claimed += this.queue.get(i).tokens();
			}
		}
		return claimed;
	}

	private int indexOf(Caller call) {
		for (int i = 0; i < this.queue.size(); i++) {
			if (this.queue.get(i).caller() == call) {
				return i;
			}
		}
		throw new IllegalStateException(call + " has no claim on " + this.name);
	}

	/** The wait by time of a call's claim in line. */
	long rateWait(Caller call) {
		int at = indexOf(call);
		if (this.queue.get(at).tokens() == 0) {
			return 0;
		}
		long behind = 0;
		for (int i = at + 1; i < this.queue.size(); i++) {
			behind += this.queue.get(i).tokens();
		}
		BigInteger missing = this.a.add(scaled(behind)).negate();
		return (missing.signum() <= 0) ? 0 : ceilDiv(missing);
	}

	/** Whether a call's claim is within the limit (capped: in flight plus claimed up to it). */
	boolean withinCeiling(Caller call) {
		int at = indexOf(call);
		if (!this.capped || this.queue.get(at).tokens() == 0) {
			return true;
		}
		return this.inFlight + claimed(at + 1) <= this.limit;
	}

	void claim(Caller call, long n) {
		this.a = this.a.subtract(scaled(n));
		this.queue.add(new Claim(call, n));
	}

	/** The claim is given back: the level goes back up (never above the limit), those behind move up. */
	void giveBack(Caller call) {
		long n = this.queue.remove(indexOf(call)).tokens();
		this.a = this.a.add(scaled(n)).min(this.full);
		dropLeadingCharges();
	}

	void grant(Caller call, long waited) {
		long n = this.queue.remove(indexOf(call)).tokens();
		if (this.capped) {
			this.inFlight += n;
		}
		this.granted++;
		if (waited > 0) {
			this.waits++;
			this.waited += waited;
		}
		dropLeadingCharges();
	}

	/** Tokens a granted call gives back to the rate: never above the limit. */
	void refund(long n) {
		this.a = this.a.add(scaled(n)).min(this.full);
	}

	/** Tokens taken without waiting, at the end of the line. */
	void charge(long n) {
		this.a = this.a.subtract(scaled(n));
		if (!this.queue.isEmpty()) {
			this.queue.add(new Claim(null, n));
		}
	}

	private void dropLeadingCharges() {
		while (!this.queue.isEmpty() && this.queue.get(0).caller() == null) {
			this.queue.remove(0);
		}
	}

	/** The calls waiting (charges are not calls). */
	long waiting() {
		long waiting = 0;
		for (Claim claim : this.queue) {
			if (claim.caller() != null) {
				waiting++;
			}
		}
		return waiting;
	}

	/** Full, nothing in flight, nobody waiting: a new bucket would be the same. */
	boolean idle() {
		return this.a.equals(this.full) && this.inFlight == 0 && waiting() == 0;
	}

	long available() {
		long byRate = (this.a.signum() <= 0) ? 0 : this.a.divide(this.den).longValueExact();
		if (!this.capped) {
			return byRate;
		}
		return Math.max(0, Math.min(byRate, this.limit - this.inFlight - claimed(this.queue.size())));
	}

	long deficiency() {
		if (this.a.signum() >= 0) {
			return 0;
		}
		BigInteger[] qr = this.a.negate().divideAndRemainder(this.den);
		return (qr[1].signum() == 0 ? qr[0] : qr[0].add(BigInteger.ONE)).longValueExact();
	}

	@Override
	public String toString() {
		return render(this.a, this.inFlight, this.queue);
	}

	/** The state now, rendered when asked (for a trace rendered only when it fails). */
	Object frozen() {
		BigInteger level = this.a;
		long flying = this.inFlight;
		List<Claim> line = this.queue.isEmpty() ? List.of() : List.copyOf(this.queue);
		return new Object() {
			@Override
			public String toString() {
				return render(level, flying, line);
			}
		};
	}

	private String render(BigInteger level, long flying, List<Claim> line) {
		StringBuilder s = new StringBuilder();
		s.append(new BigDecimal(level.multiply(BigInteger.valueOf(SECOND)).divide(this.den), 9)
			.stripTrailingZeros()
			.toPlainString());
		if (this.capped) {
			s.append(" (").append(flying).append(" in flight)");
		}
		if (!line.isEmpty()) {
			s.append(" line[");
			for (Claim claim : line) {
				s.append(' ')
					.append((claim.caller() != null) ? "#" + claim.caller().id() : "charge")
					.append(':')
					.append(claim.tokens());
			}
			s.append(" ]");
		}
		return s.toString();
	}
}
