package dev.ratelimit.spring.aop;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.BucketStats;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.ModelSeeds;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RegisteredBucket;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The annotation's general path checked step by step against an exact reference written for the test:
 * methods with several {@code @RateLimited} (plain and per-key buckets mixed, some buckets shared by
 * several methods), {@code refundIf} and {@code settle} (over a parameter and over {@code #result}),
 * and one single-bucket method on a bucket the others use, in seeded random sequences of calls and
 * clock moves on a fake clock. Every bucket is shared, uncapped, {@code max-wait: 0}, so no call
 * blocks.
 *
 * <p>The reference holds each bucket's level as an exact rational ({@code a / den} tokens, the rate
 * {@code num / den} per nanosecond), capped at the limit as time passes and on every give-back, so a
 * full bucket earns no part of the next token (the core's I2). A call takes its cost from every bucket
 * or from none: it is granted when every bucket has its cost now (a cost of 0 always is); a refusal
 * changes no level, names a refusing bucket whose wait (whole nanoseconds, rounded up) is the longest,
 * with that wait as {@code getRetryAfter()}, its cost, and its key for a per-key bucket, and counts as
 * {@code rejected} on that bucket alone. When granted, every bucket counts it as {@code granted}, the
 * method runs once, and at completion {@code refundIf} gives the bucket's cost back and {@code settle}
 * gives back or charges (into debt) the difference, never above the limit. After every step, every
 * bucket's (and every key's) available tokens, and every bucket's granted and rejected counts, must
 * equal the reference's; a key whose bucket was dropped must have been full.
 *
 * <p>Starting a context costs far more than a sequence, so one context per bucket configuration runs
 * all the sequences of that configuration, one after the other; each sequence starts by moving the
 * clock a day ahead (every bucket full again, whatever came before) and compares counts from where
 * they stand. A failure prints the seed, the configuration and the trace; {@code -Dmodel.seed=<seed>}
 * replays one sequence (in a fresh context, which is the same: the sequence starts from full buckets),
 * {@code -Dmodel.sequences=<n>} runs more.
 */
class SeveralBucketsModelTests {

	private static final long SEQUENCES = Long.getLong("model.sequences", 4_000);

	private static final int STEPS = 40;

	/** Bucket configurations; a sequence's seed picks one. */
	private static final int CONFIGURATIONS = 4;

	/** Every bucket, in the order the interceptor claims (by name). */
	private static final String[] BUCKETS = { "alpha", "beta", "delta", "gamma", "perkey" };

	private static final String[] KEYS = { "ann", "bob", "cy", "dee" };

	private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

	private static final long DAY = TimeUnit.DAYS.toNanos(1);

	@Test
	void agreesWithAnExactReferenceOnRandomSequences() {
		Long only = Long.getLong("model.seed");
		if (only != null) {
			runSeeds(List.of(only), Integer.getInteger("model.keys-max", 0));
			return;
		}
		long first = new SplittableRandom().nextLong();
		List<Long> seeds = new ArrayList<>();
		for (long i = 0; i < SEQUENCES; i++) {
			seeds.add(first + i);
		}
		runSeeds(seeds, 0);
	}

	@Test
	void agreesOnFixedSeeds() {
		List<Long> seeds = new ArrayList<>();
		for (long seed = 0; seed < 400; seed++) {
			seeds.add(seed);
		}
		runSeeds(seeds, 0);
	}

	/**
	 * {@code keys.max: 2} for four keys: a new key finds no room unless a kept key's bucket is full
	 * (then that one is dropped), and otherwise shares the overflow bucket. Replay with
	 * {@code -Dmodel.seed=<seed> -Dmodel.keys-max=2}.
	 */
	@Test
	void agreesWhenKeysOverflow() {
		long first = new SplittableRandom().nextLong();
		List<Long> seeds = new ArrayList<>();
		for (long i = 0; i < SEQUENCES / 4; i++) {
			seeds.add(first + i);
		}
		runSeeds(seeds, 2);
	}

	/**
	 * Runs the seeds, one context per configuration, and prints what they covered.
	 *
	 * @param keysMax {@code keys.max} of the per-key bucket, 0 for the default (no overflow here)
	 */
	private static void runSeeds(List<Long> seeds, int keysMax) {
		Map<String, Long> tally = new java.util.TreeMap<>();
		long started = System.nanoTime();
		for (int configuration = 0; configuration < CONFIGURATIONS; configuration++) {
			List<Long> mine = ModelSeeds.inSlot(seeds, configuration, (seed) -> configurationOf(seed));
			if (mine.isEmpty()) {
				continue;
			}
			Config config = Config.of(configuration, keysMax);
			AtomicLong clock = new AtomicLong(SECOND);
			new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
				.withUserConfiguration(ServiceConfiguration.class)
				.withBean(RateLimitClock.class, () -> clock::get)
				.withPropertyValues(config.properties())
				.run((context) -> {
					if (context.getStartupFailure() != null) {
						throw new AssertionError("context did not start", context.getStartupFailure());
					}
					Service service = context.getBean(Service.class);
					RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
					for (long seed : mine) {
						new Run(seed, config, clock, service, registry, tally).execute();
					}
				});
		}
		System.out.printf("SeveralBucketsModelTests (keys.max %s): %d sequences of %d steps in %d ms: %s%n",
				(keysMax > 0) ? keysMax : "default", seeds.size(), STEPS, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started), tally);
	}

	private static int configurationOf(long seed) {
		return (int) Math.floorMod(seed, (long) CONFIGURATIONS);
	}

	/** Rates (per second) and limits of the buckets, by name, drawn from the configuration's number. */
	private record Config(int number, Map<String, long[]> buckets, int keysMax) {

		static Config of(int number, int keysMax) {
			SplittableRandom random = new SplittableRandom(0x5eed0000L + number);
			Map<String, long[]> buckets = new LinkedHashMap<>();
			for (String name : BUCKETS) {
				buckets.put(name, new long[] { 3 + random.nextInt(8), 1 + random.nextInt(5) });
			}
			return new Config(number, buckets, keysMax);
		}

		String[] properties() {
			List<String> properties = new ArrayList<>();
			this.buckets.forEach((name, rl) -> {
				properties.add("ratelimit.buckets." + name + ".rate=" + rl[0]);
				properties.add("ratelimit.buckets." + name + ".limit=" + rl[1]);
				properties.add("ratelimit.buckets." + name + ".max-wait=0");
			});
			if (this.keysMax > 0) {
				properties.add("ratelimit.buckets.perkey.keys.max=" + this.keysMax);
			}
			return properties.toArray(new String[0]);
		}

		@Override
		public String toString() {
			StringBuilder s = new StringBuilder("configuration ").append(this.number)
				.append((this.keysMax > 0) ? " (perkey keys.max=" + this.keysMax + ")" : "")
				.append(':');
			this.buckets.forEach((name, rl) -> s.append(' ').append(name).append(" rate=").append(rl[0])
				.append("/s limit=").append(rl[1]));
			return s.toString();
		}
	}

	/** One random sequence against the reference. */
	private static final class Run {

		private final long seed;

		private final Config config;

		private final SplittableRandom random;

		private final AtomicLong clock;

		private final Service service;

		private final RateLimiterRegistry registry;

		private final List<String> trace = new ArrayList<>();

		/** The reference's plain buckets (the per-key template too, which no call uses), by name. */
		private final Map<String, RefBucket> plain = new LinkedHashMap<>();

		/** The reference's overflow bucket (keys without room share it). */
		private RefBucket overflow;

		/** The reference's per-key buckets, made full on first use. */
		private final Map<String, RefBucket> keyed = new LinkedHashMap<>();

		private final Map<String, long[]> counts = new HashMap<>();

		private final Map<String, Long> invocations = new HashMap<>();

		/** What the sequences covered, for the summary line. */
		private final Map<String, Long> tally;

		Run(long seed, Config config, AtomicLong clock, Service service, RateLimiterRegistry registry,
				Map<String, Long> tally) {
			this.tally = tally;
			this.seed = seed;
			this.config = config;
			this.random = new SplittableRandom(seed);
			this.clock = clock;
			this.service = service;
			this.registry = registry;
		}

		void execute() {
			try {
				start();
				for (int step = 0; step < STEPS; step++) {
					step();
					stateAfter();
					check();
				}
			}
			catch (AssertionError | RuntimeException ex) {
				StringBuilder message = new StringBuilder("seed ").append(this.seed)
					.append(" (replay with -Dmodel.seed=").append(this.seed).append(")\n  ").append(this.config)
					.append('\n');
				for (String line : this.trace) {
					message.append("  ").append(line).append('\n');
				}
				message.append("  => ").append(ex);
				throw new AssertionError(message.toString(), ex);
			}
		}

		/** A day later every bucket is full (no sequence owes that much); counts go on from where they are. */
		private void start() {
			long now = this.clock.addAndGet(DAY);
			for (String name : BUCKETS) {
				long[] rl = this.config.buckets.get(name);
				this.plain.put(name, new RefBucket(rl[0], rl[1], now));
				BucketStats stats = this.registry.get(name).stats();
				this.counts.put(name, new long[] { stats.granted(), stats.rejected() });
			}
			this.invocations.putAll(this.service.invocations());
			long[] template = this.config.buckets.get("perkey");
			this.overflow = new RefBucket(template[0], template[1], now);
			log("start, a day later: every bucket full");
			stateAfter();
			check();
		}

		private RefBucket keyRef(String key) {
			long[] rl = this.config.buckets.get("perkey");
			return this.keyed.computeIfAbsent(key, (k) -> new RefBucket(rl[0], rl[1], this.clock.get()));
		}

		private void step() {
			int op = this.random.nextInt(100);
			if (op < 22) {
				moveClock();
			}
			else if (op < 37) {
				callA();
			}
			else if (op < 52) {
				callB();
			}
			else if (op < 64) {
				callC();
			}
			else if (op < 78) {
				callD();
			}
			else if (op < 92) {
				callE();
			}
			else {
				callF();
			}
		}

		private void moveClock() {
			long interval = (SECOND + 2) / 3; // the longest interval of any bucket here (3 per second)
			long delta = switch (this.random.nextInt(10)) {
				case 0 -> 0;
				case 1 -> 1 + this.random.nextInt(5);
				case 2, 3 -> 1 + this.random.nextLong(interval);
				case 4 -> SECOND / (3 + this.random.nextInt(8)) + this.random.nextInt(3) - 1; // about one interval
				case 5, 6 -> interval * (2 + this.random.nextInt(6));
				case 7 -> this.random.nextLong(5 * SECOND);
				case 8 -> SECOND / (3 + this.random.nextInt(8)) * (1 + this.random.nextInt(4)); // whole intervals
				default -> (this.random.nextInt(4) == 0) ? TimeUnit.HOURS.toNanos(1 + this.random.nextInt(3))
						: this.random.nextLong(interval / 4);
			};
			this.clock.addAndGet(delta);
			log("clock +%d ns", delta);
		}

		private long cost(String bucket) {
			return this.random.nextLong(this.config.buckets.get(bucket)[1] + 2);
		}

		private long cost(String first, String second) {
			long most = Math.max(this.config.buckets.get(first)[1], this.config.buckets.get(second)[1]);
			return this.random.nextLong(most + 2);
		}

		private String key() {
			return KEYS[this.random.nextInt(KEYS.length)];
		}

		/** Two plain buckets, each its own cost. */
		private void callA() {
			long n = cost("alpha");
			long m = cost("beta");
			call("a(n=" + n + ", m=" + m + ")", List.of(part("alpha", null, n), part("beta", null, m)),
					() -> this.service.a(n, m), null);
		}

		/** A per-key bucket and a plain one, one cost. */
		private void callB() {
			String k = key();
			long n = cost("perkey", "beta");
			call("b(k=" + k + ", n=" + n + ")", List.of(part("beta", null, n), part("perkey", k, n)),
					() -> this.service.b(k, n), null);
		}

		/** One bucket, {@code refundIf} on a parameter. */
		private void callC() {
			long n = cost("gamma");
			boolean ok = this.random.nextBoolean();
			call("c(n=" + n + ", ok=" + ok + ")", List.of(part("gamma", null, n)), () -> this.service.c(n, ok),
					(parts) -> {
						if (ok) {
							refund(parts.get(0), n);
						}
					});
		}

		/** Two buckets, {@code settle} on a parameter and on {@code #result}. */
		private void callD() {
			long n = cost("alpha", "delta");
			long used = settled(n);
			long used2 = settled(n);
			call("d(n=" + n + ", used=" + used + ", used2=" + used2 + ")",
					List.of(part("alpha", null, n), part("delta", null, n)), () -> this.service.d(n, used, used2),
					(parts) -> {
						settle(parts.get(0), n, used2); // alpha: settle = "#result"
						settle(parts.get(1), n, used); // delta: settle = "#used"
					});
		}

		/** A per-key bucket with {@code refundIf} on {@code #result} and a plain one with {@code settle}. */
		private void callE() {
			String k = key();
			long n = cost("perkey");
			long m = cost("delta");
			long used = settled(m);
			boolean ok = this.random.nextInt(3) == 0;
			call("e(k=" + k + ", n=" + n + ", m=" + m + ", used=" + used + ", ok=" + ok + ")",
					List.of(part("delta", null, m), part("perkey", k, n)), () -> this.service.e(k, n, m, used, ok),
					(parts) -> {
						settle(parts.get(0), m, used);
						if (ok) {
							refund(parts.get(1), n);
						}
					});
		}

		/** One bucket, no completion attribute: the single-bucket path, on a bucket C uses too. */
		private void callF() {
			long n = cost("gamma");
			call("f(n=" + n + ")", List.of(part("gamma", null, n)), () -> this.service.f(n), null);
		}

		private long settled(long cost) {
			return switch (this.random.nextInt(4)) {
				case 0 -> cost;
				case 1 -> this.random.nextLong(cost + 1);
				default -> this.random.nextLong(2 * cost + 4);
			};
		}

		private Part part(String bucket, String key, long cost) {
			if (key == null) {
				return new Part(bucket, null, cost, this.plain.get(bucket), false);
			}
			boolean overflows = overflows(key);
			return new Part(bucket, key, cost, overflows ? this.overflow : keyRef(key), overflows);
		}

		/**
		 * Whether a call with {@code key} goes to the overflow bucket: the key has no bucket of its own
		 * now, {@code keys.max} keys have one, and none of theirs is full (a full one would be dropped to
		 * make room). Which keys have a bucket is read from the application: which full one is dropped
		 * is the implementation's choice, and changes nothing (a key without a bucket is a full one).
		 */
		private boolean overflows(String key) {
			if (this.config.keysMax == 0) {
				return false;
			}
			KeyedBuckets keys = this.registry.get("perkey").keyed();
			if (keys.find(key) != null) {
				return false;
			}
			long now = this.clock.get();
			int kept = 0;
			for (String other : KEYS) {
				if (keys.find(other) != null) {
					kept++;
					RefBucket ref = keyRef(other);
					ref.advance(now);
					if (ref.full()) {
						return false;
					}
				}
			}
			if (kept < this.config.keysMax) {
				return false;
			}
			count("call to the overflow bucket");
			return true;
		}

		private void refund(Part part, long n) {
			count("refundIf true");
			part.ref.refund(n);
		}

		private void settle(Part part, long cost, long used) {
			if (used < cost) {
				count("settle gives back");
				part.ref.refund(cost - used);
			}
			else if (used > cost) {
				count("settle charges");
				part.ref.charge(used - cost);
				if (part.ref.a.signum() < 0) {
					count("settle into debt");
				}
			}
		}

		private void count(String what) {
			this.tally.merge(what, 1L, Long::sum);
		}

		/**
		 * Calls the method and checks the outcome against the reference's; on a grant, the reference runs
		 * the completion attributes.
		 */
		private void call(String what, List<Part> parts, Runnable method, Consumer<List<Part>> completion) {
			long now = this.clock.get();
			long longest = -1;
			List<Part> refusing = new ArrayList<>();
			for (Part part : parts) {
				part.ref.advance(now);
				if (part.ref.a.signum() < 0) {
					count((part.cost == 0) ? "cost 0 on a bucket in debt" : "call on a bucket in debt");
				}
				if (!part.ref.has(part.cost)) {
					long wait = part.ref.waitFor(part.cost);
					if (wait > longest) {
						longest = wait;
						refusing.clear();
					}
					if (wait == longest) {
						refusing.add(part);
					}
				}
			}
			String method1 = what.substring(0, 1);
			RateLimitExceededException refusal = null;
			try {
				method.run();
			}
			catch (RateLimitExceededException ex) {
				refusal = ex;
			}
			if (refusal == null) {
				log("%s -> granted (reference: %s)", what,
						refusing.isEmpty() ? "granted" : "refused by " + refusing.get(0).name() + " in " + longest + " ns");
				equal(what + ": granted", true, refusing.isEmpty());
				count("granted");
				for (Part part : parts) {
					part.ref.take(part.cost);
					this.counts.get(part.bucket)[0]++;
				}
				this.invocations.merge(method1, 1L, Long::sum);
				if (completion != null) {
					completion.accept(parts);
				}
				return;
			}
			RateLimitExceededException ex = refusal;
			log("%s -> refused by %s%s, cost %d, retry after %d ns (reference: %s)", what, ex.getBucket(),
					(ex.getKey() != null) ? " key " + ex.getKey() : "", ex.getCost(), ex.getRetryAfter().toNanos(),
					refusing.isEmpty() ? "granted" : "refused by " + refusing.stream().map(Part::name).toList() + " in "
							+ longest + " ns");
			equal(what + ": granted", false, refusing.isEmpty());
			count("refused");
			long refusingParts = parts.stream().filter((p) -> !p.ref.has(p.cost)).count();
			if (refusingParts > 1) {
				count((refusing.size() > 1) ? "refused by several, tied" : "refused by several");
			}
			if (parts.size() > 1 && refusingParts < parts.size()) {
				count("refused with another bucket able");
			}
			if (ex.getKey() != null) {
				count("refused by a key's bucket");
			}
			Part named = refusing.stream()
				.filter((p) -> p.bucket.equals(ex.getBucket()) && java.util.Objects.equals(p.key, ex.getKey()))
				.findFirst()
				.orElseThrow(() -> new AssertionError(what + ": refused by " + ex.getBucket() + " key " + ex.getKey()
						+ ", reference: one of " + refusing.stream().map(Part::name).toList()));
			equal(what + ": retry after (ns)", ex.getRetryAfter().toNanos(), longest);
			equal(what + ": cost in the refusal", ex.getCost(), named.cost);
			this.counts.get(named.bucket)[1]++;
		}

		private void check() {
			long now = this.clock.get();
			for (String name : BUCKETS) {
				RegisteredBucket bucket = this.registry.get(name);
				RefBucket ref = this.plain.get(name);
				ref.advance(now);
				equal(name + ": available", (long) bucket.limiter().snapshot().available(), ref.available());
				equal(name + ": granted", bucket.stats().granted(), this.counts.get(name)[0]);
				equal(name + ": rejected", bucket.stats().rejected(), this.counts.get(name)[1]);
			}
			RegisteredBucket perkey = this.registry.get("perkey");
			for (String key : KEYS) {
				RefBucket ref = this.keyed.get(key);
				if (ref != null) {
					ref.advance(now);
				}
				RateLimiter limiter = perkey.keyed().find(key);
				if (limiter == null) {
					if (ref != null && !ref.full()) {
						throw new AssertionError("perkey[" + key + "]: dropped while not full, reference " + ref);
					}
					count("key without a bucket at a check");
					continue;
				}
				long expected = (ref != null) ? ref.available() : this.config.buckets.get("perkey")[1];
				equal("perkey[" + key + "]: available", (long) limiter.snapshot().available(), expected);
			}
			equal("method invocations", this.service.invocations(), this.invocations);
		}

		private void log(String format, Object... args) {
			this.trace.add(String.format("t=%d ", this.clock.get()) + String.format(format, args));
		}

		/** Adds the reference's levels after the step (as of the step's instant) to the step's line. */
		private void stateAfter() {
			long now = this.clock.get();
			StringBuilder state = new StringBuilder();
			this.plain.forEach((name, ref) -> {
				if (!name.equals("perkey")) {
					ref.advance(now);
					state.append(' ').append(name).append('=').append(ref);
				}
			});
			this.keyed.forEach((key, ref) -> {
				ref.advance(now);
				state.append(" perkey[").append(key).append("]=").append(ref);
			});
			if (this.config.keysMax > 0) {
				this.overflow.advance(now);
				state.append(" overflow=").append(this.overflow);
			}
			int last = this.trace.size() - 1;
			this.trace.set(last, this.trace.get(last) + "    [reference after:" + state + "]");
		}

		private static void equal(String what, Object actual, Object expected) {
			if (!actual.equals(expected)) {
				throw new AssertionError(what + ": actual " + actual + ", reference " + expected);
			}
		}
	}

	/**
	 * One bucket a call takes from: the bucket's name, the key ({@code null}: the bucket itself), the cost,
	 * the reference's bucket, and whether that is the overflow bucket.
	 */
	private record Part(String bucket, String key, long cost, RefBucket ref, boolean overflow) {

		String name() {
			return (this.key != null) ? this.bucket + "[" + this.key + (this.overflow ? " in overflow" : "") + "]"
					: this.bucket;
		}

		@Override
		public String toString() {
			return name();
		}
	}

	/**
	 * The exact token bucket: {@code a / den} tokens (negative when owed), at most the limit, growing
	 * by {@code num / den} per nanosecond; rate r per second is {@code num / den = r / 10^9} in lowest
	 * terms, so {@code den} divides 10^9 and a level prints exactly with nine decimals.
	 */
	private static final class RefBucket {

		private final BigInteger num;

		private final BigInteger den;

		private final BigInteger full;

		private BigInteger a;

		private long time;

		RefBucket(long perSecond, long limit, long now) {
			BigInteger r = BigInteger.valueOf(perSecond);
			BigInteger p = BigInteger.valueOf(SECOND);
			BigInteger g = r.gcd(p);
			this.num = r.divide(g);
			this.den = p.divide(g);
			this.full = BigInteger.valueOf(limit).multiply(this.den);
			this.a = this.full;
			this.time = now;
		}

		/** Time moves on: the level grows, never above the limit (the excess, a fraction included, is lost). */
		void advance(long now) {
			if (now > this.time) {
				this.a = this.a.add(this.num.multiply(BigInteger.valueOf(now - this.time))).min(this.full);
				this.time = now;
			}
		}

		private BigInteger scaled(long n) {
			return BigInteger.valueOf(n).multiply(this.den);
		}

		/** Whether {@code n} tokens can be taken now without waiting (0 always can). */
		boolean has(long n) {
			return n == 0 || this.a.compareTo(scaled(n)) >= 0;
		}

		/** The first whole nanosecond at which {@code n} tokens are there. */
		long waitFor(long n) {
			BigInteger missing = scaled(n).subtract(this.a);
			BigInteger[] qr = missing.divideAndRemainder(this.num);
			return (qr[1].signum() == 0 ? qr[0] : qr[0].add(BigInteger.ONE)).longValueExact();
		}

		void take(long n) {
			this.a = this.a.subtract(scaled(n));
		}

		void refund(long n) {
			this.a = this.a.add(scaled(n)).min(this.full);
		}

		void charge(long n) {
			this.a = this.a.subtract(scaled(n));
		}

		boolean full() {
			return this.a.equals(this.full);
		}

		long available() {
			return (this.a.signum() <= 0) ? 0 : this.a.divide(this.den).longValueExact();
		}

		@Override
		public String toString() {
			BigInteger nanos = this.a.multiply(BigInteger.valueOf(SECOND).divide(this.den));
			return new BigDecimal(nanos, 9).stripTrailingZeros().toPlainString();
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class ServiceConfiguration {

		@Bean
		Service service() {
			return new Service();
		}
	}

	/** The guarded methods; each counts its invocations. */
	static class Service {

		private final Map<String, AtomicLong> invocations = new java.util.concurrent.ConcurrentHashMap<>();

		private void ran(String method) {
			this.invocations.computeIfAbsent(method, (m) -> new AtomicLong()).incrementAndGet();
		}

		Map<String, Long> invocations() {
			Map<String, Long> copy = new HashMap<>();
			this.invocations.forEach((method, count) -> copy.put(method, count.get()));
			return copy;
		}

		@RateLimited(value = "alpha", cost = "#n")
		@RateLimited(value = "beta", cost = "#m")
		public void a(long n, long m) {
			ran("a");
		}

		@RateLimited(value = "perkey", key = "#k", cost = "#n")
		@RateLimited(value = "beta", cost = "#n")
		public void b(String k, long n) {
			ran("b");
		}

		@RateLimited(value = "gamma", cost = "#n", refundIf = "#ok")
		public void c(long n, boolean ok) {
			ran("c");
		}

		@RateLimited(value = "delta", cost = "#n", settle = "#used")
		@RateLimited(value = "alpha", cost = "#n", settle = "#result")
		public long d(long n, long used, long used2) {
			ran("d");
			return used2;
		}

		@RateLimited(value = "perkey", key = "#k", cost = "#n", refundIf = "#result")
		@RateLimited(value = "delta", cost = "#m", settle = "#used")
		public boolean e(String k, long n, long m, long used, boolean ok) {
			ran("e");
			return ok;
		}

		@RateLimited(value = "gamma", cost = "#n")
		public void f(long n) {
			ran("f");
		}
	}
}
