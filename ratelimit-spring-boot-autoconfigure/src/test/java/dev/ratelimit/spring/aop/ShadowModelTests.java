package dev.ratelimit.spring.aop;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.BucketStats;
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
 * Shadow mode (contract revision 2, "Shadow mode") checked step by step against an exact reference
 * written for the test, in seeded random sequences of calls and clock moves on a fake clock.
 *
 * <p>Buckets: {@code s1} (shadow, plain), {@code s2} (shadow, capped release), {@code sk} (shadow,
 * per-key), each with a max-wait the configuration draws (0, a third of an interval, two intervals and
 * a bit, an hour); beside them {@code e1} (enforce, plain), {@code ec} (enforce, capped release) and
 * {@code ek} (enforce, per-key), all with {@code max-wait: 0}, so that no call ever parks a thread.
 * Methods take from one shadow bucket (blocking, {@code CompletableFuture} held open by the test so that
 * capped tokens stay in flight, an annotation {@code maxWait} override, {@code settle}), from a shadow
 * bucket beside an enforcing one, from two shadow buckets, and from an enforcing bucket alone.
 *
 * <p>What the reference says, from the contract and the starter's javadoc:
 * <ul>
 * <li>A shadow bucket never holds a call back: a method whose buckets are all in shadow mode always
 * runs, at once, and never fails.</li>
 * <li>It decides as the bucket would: with {@code w} the time until its tokens are there (exact, whole
 * nanoseconds rounded up) and {@code W} its max-wait, a call with {@code w > W} would be refused: it
 * counts as {@code shadow-rejected} and the bucket keeps nothing. A call with {@code w = 0} whose tokens
 * are there takes them as usual (capped: in flight until the call completes) and counts as
 * {@code granted}. A call it would make wait ({@code 0 < w <= W}, or, capped, tokens all in flight and
 * {@code W > 0}) runs at once keeping its tokens, taken on the rate only (nothing in flight), and counts
 * as {@code granted}. Capped with its tokens in flight and {@code W = 0}: the bucket would refuse at
 * once ({@code shadow-rejected}).</li>
 * <li>{@code settle} acts on a shadow bucket that kept the call's tokens, not on one that would have
 * refused it.</li>
 * <li>Beside an enforcing bucket, the enforcing decision is the enforcing bucket's alone: refused
 * exactly when its tokens are not there (time, or capped: in flight), naming it (and its key), with the
 * exact wait as {@code getRetryAfter()} for a time-based refusal, counted {@code rejected} on it; a
 * refused call does not run, and the shadow buckets beside it neither keep nor count anything (the
 * call was not let through).</li>
 * <li>Levels: each bucket's level is an exact rational that grows at the rate up to the limit (a full
 * bucket earns no part of the next token), less what calls took or were charged, plus what
 * {@code settle} gave back (never above the limit); a capped bucket also holds its tokens in flight until
 * the call completes. After every step, every bucket's and every key's {@code available},
 * {@code deficiency} and {@code inFlight}, and every bucket's {@code granted}, {@code rejected} and
 * {@code shadow-rejected} counts, equal the reference's; a key's bucket that is gone must have been
 * full.</li>
 * </ul>
 *
 * <p>One context per configuration runs every sequence of that configuration; a sequence starts by
 * completing every call still open and moving the clock a day ahead (every bucket full). A failure
 * prints the seed, the configuration and the trace; {@code -Dmodel.seed=<seed>} replays one sequence,
 * {@code -Dmodel.sequences=<n>} runs more random ones.
 */
class ShadowModelTests {

	private static final long RANDOM_SEQUENCES = Long.getLong("model.sequences", 1_500);

	private static final long FIXED_SEQUENCES = 1_500;

	private static final int STEPS = 40;

	private static final int CONFIGURATIONS = 4;

	/** Every bucket, in claim order (by name). */
	private static final String[] BUCKETS = { "e1", "ec", "ek", "s1", "s2", "sk" };

