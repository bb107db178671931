package dev.ratelimit.spring.aop;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongConsumer;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.BucketStats;
import dev.ratelimit.spring.ModelSeeds;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RegisteredBucket;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.publisher.Mono;
import reactor.core.publisher.Sinks;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * The asynchronous paths of methods guarded by <em>one</em> bucket ({@code CompletableFuture} and
 * {@code Mono}; plain, with {@code refundIf}/{@code settle}, with a fallback, with a key, with an annotation
 * {@code maxWait}), checked step by step against an exact reference bucket written for the tests
 * ({@link ReferenceBucket}), in seeded random sequences of calls, completions (a value, an empty
 * {@code Mono}, a failure; bodies that throw, return {@code null} or a value at once), cancellations (a
 * {@code CompletableFuture} cancelled, a {@code Mono} subscription disposed: while waiting for tokens,
 * while running, and when done already), retunes of a bucket's rate and limit (as the endpoint does) and
 * moves of a fake clock (small steps, whole token intervals, deadlines and due times to the nanosecond,
 * seconds, hours).
 *
 * <p>Buckets: {@code plain} (shared, uncapped, a rate in tenths per second so that some rates are
 * fractional, max-wait tens of milliseconds: calls wait for time), {@code cap} (shared, capped release,
 * max-wait a few milliseconds: calls wait for releases, and time out) and {@code keyed} (a capped template
 * used with a key, {@code x} or {@code y}: one bucket per key; with {@code keys.max: 1} in two of the three
 * configurations, so that a key whose bucket is busy shares the overflow bucket, and an idle key's bucket is
 * dropped for another key). Blocking methods are called only when the reference says they are decided at once (a
 * blocking call that waits would park the test's thread).
 *
 * <p>Nothing runs on its own: the starter's timer and Reactor's parallel scheduler are one
 * {@link ManualTimer}, run by the test on the fake clock; delayed calls run on the polling thread.
 *
 * <p>What the reference says (contract: core promises, "Annotation", "Rejection", "Micrometer meters"):
 * <ul>
 * <li>A bucket's level is an exact rational, growing with time up to the limit (a full bucket earns no
 * part of the next token), less the tokens claimed; claims are served in order: a claim is covered by
 * time when the level plus the tokens claimed behind it is at least 0; capped, it is also within the limit
 * when the tokens in flight plus the claims up to and including it are at most the limit. (So a capped
 * claim's tokens count as taken when it is made: while it waits for a release the bucket fills up behind
 * it, see {@code CappedWaitBurstTests}.)</li>
 * <li>A claim whose wait by time (whole nanoseconds, rounded up) is longer than the max-wait is refused at
 * once, with that wait as its retry-after, taking nothing; so is a capped claim with max-wait 0 whose tokens
 * are in flight (retry-after 1 ms). A capped claim not within the limit when its max-wait runs out is
 * refused then (retry-after: what it waited, its max-wait, at least 1 ms; a release at that instant comes
 * too late), and gives its claim back. After a retune to a slower rate, a waiter whose tokens are now due
 * later than its max-wait allows is refused at once, with its new wait.</li>
 * <li>A claim given back (refused, cancelled) moves the claims behind it up at once. Calls granted at one
 * instant may run in any order.</li>
 * <li>A granted call's method runs at that instant; capped tokens go in flight and come back exactly once
 * when the call completes, fails or is cancelled. {@code refundIf} true gives the cost back to the rate;
 * {@code settle} gives back or charges the difference (a charge is paid by later callers: callers already
 * waiting keep their place). A cancelled {@code CompletableFuture} is judged as failed with a
 * {@code CancellationException} (the aspect cancels the method's own future); a cancelled {@code Mono} has no
 * outcome (its cost stands). A fallback answers a refusal instead of the error, which still counts as
 * rejected.</li>
 * <li>A retune of the rate counts the time that passed under the old rate and drops the part of a token
 * earned under it; a smaller limit drops the excess.</li>
 * <li>Per-key buckets: a key takes from its own bucket, or a new one when there is room or another key's
 * bucket can be dropped, else from the overflow bucket (counted in {@code ratelimit.keys.overflow}). A key's
 * bucket is dropped only when that changes nothing callers see: full, nothing in flight, nobody waiting, and
 * no call running whose {@code settle} may still charge it ({@code KeyDroppedWhileRunningTests} shows the
 * product dropping it then, before it kept the bucket of a running call with a completion attribute).</li>
 * </ul>
 * After every step the test compares what the application did (methods run, refusals with bucket,
 * cost, retry-after and key, the values and failures the callers saw, at which instant), then each
 * bucket's (each key's) {@code available}, {@code deficiency}, {@code waiting}, {@code inFlight}, its
 * granted and rejected counts, {@code ratelimit.calls} and {@code ratelimit.wait} (count and total, exact on
 * the fake clock). A failure prints the seed, the configuration and the trace (with the reference's buckets
 * after each step); {@code -Dmodel.seed=<seed>} replays one sequence, {@code -Dmodel.sequences=<n>} runs more
 * random ones.
 */
class AsyncSingleBucketModelTests {

	private static final long RANDOM_SEQUENCES = Long.getLong("model.sequences", 400);

	private static final long FIXED_SEQUENCES = 400;

	private static final int STEPS = 40;

	private static final int CONFIGURATIONS = 3;

	/** The buckets' (and keys') references, by name. */
	private static final String[] BUCKETS = { "plain", "cap", "keyed/x", "keyed/y", "keyed/overflow" };

