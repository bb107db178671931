package dev.ratelimit.spring.aop;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.spring.Backend;
import dev.ratelimit.spring.BucketBackend;
import dev.ratelimit.spring.BucketDefinition;
import dev.ratelimit.spring.BucketStats;
import dev.ratelimit.spring.ModelSeeds;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RegisteredBucket;
import dev.ratelimit.spring.engine.SeveralBucketsExceeded;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import org.junit.jupiter.api.Test;

import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Calls guarded by several buckets that wait, and are granted or refused <em>after</em> their claim (at a
 * poll), checked step by step against an exact reference written for the tests ({@link ReferenceBucket}),
 * in seeded random sequences of calls, completions (capped releases) and moves of a fake clock.
 *
 * <p>Buckets (claim order is by name): {@code cap1} and {@code cap2} (shared, capped release, max-wait
 * a few milliseconds, so that calls wait for releases and may time out), {@code plain} (shared, uncapped,
 * max-wait tens of milliseconds: calls wait for time), {@code shad} (shared, shadow mode), and {@code r1},
 * {@code r2} ({@code backend: redis}, served by a backend bean of the test, {@link ScriptedRemote}, whose
 * claims are answered at an instant and with an answer the test draws for each call: granted, or refused
 * with a retry-after of its own, at once or later, both at the same instant or not, as a Redis answer that
 * arrives after the claim; only their counts are followed). Methods:
 * {@code CompletableFuture} ones held open by the test (so that capped tokens stay in flight until the
 * test completes them) on two or three buckets, one with an annotation {@code maxWait} on {@code cap2},
 * one with {@code maxWait = "0"} on {@code cap1} (beside {@code plain}), one on {@code cap1} alone (the single-bucket path, for contrast), and blocking ones on two buckets,
 * called only when the reference says they are decided at once (a blocking call that waits would park
 * the test's thread).
 *
 * <p>Nothing runs on its own: the starter's timer is replaced by one the test runs ({@link ManualTimer}),
 * which runs each scheduled poll with the fake clock at the poll's due time, in due order, and delayed
 * calls run on the polling thread. So a sequence is one thread, deterministic, and takes no real time.
 *
 * <p>What the reference says (contract: several buckets on one method, {@code max-wait}, capped release,
 * rejection, meters, shadow mode, {@code violated-policies}):
 * <ul>
 * <li>Each bucket's level is an exact rational ({@code a / den} tokens, the rate {@code num / den} per
 * nanosecond) that grows with time up to the limit (a full bucket earns no part of the next token),
 * less the tokens of the calls that claimed or took them; a capped bucket also counts the tokens in
 * flight (granted, not released) and the tokens claimed by waiting calls against its limit. Claims
 * are served in order: a claim is covered by time when the level plus the tokens claimed behind it is
 * at least 0, and (capped) by the limit when the tokens in flight plus the tokens claimed up to and
 * including it are at most the limit.</li>
 * <li>At the claim, an enforcing bucket whose wait by time (exact, whole nanoseconds rounded up) is
 * longer than its max-wait refuses: the call takes nothing, the refusing bucket with the longest wait
 * (the first by name on a tie) is named with that wait as {@code getRetryAfter()} and its cost, and
 * alone counts {@code rejected}; every refusing bucket is listed. A capped bucket whose tokens are in
 * flight (or claimed by calls ahead) does not refuse at the claim: it waits up to its max-wait for
 * releases; with a max-wait of 0 it waits for nothing, and refuses at once (reporting 1 ms, see below),
 * named and listed as the others are; so is a remote bucket whose answer, a refusal, is there at once.</li>
 * <li>Otherwise the call claims from every enforcing bucket; the shadow bucket decides at once
 * (shadow-rejected and keeps nothing when its wait is longer than its max-wait, else takes the tokens
 * and counts granted). The call is granted at the first instant every claim is covered (at the claim,
 * at the time its longest wait runs out, or when a release or a give-back covers the last one): every
 * enforcing bucket counts {@code granted} and times the wait in {@code ratelimit.wait} (when it was
 * not 0 and the bucket's claim was not covered when made), capped tokens go in flight, and the method runs
 * then, once.</li>
 * <li>A capped claim not covered when its bucket's max-wait (the annotation's, or the bucket's) runs
 * out refuses the call at that instant (a release at the same instant comes too late), and so does a
 * remote answer that is a refusal, when it comes, or, when another remote answer has not come yet, when
 * the last of them comes (it may refuse with a longer wait; the capped buckets are asked again then): every
 * claim is given back (waiters behind move up at once), the shadow bucket gets its tokens back (never
 * above its limit) and its count is taken back (a meter never goes down: it shows the highest count it
 * showed until the count passes it), and the refusal names, among the buckets refusing at that instant,
 * the one with the longest retry-after (a wait for releases reports what it waited, its max-wait, at least
 * 1 ms; a remote refusal its own), the first by name on a tie, which alone counts {@code rejected}; it
 * lists every refusing bucket, and never counts {@code granted} anywhere.</li>
 * </ul>
 * After every step the test compares the calls decided in the step (which, when, how: granted, or
 * refused naming which bucket, with what cost, retry-after and list), then every bucket's
 * {@code available}, {@code deficiency}, {@code waiting} and {@code inFlight}, its {@code granted},
 * {@code rejected} and {@code shadow-rejected} counts, and the meters {@code ratelimit.calls} (by
 * outcome) and {@code ratelimit.wait} (count and total time, exact on the fake clock).
 *
 * <p>Calls are issued so that no two instants at which calls may be refused (capped deadlines, remote
 * answers) of different calls fall on the same nanosecond (the order of two refusals at one instant is not
 * the contract's). One context per configuration runs every sequence of
 * that configuration; a sequence first finishes what the previous one left (checked too), then moves
 * the clock a day ahead. A failure prints the seed, the configuration and the trace;
 * {@code -Dmodel.seed=<seed>} replays one sequence, {@code -Dmodel.sequences=<n>} runs more random ones.
 */
class SeveralBucketsPollModelTests {

	private static final long RANDOM_SEQUENCES = Long.getLong("model.sequences", 1_500);

	private static final long FIXED_SEQUENCES = 1_500;

	private static final int STEPS = 40;

	private static final int CONFIGURATIONS = 4;

	/** Every bucket, in claim order (by name). */
	private static final String[] BUCKETS = { "cap1", "cap2", "plain", "r1", "r2", "shad" };

	private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);

	private static final long SECOND = TimeUnit.SECONDS.toNanos(1);

	private static final long HOUR = TimeUnit.HOURS.toNanos(1);

	/** Method d's {@code maxWait} on {@code cap2}. */
	private static final long D_CAP2_WAIT = 2_345_679L;

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

	/**
	 * The sequences that find the defects fixed so far, with the generator as it is now (a change to the
	 * generator changes what a seed plays: check that each still fails with its fix undone).
	 */
	@Test
	void agreesOnTheSequencesThatFoundDefects() {
		// Seed 0: a capped claim not covered by its max-wait while another claim of the call still waited for
		// time was polled again only when the longest wait ran out, so the call was refused that late (and a
		// release coming in between let it through): D #17 and #18 (cap2 max-wait 2.35 ms, its one token in
		// flight; plain waiting 5.7 ms for time) refused at 2.35 ms, not 5.7 ms
		// Seed 116: a capped bucket with max-wait 0 whose tokens were in flight, beside a bucket that refused
		// at the claim, was not listed in the refusal (violated-policies): H #739 (cap1 and plain)
		runSeeds("sequences that found defects", List.of(0L, 116L));
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
			ScriptedRemote remote = new ScriptedRemote(clock);
			ModelContext.runner(clock, timer, ServiceConfiguration.class)
				.withBean(BucketBackend.class, () -> remote)
				.withPropertyValues(config.properties())
				.run((context) -> {
					ModelContext.started(context);
					Service service = context.getBean(Service.class);
					Model model = new Model(config, clock, timer, remote, service, context.getBean(RateLimiterRegistry.class),
							context.getBean(MeterRegistry.class), tally);
					for (long seed : mine) {
						model.run(seed);
					}
				});
		}
		System.out.printf("SeveralBucketsPollModelTests (%s): %d sequences of %d steps in %d ms: %s%n", what,
				seeds.size(), STEPS, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started), tally);
	}

	/** Each bucket's rate (per second), limit and max-wait (ns), drawn from the configuration's number. */
	record Config(int number, Map<String, long[]> buckets) {

		static Config of(int number) {
			SplittableRandom random = new SplittableRandom(0x9011L + number);
			Map<String, long[]> buckets = new LinkedHashMap<>();
			long[] cappedRates = { 300, 500, 1000, 2000 };
			for (String name : BUCKETS) {
				long rate;
				long maxWait;
				if (capped(name)) {
					rate = cappedRates[random.nextInt(cappedRates.length)];
					maxWait = (2 + random.nextInt(10)) * MS + 1 + 2 * random.nextInt(500);
				}
				else if (remote(name)) {
					rate = 100;
					maxWait = HOUR;
				}
				else if (name.equals("plain")) {
					rate = 40 + random.nextInt(300);
					maxWait = (3 + random.nextInt(35)) * MS + 1 + 2 * random.nextInt(500);
				}
				else {
					rate = 40 + random.nextInt(300);
					maxWait = switch (number % 3) {
						case 0 -> 0;
						case 1 -> 5 * MS + 1 + 2 * random.nextInt(500);
						default -> 30 * MS + 1 + 2 * random.nextInt(500);
					};
				}
				buckets.put(name, new long[] { rate, 1 + random.nextInt(3), maxWait });
			}
			if (number == 3) {
				// both capped buckets time out at the same instant: a refusal at a poll by both
				buckets.get("cap2")[2] = buckets.get("cap1")[2];
			}
			return new Config(number, buckets);
		}

		static boolean capped(String bucket) {
			return bucket.startsWith("cap");
		}

		static boolean shadow(String bucket) {
			return bucket.equals("shad");
		}

		/** A bucket whose answers come later, as from Redis: scripted by the test ({@link ScriptedRemote}). */
		static boolean remote(String bucket) {
			return bucket.startsWith("r");
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

		String[] properties() {
			List<String> properties = new ArrayList<>();
			this.buckets.forEach((name, b) -> {
				String prefix = "ratelimit.buckets." + name + ".";
				properties.add(prefix + "rate=" + b[0]);
				properties.add(prefix + "limit=" + b[1]);
				properties.add(prefix + "max-wait=" + ((b[2] == 0) ? "0" : b[2] + "ns"));
				if (capped(name)) {
					properties.add(prefix + "capped-release=true");
				}
				if (shadow(name)) {
					properties.add(prefix + "mode=shadow");
				}
				if (remote(name)) {
					properties.add(prefix + "backend=redis");
				}
			});
			return properties.toArray(new String[0]);
		}

		@Override
		public String toString() {
			StringBuilder s = new StringBuilder("configuration ").append(this.number).append(':');
			this.buckets.forEach((name, b) -> s.append(' ')
				.append(name)
				.append(capped(name) ? "(capped)" : shadow(name) ? "(shadow)" : "")
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

	/** The methods, what they take from, and how they return. */
	enum Method {

		/** cap1 + plain, async. */
		A(true, "cap1", "plain"),
		/** cap1 + cap2, async. */
		B(true, "cap1", "cap2"),
		/** cap2 + plain + shad, async. */
		C(true, "cap2", "plain", "shad"),
		/** cap1 + cap2 (annotation maxWait) + plain, async. */
		D(true, "cap1", "cap2", "plain"),
		/** cap1 alone, async: the single-bucket path. */
		E(true, "cap1"),
		/** cap1 (annotation maxWait 0) + plain, async. */
		H(true, "cap1", "plain"),
		/** cap1 + r1 + r2 (remote, scripted answers), async. */
		R(true, "cap1", "r1", "r2"),
		/** plain + shad, blocking. */
		F(false, "plain", "shad"),
		/** cap2 + plain, blocking. */
		G(false, "cap2", "plain");

		final boolean async;

		final String[] buckets;

		Method(boolean async, String... buckets) {
			this.async = async;
			this.buckets = buckets;
		}
	}

	/** A bucket's part of a call. */
	static final class Part {

		final String bucket;

		final long cost;

		final long maxWait;

		/** Shadow only: whether the bucket kept the tokens (else it would have refused). */
		boolean kept;

		/** Local enforcing buckets: whether the claim found its tokens there (then its bucket records no wait). */
		boolean coveredAtClaim;

		/** Remote only: when the answer comes. */
		long answerAt;

		/** Remote only: the retry-after of a refusal, or -1 when the answer is a grant. */
		long refusedRetry = -1;

		Part(String bucket, long cost, long maxWait) {
			this.bucket = bucket;
			this.cost = cost;
			this.maxWait = maxWait;
		}

		@Override
		public String toString() {
			return this.bucket + ":" + this.cost;
		}
	}

	/** One call, as the reference sees it. */
	static final class Call1 implements ReferenceBucket.Caller {

		final long id;

		final Method method;

		final List<Part> parts;

		final long start;

		/** PENDING (waiting), RUNNING (granted, open), DONE. */
		String state = "PENDING";

		Call1(long id, Method method, List<Part> parts, long start) {
			this.id = id;
			this.method = method;
			this.parts = parts;
			this.start = start;
		}

		@Override
		public long id() {
			return this.id;
		}

		@Override
		public String toString() {
			return "#" + this.id + " " + this.method + this.parts;
		}
	}

	/** A call decided: granted (the method ran) or refused. */
	record Event(long id, long time, boolean granted, String bucket, long cost, long retryAfter, List<String> refusing,
			String type) {

		static Event granted(long id, long time) {
			return new Event(id, time, true, null, 0, 0, null, null);
		}

		@Override
		public String toString() {
			return "#" + this.id + "@" + this.time + (this.granted ? " granted"
					: " refused by " + this.bucket + " (cost " + this.cost + ", retry after " + this.retryAfter + " ns, "
							+ this.type + ", violated-policies " + this.refusing + ")");
		}
	}

	/**
	 * The exact bucket ({@link ReferenceBucket}) with what a shadow bucket counts besides: the tokens it takes
	 * without waiting, its shadow-rejected count, and the counts its meters showed (a meter never goes down:
	 * a count taken back shows the highest it showed until the count passes it).
	 */
	static final class RefBucket extends ReferenceBucket {

		long shownGranted;

		long shadowRejected;

		long shownShadowRejected;

		RefBucket(String name, long perSecond, long limit, boolean capped, long now) {
			super(name, perSecond, SECOND, limit, capped, now);
		}

		/** Shadow: takes the tokens (into debt when it would wait). */
		void take(long n) {
			this.a = this.a.subtract(scaled(n));
		}
	}

	/**
	 * One context's reference and the application under test; runs sequences one after the other.
	 */
	static final class Model extends SequenceModel<Call1> {

		private final Config config;

		private final ManualTimer timer;

		private final ScriptedRemote remote;

		private final Service service;

		private final RateLimiterRegistry registry;

		private final MeterRegistry meters;

		private final Map<String, Object> meterCache = new java.util.HashMap<>();

		private final Map<String, RefBucket> refs = new LinkedHashMap<>();

		/** The calls decided: what the application did (methods that ran, futures that failed), and the reference. */
		private final ModelEvents<Event> events = new ModelEvents<>(
				Comparator.comparingLong(Event::time).thenComparingLong(Event::id), "calls decided");

		Model(Config config, AtomicLong clock, ManualTimer timer, ScriptedRemote remote, Service service,
				RateLimiterRegistry registry, MeterRegistry meters, Map<String, Long> tally) {
			super(config, STEPS, clock, tally);
			this.remote = remote;
			this.config = config;
			this.timer = timer;
			this.service = service;
			this.registry = registry;
			this.meters = meters;
			for (String name : BUCKETS) {
				this.refs.put(name, new RefBucket(name, config.rate(name), config.limit(name), Config.capped(name),
						this.now));
			}
			service.listen((id) -> this.events.saw(Event.granted(id, this.clock.get())));
		}

		@Override
		void step() {
			int op = this.random.nextInt(100);
			if (op < 20) {
				moveClock();
			}
			else if (op < 32) {
				call(Method.A);
			}
			else if (op < 43) {
				call(Method.B);
			}
			else if (op < 53) {
				call(Method.C);
			}
			else if (op < 62) {
				call(Method.D);
			}
			else if (op < 67) {
				call(Method.E);
			}
			else if (op < 70) {
				call(Method.H);
			}
			else if (op < 75) {
				call(Method.R);
			}
			else if (op < 82) {
				call(this.random.nextBoolean() ? Method.F : Method.G);
			}
			else {
				List<Call1> running = this.open.values().stream().filter((c) -> c.state.equals("RUNNING")).toList();
				if (running.isEmpty()) {
					moveClock();
				}
				else {
					complete(running.get(this.random.nextInt(running.size())), this.random.nextInt(4) == 0);
				}
			}
		}

		private void moveClock() {
			long delta = switch (this.random.nextInt(12)) {
				case 0 -> 0;
				case 1 -> 1 + this.random.nextInt(1000);
				case 2, 3 -> 1 + this.random.nextLong(MS);
				case 4, 5 -> MS + this.random.nextLong(9 * MS);
				case 6 -> this.random.nextLong(50 * MS);
				case 7 -> (this.random.nextInt(4) == 0) ? SECOND : this.random.nextLong(200 * MS);
				default -> nextDeadline();
			};
			moveTo(this.now + delta, "clock +" + delta + " ns");
		}

		/** To a waiting call's deadline, a nanosecond before or after, or a little way. */
		private long nextDeadline() {
			List<Long> deadlines = new ArrayList<>();
			for (Call1 call : this.open.values()) {
				if (call.state.equals("PENDING")) {
					for (Part part : call.parts) {
						if (Config.capped(part.bucket)) {
							deadlines.add(call.start + part.maxWait);
						}
					}
				}
			}
			if (deadlines.isEmpty()) {
				return this.random.nextLong(3 * MS);
			}
			long at = deadlines.get(this.random.nextInt(deadlines.size())) + this.random.nextInt(3) - 1;
			return Math.max(0, at - this.now);
		}

		/** The clock moves: the application's polls run, the reference decides what falls due. */
		@Override
		void moveTo(long target, String what) {
			long from = this.now;
			log("%s", what);
			this.timer.runUntil(target);
			decideUntil(target);
			if (this.clock.get() != target) {
				throw new AssertionError("clock at " + this.clock.get() + " after moving from " + from + " to " + target);
			}
			compareEvents();
		}

		private long cost(String bucket) {
			long limit = this.config.limit(bucket);
			return this.random.nextLong(Config.capped(bucket) ? limit + 1 : limit + 2);
		}

		private void call(Method method) {
			// a little later, or at once; never where a capped deadline of this call meets another's
			long before = switch (this.random.nextInt(4)) {
				case 0 -> 0;
				case 1 -> 1 + this.random.nextInt(1000);
				default -> this.random.nextLong(2 * MS);
			};
			if (before > 0) {
				moveTo(this.now + before, "clock +" + before + " ns");
			}
			List<Part> parts = new ArrayList<>();
			for (String bucket : method.buckets) {
				long maxWait = (method == Method.D && bucket.equals("cap2")) ? D_CAP2_WAIT
						: (method == Method.H && bucket.equals("cap1")) ? 0 : this.config.maxWait(bucket);
				Part part = new Part(bucket, Config.remote(bucket) ? 1 : cost(bucket), maxWait);
				if (Config.remote(bucket)) {
					// answered at once, a little later, or with the other one; refused (with a retry-after of its
					// own, or one equal to the other's, or the 1 ms of a capped refusal) or granted
					long delay = switch (this.random.nextInt(4)) {
						case 0 -> 0;
						case 1 -> (parts.size() > 1 && Config.remote(parts.get(parts.size() - 1).bucket))
								? parts.get(parts.size() - 1).answerAt : 0;
						default -> 1 + this.random.nextLong(6 * MS);
					};
					part.answerAt = delay; // relative until the call is made
					if (this.random.nextInt(5) < 2) {
						long previous = (parts.size() > 1) ? parts.get(parts.size() - 1).refusedRetry : -1;
						part.refusedRetry = switch (this.random.nextInt(4)) {
							case 0 -> RELEASE_RETRY;
							case 1 -> (previous > 0) ? previous : RELEASE_RETRY + 1;
							default -> 1 + this.random.nextLong(5 * MS);
						};
					}
				}
				parts.add(part);
			}
			while (collides(parts)) {
				moveTo(this.now + 1, "clock +1 ns (two deadlines would meet)");
				count("deadline moved apart");
			}
			Call1 call = new Call1(this.nextId++, method, parts, this.now);
			for (Part part : parts) {
				if (Config.remote(part.bucket)) {
					part.answerAt += this.now;
					this.remote.script(part.bucket, part.answerAt, part.refusedRetry);
				}
			}
			if (!method.async && !decidedAtOnce(call)) {
				count("blocking call left out: it would wait");
				moveClock();
				return;
			}
			log("call %s", call);
			claim(call);
			long[] p = new long[parts.size()];
			for (int i = 0; i < p.length; i++) {
				p[i] = parts.get(i).cost;
			}
			long id = call.id;
			if (method.async) {
				CompletableFuture<Object> result = switch (method) {
					case A -> this.service.a(id, p[0], p[1]);
					case B -> this.service.b(id, p[0], p[1]);
					case C -> this.service.c(id, p[0], p[1], p[2]);
					case D -> this.service.d(id, p[0], p[1], p[2]);
					case H -> this.service.h(id, p[0], p[1]);
					case R -> this.service.r(id, p[0], p[1], p[2]);
					default -> this.service.e(id, p[0]);
				};
				result.whenComplete((value, failure) -> {
					Throwable cause = (failure instanceof CompletionException && failure.getCause() != null)
							? failure.getCause() : failure;
					if (cause instanceof RateLimitExceededException ex) {
						this.events.saw(refused(id, ex));
					}
					else if (cause != null && !(cause instanceof ModelCompletion)) {
						this.events.saw(new Event(id, this.clock.get(), false, null, 0, 0, null, cause.toString()));
					}
				});
			}
			else {
				try {
					if (method == Method.F) {
						this.service.f(id, p[0], p[1]);
					}
					else {
						this.service.g(id, p[0], p[1]);
					}
				}
				catch (RateLimitExceededException ex) {
					this.events.saw(refused(id, ex));
				}
			}
			this.timer.runUntil(this.now);
			decideUntil(this.now);
			if (!method.async && call.state.equals("RUNNING")) {
				release(call); // a blocking call returned: its capped tokens are back
				this.timer.runUntil(this.now);
				decideUntil(this.now);
			}
			compareEvents();
		}

		private Event refused(long id, RateLimitExceededException ex) {
			List<String> violated = (ex instanceof SeveralBucketsExceeded several) ? several.getRefusingBuckets()
					: List.of(ex.getBucket());
			return new Event(id, this.clock.get(), false, ex.getBucket(), ex.getCost(), ex.getRetryAfter().toNanos(),
					violated, ex.getClass().getSimpleName());
		}

		/**
		 * Whether an instant at which a new call may be refused (a capped deadline, a remote answer) would fall
		 * on one of another waiting call's.
		 */
		private boolean collides(List<Part> parts) {
			for (Part part : parts) {
				long at = instant(part, this.now, true);
				if (at < 0) {
					continue;
				}
				for (Call1 other : this.open.values()) {
					if (!other.state.equals("PENDING")) {
						continue;
					}
					for (Part theirs : other.parts) {
						if (instant(theirs, other.start, false) == at) {
							return true;
						}
					}
				}
			}
			return false;
		}

		/**
		 * When a part may refuse its call (capped: its deadline; remote: its answer), or -1; a remote answer's
		 * instant is relative to {@code start} until the call is made.
		 */
		private static long instant(Part part, long start, boolean relative) {
			if (Config.capped(part.bucket)) {
				return start + part.maxWait;
			}
			if (Config.remote(part.bucket)) {
				return relative ? start + part.answerAt : part.answerAt;
			}
			return -1;
		}

		/** A blocking call is made only when it would not wait: refused at the claim, or granted at once. */
		private boolean decidedAtOnce(Call1 call) {
			boolean covered = true;
			for (Part part : call.parts) {
				if (Config.shadow(part.bucket)) {
					continue;
				}
				RefBucket ref = ref(part.bucket);
				long wait = ref.newWait(part.cost);
				if (wait > part.maxWait) {
					return true;
				}
				covered &= wait == 0;
				if (ref.capped && part.cost > 0) {
					covered &= ref.fits(part.cost);
				}
			}
			return covered;
		}

		private RefBucket ref(String bucket) {
			RefBucket ref = this.refs.get(bucket);
			ref.advance(this.now);
			return ref;
		}

		/** The reference's claim: refused at once, or claims (and shadow decisions), then granted if covered. */
		private void claim(Call1 call) {
			long longest = -1;
			Part named = null;
			List<String> refusing = new ArrayList<>();
			boolean atClaim = false;
			for (Part part : call.parts) {
				if (Config.shadow(part.bucket)) {
					continue;
				}
				long retry = -1;
				if (Config.remote(part.bucket)) {
					// answers at a poll; refused at once, it is one of the refusing buckets when another refused
					if (part.answerAt == this.now && part.refusedRetry >= 0) {
						retry = part.refusedRetry;
					}
				}
				else {
					RefBucket ref = ref(part.bucket);
					long wait = ref.newWait(part.cost);
					if (wait <= part.maxWait && part.maxWait == 0 && ref.capped && part.cost > 0
							&& !ref.fits(part.cost)) {
						wait = RELEASE_RETRY; // would wait for releases, and waits for nothing: refuses at once
						count("capped with max-wait 0 refuses for releases at the claim");
					}
					if (wait > part.maxWait) {
						retry = wait;
						atClaim = true;
					}
				}
				if (retry >= 0) {
					refusing.add(part.bucket);
					if (retry > longest) {
						longest = retry;
						named = part;
					}
				}
			}
			if (atClaim) {
				count(refusing.size() > 1 ? "refused at the claim by several" : "refused at the claim");
				if (call.method == Method.R && refusing.size() > 1) {
					count("refused at the claim, a remote answer among the refusing");
				}
				ref(named.bucket).rejected++;
				this.events.expect(new Event(call.id, this.now, false, named.bucket, named.cost, longest, refusing,
						(refusing.size() > 1) ? "SeveralBucketsExceeded" : "RateLimitExceededException"));
				call.state = "DONE";
				return;
			}
			for (Part part : call.parts) {
				RefBucket ref = ref(part.bucket);
				if (!Config.shadow(part.bucket) && !Config.remote(part.bucket)) {
					part.coveredAtClaim = part.cost == 0
							|| (ref.newWait(part.cost) == 0 && ref.fits(part.cost));
					ref.claim(call, part.cost);
				}
			}
			for (Part part : call.parts) {
				if (Config.shadow(part.bucket)) {
					RefBucket ref = ref(part.bucket);
					long wait = ref.newWait(part.cost);
					if (wait > part.maxWait) {
						ref.shadowRejected++;
						part.kept = false;
						count("shadow would refuse");
					}
					else {
						ref.take(part.cost);
						ref.granted++;
						part.kept = true;
						if (wait > 0) {
							count("shadow would wait");
						}
					}
				}
			}
			this.open.put(call.id, call);
		}

		/**
		 * Decides, in time order, what falls due up to {@code until}: grants (every claim covered) and
		 * refusals (a capped claim not covered at its deadline).
		 */
		private void decideUntil(long until) {
			for (;;) {
				long best = Long.MAX_VALUE;
				Call1 next = null;
				boolean grant = false;
				for (Call1 call : this.open.values()) {
					if (!call.state.equals("PENDING")) {
						continue;
					}
					boolean within = true;
					long ready = this.now;
					long refusal = Long.MAX_VALUE; // the first refusal by a remote answer
					long localRefusal = Long.MAX_VALUE; // the first capped deadline passed
					long answers = this.now; // when every remote answer is in
					for (Part part : call.parts) {
						if (Config.shadow(part.bucket)) {
							continue;
						}
						if (Config.remote(part.bucket)) {
							if (part.refusedRetry >= 0) {
								within = false;
								refusal = Math.min(refusal, part.answerAt);
							}
							ready = Math.max(ready, part.answerAt);
							answers = Math.max(answers, part.answerAt);
							continue;
						}
						RefBucket ref = ref(part.bucket);
						if (!ref.withinCeiling(call)) {
							within = false;
							localRefusal = Math.min(localRefusal, call.start + part.maxWait);
						}
						ready = Math.max(ready, this.now + ref.rateWait(call));
					}
					// a refusal by a bucket here is decided at once; one by a remote answer waits for the other
					// remote answers (one may refuse with a longer wait), the buckets here asked again then
					long at = within ? ready : (localRefusal <= refusal) ? localRefusal : Math.max(refusal, answers);
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
				if (grant) {
					grant(next);
				}
				else {
					refuseAtPoll(next);
				}
			}
			this.now = Math.max(this.now, until);
			for (RefBucket ref : this.refs.values()) {
				ref.advance(this.now);
			}
		}

		private void grant(Call1 call) {
			long waited = this.now - call.start;
			count((waited > 0) ? "granted after waiting" : "granted at once");
			if (waited > 0 && call.parts.size() > 1) {
				count("several buckets: granted after waiting");
			}
			for (Part part : call.parts) {
				if (Config.remote(part.bucket)) {
					// its answer said the tokens were there: the time to the answer is no wait for tokens
					ref(part.bucket).granted++;
				}
				else if (!Config.shadow(part.bucket)) {
					// a bucket records the call's wait only when the call waited for its tokens
					ref(part.bucket).grant(call, part.coveredAtClaim ? 0 : waited);
				}
			}
			call.state = call.method.async ? "RUNNING" : "DONE";
			if (!call.method.async) {
				// (the blocking call's release is the caller's: see call)
				call.state = "RUNNING";
			}
			this.events.expect(Event.granted(call.id, this.now));
		}

		private void refuseAtPoll(Call1 call) {
			List<String> refusing = new ArrayList<>();
			Part named = null;
			long longest = -1;
			for (Part part : call.parts) {
				long retry = -1;
				if (Config.capped(part.bucket) && !ref(part.bucket).withinCeiling(call)
						&& call.start + part.maxWait <= this.now) {
					retry = Math.max(part.maxWait, RELEASE_RETRY); // what it waited for releases, at least 1 ms
				}
				if (Config.remote(part.bucket) && part.refusedRetry >= 0 && part.answerAt <= this.now) {
					retry = part.refusedRetry;
					count("refused by a remote answer");
				}
				if (retry >= 0) {
					refusing.add(part.bucket);
					if (retry > longest) {
						longest = retry;
						named = part;
					}
				}
			}
			if (refusing.size() > 1 && !named.bucket.equals(refusing.get(0))) {
				count("refused at a poll by several, named not the first");
			}
			count((call.parts.size() > 1) ? (refusing.size() > 1 ? "refused at a poll by several" : "refused at a poll")
					: "refused at a poll (one bucket)");
			boolean othersWaitingForTime = false;
			for (Part part : call.parts) {
				RefBucket ref = ref(part.bucket);
				if (Config.remote(part.bucket)) {
					continue; // (nothing to give back that the reference follows)
				}
				if (Config.shadow(part.bucket)) {
					if (part.kept) {
						ref.refund(part.cost);
						ref.granted--;
					}
					else {
						ref.shadowRejected--;
					}
					count("refused at a poll beside a shadow bucket");
				}
				else {
					othersWaitingForTime |= ref.rateWait(call) > 0;
					ref.giveBack(call);
				}
			}
			if (othersWaitingForTime) {
				count("refused at a poll while another claim waited for time");
			}
			ref(named.bucket).rejected++;
			call.state = "DONE";
			this.open.remove(call.id);
			this.events.expect(new Event(call.id, this.now, false, named.bucket, named.cost, longest, refusing,
					(refusing.size() > 1) ? "SeveralBucketsExceeded" : "RateLimitExceededException"));
		}

		/** An open call completes: its capped tokens are released; waiting calls may be covered now. */
		@Override
		void complete(Call1 call, boolean failing) {
			log("complete #%d%s", call.id, failing ? " with an exception" : "");
			CompletableFuture<Object> inner = this.service.openFutures().remove(call.id);
			if (inner == null) {
				throw new AssertionError("#" + call.id + " is open in the reference, but its method never ran");
			}
			if (failing) {
				inner.completeExceptionally(new ModelCompletion());
			}
			else {
				inner.complete("done");
			}
			release(call);
			this.timer.runUntil(this.now);
			decideUntil(this.now);
			compareEvents();
		}

		private void release(Call1 call) {
			for (Part part : call.parts) {
				if (Config.capped(part.bucket)) {
					ref(part.bucket).inFlight -= part.cost;
				}
			}
			call.state = "DONE";
			this.open.remove(call.id);
		}

		private void compareEvents() {
			this.events.compare(this.trace);
		}

		@Override
		void check() {
			Object[] state = new Object[BUCKETS.length];
			for (int i = 0; i < BUCKETS.length; i++) {
				state[i] = ref(BUCKETS[i]).frozen();
			}
			this.trace.referenceAfter(BUCKETS, state);
			for (String name : BUCKETS) {
				RefBucket ref = ref(name);
				RegisteredBucket bucket = this.registry.get(name);
				RateLimiterSnapshot snapshot = bucket.limiter().snapshot();
				if (!Config.remote(name)) {
					equal(name + ": available", (long) snapshot.available(), ref.available());
					equal(name + ": deficiency", (long) snapshot.deficiency(), ref.deficiency());
					equal(name + ": waiting", (long) snapshot.waiting(), (long) ref.queue.size());
					equal(name + ": inFlight", (long) snapshot.inFlight(), ref.inFlight);
				}
				ref.shownGranted = Math.max(ref.shownGranted, ref.granted);
				ref.shownShadowRejected = Math.max(ref.shownShadowRejected, ref.shadowRejected);
				BucketStats stats = bucket.stats();
				equal(name + ": granted", stats.granted(), ref.shownGranted);
				equal(name + ": rejected", stats.rejected(), ref.rejected);
				equal(name + ": shadow-rejected", stats.shadowRejected(), ref.shownShadowRejected);
				equal(name + ": ratelimit.calls granted", calls(name, "granted"), ref.shownGranted);
				equal(name + ": ratelimit.calls rejected", calls(name, "rejected"), ref.rejected);
				equal(name + ": ratelimit.calls shadow-rejected", calls(name, "shadow-rejected"), ref.shownShadowRejected);
				Timer waits = (Timer) meter(name, "wait");
				equal(name + ": ratelimit.wait count", waits.count(), ref.waits);
				equal(name + ": ratelimit.wait total (ns)", Math.round(waits.totalTime(TimeUnit.NANOSECONDS)), ref.waited);
			}
			long waiting = this.open.values().stream().filter((c) -> c.state.equals("PENDING")).count();
			if (waiting > 0) {
				count("steps ending with calls waiting");
			}
		}

		private long calls(String bucket, String outcome) {
			return Math.round(((FunctionCounter) meter(bucket, outcome)).count());
		}

		/** The bucket's {@code ratelimit.calls} counter of an outcome, or its {@code ratelimit.wait} timer. */
		private Object meter(String bucket, String what) {
			return this.meterCache.computeIfAbsent(bucket + "/" + what,
					(k) -> what.equals("wait") ? this.meters.get("ratelimit.wait").tag("bucket", bucket).timer()
							: this.meters.get("ratelimit.calls").tags("bucket", bucket, "outcome", what).functionCounter());
		}

		private void log(String format, Object... args) {
			this.trace.log(format, args);
		}
	}

	/**
	 * The backend of {@code backend: redis} buckets here: each claim is answered at the instant, and with
	 * the answer (granted, or refused with a retry-after), the test scripted for it, as a Redis answer that
	 * arrives after the claim. It counts calls as a limiter does; its level is not followed.
	 */
	static final class ScriptedRemote implements BucketBackend {

		private final AtomicLong clock;

		private final Map<String, java.util.ArrayDeque<long[]>> scripts = new java.util.concurrent.ConcurrentHashMap<>();

		ScriptedRemote(AtomicLong clock) {
			this.clock = clock;
		}

		void script(String bucket, long answerAt, long refusedRetry) {
			this.scripts.computeIfAbsent(bucket, (b) -> new java.util.ArrayDeque<>()).add(new long[] { answerAt, refusedRetry });
		}

		@Override
		public Backend backend() {
			return Backend.REDIS;
		}

		@Override
		public RateLimiter create(BucketDefinition definition, StatsRecorder stats) {
			return new Remote(definition.name(), stats);
		}

		private final class Remote implements RateLimiter {

			private final String name;

			private final StatsRecorder stats;

			private final AtomicLong waiting = new AtomicLong();

			Remote(String name, StatsRecorder stats) {
				this.name = name;
				this.stats = stats;
			}

			@Override
			public String name() {
				return this.name;
			}

			@Override
			public boolean tryAcquire(long n) {
				throw new UnsupportedOperationException();
			}

			@Override
			public Permit acquire(long n, java.time.Duration maxWait) {
				throw new UnsupportedOperationException();
			}

			@Override
			public Reservation reserve(long n, java.time.Duration maxWait) {
				long[] answer = ScriptedRemote.this.scripts.get(this.name).poll();
				if (answer == null) {
					throw new IllegalStateException("no answer scripted for a claim on " + this.name);
				}
				this.waiting.incrementAndGet();
				return new Reservation() {

					private int state; // 0 pending, 1 ready, 2 granted, 3 cancelled

					@Override
					public long poll() {
						if (this.state >= 2) {
							throw new IllegalStateException("Reservation already " + ((this.state == 2) ? "granted" : "cancelled"));
						}
						long now = ScriptedRemote.this.clock.get();
						if (now < answer[0]) {
							return answer[0] - now;
						}
						if (answer[1] >= 0) {
							cancel();
							Remote.this.stats.recordRejected();
							throw new RateLimitExceededException(Remote.this.name, n, java.time.Duration.ofNanos(answer[1]));
						}
						this.state = 1;
						return 0;
					}

					@Override
					public boolean awaitingAnswer() {
						return this.state == 0 && ScriptedRemote.this.clock.get() < answer[0];
					}

					@Override
					public Permit permit() {
						if (this.state != 1) {
							throw new IllegalStateException("not ready");
						}
						this.state = 2;
						Remote.this.waiting.decrementAndGet();
						Remote.this.stats.recordGranted(0); // as Redis: waited for the answer, not for tokens
						return Permit.noop();
					}

					@Override
					public boolean cancel() {
						if (this.state >= 2) {
							return false;
						}
						this.state = 3;
						Remote.this.waiting.decrementAndGet();
						return true;
					}
				};
			}

			@Override
			public void refund(long n) {
			}

			@Override
			public void charge(long n) {
			}

			@Override
			public RateLimiterSnapshot snapshot() {
				return new RateLimiterSnapshot(100, java.time.Duration.ofSeconds(1), 100, false, 0, 0,
						(int) this.waiting.get(), 0, this.stats.granted(), this.stats.rejected(), null,
						java.time.Duration.ZERO);
			}

			@Override
			public void updateRate(long tokens, java.time.Duration period) {
				throw new UnsupportedOperationException();
			}

			@Override
			public void updateLimit(long limit) {
				throw new UnsupportedOperationException();
			}
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class ServiceConfiguration {

		@Bean
		Service service() {
			return new Service();
		}
	}

	/** The guarded methods; each tells the test it ran, and the async ones return a future the test completes. */
	static class Service {

		private volatile java.util.function.LongConsumer ran;

		private final Map<Long, CompletableFuture<Object>> open = new java.util.concurrent.ConcurrentHashMap<>();

		/** (Public, so that the proxy hands it to the bean.) */
		public void listen(java.util.function.LongConsumer ran) {
			this.ran = ran;
		}

		public Map<Long, CompletableFuture<Object>> openFutures() {
			return this.open;
		}

		private CompletableFuture<Object> run(long id) {
			this.ran.accept(id);
			CompletableFuture<Object> future = new CompletableFuture<>();
			this.open.put(id, future);
			return future;
		}

		@RateLimited(value = "cap1", cost = "#n")
		@RateLimited(value = "plain", cost = "#m")
		public CompletableFuture<Object> a(long id, long n, long m) {
			return run(id);
		}

		@RateLimited(value = "cap1", cost = "#n")
		@RateLimited(value = "cap2", cost = "#m")
		public CompletableFuture<Object> b(long id, long n, long m) {
			return run(id);
		}

		@RateLimited(value = "cap2", cost = "#n")
		@RateLimited(value = "plain", cost = "#m")
		@RateLimited(value = "shad", cost = "#s")
		public CompletableFuture<Object> c(long id, long n, long m, long s) {
			return run(id);
		}

		@RateLimited(value = "plain", cost = "#p")
		@RateLimited(value = "cap2", cost = "#m", maxWait = D_CAP2_WAIT + "ns")
		@RateLimited(value = "cap1", cost = "#n")
		public CompletableFuture<Object> d(long id, long n, long m, long p) {
			return run(id);
		}

		@RateLimited(value = "cap1", cost = "#n")
		public CompletableFuture<Object> e(long id, long n) {
			return run(id);
		}

		@RateLimited(value = "r2", cost = "#b")
		@RateLimited(value = "cap1", cost = "#n")
		@RateLimited(value = "r1", cost = "#a")
		public CompletableFuture<Object> r(long id, long n, long a, long b) {
			return run(id);
		}

		@RateLimited(value = "cap1", cost = "#n", maxWait = "0")
		@RateLimited(value = "plain", cost = "#m")
		public CompletableFuture<Object> h(long id, long n, long m) {
			return run(id);
		}

		@RateLimited(value = "shad", cost = "#m")
		@RateLimited(value = "plain", cost = "#n")
		public void f(long id, long n, long m) {
			this.ran.accept(id);
		}

		@RateLimited(value = "cap2", cost = "#n")
		@RateLimited(value = "plain", cost = "#m")
		public void g(long id, long n, long m) {
			this.ran.accept(id);
		}
	}
}