	private static final String[] KEYED = { "ek", "sk" };

	private static final String[] KEYS = { "ann", "bob", "cy" };

	private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

	private static final long HOUR = TimeUnit.HOURS.toNanos(1);

	private static final long DAY = TimeUnit.DAYS.toNanos(1);

	@Test
	void agreesWithTheReferenceOnFixedSeeds() {
		ModelSeeds.Seeds seeds = ModelSeeds.fixed(FIXED_SEQUENCES);
		runSeeds(seeds.what(), seeds.list());
	}

	@Test
	void agreesWithTheReferenceOnRandomSeeds() {
		ModelSeeds.Seeds seeds = ModelSeeds.random(RANDOM_SEQUENCES);
		runSeeds(seeds.what(), seeds.list());
	}

	private static void runSeeds(String what, List<Long> seeds) {
		Map<String, Long> tally = new TreeMap<>();
		long started = System.nanoTime();
		for (int configuration = 0; configuration < CONFIGURATIONS; configuration++) {
			List<Long> mine = ModelSeeds.inSlot(seeds, configuration, (seed) -> Math.floorMod(seed, CONFIGURATIONS));
			if (mine.isEmpty()) {
				continue;
			}
			Config config = Config.of(configuration);
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
		System.out.printf("ShadowModelTests (%s): %d sequences of %d steps in %d ms: %s%n", what, seeds.size(),
				STEPS, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started), tally);
	}

	/** Each bucket's rate (per second), limit and max-wait (ns), drawn from the configuration's number. */
	record Config(int number, Map<String, long[]> buckets) {

		static Config of(int number) {
			SplittableRandom random = new SplittableRandom(0x5ad0L + number);
			Map<String, long[]> buckets = new LinkedHashMap<>();
			for (String name : BUCKETS) {
				long rate = 3 + random.nextInt(8);
				long limit = 1 + random.nextInt(5);
				long interval = (SECOND + rate - 1) / rate;
				long maxWait = 0;
				if (name.startsWith("s")) {
					// each configuration gives the shadow buckets different max-waits
					maxWait = switch ((number + name.charAt(1)) % 4) {
						case 0 -> 0;
						case 1 -> interval / 3;
						case 2 -> 2 * interval + 7;
						default -> HOUR;
					};
				}
				buckets.put(name, new long[] { rate, limit, maxWait });
			}
			return new Config(number, buckets);
		}

		long rate(String bucket) {
			return this.buckets.get(bucket)[0];
		}

		long limit(String bucket) {
			return this.buckets.get(bucket)[1];
		}

		long maxWait(String bucket) {
			return this.buckets.get(bucket)[2];
		}

		static boolean shadow(String bucket) {
			return bucket.startsWith("s");
		}

		static boolean capped(String bucket) {
			return bucket.endsWith("c") || bucket.equals("s2");
		}

		String[] properties() {
			List<String> properties = new ArrayList<>();
			this.buckets.forEach((name, b) -> {
				String prefix = "ratelimit.buckets." + name + ".";
				properties.add(prefix + "rate=" + b[0]);
				properties.add(prefix + "limit=" + b[1]);
				properties.add(prefix + "max-wait=" + ((b[2] == 0) ? "0" : b[2] + "ns"));
				properties.add(prefix + "mode=" + (shadow(name) ? "shadow" : "enforce"));
				if (capped(name)) {
					properties.add(prefix + "capped-release=true");
				}
			});
			return properties.toArray(new String[0]);
		}

		@Override
		public String toString() {
			StringBuilder s = new StringBuilder("configuration ").append(this.number).append(':');
			this.buckets.forEach((name, b) -> s.append(' ')
				.append(name)
				.append(shadow(name) ? "(shadow" : "(enforce")
				.append(capped(name) ? ", capped)" : ")")
				.append(" rate=")
				.append(b[0])
				.append("/s limit=")
				.append(b[1])
				.append(" max-wait=")
				.append(b[2])
				.append("ns"));
			return s.toString();
		}
	}