	private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);

	private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

	private static final long HOUR = TimeUnit.HOURS.toNanos(1);

	/** The period of a rate in tenths of a token per second: tenths every ten seconds. */
	private static final long TENTHS_PERIOD = 10 * SECOND;

	/** What the test's subscriber of a {@code Mono} sees when it completes empty. */
	private static final String EMPTY = "<empty>";


	/** What a refusal for releases that did not come reports as its retry-after at least (then its max-wait). */
	private static final long RELEASE_RETRY = MS;

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

	static void runSeeds(String what, List<Long> seeds) {
		Map<String, Long> tally = new TreeMap<>();
		long started = System.nanoTime();
		for (int configuration = 0; configuration < CONFIGURATIONS; configuration++) {
			List<Long> mine = ModelSeeds.inSlot(seeds, configuration, (seed) -> Math.floorMod(seed, CONFIGURATIONS));
			if (mine.isEmpty()) {
				continue;
			}
			Config config = Config.of(configuration);
			AtomicLong clock = new AtomicLong(SECOND);
			ManualTimer timer = new ManualTimer(clock);
			Schedulers.setFactory(new Schedulers.Factory() {
				@Override
				public Scheduler newParallel(int parallelism, java.util.concurrent.ThreadFactory threadFactory) {
					return Schedulers.fromExecutorService(timer, "manual-parallel");
				}
			});
			try {
				ModelContext.runner(clock, timer, ServiceConfiguration.class)
					.withPropertyValues(config.properties())
					.run((context) -> {
						ModelContext.started(context);
						Model model = new Model(config, clock, timer, context.getBean(Service.class),
								context.getBean(RateLimiterRegistry.class), context.getBean(MeterRegistry.class), tally);
						for (long seed : mine) {
							model.run(seed);
						}
					});
			}
			finally {
				Schedulers.resetFactory();
			}
		}
		System.out.printf("AsyncSingleBucketModelTests (%s): %d sequences of %d steps in %d ms: %s%n", what,
				seeds.size(), STEPS, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started), tally);
	}

	/**
	 * Each bucket's rate (tenths of a token per second), limit and max-wait (ns), drawn from the
	 * configuration's number.
	 */
	record Config(int number, Map<String, long[]> buckets) {

		static Config of(int number) {
			SplittableRandom random = new SplittableRandom(0xA5C1L + number);
			Map<String, long[]> buckets = new LinkedHashMap<>();
			// plain: 40..340 per second, in tenths (some fractional), max-wait 3..38 ms and an odd part
			long plainTenths = (number == 0) ? 10 * (40 + random.nextInt(300)) : 400 + random.nextInt(3000);
			buckets.put("plain", new long[] { plainTenths, 1 + random.nextInt((number == 2) ? 5 : 3),
					(3 + random.nextInt(35)) * MS + 1 + 2 * random.nextInt(500) });
			long[] cappedRates = { 300, 500, 1000, 2000 };
			for (String name : new String[] { "cap", "keyed" }) {
				buckets.put(name, new long[] { 10 * cappedRates[random.nextInt(cappedRates.length)],
						1 + random.nextInt(3), (2 + random.nextInt(10)) * MS + 1 + 2 * random.nextInt(500) });
			}
			return new Config(number, buckets);
		}

		/** Keys with a bucket of their own at most: 1 (the other key shares the overflow bucket while it is busy), or plenty. */
		int keysMax() {
			return (this.number == 0) ? 10_000 : 1;
		}

		long[] of(String bucket) {
			return this.buckets.get(bucket.startsWith("keyed") ? "keyed" : bucket);
		}

		long tenths(String bucket) {
			return of(bucket)[0];
		}

		long limit(String bucket) {
			return of(bucket)[1];
		}

		long maxWait(String bucket) {
			return of(bucket)[2];
		}

		static boolean capped(String bucket) {
			return !bucket.equals("plain");
		}

		String[] properties() {
			List<String> properties = new ArrayList<>();
			this.buckets.forEach((name, b) -> {
				String prefix = "ratelimit.buckets." + name + ".";
				properties.add(prefix + "rate=" + new java.math.BigDecimal(BigInteger.valueOf(b[0]), 1).toPlainString());
				properties.add(prefix + "limit=" + b[1]);
				properties.add(prefix + "max-wait=" + b[2] + "ns");
				if (name.equals("keyed") && keysMax() == 1) {
					properties.add(prefix + "keys.max=1");
				}
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
				.append(capped(name) ? "(capped)" : "")
				.append(" rate=")
				.append(b[0] / 10.0)
				.append("/s limit=")
				.append(b[1])
				.append(" max-wait=")
				.append(b[2])
				.append("ns"));
			return s.toString();
		}
	}

	/** The methods: their bucket, how they return, and what is evaluated when they complete. */
	enum Method {

		CF_PLAIN("plain", Kind.CF, null), CF_CAP("cap", Kind.CF, null), MONO_PLAIN("plain", Kind.MONO, null),
		MONO_CAP("cap", Kind.MONO, null), CF_PLAIN_REFUND("plain", Kind.CF, "refund"),
		CF_PLAIN_SETTLE("plain", Kind.CF, "settle"), MONO_CAP_SETTLE("cap", Kind.MONO, "settle"),
		MONO_PLAIN_REFUND("plain", Kind.MONO, "refund"), CF_KEYED("keyed", Kind.CF, null),
		MONO_KEYED_SETTLE("keyed", Kind.MONO, "settle"),
		MONO_KEYED("keyed", Kind.MONO, null), CF_CAP_REFUND_ON_ERROR("cap", Kind.CF, "refundOnError"),
		MONO_PLAIN_REFUND_ON_ERROR("plain", Kind.MONO, "refundOnError"), CF_CAP_FALLBACK("cap", Kind.CF, "fallback"),
		MONO_CAP_FALLBACK("cap", Kind.MONO, "fallback"), MONO_PLAIN_FALLBACK("plain", Kind.MONO, "fallback"), BLOCKING_PLAIN("plain", Kind.BLOCKING, null),
		BLOCKING_CAP("cap", Kind.BLOCKING, null), CF_CAP_NO_WAIT("cap", Kind.CF, null, 0),
		MONO_PLAIN_LONG_WAIT("plain", Kind.MONO, null, SECOND), MONO_CAP_NO_WAIT("cap", Kind.MONO, null, 0);

		final String bucket;

		final Kind kind;

		/**
		 * {@code refund} ({@code refundIf = "#result == 'refund'"}), {@code refundOnError} ({@code refundIf =
		 * "#exception != null"}), {@code settle} ({@code #result} or the cost), {@code fallback} (a fallback
		 * answers a refusal, with a value naming it), or none.
		 */
		final String completes;

		/** The annotation's {@code maxWait} in nanoseconds, or -1 for the bucket's. */
		final long maxWait;

		Method(String bucket, Kind kind, String completes) {
			this(bucket, kind, completes, -1);
		}

		Method(String bucket, Kind kind, String completes, long maxWait) {
			this.bucket = bucket;
			this.kind = kind;
			this.completes = completes;
			this.maxWait = maxWait;
		}
	}

	enum Kind {

		CF, MONO, BLOCKING

	}

	/** One call, as the reference sees it. */
	static final class Call1 implements ReferenceBucket.Caller {

		final long id;

		final Method method;

		/** The reference bucket: the bucket's name, or {@code keyed/<key>} or {@code keyed/overflow} (from the claim on). */
		String bucket;

		final String key;

		final long cost;

		final long start;

		final long maxWait;

		boolean coveredAtClaim;

		/** What the method's body does: {@code returns} (what the test completes), {@code throws}, {@code returns null}. */
		String body = "returns";

		/** Keyed calls on a key's own bucket: which of the key's buckets (made again after a drop) it took from. */
		int incarnation;

		/** PENDING (waiting), RUNNING (granted, open), DONE. */
		String state = "PENDING";

		/** The caller's side: the returned future, or the subscription. */
		CompletableFuture<Object> result;

		Disposable subscription;

		Call1(long id, Method method, String key, long cost, long start, long maxWait) {
			this.id = id;
			this.method = method;
			this.key = key;
			this.bucket = (key != null) ? method.bucket + "/" + key : method.bucket;
			this.cost = cost;
			this.start = start;
			this.maxWait = maxWait;
		}

		@Override
		public long id() {
			return this.id;
		}

		@Override
		public String toString() {
			return "#" + this.id + " " + this.method + "(" + this.bucket + ":" + this.cost + ")";
		}
	}

	/**
	 * What a caller saw: {@code ran} (the method body ran), {@code refused} (with the refusal's bucket, cost,
	 * retry-after and key), or {@code value}, {@code failed}, {@code cancelled} (the caller's future or
	 * {@code Mono} completed so).
	 */
	record Event(long id, long time, String what, String detail) {

		@Override
		public String toString() {
			return "#" + this.id + "@" + this.time + " " + this.what + ((this.detail != null) ? " " + this.detail : "");
		}
	}

	/** One context's reference and the application under test; runs sequences one after the other. */
	static final class Model extends SequenceModel<Call1> {

		private final Config config;

		private final ManualTimer timer;

		private final Service service;

		private final RateLimiterRegistry registry;

		private final MeterRegistry meters;

		private final Map<String, ReferenceBucket> refs = new LinkedHashMap<>();

		/**
		 * What callers saw. (Calls granted at one instant may run in any order: a release wakes every waiter,
		 * and each claim covered then runs; first-come first-served shows in the instants.)
		 */
		private final ModelEvents<Event> events = new ModelEvents<>(Comparator.comparingLong(Event::time)
			.thenComparingLong(Event::id)
			.thenComparing(Event::what), "callers saw");

		Model(Config config, AtomicLong clock, ManualTimer timer, Service service, RateLimiterRegistry registry,
				MeterRegistry meters, Map<String, Long> tally) {
			super(config, STEPS, clock, tally);
			this.config = config;
			this.timer = timer;
			this.service = service;
			this.registry = registry;
			this.meters = meters;
			for (String name : BUCKETS) {
				this.refs.put(name, new ReferenceBucket(name, config.tenths(name), TENTHS_PERIOD, config.limit(name),
						Config.capped(name), this.now));
			}
			service.listen((id) -> ran(id));
		}

		private void ran(long id) {
			this.events.saw(new Event(id, this.clock.get(), "ran", null));
		}

		@Override
		void step() {
			int op = this.random.nextInt(100);
			if (op < 5) {
				// mostly a bucket with callers waiting
				String bucket = this.random.nextBoolean() ? "plain" : "cap";
				if (this.refs.get(bucket).waiting() == 0 && this.random.nextInt(3) > 0) {
					bucket = bucket.equals("plain") ? "cap" : "plain";
				}
				retune(bucket);
			}
			else if (op < 22) {
				moveClock();
			}
			else if (op < 62) {
				Method[] methods = Method.values();
				call(methods[this.random.nextInt(methods.length)]);
			}
			else if (op < 82) {
				List<Call1> running = open("RUNNING");
				if (running.isEmpty()) {
					moveClock();
				}
				else {
					complete(running.get(this.random.nextInt(running.size())), this.random.nextInt(4) == 0);
				}
			}
			else {
				List<Call1> cancellable = new ArrayList<>(open("PENDING"));
				if (cancellable.isEmpty() || this.random.nextInt(3) == 0) {
					cancellable = new ArrayList<>(this.open.values());
				}
				cancellable.removeIf((c) -> c.method.kind == Kind.BLOCKING);
				if (!this.made.isEmpty() && this.random.nextInt(6) == 0) {
					cancelDone(this.made.get(this.random.nextInt(this.made.size())));
				}
				else if (cancellable.isEmpty()) {
					moveClock();
				}
				else {
					cancel(cancellable.get(this.random.nextInt(cancellable.size())));
				}
			}
		}

		private List<Call1> open(String state) {
			return this.open.values().stream().filter((c) -> c.state.equals(state)).toList();
		}

		private void moveClock() {
			ReferenceBucket any = this.refs.get(BUCKETS[this.random.nextInt(BUCKETS.length)]);
			long delta = switch (this.random.nextInt(14)) {
				case 0 -> 0;
				case 1 -> 1 + this.random.nextInt(1000);
				case 2, 3 -> 1 + this.random.nextLong(MS);
				case 4, 5 -> MS + this.random.nextLong(9 * MS);
				case 6 -> this.random.nextLong(50 * MS);
				case 7 -> any.interval(1 + this.random.nextInt(3)) + this.random.nextInt(3) - 1;
				case 8 -> (this.random.nextInt(3) == 0) ? HOUR : SECOND;
				default -> nextDeadline();
			};
			moveTo(this.now + Math.max(0, delta), "clock +" + delta + " ns");
		}

		/**
		 * The bucket is retuned (as the endpoint does): a new rate, a new limit, or both. Its waiters keep their
		 * place; a waiter whose tokens are now due later than its max-wait allows is refused at once. A rate that
		 * refuses a waiter only while at most one call waits (two waiters refused at one instant are decided in
		 * any order, and the first refusal moves the other up: the product wakes its waiters in no set order).
		 */
		private void retune(String bucket) {
			ReferenceBucket ref = ref(bucket);
			long tenths = this.random.nextBoolean() ? 10 + this.random.nextInt(400) : 400 + this.random.nextInt(20_000);
			if (ref.waiting() > 1 && refusesAWaiter(ref, tenths)) {
				tenths = -1; // left alone: two waiters refused at one instant may be decided in any order
			}
			long limit = 1 + this.random.nextInt(4);
			if (Config.capped(bucket)) {
				// a capped claim larger than the limit could never be granted
				for (ReferenceBucket.Claim claim : ref.queue) {
					limit = Math.max(limit, claim.tokens());
				}
			}
			int what = this.random.nextInt(3);
			Long newLimit = (what != 0) ? limit : null;
			java.math.BigDecimal newRate = (what != 1 && tenths > 0) ? new java.math.BigDecimal(BigInteger.valueOf(tenths), 1) : null;
			if (newLimit == null && newRate == null) {
				return;
			}
			log("retune %s: rate %s, limit %s", bucket, newRate, newLimit);
			count("retuned" + (ref.waiting() > 0 ? " with callers waiting" : ""));
			this.registry.get(bucket).update(newRate, newLimit);
			if (newRate != null) {
				ref.updateRate(tenths, TENTHS_PERIOD);
			}
			if (newLimit != null) {
				ref.updateLimit(newLimit);
			}
			this.timer.runUntil(this.now);
			decideUntil(this.now);
			compareEvents();
		}

		/**
		 * Whether a new rate would refuse a waiter of the bucket at once (a slower rate, or the part of a token
		 * dropped with the old one).
		 */
		private boolean refusesAWaiter(ReferenceBucket ref, long tenths) {
			BigInteger a = ref.a;
			BigInteger num = ref.num;
			BigInteger den = ref.den;
			BigInteger full = ref.full;
			try {
				ref.updateRate(tenths, TENTHS_PERIOD);
				for (ReferenceBucket.Claim claim : ref.queue) {
					Call1 call = (Call1) claim.caller();
					if (call != null && ref.rateWait(call) > call.start + call.maxWait - this.now) {
						return true;
					}
				}
				return false;
			}
			finally {
				ref.a = a;
				ref.num = num;
				ref.den = den;
				ref.full = full;
			}
		}

		/** To a waiting call's deadline or due time, a nanosecond before or after. */
		private long nextDeadline() {
			List<Long> instants = new ArrayList<>();
			for (Call1 call : this.open.values()) {
				if (call.state.equals("PENDING")) {
					instants.add(call.start + call.maxWait);
					instants.add(this.now + ref(call.bucket).rateWait(call));
				}
			}
			if (instants.isEmpty()) {
				return this.random.nextLong(3 * MS);
			}
			long at = instants.get(this.random.nextInt(instants.size())) + this.random.nextInt(3) - 1;
			return Math.max(0, at - this.now);
		}

		@Override
		void moveTo(long target, String what) {
			log("%s", what);
			this.timer.runUntil(target);
			decideUntil(target);
			if (this.clock.get() != target) {
				throw new AssertionError("clock at " + this.clock.get() + ", expected " + target);
			}
			compareEvents();
		}

		private ReferenceBucket ref(String bucket) {
			ReferenceBucket ref = this.refs.get(bucket);
			ref.advance(this.now);
			return ref;
		}

		private void call(Method method) {
			long before = switch (this.random.nextInt(5)) {
				case 0, 4 -> 0;
				case 1 -> 1 + this.random.nextInt(1000);
				default -> this.random.nextLong(2 * MS);
			};
			if (before > 0) {
				moveTo(this.now + before, "clock +" + before + " ns");
			}
			String key = method.bucket.equals("keyed") ? (this.random.nextBoolean() ? "x" : "y") : null;
			String bucket = (key != null) ? "keyed/" + key : method.bucket;
			long limit = this.refs.get(bucket).limit;
			long cost = this.random.nextLong(Config.capped(bucket) ? limit + 1 : limit + 2);
			// two capped deadlines of one bucket never meet (which of two refusals at one instant comes first
			// is not the contract's)
			long maxWait = (method.maxWait >= 0) ? method.maxWait : this.config.maxWait(bucket);
			while (Config.capped(bucket) && deadlineTaken((key != null) ? "keyed/" : bucket, this.now + maxWait)) {
				moveTo(this.now + 1, "clock +1 ns (two deadlines would meet)");
			}
			Call1 call = new Call1(this.nextId++, method, key, cost, this.now, maxWait);
			if (method.kind != Kind.BLOCKING) {
				// the method's body, when it runs: returns what the test completes, or throws, or returns null
				int body = this.random.nextInt(14);
				call.body = switch (body) {
					case 0 -> "throws";
					case 1 -> "returns null";
					case 2, 3 -> "returns done";
					default -> "returns";
				};
				if (!call.body.equals("returns")) {
					this.service.bodies().put(call.id, call.body);
				}
			}
			if (method.kind == Kind.BLOCKING && !decidedAtOnce(call)) {
				count("blocking call left out: it would wait");
				return;
			}
			log("call %s%s", call, call.body.equals("returns") ? "" : " (its body " + call.body + ")");
			long id = call.id;
			if (method.kind != Kind.MONO) {
				claim(call);
			}
			switch (method.kind) {
				case CF -> {
					CompletableFuture<Object> result = switch (method) {
						case CF_PLAIN -> this.service.cfPlain(id, cost);
						case CF_CAP -> this.service.cfCap(id, cost);
						case CF_PLAIN_REFUND -> this.service.cfPlainRefund(id, cost);
						case CF_PLAIN_SETTLE -> this.service.cfPlainSettle(id, cost);
						case CF_CAP_NO_WAIT -> this.service.cfCapNoWait(id, cost);
						case CF_CAP_REFUND_ON_ERROR -> this.service.cfCapRefundOnError(id, cost);
						case CF_CAP_FALLBACK -> this.service.cfCapFallback(id, cost);
						default -> this.service.cfKeyed(id, key, cost);
					};
					call.result = result;
					result.whenComplete((value, failure) -> {
						Throwable cause = (failure instanceof CompletionException && failure.getCause() != null)
								? failure.getCause() : failure;
						outcome(id, value, cause);
					});
				}
				case MONO -> {
					Mono<Object> mono = switch (method) {
						case MONO_PLAIN -> this.service.monoPlain(id, cost);
						case MONO_CAP -> this.service.monoCap(id, cost);
						case MONO_CAP_SETTLE -> this.service.monoCapSettle(id, cost);
						case MONO_PLAIN_REFUND -> this.service.monoPlainRefund(id, cost);
						case MONO_CAP_NO_WAIT -> this.service.monoCapNoWait(id, cost);
						case MONO_PLAIN_REFUND_ON_ERROR -> this.service.monoPlainRefundOnError(id, cost);
						case MONO_CAP_FALLBACK -> this.service.monoCapFallback(id, cost);
						case MONO_PLAIN_FALLBACK -> this.service.monoPlainFallback(id, cost);
						case MONO_PLAIN_LONG_WAIT -> this.service.monoPlainLongWait(id, cost);
						case MONO_KEYED_SETTLE -> this.service.monoKeyedSettle(id, key, cost);
						default -> this.service.monoKeyed(id, key, cost);
					};
					if (this.random.nextInt(4) == 0) {
						check(); // nothing happens before subscription
					}
					claim(call);
					call.subscription = mono.defaultIfEmpty(EMPTY).subscribe((value) -> outcome(id, value, null),
							(failure) -> outcome(id, null, failure));
				}
				default -> {
					try {
						if (method == Method.BLOCKING_PLAIN) {
							this.service.blockingPlain(id, cost);
						}
						else {
							this.service.blockingCap(id, cost);
						}
						outcome(id, "returned", null);
					}
					catch (RateLimitExceededException ex) {
						outcome(id, null, ex);
					}
				}
			}
			if (method.kind != Kind.BLOCKING) {
				this.made.add(call);
				if (this.made.size() > 8) {
					this.made.remove(0);
				}
			}
			this.timer.runUntil(this.now);
			decideUntil(this.now);
			if (method.kind == Kind.BLOCKING && call.state.equals("RUNNING")) {
				this.events.expect(new Event(id, this.now, "value", "returned"));
				release(call); // returned: its capped tokens are back
				this.timer.runUntil(this.now);
				decideUntil(this.now);
			}
			compareEvents();
		}

		private boolean deadlineTaken(String bucket, long deadline) {
			for (Call1 other : this.open.values()) {
				if (other.state.equals("PENDING") && other.bucket.startsWith(bucket)
						&& other.start + other.maxWait == deadline) {
					return true;
				}
			}
			return false;
		}

		private void outcome(long id, Object value, Throwable failure) {
			long at = this.clock.get();
			if (failure == null) {
				this.events.saw(new Event(id, at, "value", String.valueOf(value)));
			}
			else if (failure instanceof RateLimitExceededException ex) {
				this.events.saw(new Event(id, at, "refused", refusal(ex.getBucket(), ex.getCost(),
						ex.getRetryAfter().toNanos(), ex.getKey(), ex.getClass().getSimpleName())));
			}
			else if (failure instanceof ModelCompletion) {
				this.events.saw(new Event(id, at, "failed", null));
			}
			else if (failure instanceof CancellationException) {
				this.events.saw(new Event(id, at, "cancelled", null));
			}
			else {
				this.events.saw(new Event(id, at, "error", failure.toString()));
			}
		}

		private static String refusal(String bucket, long cost, long retry, String key, String type) {
			return "by " + bucket + " (cost " + cost + ", retry after " + retry + " ns, key " + key + ", " + type + ")";
		}

		/** What the caller sees of a refusal: the error, or the fallback's value (which names the refusal). */
		private Event refusedEvent(Call1 call, long retry) {
			if ("fallback".equals(call.method.completes)) {
				count("refusal answered by the fallback");
				return new Event(call.id, this.now, "value", "fallback #" + call.id + " " + call.method.bucket + " "
						+ call.cost + " " + retry);
			}
			return new Event(call.id, this.now, "refused", refusal(call.method.bucket, call.cost, retry, call.key,
					(call.key != null) ? "KeyedBucketExceeded" : "RateLimitExceededException"));
		}

		private boolean decidedAtOnce(Call1 call) {
			ReferenceBucket ref = ref(call.bucket);
			long wait = ref.newWait(call.cost);
			return wait > call.maxWait || (wait == 0 && (call.cost == 0 || ref.fits(call.cost)));
		}

		/** Keys with a bucket of their own (the reference's view; at most {@code keys.max}). */
		private final java.util.Set<String> own = new java.util.LinkedHashSet<>();

		private long overflowCalls;

		/**
		 * The bucket a keyed call takes from: its key's own, a new one for it when there is room or another key's
		 * bucket is idle (full, nothing in flight, nobody waiting: dropped for it), else the overflow bucket.
		 */
		private String route(String key, boolean count) {
			if (!this.own.contains(key)) {
				if (this.own.size() >= this.config.keysMax()) {
					String idle = null;
					for (String other : this.own) {
						if (ref("keyed/" + other).idle() && !settleToCome(other)) {
							idle = other;
							break;
						}
					}
					if (idle == null) {
						if (count) {
							this.overflowCalls++;
						}
						count("a key on the overflow bucket");
						return "keyed/overflow";
					}
					this.own.remove(idle);
					count("an idle key's bucket dropped for another key");
				}
				if (!ref("keyed/" + key).idle()) {
					throw new IllegalStateException("reference: " + key + " gets a bucket of its own, but its old one is not idle");
				}
				this.own.add(key);
				this.incarnations.merge(key, 1, Integer::sum);
			}
			return "keyed/" + key;
		}

		private final Map<String, Integer> incarnations = new HashMap<>();

		/**
		 * Whether a call of the key runs with a {@code settle} to come: then its bucket is not indistinguishable
		 * from a new one (the settle may charge it), and is not to be dropped however full it is.
		 */
		private boolean settleToCome(String key) {
			for (Call1 call : this.open.values()) {
				if (call.state.equals("RUNNING") && key.equals(call.key) && call.bucket.equals("keyed/" + key)
						&& "settle".equals(call.method.completes)) {
					return true;
				}
			}
			return false;
		}

		/**
		 * The bucket a keyed call's refund or charge goes to: the one it took from, unless that key's bucket was
		 * dropped since (a key's bucket is kept while a call on it has a settle to come, so this does not happen
		 * as the reference drops buckets): then a refund goes nowhere (the bucket was full), a charge to the
		 * bucket the key would use now.
		 */
		private String completionTarget(Call1 call, boolean charge) {
			if (call.key == null || call.bucket.equals("keyed/overflow")) {
				return call.bucket;
			}
			boolean current = this.own.contains(call.key) && this.incarnations.get(call.key) == call.incarnation;
			if (current) {
				return call.bucket;
			}
			count("a completion after the key's bucket was dropped");
			return charge ? route(call.key, false) : null;
		}

		private void claim(Call1 call) {
			if (call.key != null) {
				call.bucket = route(call.key, true);
				call.incarnation = this.incarnations.getOrDefault(call.key, 0);
			}
			ReferenceBucket ref = ref(call.bucket);
			long wait = ref.newWait(call.cost);
			if (wait <= call.maxWait && call.maxWait == 0 && call.cost > 0 && !ref.fits(call.cost)) {
				wait = RELEASE_RETRY; // would wait for releases, and waits for nothing: refused at once
				count("max-wait 0, refused for releases at once");
			}
			if (wait > call.maxWait) {
				count("refused at the claim");
				ref.rejected++;
				call.state = "DONE";
				this.events.expect(refusedEvent(call, wait));
				return;
			}
			call.coveredAtClaim = call.cost == 0 || (wait == 0 && ref.fits(call.cost));
			ref.claim(call, call.cost);
			this.open.put(call.id, call);
		}

		/** Decides, in time order, what falls due up to {@code until}: grants and capped refusals. */
		private void decideUntil(long until) {
			for (;;) {
				long best = Long.MAX_VALUE;
				Call1 next = null;
				boolean grant = false;
				for (Call1 call : this.open.values()) {
					if (!call.state.equals("PENDING")) {
						continue;
					}
					ReferenceBucket ref = ref(call.bucket);
					if (ref.rateWait(call) > call.start + call.maxWait - this.now) {
						// (only after a retune to a slower rate) the tokens come later than the max-wait allows
						next = call;
						best = this.now;
						grant = false;
						break;
					}
					boolean within = ref.withinCeiling(call);
					long at = within ? this.now + ref.rateWait(call) : call.start + call.maxWait;
					if (at < best) {
						best = at;
						next = call;
						grant = within;
					}
				}
				if (next == null || best > until) {
					break;
				}
				if (best < this.now) {
					throw new IllegalStateException("reference: " + next + " due at " + best + ", now " + this.now);
				}
				this.now = best;
				ReferenceBucket ref = ref(next.bucket);
				if (grant) {
					long waited = this.now - next.start;
					count((waited > 0) ? "granted after waiting" : "granted at once");
					ref.grant(next, next.coveredAtClaim ? 0 : waited);
					next.state = "RUNNING";
					this.events.expect(new Event(next.id, this.now, "ran", null));
					if (next.body.equals("throws")) {
						count("its body threw");
						completed(next, null, true);
						release(next);
						this.events.expect(new Event(next.id, this.now, "failed", null));
					}
					else if (next.body.equals("returns done")) {
						count("its body returned a completed value");
						completed(next, "done at once", false);
						release(next);
						this.events.expect(new Event(next.id, this.now, "value", "done at once"));
					}
					else if (next.body.equals("returns null")) {
						count("its body returned null");
						completed(next, null, false);
						release(next);
						this.events.expect(new Event(next.id, this.now, "value",
								(next.method.kind == Kind.MONO) ? EMPTY : "null"));
					}
				}
				else {
					long rateWait = ref.rateWait(next);
					boolean late = rateWait > next.start + next.maxWait - this.now;
					count(late ? "refused at a poll: due too late after a retune" : "refused for releases that did not come");
					ref.giveBack(next);
					ref.rejected++;
					next.state = "DONE";
					this.open.remove(next.id);
					this.events.expect(refusedEvent(next, late ? rateWait : Math.max(next.maxWait, RELEASE_RETRY)));
				}
			}
			this.now = Math.max(this.now, until);
			for (ReferenceBucket ref : this.refs.values()) {
				ref.advance(this.now);
			}
		}

		/**
		 * What {@code refundIf} and {@code settle} do when a call completes with {@code value}, or fails: the
		 * method's refundIf {@code #result == 'refund'}, or {@code #exception != null}; its settle
		 * {@code #exception != null ? 0 : (#result instanceof T(Number) ? #result : #n)}.
		 */
		private void completed(Call1 call, Object value, boolean failing) {
			if (call.method.completes == null || call.method.completes.equals("fallback")) {
				return;
			}
			ReferenceBucket ref = ref(call.bucket);
			String waiters = (ref.waiting() > 0) ? " with callers waiting" : "";
			switch (call.method.completes) {
				case "refund" -> {
					if (!failing && "refund".equals(value)) {
						ref.refund(call.cost);
						count("refundIf: refunded" + waiters);
					}
				}
				case "refundOnError" -> {
					if (failing) {
						ref.refund(call.cost);
						count("refundIf on error: refunded" + waiters);
					}
				}
				default -> {
					long real = failing ? 0 : (value instanceof Long settled) ? settled : call.cost;
					if (real < call.cost) {
						String target = completionTarget(call, false);
						if (target != null) {
							ref(target).refund(call.cost - real);
						}
						count("settle: refunded" + waiters);
					}
					else if (real > call.cost) {
						ref(completionTarget(call, true)).charge(real - call.cost);
						count("settle: charged" + waiters);
					}
				}
			}
		}

		/** A running call completes: the completion attributes, then the capped release. */
		@Override
		void complete(Call1 call, boolean failing) {
			Object value;
			if (call.method.kind == Kind.MONO && this.random.nextInt(5) == 0) {
				value = null; // completes empty
			}
			else if (call.method.completes == null) {
				value = "done";
			}
			else if (call.method.completes.equals("refund")) {
				value = this.random.nextBoolean() ? "refund" : "keep";
			}
			else {
				value = this.random.nextLong(this.refs.get(call.bucket).limit + 3);
			}
			log("complete %s %s", call, failing ? "with an exception" : "with " + value);
			completed(call, value, failing);
			release(call);
			this.events.expect(new Event(call.id, this.now, failing ? "failed" : "value",
					failing ? null : (value != null) ? String.valueOf(value) : EMPTY));
			if (call.method.kind == Kind.CF) {
				CompletableFuture<Object> inner = this.service.futures().remove(call.id);
				if (inner == null) {
					throw new AssertionError(call + " is running in the reference, but its method never ran");
				}
				if (failing) {
					inner.completeExceptionally(new ModelCompletion());
				}
				else {
					inner.complete(value);
				}
			}
			else {
				Sinks.One<Object> inner = this.service.monos().remove(call.id);
				if (inner == null) {
					throw new AssertionError(call + " is running in the reference, but its method never ran");
				}
				Sinks.EmitResult emitted = failing ? inner.tryEmitError(new ModelCompletion())
						: (value != null) ? inner.tryEmitValue(value) : inner.tryEmitEmpty();
				if (emitted.isFailure()) {
					throw new AssertionError(call + ": could not complete its Mono: " + emitted);
				}
			}
			this.timer.runUntil(this.now);
			decideUntil(this.now);
			compareEvents();
		}

		/** The last asynchronous calls made (decided or not), for cancels that come after the call is done. */
		private final List<Call1> made = new ArrayList<>();

		/** A caller cancels (disposes) a call that is done already (refused, completed, cancelled): nothing happens. */
		private void cancelDone(Call1 call) {
			if (!call.state.equals("DONE")) {
				return;
			}
			log("cancel %s (done already)", call);
			count("cancelled when done");
			if (call.result != null) {
				call.result.cancel(false);
			}
			if (call.subscription != null) {
				call.subscription.dispose();
			}
			this.timer.runUntil(this.now);
			decideUntil(this.now);
			compareEvents();
		}

		/** The caller gives up: the future cancelled, the subscription disposed. */
		private void cancel(Call1 call) {
			log("cancel %s (%s)", call, call.state.equals("PENDING") ? "waiting" : "running");
			ReferenceBucket ref = ref(call.bucket);
			if (call.state.equals("PENDING")) {
				count("cancelled while waiting");
				ref.giveBack(call);
				call.state = "DONE";
				this.open.remove(call.id);
			}
			else {
				count("cancelled while running");
				if (call.method.kind == Kind.CF) {
					// the aspect cancels the method's own future, which completes it with a CancellationException:
					// refundIf and settle see it as #exception (a cancelled Mono has no outcome: they are not evaluated)
					completed(call, null, true);
				}
				release(call);
			}
			if (call.method.kind == Kind.CF) {
				this.events.expect(new Event(call.id, this.now, "cancelled", null));
				call.result.cancel(false);
				this.service.futures().remove(call.id);
			}
			else {
				call.subscription.dispose();
				this.service.monos().remove(call.id);
			}
			this.timer.runUntil(this.now);
			decideUntil(this.now);
			compareEvents();
		}

		private void release(Call1 call) {
			ReferenceBucket ref = ref(call.bucket);
			if (ref.capped) {
				ref.inFlight -= call.cost;
			}
			call.state = "DONE";
			this.open.remove(call.id);
		}

		private void compareEvents() {
			this.events.compare(this.trace);
		}

		@Override
		void check() {
			String[] states = new String[BUCKETS.length];
			for (int i = 0; i < BUCKETS.length; i++) {
				states[i] = ref(BUCKETS[i]).toString();
			}
			this.trace.reference(BUCKETS, states);
			Map<String, long[]> counts = new HashMap<>();
			for (String name : BUCKETS) {
				ReferenceBucket ref = ref(name);
				RateLimiter limiter;
				if (name.equals("keyed/overflow")) {
					limiter = this.registry.get("keyed").keyed().bucketOf("(a key never used)");
				}
				else if (name.startsWith("keyed/")) {
					RegisteredBucket keyed = this.registry.get("keyed");
					String key = name.substring("keyed/".length());
					limiter = keyed.keyed().find(key);
					if (limiter != null && !this.own.contains(key)) {
						throw new AssertionError(name + ": the key has a bucket of its own, but not in the reference");
					}
					if (limiter == null) {
						if (!ref.idle()) {
							throw new AssertionError(name + ": the key has no bucket, but the reference's is not idle: "
									+ ref);
						}
						count("a key without a bucket of its own");
					}
				}
				else {
					limiter = this.registry.get(name).limiter();
				}
				if (limiter != null) {
					RateLimiterSnapshot snapshot = limiter.snapshot();
					equal(name + ": available", (long) snapshot.available(), ref.available());
					equal(name + ": deficiency", (long) snapshot.deficiency(), ref.deficiency());
					equal(name + ": waiting", (long) snapshot.waiting(), ref.waiting());
					equal(name + ": inFlight", (long) snapshot.inFlight(), ref.inFlight);
				}
				long[] c = counts.computeIfAbsent(name.split("/")[0], (k) -> new long[4]);
				c[0] += ref.granted;
				c[1] += ref.rejected;
				c[2] += ref.waits;
				c[3] += ref.waited;
			}
			equal("keyed: ratelimit.keys.overflow", this.registry.get("keyed").keyed().overflowCalls(), this.overflowCalls);
			counts.forEach((name, c) -> {
				BucketStats stats = this.registry.get(name).stats();
				equal(name + ": granted", stats.granted(), c[0]);
				equal(name + ": rejected", stats.rejected(), c[1]);
				equal(name + ": ratelimit.calls granted", calls(name, "granted"), c[0]);
				equal(name + ": ratelimit.calls rejected", calls(name, "rejected"), c[1]);
				Timer waits = this.meters.get("ratelimit.wait").tag("bucket", name).timer();
				equal(name + ": ratelimit.wait count", waits.count(), c[2]);
				equal(name + ": ratelimit.wait total (ns)", Math.round(waits.totalTime(TimeUnit.NANOSECONDS)), c[3]);
			});
		}

		private long calls(String bucket, String outcome) {
			return Math.round(this.meters.get("ratelimit.calls")
				.tags("bucket", bucket, "outcome", outcome)
				.functionCounter()
				.count());
		}

		/** (Formatted now: a call's bucket changes after it is logged, when its claim routes its key.) */
		private void log(String format, Object... args) {
			this.trace.log("%s", String.format(format, args));
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class ServiceConfiguration {

		@Bean
		Service service() {
			return new Service();
		}
	}

	/** The guarded methods; each tells the test it ran, and returns what the test completes. */
	static class Service {

		private volatile LongConsumer ran;

		private final Map<Long, CompletableFuture<Object>> futures = new ConcurrentHashMap<>();

		private final Map<Long, Sinks.One<Object>> monos = new ConcurrentHashMap<>();

		private final Map<Long, String> bodies = new ConcurrentHashMap<>();

		/** (Public, so that the proxy hands it to the bean.) */
		public void listen(LongConsumer ran) {
			this.ran = ran;
		}

		/** The futures of the {@code CompletableFuture} methods that ran and are not completed yet, by call. */
		public Map<Long, CompletableFuture<Object>> futures() {
			return this.futures;
		}

		/** What the body of a call does when it is not to return what the test completes: throws, returns null. */
		public Map<Long, String> bodies() {
			return this.bodies;
		}

		/** The sinks of the {@code Mono} methods that ran and are not completed yet, by call. */
		public Map<Long, Sinks.One<Object>> monos() {
			return this.monos;
		}

		private CompletableFuture<Object> future(long id) {
			this.ran.accept(id);
			String body = this.bodies.remove(id);
			if (body != null) {
				if (body.equals("throws")) {
					throw new ModelCompletion();
				}
				return body.equals("returns done") ? CompletableFuture.completedFuture("done at once") : null;
			}
			CompletableFuture<Object> future = new CompletableFuture<>();
			this.futures.put(id, future);
			return future;
		}

		private Mono<Object> mono(long id) {
			this.ran.accept(id);
			String body = this.bodies.remove(id);
			if (body != null) {
				if (body.equals("throws")) {
					throw new ModelCompletion();
				}
				return body.equals("returns done") ? Mono.just("done at once") : null;
			}
			Sinks.One<Object> sink = Sinks.one();
			this.monos.put(id, sink);
			return sink.asMono();
		}

		@RateLimited(value = "plain", cost = "#n")
		public CompletableFuture<Object> cfPlain(long id, long n) {
			return future(id);
		}

		@RateLimited(value = "cap", cost = "#n")
		public CompletableFuture<Object> cfCap(long id, long n) {
			return future(id);
		}

		@RateLimited(value = "plain", cost = "#n", refundIf = "#result == 'refund'")
		public CompletableFuture<Object> cfPlainRefund(long id, long n) {
			return future(id);
		}

		@RateLimited(value = "plain", cost = "#n", settle = "#exception != null ? 0 : (#result instanceof T(Number) ? #result : #n)")
		public CompletableFuture<Object> cfPlainSettle(long id, long n) {
			return future(id);
		}

		@RateLimited(value = "keyed", cost = "#n", key = "#key")
		public CompletableFuture<Object> cfKeyed(long id, String key, long n) {
			return future(id);
		}

		@RateLimited(value = "plain", cost = "#n")
		public Mono<Object> monoPlain(long id, long n) {
			return mono(id);
		}

		@RateLimited(value = "cap", cost = "#n")
		public Mono<Object> monoCap(long id, long n) {
			return mono(id);
		}

		@RateLimited(value = "cap", cost = "#n", settle = "#exception != null ? 0 : (#result instanceof T(Number) ? #result : #n)")
		public Mono<Object> monoCapSettle(long id, long n) {
			return mono(id);
		}

		@RateLimited(value = "plain", cost = "#n", refundIf = "#result == 'refund'")
		public Mono<Object> monoPlainRefund(long id, long n) {
			return mono(id);
		}

		@RateLimited(value = "keyed", cost = "#n", key = "#key")
		public Mono<Object> monoKeyed(long id, String key, long n) {
			return mono(id);
		}

		@RateLimited(value = "keyed", cost = "#n", key = "#key",
				settle = "#exception != null ? 0 : (#result instanceof T(Number) ? #result : #n)")
		public Mono<Object> monoKeyedSettle(long id, String key, long n) {
			return mono(id);
		}

		@RateLimited(value = "cap", cost = "#n", refundIf = "#exception != null")
		public CompletableFuture<Object> cfCapRefundOnError(long id, long n) {
			return future(id);
		}

		@RateLimited(value = "plain", cost = "#n", refundIf = "#exception != null")
		public Mono<Object> monoPlainRefundOnError(long id, long n) {
			return mono(id);
		}

		@RateLimited(value = "cap", cost = "#n", fallback = "cfFallback")
		public CompletableFuture<Object> cfCapFallback(long id, long n) {
			return future(id);
		}

		CompletableFuture<Object> cfFallback(long id, long n, RateLimitExceededException refusal) {
			return CompletableFuture.completedFuture(fallback(id, refusal));
		}

		@RateLimited(value = "cap", cost = "#n", fallback = "monoFallback")
		public Mono<Object> monoCapFallback(long id, long n) {
			return mono(id);
		}

		@RateLimited(value = "plain", cost = "#n", fallback = "monoFallback")
		public Mono<Object> monoPlainFallback(long id, long n) {
			return mono(id);
		}

		Mono<Object> monoFallback(long id, long n, RateLimitExceededException refusal) {
			return Mono.just(fallback(id, refusal));
		}

		private static String fallback(long id, RateLimitExceededException refusal) {
			return "fallback #" + id + " " + refusal.getBucket() + " " + refusal.getCost() + " "
					+ refusal.getRetryAfter().toNanos();
		}

		@RateLimited(value = "cap", cost = "#n", maxWait = "0")
		public CompletableFuture<Object> cfCapNoWait(long id, long n) {
			return future(id);
		}

		@RateLimited(value = "cap", cost = "#n", maxWait = "0")
		public Mono<Object> monoCapNoWait(long id, long n) {
			return mono(id);
		}

		@RateLimited(value = "plain", cost = "#n", maxWait = "1s")
		public Mono<Object> monoPlainLongWait(long id, long n) {
			return mono(id);
		}

		@RateLimited(value = "plain", cost = "#n")
		public void blockingPlain(long id, long n) {
			this.ran.accept(id);
		}

		@RateLimited(value = "cap", cost = "#n")
		public void blockingCap(long id, long n) {
			this.ran.accept(id);
		}
	}
}
