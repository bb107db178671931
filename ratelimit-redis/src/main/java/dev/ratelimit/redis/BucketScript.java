package dev.ratelimit.redis;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.core.InvalidArgumentException;
import dev.ratelimit.core.Rate;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.StatsRecorder;
import org.jspecify.annotations.Nullable;

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
		/**
		 * Give {@code n} tokens back (a claim given up, or a refund of a granted call), up to the limit;
		 * capped: also out of flight when {@code id} names a lease.
		 */
		REFUND("refund"),
		/** Take {@code n} more tokens now, into debt if need be, never in flight (a settle that costs more). */
		CHARGE("charge"),
		/** Capped release of a claim's tokens (its lease), once. */
		RELEASE("release"),
		/** A capped waiter leaves the queue without tokens. */
		LEAVE("leave"),
		/** Bank the time that passed. */
		SYNC("sync"),
		/** Change the settings for every instance: the time that passed counts at the old ones. */
		RETUNE("retune"),
		/** Read the level without writing. */
		PEEK("peek"),
		/**
		 * Read the retune in force for this configuration (dropping one made for another) and nothing
		 * else: how an instance learns its template's settings for the buckets of its keys.
		 */
		TUNE("tune"),
		/**
		 * Store the bucket mode ({@code enforce} or {@code shadow}) in the retune record for every instance,
		 * and read the retune in force, as {@link #TUNE} does; nothing else is read or written.
		 */
		SWITCH("switch"),
		/**
		 * Contract revision 3: make the bucket full now, what callers owed forgotten (capped: what is in flight
		 * stays in flight), and, for a bucket with four keys, record the reset for its overflow bucket and its
		 * keys' buckets on every instance (a hash that has not followed it is full again at its next call), and
		 * publish it on {@code <key-prefix>{<bucket>}:reset}.
		 */
		RESET("reset"),
		/**
		 * Contract revision 3, batches: the holder ({@code id}, {@code <holder>#<kept>}) keeps {@code kept} of the
		 * tokens its batch held, gives back {@code maxwait} (the argument's place) and the rest count as spent;
		 * then it takes up to {@code n} of the tokens there now (at least one, or none and the wait for the
		 * next), held until {@code lease} from now. Uncapped buckets only.
		 */
		BATCH("batch");

		final String argument;

		Mode(String argument) {
			this.argument = argument;
		}
	}

	/**
	 * The rate as {@code a} tokens per {@code b} microseconds, reduced, with the bucket's limit, whether
	 * its release is capped and the lease of capped tokens: what every call sends; and, for settings that
	 * come from a retune, when it was made ({@code retunedAtMicros}, Redis's {@code TIME}; 0 for a
	 * configuration), which a key's call passes so that the time before it counts at the old settings.
	 */
	record Settings(Rate rate, long limit, boolean capped, long leaseMicros, long a, long b, long retunedAtMicros) {

		/**
		 * Checks a call's {@code n} against these settings: {@code >= 0}, within the limit when capped (more could
		 * never be granted), and within what the script's Lua doubles hold exactly.
		 *
		 * @throws InvalidArgumentException naming {@code n}, the bucket and the bound
		 */
		void checkCost(long n, String bucket) {
			if (n < 0) {
				throw new InvalidArgumentException("n", n, 0L, null, "n must be >= 0, was " + n);
			}
			if (this.capped && n > this.limit) {
				throw new InvalidArgumentException("n", n, 0L, this.limit, "n must be at most the limit (" + this.limit
						+ ") of capped bucket '" + bucket + "', was " + n + ": it could never be granted");
			}
			if (n > maxCost()) {
				throw new InvalidArgumentException("n", n, 0L, maxCost(), "n must be at most " + maxCost()
						+ " for Redis bucket '" + bucket + "' (exact arithmetic in Lua doubles), was " + n);
			}
		}

		static Settings of(Rate rate, long limit, boolean capped, Duration lease, String bucket) {
			if (limit < 1) {
				throw new InvalidArgumentException("limit", limit, 1L, null, "limit must be >= 1, was " + limit);
			}
			if (lease == null || lease.toMillis() < 1) {
				throw new InvalidArgumentException("lease", lease, Duration.ofMillis(1), null,
						"lease of Redis bucket '" + bucket
						+ "' must be at least 1ms, was " + lease);
			}
			long[] perMicro = rate.per(Duration.ofNanos(1000));
			long a = perMicro[0];
			long b = perMicro[1];
			if (a >= MAX_EXACT || b >= MAX_EXACT / limit) {
				throw new IllegalArgumentException("Redis bucket '" + bucket + "': limit " + limit + " with " + rate
						+ " is too fine for exact arithmetic in Redis (Lua numbers are doubles, exact below 2^53); use"
						+ " a coarser period or a smaller limit");
			}
			long leaseMicros = Math.min(TimeUnit.MILLISECONDS.toMicros(lease.toMillis()), MAX_EXACT);
			return new Settings(rate, limit, capped, leaseMicros, a, b, 0);
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
			return of(next, this.limit, this.capped, Duration.ofNanos(this.leaseMicros * 1000), bucket);
		}

		Settings withLimit(long next, String bucket) {
			return of(this.rate, next, this.capped, Duration.ofNanos(this.leaseMicros * 1000), bucket);
		}

		/** These settings, as made by a retune at {@code micros} (Redis's {@code TIME}). */
		Settings retunedAt(long micros) {
			return new Settings(this.rate, this.limit, this.capped, this.leaseMicros, this.a, this.b, micros);
		}

		/**
		 * The settings a reply says are in effect: a retune made through any instance (with its time), or
		 * these (the configuration) when there is none.
		 */
		Settings inEffect(Reply reply, Settings current, String bucket) {
			if (reply.tunedB() == 0) {
				return this;
			}
			if (reply.tunedA() == current.a && reply.tunedB() == current.b && reply.tunedLimit() == current.limit) {
				return (reply.tunedAtMicros() == current.retunedAtMicros) ? current
						: current.retunedAt(reply.tunedAtMicros());
			}
			return of(Rate.of(reply.tunedTokens(), Duration.ofNanos(reply.tunedPeriodNanos())), reply.tunedLimit(),
					this.capped, Duration.ofNanos(this.leaseMicros * 1000), bucket)
				.retunedAt(reply.tunedAtMicros());
		}

		/**
		 * The script's arguments for a call on a key's bucket (three keys): the settings in force, then the
		 * time of the retune they come from (0: the configuration), so that a key's hash written with other
		 * settings counts the time before the retune at those.
		 *
		 * @param inForce the template's settings in force, as this instance last read them
		 */
		static String[] keyArguments(Settings inForce, Mode mode, long n, long maxWaitMicros, String id) {
			return keyArguments(inForce, mode, n, maxWaitMicros, id, 0);
		}

		/**
		 * The script's arguments for the bucket of one key, as {@link #keyArguments(Settings, Mode, long, long, String)},
		 * with the template's last reset as read with its settings ({@code resetAtMicros}, 0 for none): a key's
		 * hash that has not followed it is full again.
		 */
		static String[] keyArguments(Settings inForce, Mode mode, long n, long maxWaitMicros, String id,
				long resetAtMicros) {
			String[] head = arguments(inForce, mode, n, maxWaitMicros, id, null);
			String[] all = java.util.Arrays.copyOf(head, head.length + 2);
			all[head.length] = Long.toString(inForce.retunedAtMicros);
			all[head.length + 1] = Long.toString(resetAtMicros);
			return all;
		}

		/**
		 * The script's arguments for {@link Mode#SWITCH}: the configuration, then the mode stored.
		 *
		 * @param configured the configuration, which the script compares with the retune record's
		 * @param bucketMode {@code enforce} or {@code shadow}
		 */
		static String[] switchArguments(Settings configured, String bucketMode) {
			String[] head = arguments(configured, Mode.SWITCH, 0, 0, "", null);
			String[] all = java.util.Arrays.copyOf(head, head.length + 1);
			all[head.length] = bucketMode;
			return all;
		}

		/**
		 * The script's arguments.
		 *
		 * @param configured the configuration, which the script compares with a retune's
		 * @param mode the mode
		 * @param n tokens
		 * @param maxWaitMicros the caller's max-wait
		 * @param id the claim's id and tokens, {@code <id>#<n>}, for capped leases and tickets, or empty
		 * @param retune the new settings for {@link Mode#RETUNE}, else {@code null}
		 */
		static String[] arguments(Settings configured, Mode mode, long n, long maxWaitMicros, String id,
				@Nullable Settings retune) {
			String[] head = { Long.toString(configured.a), Long.toString(configured.b),
					Long.toString(configured.limit), Long.toString(n), Long.toString(maxWaitMicros),
					configured.capped ? "1" : "0", mode.argument, id, Long.toString(configured.leaseMicros) };
			if (retune == null) {
				return head;
			}

			String[] all = java.util.Arrays.copyOf(head, head.length + 5);
			all[head.length] = Long.toString(retune.a);
			all[head.length + 1] = Long.toString(retune.b);
			all[head.length + 2] = Long.toString(retune.limit);
			all[head.length + 3] = Long.toString(retune.rate.tokens());
			all[head.length + 4] = Long.toString(retune.rate.period().toNanos());
			return all;
		}
	}

	/**
	 * The keys of a bucket, all with its hash tag: the state, the retune, the leases and the queue.
	 *
	 * @param key the bucket's key, {@code <key-prefix>{<bucket>}}
	 * @return the script's keys
	 */
	/**
	 * The keys of a bucket named {@code name}: its own ({@code perKey} null), its overflow bucket's
	 * ({@code perKey} empty) or one key's ({@code <prefix>{<name>:<key>}}); the bucket's hash first.
	 */
	static String[] keysOf(String keyPrefix, String name, @Nullable String perKey) {
		String template = keyPrefix + "{" + name + "}";
		if (perKey == null) {
			return keys(template);
		}
		return perKey.isEmpty() ? overflowKeys(template + ":overflow", template)
				: keyKeys(keyPrefix + "{" + name + ":" + perKey + "}");
	}

	static String[] keys(String key) {
		return new String[] { key, key + ":retuned", key + ":leases", key + ":queue" };
	}

	/**
	 * The keys of the overflow bucket of a bucket used with a key: its state, its template's retune
	 * (the same hash tag, so one call reads it), its leases and its queue.
	 *
	 * @param key the overflow bucket's key, {@code <key-prefix>{<bucket>}:overflow}
	 * @param template the template's key, {@code <key-prefix>{<bucket>}}
	 * @return the script's keys
	 */
	static String[] overflowKeys(String key, String template) {
		return new String[] { key, template + ":retuned", key + ":leases", key + ":queue" };
	}

	/**
	 * The keys of one key's bucket: its state, its leases and its queue, and no retune (its template's is
	 * in another Redis Cluster hash slot: the caller passes the settings in force as arguments).
	 *
	 * @param key the key's bucket's key, {@code <key-prefix>{<bucket>:<key>}}
	 * @return the script's keys
	 */
	static String[] keyKeys(String key) {
		return new String[] { key, key + ":leases", key + ":queue" };
	}

	/**
	 * The channel on which the script announces released tokens and waiters leaving the queue.
	 *
	 * @param key the bucket's key
	 * @return the channel
	 */
	static String channel(String key) {
		return key + ":woken";
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
	 * @param tunedA the retune in effect: its rate's {@code a}, or 0 when the configuration is in effect
	 * @param tunedB its {@code b}, or 0
	 * @param tunedLimit its limit, or 0
	 * @param tunedTokens its rate's tokens per period, or 0
	 * @param tunedPeriodNanos its rate's period, or 0
	 * @param tunedAtMicros when it was made (Redis's {@code TIME}), or 0
	 * @param sharedMode the bucket mode switched through an endpoint: {@link #ENFORCE}, {@link #SHADOW}, or
	 *        {@link #AS_CONFIGURED} (0, also for a key's bucket and for a script that does not say)
	 * @param resetAtMicros the last reset (Redis's {@code TIME}), or 0
	 * @param taken mode {@code batch}: the tokens the batch took; else 0
	 * @param kept mode {@code batch}: the tokens of its batch the holder keeps (fewer than it said when its lease
	 *        ran out before the call: those count as spent, and must not be granted); else 0
	 */
	record Reply(long code, long waitMicros, long level, long remainder, long inFlight, long tunedA, long tunedB,
			long tunedLimit, long tunedTokens, long tunedPeriodNanos, long tunedAtMicros, long sharedMode,
			long resetAtMicros, long taken, long kept) {

		/** {@link #sharedMode()}: no mode was switched, each instance's configuration is in force. */
		static final long AS_CONFIGURED = 0;

		/** {@link #sharedMode()}: switched to enforce. */
		static final long ENFORCE = 1;

		/** {@link #sharedMode()}: switched to shadow. */
		static final long SHADOW = 2;

		static final long REFUSED = 0;

		static final long GRANTED = 1;

		static final long AWAITING_RELEASE = 2;

		/**
		 * The reply's thirteen values (fifteen for mode {@code batch}, with the tokens taken and kept); twelve (as the script gave before resets, contract revision 3) are read
		 * with no reset, eleven (before the mode was shared) also with the mode as configured, and ten (before a
		 * retune recorded its time) also with a time of 0.
		 */
		static Reply of(@Nullable List<?> values) {
			if (values == null || values.size() < 10 || values.size() > 15) {
				throw new IllegalStateException("Unexpected reply from the bucket script: " + values);
			}
			return new Reply(number(values.get(0)), number(values.get(1)), number(values.get(2)),
					number(values.get(3)), number(values.get(4)), number(values.get(5)), number(values.get(6)),
					number(values.get(7)), number(values.get(8)), number(values.get(9)),
					(values.size() >= 11) ? number(values.get(10)) : 0,
					(values.size() >= 12) ? number(values.get(11)) : AS_CONFIGURED,
					(values.size() >= 13) ? number(values.get(12)) : 0,
					(values.size() >= 14) ? number(values.get(13)) : 0,
					(values.size() == 15) ? number(values.get(14)) : 0);
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

		boolean queued() {
			return this.code == AWAITING_RELEASE;
		}
	}

	/** A script of the module, from the class path. */
	static String load(String resource) {
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

	/** A script's SHA-1, as {@code EVALSHA} names it. */
	static String sha1(String text) {
		try {
			return HexFormat.of()
				.formatHex(MessageDigest.getInstance("SHA-1").digest(text.getBytes(StandardCharsets.UTF_8)));
		}
		catch (NoSuchAlgorithmException ex) {
			throw new IllegalStateException(ex);
		}
	}

	/**
	 * The view of a bucket from the script's reply to a peek.
	 *
	 * @param s the settings in force
	 * @param reply the reply
	 * @param waiting callers waiting on this instance
	 * @param stats the bucket's counts
	 * @return the view
	 */
	static RateLimiterSnapshot view(Settings s, Reply reply, int waiting, StatsRecorder stats) {
		Rate rate = s.rate();
		long level = reply.level();
		long available = Math.max(level, 0);
		if (s.capped()) {
			// a capped bucket lends only what is not in flight, whatever time has banked
			available = Math.min(available, Math.max(s.limit() - reply.inFlight(), 0));
		}
		if (s.capped()) {
			// tokens in flight come back at releases, not in time: whole tokens at the rate
			return new RateLimiterSnapshot(rate.tokens(), rate.period(), s.limit(), true, available,
					Math.max(-level, 0), waiting, reply.inFlight(), stats.granted(),
					stats.rejected(), null, Duration.ZERO);
		}
		// the script's own sum: (limit - level) tokens less the credit already made, at A units per microsecond
		long untilFull = (level >= s.limit()) ? 0 : untilFullNanos(s.limit() - level, reply.remainder(), s.a(), s.b());
		return new RateLimiterSnapshot(rate.tokens(), rate.period(), s.limit(), false, available, Math.max(-level, 0),
				waiting, 0, stats.granted(), stats.rejected(), null, Duration.ZERO,
				Duration.ofNanos(untilFull));
	}

	/**
	 * Nanoseconds until {@code missing} tokens are made at {@code a} units of {@code 1/b} of a token per
	 * microsecond, {@code credit} units of the next one already made: the script's own sum, in microseconds
	 * rounded up; {@link Long#MAX_VALUE} beyond what a {@code long} holds (a debt of many waiters).
	 */
	static long untilFullNanos(long missing, long credit, long a, long b) {
		BigInteger units = BigInteger.valueOf(missing).multiply(BigInteger.valueOf(b)).subtract(BigInteger.valueOf(credit));
		BigInteger[] qr = units.divideAndRemainder(BigInteger.valueOf(a));
		BigInteger nanos = qr[0].add((qr[1].signum() > 0) ? BigInteger.ONE : BigInteger.ZERO)
			.multiply(BigInteger.valueOf(1000));
		return (nanos.bitLength() < 64) ? Math.max(nanos.longValue(), 0) : Long.MAX_VALUE;
	}
}