	/** What a shadow bucket decided for a call, in the reference. */
	enum Decision {

		/** Its tokens were there: taken as usual. */
		TAKEN,

		/** It would have made the call wait: the call ran at once, its tokens taken on the rate only. */
		CHARGED,

		/** It would have refused: the call ran, the bucket kept nothing. */
		SHADOW_REJECTED

	}

	/** A call the test keeps open (a {@code CompletableFuture} method): its capped tokens stay in flight. */
	private record Open(String what, CompletableFuture<String> held, CompletableFuture<?> result,
			List<Part> inFlight) {
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

		private final Map<String, RefBucket> plain = new LinkedHashMap<>();

		/** Per-key reference buckets, by bucket and key, made full on first use. */
		private final Map<String, Map<String, RefBucket>> keyed = new LinkedHashMap<>();

		/** granted, rejected, shadow-rejected, by bucket. */
		private final Map<String, long[]> counts = new HashMap<>();

		private final Map<String, Long> invocations = new HashMap<>();

		private final List<Open> open = new ArrayList<>();

		private final Map<String, Long> tally;

		Run(long seed, Config config, AtomicLong clock, Service service, RateLimiterRegistry registry,
				Map<String, Long> tally) {
			this.seed = seed;
			this.config = config;
			this.random = new SplittableRandom(seed);
			this.clock = clock;
			this.service = service;
			this.registry = registry;
			this.tally = tally;
		}

		void execute() {
			try {
				start();
				for (int step = 0; step < STEPS; step++) {
					step();
					stateAfter();
					check();
				}
				finish();
			}
			catch (AssertionError | RuntimeException ex) {
				StringBuilder message = new StringBuilder("seed ").append(this.seed)
					.append(" (replay with -Dmodel.seed=")
					.append(this.seed)
					.append(")\n  ")
					.append(this.config)
					.append('\n');
				for (String line : this.trace) {
					message.append("  ").append(line).append('\n');
				}
				message.append("  => ").append(ex);
				throw new AssertionError(message.toString(), ex);
			}
		}

		/**
		 * A day later every bucket is full (the previous sequence completed its calls); counts go on from
		 * where they are.
		 */
		private void start() {
			long now = this.clock.addAndGet(DAY);
			for (String name : BUCKETS) {
				this.plain.put(name, ref(name, now));
				BucketStats stats = this.registry.get(name).stats();
				this.counts.put(name, new long[] { stats.granted(), stats.rejected(), stats.shadowRejected() });
			}
			for (String name : KEYED) {
				this.keyed.put(name, new LinkedHashMap<>());
			}
			this.invocations.putAll(this.service.invocations());
			log("start, a day later: every bucket full");
			stateAfter();
			check();
		}

		/** Completes the calls still open, so that the next sequence starts with nothing in flight. */
		private void finish() {
			while (!this.open.isEmpty()) {
				complete(0);
				stateAfter();
				check();
			}
		}

		private RefBucket ref(String name, long now) {
			return new RefBucket(this.config.rate(name), this.config.limit(name), Config.capped(name), now);
		}

		private RefBucket keyRef(String bucket, String key) {
			return this.keyed.get(bucket).computeIfAbsent(key, (k) -> ref(bucket, this.clock.get()));
		}

		private void step() {
			int op = this.random.nextInt(100);
			if (op < 20) {
				moveClock();
			}
			else if (op < 27) {
				if (this.open.isEmpty()) {
					moveClock();
				}
				else {
					complete(this.random.nextInt(this.open.size()));
				}
			}
			else if (op < 35) {
				callA(false);
			}
			else if (op < 39) {
				callA(true);
			}
			else if (op < 47) {
				callB();
			}
			else if (op < 55) {
				callC();
			}
			else if (op < 64) {
				callD();
			}
			else if (op < 72) {
				callE();
			}
			else if (op < 81) {
				callF();
			}
			else if (op < 88) {
				callG();
			}
			else if (op < 93) {
				callH();
			}
			else {
				callI();
			}
		}

		private void moveClock() {
			long interval = (SECOND + 2) / 3; // the longest interval of any bucket here (3 per second)
			long delta = switch (this.random.nextInt(10)) {
				case 0 -> 0;
				case 1 -> 1 + this.random.nextInt(5);
				case 2, 3 -> 1 + this.random.nextLong(interval);
				case 4 -> SECOND / (3 + this.random.nextInt(8)) + this.random.nextInt(3) - 1; // about one interval
				case 5, 6 -> interval * (1 + this.random.nextInt(4));
				case 7 -> this.random.nextLong(3 * SECOND);
				case 8 -> SECOND / (3 + this.random.nextInt(8)) * (1 + this.random.nextInt(4)); // whole intervals
				default -> (this.random.nextInt(4) == 0) ? HOUR * (1 + this.random.nextInt(3))
						: this.random.nextLong(interval / 4);
			};
			this.clock.addAndGet(delta);
			log("clock +%d ns", delta);
		}

		/** A cost: up to two more than the limit, but never more than the limit of a capped bucket. */
		private long cost(String bucket) {
			long limit = this.config.limit(bucket);
			return this.random.nextLong(Config.capped(bucket) ? limit + 1 : limit + 3);
		}

		private String key() {
			return KEYS[this.random.nextInt(KEYS.length)];
		}

		private Part part(String bucket, String key, long cost, long maxWait) {
			RefBucket ref = (key != null) ? keyRef(bucket, key) : this.plain.get(bucket);
			return new Part(bucket, key, cost, ref, Config.shadow(bucket), maxWait);
		}

		private Part part(String bucket, String key, long cost) {
			return part(bucket, key, cost, this.config.maxWait(bucket));
		}

		/** One shadow bucket, blocking; {@code zero}: the annotation's {@code maxWait = "0"}. */
		private void callA(boolean zero) {
			long n = cost("s1");
			Part s1 = zero ? part("s1", null, n, 0) : part("s1", null, n);
			String name = zero ? "a0" : "a";
			call(name + "(n=" + n + ")", name, List.of(s1), zero ? () -> this.service.a0(n) : () -> this.service.a(n),
					null, null);
		}

		/** One shadow per-key bucket. */
		private void callB() {
			String k = key();
			long n = cost("sk");
			call("b(k=" + k + ", n=" + n + ")", "b", List.of(part("sk", k, n)), () -> this.service.b(k, n), null, null);
		}

		/** One shadow capped bucket, a call held open. */
		private void callC() {
			long n = cost("s2");
			CompletableFuture<String> held = new CompletableFuture<>();
			call("c(n=" + n + ")", "c", List.of(part("s2", null, n)), () -> this.service.c(n, held), null, held);
		}

		/** An enforcing bucket and a shadow one. */
		private void callD() {
			long n = cost("e1");
			long m = cost("s1");
			call("d(n=" + n + ", m=" + m + ")", "d", List.of(part("e1", null, n), part("s1", null, m)),
					() -> this.service.d(n, m), null, null);
		}

		/** An enforcing per-key bucket and a shadow per-key one, the same key. */
		private void callE() {
			String k = key();
			long n = cost("ek");
			long m = cost("sk");
			call("e(k=" + k + ", n=" + n + ", m=" + m + ")", "e", List.of(part("ek", k, n), part("sk", k, m)),
					() -> this.service.e(k, n, m), null, null);
		}

		/** An enforcing capped bucket and a shadow capped one, a call held open. */
		private void callF() {
			long n = cost("ec");
			long m = cost("s2");
			CompletableFuture<String> held = new CompletableFuture<>();
			call("f(n=" + n + ", m=" + m + ")", "f", List.of(part("ec", null, n), part("s2", null, m)),
					() -> this.service.f(n, m, held), null, held);
		}

		/** Two shadow buckets (one capped), blocking: the capped tokens come back when it returns. */
		private void callG() {
			long n = cost("s1");
			long m = cost("s2");
			call("g(n=" + n + ", m=" + m + ")", "g", List.of(part("s1", null, n), part("s2", null, m)),
					() -> this.service.g(n, m), null, null);
		}

		/** An enforcing bucket alone (the reference for what enforcing means here). */
		private void callH() {
			long n = cost("e1");
			call("h(n=" + n + ")", "h", List.of(part("e1", null, n)), () -> this.service.h(n), null, null);
		}

		/** A shadow bucket with {@code settle = "#used"}. */
		private void callI() {
			long n = cost("s1");
			long used = switch (this.random.nextInt(3)) {
				case 0 -> n;
				case 1 -> this.random.nextLong(n + 1);
				default -> this.random.nextLong(2 * n + 4);
			};
			call("i(n=" + n + ", used=" + used + ")", "i", List.of(part("s1", null, n)), () -> this.service.i(n, used),
					(decided) -> {
						Part s1 = decided.get(0);
						if (s1.decision == Decision.SHADOW_REJECTED) {
							return;
						}
						if (used < n) {
							count("settle gives back on a shadow bucket");
							s1.ref.refund(n - used);
						}
						else if (used > n) {
							count("settle charges a shadow bucket");
							s1.ref.charge(used - n);
						}
					}, null);
		}

		/** Completes an open call: its capped tokens come back. */
		private void complete(int index) {
			Open call = this.open.remove(index);
			call.held.complete("done");
			log("complete %s", call.what);
			for (Part part : call.inFlight) {
				part.ref.release(part.cost);
			}
			if (!call.result.isDone() || call.result.isCompletedExceptionally()) {
				throw new AssertionError(call.what + ": its future did not complete with the held one: " + call.result);
			}
		}

		private void count(String what) {
			this.tally.merge(what, 1L, Long::sum);
		}

		/**
		 * Calls a method and checks the outcome against the reference's.
		 *
		 * @param parts the buckets the call takes from, in claim order (by name)
		 * @param completion what the reference does when a granted call completes (blocking methods only)
		 * @param held the future a {@code CompletableFuture} method returns, kept open, or {@code null} for a
		 *        blocking method
		 */
		private void call(String what, String method, List<Part> parts, Callable<Object> invoke,
				java.util.function.Consumer<List<Part>> completion, CompletableFuture<String> held) {
			long now = this.clock.get();
			for (Part part : parts) {
				part.ref.advance(now);
			}
			// the enforcing bucket (at most one here) decides alone
			Part enforcing = null;
			for (Part part : parts) {
				if (!part.shadow) {
					enforcing = part;
				}
			}
			long wait = 0;
			boolean refused = false;
			if (enforcing != null && !enforcing.ref.has(enforcing.cost)) {
				refused = true;
				wait = enforcing.ref.timeWait(enforcing.cost);
			}
			// what the application does
			Object returned = null;
			Throwable failure = null;
			try {
				returned = invoke.call();
			}
			catch (Throwable ex) {
				failure = ex;
			}
			if (held != null && failure == null) {
				CompletableFuture<?> result = (CompletableFuture<?>) returned;
				if (result.isCompletedExceptionally()) {
					failure = causeOf(result);
				}
				else if (result.isDone()) {
					throw new AssertionError(what + ": completed before the held future: " + result);
				}
			}
			if (refused) {
				checkRefused(what, enforcing, wait, failure);
				return;
			}
			if (failure != null) {
				log("%s -> failed: %s (reference: granted)", what, failure);
				throw new AssertionError(what + ": failed, reference: granted", failure);
			}
			// granted: the enforcing bucket takes, each shadow bucket decides as it would
			StringBuilder decisions = new StringBuilder();
			List<Part> inFlight = new ArrayList<>();
			for (Part part : parts) {
				if (!part.shadow) {
					part.ref.take(part.cost);
					this.counts.get(part.bucket)[0]++;
					if (part.ref.capped && part.cost > 0) {
						inFlight.add(part);
					}
					decisions.append(' ').append(part.name()).append(" granted");
					continue;
				}
				part.decision = decide(part);
				decisions.append(' ').append(part.name()).append(' ').append(part.decision);
				if (part.decision == Decision.TAKEN && part.ref.capped && part.cost > 0) {
					inFlight.add(part);
				}
			}
			this.invocations.merge(method, 1L, Long::sum);
			log("%s -> ran (reference:%s)", what, decisions);
			if (held == null) {
				if (completion != null) {
					completion.accept(parts);
				}
				for (Part part : inFlight) {
					part.ref.release(part.cost);
				}
			}
			else {
				this.open.add(new Open(what, held, (CompletableFuture<?>) returned, inFlight));
			}
		}

		/** A shadow bucket's decision in the reference, applied to it and counted. */
		private Decision decide(Part part) {
			RefBucket ref = part.ref;
			long[] counts = this.counts.get(part.bucket);
			long wait = ref.timeWait(part.cost);
			if (wait > part.maxWait) {
				counts[2]++;
				count("shadow-rejected: wait longer than max-wait");
				return Decision.SHADOW_REJECTED;
			}
			boolean room = ref.hasRoom(part.cost);
			if (wait == 0 && room) {
				ref.take(part.cost);
				counts[0]++;
				count("shadow: tokens there");
				return Decision.TAKEN;
			}
			if (wait == 0 && part.maxWait == 0) {
				counts[2]++;
				count("shadow-rejected: capped, tokens in flight, max-wait 0");
				return Decision.SHADOW_REJECTED;
			}
			ref.charge(part.cost);
			counts[0]++;
			count(room ? "shadow: would wait, charged" : "shadow: capped, would wait for releases, charged");
			return Decision.CHARGED;
		}

		private void checkRefused(String what, Part enforcing, long wait, Throwable failure) {
			String reference = "refused by " + enforcing.name() + ((wait > 0) ? " in " + wait + " ns" : " (in flight)");
			if (!(failure instanceof RateLimitExceededException ex)) {
				log("%s -> %s (reference: %s)", what, (failure == null) ? "ran" : "failed: " + failure, reference);
				throw new AssertionError(what + ": not refused, reference: " + reference, failure);
			}
			log("%s -> refused by %s%s, retry after %d ns (reference: %s)", what, ex.getBucket(),
					(ex.getKey() != null) ? " key " + ex.getKey() : "", ex.getRetryAfter().toNanos(), reference);
			equal(what + ": refusing bucket", ex.getBucket(), enforcing.bucket);
			equal(what + ": key in the refusal", Objects.toString(ex.getKey()), Objects.toString(enforcing.key));
			equal(what + ": cost in the refusal", ex.getCost(), enforcing.cost);
			if (wait > 0) {
				equal(what + ": retry after (ns)", ex.getRetryAfter().toNanos(), wait);
				count("enforcing bucket refuses: time");
			}
			else {
				if (ex.getRetryAfter().isNegative() || ex.getRetryAfter().isZero()) {
					throw new AssertionError(what + ": retry after " + ex.getRetryAfter() + " for tokens in flight");
				}
				count("enforcing bucket refuses: tokens in flight");
			}
			this.counts.get(enforcing.bucket)[1]++;
		}

		private static Throwable causeOf(CompletableFuture<?> future) {
			try {
				future.get();
				return null;
			}
			catch (ExecutionException ex) {
				return ex.getCause();
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
				return ex;
			}
			catch (CompletionException ex) {
				return ex.getCause();
			}
		}

		private void check() {
			long now = this.clock.get();
			for (String name : BUCKETS) {
				RegisteredBucket bucket = this.registry.get(name);
				RefBucket ref = this.plain.get(name);
				ref.advance(now);
				checkLevels(name, bucket.limiter().snapshot(), ref);
				BucketStats stats = bucket.stats();
				long[] counts = this.counts.get(name);
				equal(name + ": granted", stats.granted(), counts[0]);
				equal(name + ": rejected", stats.rejected(), counts[1]);
				equal(name + ": shadow-rejected", stats.shadowRejected(), counts[2]);
			}
			for (String name : KEYED) {
				RegisteredBucket bucket = this.registry.get(name);
				for (String key : KEYS) {
					RefBucket ref = this.keyed.get(name).get(key);
					if (ref != null) {
						ref.advance(now);
					}
					RateLimiter limiter = (bucket.keys() > 0) ? bucket.keyed().find(key) : null;
					if (limiter == null) {
						if (ref != null && !ref.full()) {
							throw new AssertionError(name + "[" + key + "]: dropped while not full, reference " + ref);
						}
						continue;
					}
					checkLevels(name + "[" + key + "]", limiter.snapshot(),
							(ref != null) ? ref : ref(name, now));
				}
			}
			equal("method invocations", this.service.invocations(), this.invocations);
		}

		private static void checkLevels(String name, RateLimiterSnapshot s, RefBucket ref) {
			equal(name + ": available", (long) s.available(), ref.available());
			equal(name + ": deficiency", (long) s.deficiency(), ref.deficiency());
			equal(name + ": in flight", (long) s.inFlight(), ref.inFlight);
		}

		private void log(String format, Object... args) {
			this.trace.add(String.format("t=%d ", this.clock.get()) + String.format(format, args));
		}

		private void stateAfter() {
			long now = this.clock.get();
			StringBuilder state = new StringBuilder();
			this.plain.forEach((name, ref) -> {
				if (!name.endsWith("k")) {
					ref.advance(now);
					state.append(' ').append(name).append('=').append(ref);
				}
			});
			this.keyed.forEach((name, keys) -> keys.forEach((key, ref) -> {
				ref.advance(now);
				state.append(' ').append(name).append('[').append(key).append("]=").append(ref);
			}));
			int last = this.trace.size() - 1;
			this.trace.set(last, this.trace.get(last) + "    [reference after:" + state + "]");
		}

		private static void equal(String what, Object actual, Object expected) {
			if (!Objects.equals(actual, expected)) {
				throw new AssertionError(what + ": actual " + actual + ", reference " + expected);
			}
		}
	}

	/** One bucket a call takes from, and (shadow) what the reference decided for it. */
	private static final class Part {

		final String bucket;

		final String key;

		final long cost;

		final RefBucket ref;

		final boolean shadow;

		final long maxWait;

		Decision decision;

		Part(String bucket, String key, long cost, RefBucket ref, boolean shadow, long maxWait) {
			this.bucket = bucket;
			this.key = key;
			this.cost = cost;
			this.ref = ref;
			this.shadow = shadow;
			this.maxWait = maxWait;
		}

		String name() {
			return (this.key != null) ? this.bucket + "[" + this.key + "]" : this.bucket;
		}
	}

	/**
	 * The exact token bucket: {@code a / den} tokens (negative when owed), at most the limit, growing by
	 * {@code num / den} per nanosecond; with capped release, {@code inFlight} tokens taken by calls not
	 * completed yet, which a call cannot have before they come back.
	 */
	static final class RefBucket {

		private final BigInteger num;

		private final BigInteger den;

		private final BigInteger full;

		private final long limit;

		final boolean capped;

		private BigInteger a;

		long inFlight;

		private long time;

		RefBucket(long perSecond, long limit, boolean capped, long now) {
			BigInteger r = BigInteger.valueOf(perSecond);
			BigInteger p = BigInteger.valueOf(SECOND);
			BigInteger g = r.gcd(p);
			this.num = r.divide(g);
			this.den = p.divide(g);
			this.limit = limit;
			this.full = BigInteger.valueOf(limit).multiply(this.den);
			this.capped = capped;
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

		/** Whether {@code n} tokens are there now: by time, and (capped) not in flight. */
		boolean has(long n) {
			return timeWait(n) == 0 && hasRoom(n);
		}

		/** Capped: whether {@code n} tokens are not in flight. */
		boolean hasRoom(long n) {
			return n == 0 || !this.capped || this.limit - this.inFlight >= n;
		}

		/** Nanoseconds until the rate has made {@code n} tokens: the first whole nanosecond. */
		long timeWait(long n) {
			if (n == 0 || this.a.compareTo(scaled(n)) >= 0) {
				return 0;
			}
			BigInteger[] qr = scaled(n).subtract(this.a).divideAndRemainder(this.num);
			return (qr[1].signum() == 0 ? qr[0] : qr[0].add(BigInteger.ONE)).longValueExact();
		}

		void take(long n) {
			this.a = this.a.subtract(scaled(n));
			if (this.capped) {
				this.inFlight += n;
			}
		}

		/** Taken on the rate only: nothing in flight. */
		void charge(long n) {
			this.a = this.a.subtract(scaled(n));
		}

		void refund(long n) {
			this.a = this.a.add(scaled(n)).min(this.full);
		}

		void release(long n) {
			this.inFlight -= n;
		}

		boolean full() {
			return this.a.equals(this.full) && this.inFlight == 0;
		}

		long available() {
			long byRate = (this.a.signum() <= 0) ? 0 : this.a.divide(this.den).longValueExact();
			return this.capped ? Math.max(0, Math.min(byRate, this.limit - this.inFlight)) : byRate;
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
			BigInteger nanos = this.a.multiply(BigInteger.valueOf(SECOND).divide(this.den));
			String level = new BigDecimal(nanos, 9).stripTrailingZeros().toPlainString();
			return this.capped ? level + "(" + this.inFlight + " in flight)" : level;
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

		private final Map<String, AtomicLong> invocations = new ConcurrentHashMap<>();

		private void ran(String method) {
			this.invocations.computeIfAbsent(method, (m) -> new AtomicLong()).incrementAndGet();
		}

		Map<String, Long> invocations() {
			Map<String, Long> copy = new HashMap<>();
			this.invocations.forEach((method, count) -> copy.put(method, count.get()));
			return copy;
		}

		@RateLimited(value = "s1", cost = "#n")
		public Object a(long n) {
			ran("a");
			return null;
		}

		@RateLimited(value = "s1", cost = "#n", maxWait = "0")
		public Object a0(long n) {
			ran("a0");
			return null;
		}

		@RateLimited(value = "sk", key = "#k", cost = "#n")
		public Object b(String k, long n) {
			ran("b");
			return null;
		}

		@RateLimited(value = "s2", cost = "#n")
		public CompletableFuture<String> c(long n, CompletableFuture<String> held) {
			ran("c");
			return held;
		}

		@RateLimited(value = "s1", cost = "#m")
		@RateLimited(value = "e1", cost = "#n")
		public Object d(long n, long m) {
			ran("d");
			return null;
		}

		@RateLimited(value = "sk", key = "#k", cost = "#m")
		@RateLimited(value = "ek", key = "#k", cost = "#n")
		public Object e(String k, long n, long m) {
			ran("e");
			return null;
		}

		@RateLimited(value = "s2", cost = "#m")
		@RateLimited(value = "ec", cost = "#n")
		public CompletableFuture<String> f(long n, long m, CompletableFuture<String> held) {
			ran("f");
			return held;
		}

		@RateLimited(value = "s2", cost = "#m")
		@RateLimited(value = "s1", cost = "#n")
		public Object g(long n, long m) {
			ran("g");
			return null;
		}

		@RateLimited(value = "e1", cost = "#n")
		public Object h(long n) {
			ran("h");
			return null;
		}

		@RateLimited(value = "s1", cost = "#n", settle = "#used")
		public Object i(long n, long used) {
			ran("i");
			return null;
		}
	}
}
