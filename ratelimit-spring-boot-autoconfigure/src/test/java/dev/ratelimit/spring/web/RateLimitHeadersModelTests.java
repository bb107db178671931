package dev.ratelimit.spring.web;

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
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import com.jayway.jsonpath.JsonPath;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.BucketStats;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.ModelSeeds;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RegisteredBucket;
import jakarta.servlet.Filter;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.mock.web.MockFilterChain;
import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.mock.web.MockHttpServletResponse;

/**
 * The HTTP answer of web rules (contract revision 2, "Web rules" and {@code ratelimit.web.headers})
 * checked request by request against an exact reference written for the test: seeded random sequences
 * of requests through the auto-configured servlet filter, on a fake clock, against rules with several
 * buckets (plain, keyed by a header, keyed by a SpEL expression that may give {@code null}, one
 * bucket named by two rules, one in shadow mode, one with a rate that is not a whole number of tokens
 * per second), costs from 0 to 3, every bucket with {@code max-wait: 0}; for each of
 * {@code headers: ietf}, {@code retry-after} and {@code none}. The header-keyed bucket has room for
 * every key in one configuration, and for two and for one key in the others ({@code keys.max}), so
 * that keys share its overflow bucket.
 *
 * <p>What the reference says:
 * <ul>
 * <li>A request takes from the buckets of every rule it matches, in order by bucket name then rule,
 * or from none: it is refused when a bucket in enforce mode has not the rule's cost now (given what the
 * request's earlier claims on it took), naming the refusing bucket whose wait (exact, whole nanoseconds
 * rounded up) is the longest, which alone counts it as rejected. A bucket in shadow mode never refuses
 * (it takes its tokens when they are there, else counts shadow-rejected). A request that matches no
 * rule is not limited.</li>
 * <li>A key takes from its own bucket while it has one that is not full; a key without one gets a new,
 * full one when fewer than {@code keys.max} keys have a bucket that is not full (a full one is
 * indistinguishable from a new one, and is dropped to make room), otherwise it takes from the
 * template's one overflow bucket, and the call counts in {@code ratelimit.keys.overflow}. The fields of
 * a request that took from (or was refused by) the overflow bucket are the overflow bucket's.</li>
 * <li>A refusal is a 429 with an {@code application/problem+json} body whose {@code bucket} is the named
 * bucket, and {@code Retry-After} the wait in whole seconds rounded up, at least 1, unless
 * {@code headers: none}. Only with {@code headers: ietf} does the body carry {@code violated-policies},
 * listing the refusing buckets.</li>
 * <li>With {@code headers: ietf}, every response of a limited request carries
 * {@code RateLimit-Policy: "<bucket>";q=<limit>;w=<seconds for limit tokens>} and
 * {@code RateLimit: "<bucket>";r=<tokens left>;t=<seconds until full>}, for the bucket closest to
 * refusing: the fewest whole tokens left (after the request took its tokens), on a tie the longest
 * time until full (exact); {@code r} rounded down, {@code w} and {@code t} whole seconds rounded up. On a
 * 429 the contract does not say whether "closest to refusing" is among the request's buckets or the
 * refusing one: the starter gives the named refusing bucket's level, and the test checks that (and
 * counts how often the other reading would differ). With {@code retry-after} or {@code none} no
 * response carries these fields; with {@code none} not even {@code Retry-After}.</li>
 * <li>After every request, every bucket's and key's available tokens and deficiency and every bucket's
 * granted, rejected and shadow-rejected counts equal the reference's.</li>
 * </ul>
 *
 * <p>One context per configuration and header mode runs its sequences; each starts a day later, every
 * bucket full. A failure prints the seed, the configuration and the trace; {@code -Dmodel.seed=<seed>}
 * replays one sequence, {@code -Dmodel.sequences=<n>} runs more random ones.
 */
class RateLimitHeadersModelTests {

	private static final long RANDOM_SEQUENCES = Long.getLong("model.sequences", 900);

	private static final long FIXED_SEQUENCES = 900;

	private static final int STEPS = 40;

	private static final int CONFIGURATIONS = 3;

	private static final String[] MODES = { "ietf", "retry-after", "none" };

	/** Every bucket, by name (the order requests claim in). */
	private static final String[] BUCKETS = { "api", "per", "shadowed", "slow", "spel" };

	private static final String[] KEYED = { "per", "spel" };

	private static final long SECOND = TimeUnit.SECONDS.toNanos(1);


	private static final long DAY = TimeUnit.DAYS.toNanos(1);

	/** Each rule: paths, methods (or null), bucket, key (or null); the cost comes from the configuration. */
	private static final String[][] RULES = {
			{ "/api/**", null, "api", null },
			{ "/api/keyed/**", null, "per", "header:X-Key" },
			{ "/api/**", "POST", "slow", null },
			{ "/api/spel/**", null, "spel", "#request.getParameter('u')" },
			{ "/api/shadow/**", null, "shadowed", null },
			{ "/api/keyed/double", null, "api", null } };

	private static final String[] PATHS = { "/api/x", "/api/keyed/x", "/api/keyed/double", "/api/spel/x",
			"/api/shadow/x", "/other", "/actuator/health" };

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

	/** A seed's configuration and header mode. */
	private static int slotOf(long seed) {
		return (int) Math.floorMod(seed, (long) (CONFIGURATIONS * MODES.length));
	}

	private static void runSeeds(String what, List<Long> seeds) {
		Map<String, Long> tally = new TreeMap<>();
		long started = System.nanoTime();
		for (int slot = 0; slot < CONFIGURATIONS * MODES.length; slot++) {
			List<Long> mine = ModelSeeds.inSlot(seeds, slot, (seed) -> slotOf(seed));
			if (mine.isEmpty()) {
				continue;
			}
			Config config = Config.of(slot / MODES.length, MODES[slot % MODES.length]);
			AtomicLong clock = new AtomicLong(SECOND);
			new WebApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
				.withBean(RateLimitClock.class, () -> clock::get)
				.withPropertyValues(config.properties())
				.run((context) -> {
					if (context.getStartupFailure() != null) {
						throw new AssertionError("context did not start", context.getStartupFailure());
					}
					@SuppressWarnings("unchecked")
					Filter filter = context.getBean(FilterRegistrationBean.class).getFilter();
					RateLimiterRegistry registry = context.getBean(RateLimiterRegistry.class);
					for (long seed : mine) {
						new Run(seed, config, clock, filter, registry, tally).execute();
					}
				});
		}
		System.out.printf("RateLimitHeadersModelTests (%s): %d sequences of %d requests in %d ms: %s%n", what,
				seeds.size(), STEPS, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started), tally);
	}

	/**
	 * A configuration: each bucket's rate (tokens per period), period (seconds) and limit, each rule's
	 * cost, and the header mode.
	 */
	record Config(int number, String mode, Map<String, long[]> buckets, long[] costs) {

		static Config of(int number, String mode) {
			SplittableRandom random = new SplittableRandom(0x4ead0L + number);
			Map<String, long[]> buckets = new LinkedHashMap<>();
			for (String name : BUCKETS) {
				long[] b = { 2 + random.nextInt(9), 1, 1 + random.nextInt(6) };
				if (name.equals("slow")) {
					// not a whole number of tokens per second: 2 per 3 s, 5 per 2 s (2.5/s), 7 per 4 s
					long[][] slow = { { 2, 3 }, { 5, 2 }, { 7, 4 } };
					b[0] = slow[number % 3][0];
					b[1] = slow[number % 3][1];
				}
				buckets.put(name, b);
			}
			long[] costs = new long[RULES.length];
			for (int i = 0; i < costs.length; i++) {
				costs[i] = random.nextInt(4);
			}
			costs[0] = 1 + random.nextInt(2);
			if (number > 0) {
				costs[1] = 1 + random.nextInt(3); // keys.max below the keys sent: keys that take make them busy
			}
			return new Config(number, mode, buckets, costs);
		}

		/** {@code keys.max} of a keyed bucket, {@code 0} for the default (room for every key here). */
		long keysMax(String bucket) {
			return bucket.equals("per") ? new long[] { 0, 2, 1 }[this.number] : 0;
		}

		String[] properties() {
			List<String> properties = new ArrayList<>();
			properties.add("ratelimit.web.headers=" + this.mode);
			this.buckets.forEach((name, b) -> {
				String prefix = "ratelimit.buckets." + name + ".";
				properties.add(prefix + "rate=" + b[0]);
				properties.add(prefix + "period=" + b[1] + "s");
				properties.add(prefix + "limit=" + b[2]);
				properties.add(prefix + "max-wait=0");
				if (name.equals("shadowed")) {
					properties.add(prefix + "mode=shadow");
				}
				if (keysMax(name) > 0) {
					properties.add(prefix + "keys.max=" + keysMax(name));
				}
			});
			for (int i = 0; i < RULES.length; i++) {
				String prefix = "ratelimit.web.rules[" + i + "].";
				properties.add(prefix + "paths=" + RULES[i][0]);
				if (RULES[i][1] != null) {
					properties.add(prefix + "methods=" + RULES[i][1]);
				}
				properties.add(prefix + "bucket=" + RULES[i][2]);
				if (RULES[i][3] != null) {
					properties.add(prefix + "key=" + RULES[i][3]);
				}
				properties.add(prefix + "cost=" + this.costs[i]);
			}
			return properties.toArray(new String[0]);
		}

		RefBucket ref(String bucket, long now) {
			long[] b = this.buckets.get(bucket);
			return new RefBucket(b[0], b[1] * SECOND, b[2], now);
		}

		@Override
		public String toString() {
			StringBuilder s = new StringBuilder("configuration ").append(this.number)
				.append(", headers: ")
				.append(this.mode)
				.append(':');
			this.buckets.forEach((name, b) -> s.append(' ')
				.append(name)
				.append(" rate=")
				.append(b[0])
				.append('/')
				.append(b[1])
				.append("s limit=")
				.append(b[2])
				.append((keysMax(name) > 0) ? " keys.max=" + keysMax(name) : ""));
			s.append("; rule costs");
			for (long cost : this.costs) {
				s.append(' ').append(cost);
			}
			return s.toString();
		}
	}

	/** One bucket a request takes from. */
	private record Part(int rule, String bucket, String key, long cost, RefBucket ref) {

		String name() {
			return (this.key != null) ? this.bucket + "[" + this.key + "]" : this.bucket;
		}

		boolean shadow() {
			return this.bucket.equals("shadowed");
		}
	}

	/**
	 * A bucket's fields as the reference gives them, with the exact time until it is full (counting the
	 * part of the next token already made), which breaks ties of {@code r}.
	 */
	private record Level(String bucket, long q, long w, long r, long t, BigInteger untilFull) {

		String policy() {
			return "\"" + this.bucket + "\";q=" + this.q + ";w=" + this.w;
		}

		String limit() {
			return "\"" + this.bucket + "\";r=" + this.r + ";t=" + this.t;
		}
	}

	private static final class Run {

		private final long seed;

		private final Config config;

		private final SplittableRandom random;

		private final AtomicLong clock;

		private final Filter filter;

		private final RateLimiterRegistry registry;

		private final Map<String, Long> tally;

		private final List<String> trace = new ArrayList<>();

		private final Map<String, RefBucket> plain = new LinkedHashMap<>();

		private final Map<String, Map<String, RefBucket>> keyed = new LinkedHashMap<>();

		/** Each keyed bucket's overflow bucket, and the calls that went to it. */
		private final Map<String, RefBucket> overflow = new LinkedHashMap<>();

		private final Map<String, long[]> overflowCalls = new HashMap<>();

		/** granted, rejected, shadow-rejected, by bucket. */
		private final Map<String, long[]> counts = new HashMap<>();

		Run(long seed, Config config, AtomicLong clock, Filter filter, RateLimiterRegistry registry,
				Map<String, Long> tally) {
			this.seed = seed;
			this.config = config;
			this.random = new SplittableRandom(seed);
			this.clock = clock;
			this.filter = filter;
			this.registry = registry;
			this.tally = tally;
		}

		void execute() {
			try {
				long now = this.clock.addAndGet(DAY);
				for (String name : BUCKETS) {
					this.plain.put(name, this.config.ref(name, now));
					BucketStats stats = this.registry.get(name).stats();
					this.counts.put(name, new long[] { stats.granted(), stats.rejected(), stats.shadowRejected() });
				}
				for (String name : KEYED) {
					this.keyed.put(name, new LinkedHashMap<>());
					this.overflow.put(name, this.config.ref(name, now));
					this.overflowCalls.put(name, new long[] { this.registry.get(name).keyed().overflowCalls() });
				}
				log("start, a day later: every bucket full");
				check();
				for (int step = 0; step < STEPS; step++) {
					if (this.random.nextInt(100) < 30) {
						moveClock();
					}
					else {
						request();
					}
					check();
				}
			}
			catch (AssertionError | Exception ex) {
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

		private void moveClock() {
			long delta = switch (this.random.nextInt(8)) {
				case 0 -> 0;
				case 1 -> 1 + this.random.nextInt(5);
				case 2, 3 -> 1 + this.random.nextLong(SECOND);
				case 4 -> SECOND / 2 * (1 + this.random.nextInt(4)) + this.random.nextInt(3) - 1;
				case 5 -> this.random.nextLong(6 * SECOND);
				case 6 -> TimeUnit.MINUTES.toNanos(1 + this.random.nextInt(30));
				default -> this.random.nextLong(SECOND / 5);
			};
			this.clock.addAndGet(delta);
			log("clock +%d ns", delta);
		}

		private void count(String what) {
			this.tally.merge(what, 1L, Long::sum);
		}

		private void request() throws Exception {
			String path = PATHS[this.random.nextInt(PATHS.length)];
			String method = this.random.nextBoolean() ? "GET" : "POST";
			String header = switch (this.random.nextInt(4)) {
				case 0 -> null;
				case 1 -> "";
				case 2 -> "k1";
				default -> "k2";
			};
			String param = switch (this.random.nextInt(3)) {
				case 0 -> null;
				case 1 -> "u1";
				default -> "u2";
			};
			MockHttpServletRequest request = new MockHttpServletRequest(method, path);
			if (header != null) {
				request.addHeader("X-Key", header);
			}
			if (param != null) {
				request.setParameter("u", param);
			}
			String what = method + " " + path + ((param != null) ? "?u=" + param : "")
					+ ((header != null) ? " X-Key: '" + header + "'" : "");
			// the reference's parts: every matching rule, by bucket name then rule
			List<Part> parts = new ArrayList<>();
			if (!path.startsWith("/actuator")) {
				for (int i = 0; i < RULES.length; i++) {
					String[] rule = RULES[i];
					boolean matches = (rule[0].endsWith("/**") ? path.startsWith(rule[0].substring(0, rule[0].length() - 3) + "/")
							: path.equals(rule[0])) && (rule[1] == null || rule[1].equals(method));
					if (!matches) {
						continue;
					}
					String key = null;
					if (rule[3] != null) {
						key = rule[3].startsWith("header:") ? Objects.toString(header, "") : Objects.toString(param, "");
					}
					RefBucket ref = (key != null) ? keyRef(rule[2], key) : this.plain.get(rule[2]);
					parts.add(new Part(i, rule[2], key, this.config.costs[i], ref));
				}
			}
			parts.sort((x, y) -> (x.bucket.equals(y.bucket)) ? Integer.compare(x.rule, y.rule) : x.bucket.compareTo(y.bucket));
			long now = this.clock.get();
			for (Part part : parts) {
				part.ref.advance(now);
			}
			// enforcing buckets claim in order; a claim that is not covered refuses (max-wait 0)
			List<Part> refusing = new ArrayList<>();
			List<Long> waits = new ArrayList<>();
			List<Part> taken = new ArrayList<>();
			for (Part part : parts) {
				if (part.shadow()) {
					continue;
				}
				long wait = part.ref.timeWait(part.cost);
				if (wait == 0) {
					part.ref.take(part.cost);
					taken.add(part);
				}
				else {
					refusing.add(part);
					waits.add(wait);
				}
			}
			MockHttpServletResponse response = new MockHttpServletResponse();
			this.filter.doFilter(request, response, new MockFilterChain());
			if (!refusing.isEmpty()) {
				for (Part part : taken) {
					part.ref.refund(part.cost);
				}
				refused(what, parts, refusing, waits, response);
				return;
			}
			for (Part part : parts) {
				if (part.shadow()) {
					long[] counts = this.counts.get(part.bucket);
					if (part.ref.timeWait(part.cost) > 0) {
						counts[2]++;
						count("shadow bucket would refuse");
					}
					else {
						part.ref.take(part.cost);
						counts[0]++;
					}
				}
				else {
					this.counts.get(part.bucket)[0]++;
				}
			}
			granted(what, parts, response);
		}

		/**
		 * The bucket a key takes from: its own while it has one that is not full, else a new one when fewer
		 * than {@code keys.max} keys have one that is not full, else the overflow bucket.
		 */
		private RefBucket keyRef(String bucket, String key) {
			long now = this.clock.get();
			Map<String, RefBucket> keys = this.keyed.get(bucket);
			RefBucket own = keys.get(key);
			if (own != null) {
				return own;
			}
			long max = this.config.keysMax(bucket);
			if (max > 0) {
				keys.values().removeIf((ref) -> {
					ref.advance(now);
					return ref.full(); // the same as a new one: dropped when room is needed
				});
				if (keys.size() >= max) {
					this.overflowCalls.get(bucket)[0]++;
					count("key in the overflow bucket");
					return this.overflow.get(bucket);
				}
			}
			RefBucket fresh = this.config.ref(bucket, now);
			keys.put(key, fresh);
			return fresh;
		}

		private void granted(String what, List<Part> parts, MockHttpServletResponse response) {
			List<Level> closest = closest(parts);
			log("%s -> %d %s %s (reference: %s%s)", what, response.getStatus(), fields(response),
					response.getHeader("Retry-After"), parts.isEmpty() ? "not limited" : "granted",
					closest.isEmpty() ? "" : ", closest " + closest);
			equal(what + ": status", response.getStatus(), 200);
			equal(what + ": Retry-After", response.getHeader("Retry-After"), null);
			if (!this.config.mode.equals("ietf") || parts.isEmpty()) {
				equal(what + ": RateLimit-Policy", response.getHeader("RateLimit-Policy"), null);
				equal(what + ": RateLimit", response.getHeader("RateLimit"), null);
				count(parts.isEmpty() ? "not limited" : "granted, no fields");
				return;
			}
			checkFields(what, response, closest);
			count((closest.size() > 1) ? "granted, ietf, closest tied" : "granted, ietf");
			if (parts.size() > 1) {
				count("granted, ietf, several buckets");
			}
		}

		private void refused(String what, List<Part> parts, List<Part> refusing, List<Long> waits,
				MockHttpServletResponse response) throws Exception {
			long longest = waits.stream().mapToLong(Long::longValue).max().getAsLong();
			List<Part> named = new ArrayList<>();
			for (int i = 0; i < refusing.size(); i++) {
				if (waits.get(i) == longest) {
					named.add(refusing.get(i));
				}
			}
			String body = response.getContentAsString();
			log("%s -> %d %s Retry-After %s %s (reference: refused by %s in %d ns)", what, response.getStatus(),
					fields(response), response.getHeader("Retry-After"), body,
					refusing.stream().map(Part::name).toList(), longest);
			equal(what + ": status", response.getStatus(), 429);
			equal(what + ": content type", response.getContentType(), "application/problem+json");
			String bucket = JsonPath.read(body, "$.bucket");
			Part refused = named.stream()
				.filter((p) -> p.bucket.equals(bucket))
				.findFirst()
				.orElseThrow(() -> new AssertionError(what + ": refused by " + bucket + ", reference: one of "
						+ named.stream().map(Part::name).toList()));
			this.counts.get(refused.bucket)[1]++;
			long seconds = Math.max(1, (longest + SECOND - 1) / SECOND);
			equal(what + ": Retry-After", response.getHeader("Retry-After"),
					this.config.mode.equals("none") ? null : Long.toString(seconds));
			boolean ietf = this.config.mode.equals("ietf");
			Object violated = JsonPath.parse(body).read("$", Map.class).get("violated-policies");
			if (!ietf) {
				equal(what + ": violated-policies", violated, null);
				equal(what + ": RateLimit-Policy", response.getHeader("RateLimit-Policy"), null);
				equal(what + ": RateLimit", response.getHeader("RateLimit"), null);
				count("refused, " + this.config.mode);
				return;
			}
			TreeSet<String> expected = new TreeSet<>();
			refusing.forEach((p) -> expected.add(p.bucket));
			if (violated == null) {
				throw new AssertionError(what + ": no violated-policies");
			}
			equal(what + ": violated-policies", new TreeSet<>((List<?>) violated), expected);
			if (expected.size() > 1) {
				count("refused, ietf, several refusing buckets");
			}
			// the fields: the named refusing bucket's level (nothing taken); see the class notes
			Level level = level(refused);
			checkFields(what, response, List.of(level));
			List<Level> closest = closest(parts);
			if (closest.stream().noneMatch((l) -> l.bucket.equals(refused.bucket) && l.equals(level))) {
				count("refused, ietf: the closest of the request's buckets is another");
			}
			count("refused, ietf");
		}

		/** The levels of the request's buckets closest to refusing (several when tied exactly). */
		private List<Level> closest(List<Part> parts) {
			List<Level> best = new ArrayList<>();
			for (Part part : parts) {
				Level level = level(part);
				if (best.isEmpty()) {
					best.add(level);
					continue;
				}
				Level b = best.get(0);
				int c = (level.r != b.r) ? Long.compare(b.r, level.r) : level.untilFull.compareTo(b.untilFull);
				if (c > 0) {
					best.clear();
					best.add(level);
				}
				else if (c == 0) {
					best.add(level);
				}
			}
			return best;
		}

		private Level level(Part part) {
			RefBucket ref = part.ref;
			BigInteger untilFull = ref.nanosUntilFull();
			return new Level(part.bucket, ref.limit, ceilSeconds(ref.nanosFor(ref.limit)), ref.available(),
					ceilSeconds(untilFull), untilFull);
		}

		private static long ceilSeconds(BigInteger nanos) {
			BigInteger[] qr = nanos.divideAndRemainder(BigInteger.valueOf(SECOND));
			return (qr[1].signum() == 0 ? qr[0] : qr[0].add(BigInteger.ONE)).longValueExact();
		}

		private static boolean matches(MockHttpServletResponse response, List<Level> candidates) {
			return candidates.stream()
				.anyMatch((l) -> l.policy().equals(response.getHeader("RateLimit-Policy"))
						&& l.limit().equals(response.getHeader("RateLimit")));
		}

		private void checkFields(String what, MockHttpServletResponse response, List<Level> candidates) {
			String policy = response.getHeader("RateLimit-Policy");
			String limit = response.getHeader("RateLimit");
			for (Level level : candidates) {
				if (level.policy().equals(policy) && level.limit().equals(limit)) {
					equal(what + ": one RateLimit-Policy field", response.getHeaders("RateLimit-Policy").size(), 1);
					equal(what + ": one RateLimit field", response.getHeaders("RateLimit").size(), 1);
					return;
				}
			}
			throw new AssertionError(what + ": fields RateLimit-Policy: " + policy + ", RateLimit: " + limit
					+ "; reference: " + candidates.stream().map((l) -> l.policy() + " / " + l.limit()).toList());
		}

		private static String fields(MockHttpServletResponse response) {
			String policy = response.getHeader("RateLimit-Policy");
			return (policy == null) ? "" : "RateLimit-Policy: " + policy + ", RateLimit: " + response.getHeader("RateLimit");
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
				this.keyed.get(name).forEach((key, ref) -> {
					ref.advance(now);
					RateLimiter limiter = (bucket.keys() > 0) ? bucket.keyed().find(key) : null;
					if (limiter == null) {
						if (!ref.full()) {
							throw new AssertionError(name + "[" + key + "]: dropped while not full, reference " + ref);
						}
						return;
					}
					checkLevels(name + "[" + key + "]", limiter.snapshot(), ref);
				});
				RefBucket overflowRef = this.overflow.get(name);
				overflowRef.advance(now);
				// a key that never had a bucket reads the overflow bucket
				checkLevels(name + " (overflow)", bucket.keyed().bucketOf("\u0000no such key").snapshot(), overflowRef);
				equal(name + ": ratelimit.keys.overflow", bucket.keyed().overflowCalls(), this.overflowCalls.get(name)[0]);
			}
		}

		private static void checkLevels(String name, RateLimiterSnapshot s, RefBucket ref) {
			equal(name + ": available", (long) s.available(), ref.available());
			equal(name + ": deficiency", (long) s.deficiency(), ref.deficiency());
		}

		private void log(String format, Object... args) {
			StringBuilder state = new StringBuilder();
			long now = this.clock.get();
			this.plain.forEach((name, ref) -> {
				if (!name.equals("per") && !name.equals("spel")) {
					ref.advance(now);
					state.append(' ').append(name).append('=').append(ref);
				}
			});
			this.keyed.forEach((name, keys) -> keys.forEach((key, ref) -> {
				ref.advance(now);
				state.append(' ').append(name).append("['").append(key).append("']=").append(ref);
			}));
			this.overflow.forEach((name, ref) -> {
				ref.advance(now);
				if (!ref.full()) {
					state.append(' ').append(name).append("(overflow)=").append(ref);
				}
			});
			this.trace.add(String.format("t=%d ", now) + String.format(format, args) + "    [reference after:" + state + "]");
		}

		private static void equal(String what, Object actual, Object expected) {
			if (!Objects.equals(actual, expected)) {
				throw new AssertionError(what + ": actual " + actual + ", reference " + expected);
			}
		}
	}

	/**
	 * The exact token bucket: {@code a / den} tokens (negative when owed), at most the limit, growing by
	 * {@code num / den} per nanosecond ({@code tokens} per {@code periodNanos}, in lowest terms).
	 */
	static final class RefBucket {

		private final BigInteger num;

		private final BigInteger den;

		private final BigInteger full;

		final long limit;

		private BigInteger a;

		private long time;

		RefBucket(long tokens, long periodNanos, long limit, long now) {
			BigInteger r = BigInteger.valueOf(tokens);
			BigInteger p = BigInteger.valueOf(periodNanos);
			BigInteger g = r.gcd(p);
			this.num = r.divide(g);
			this.den = p.divide(g);
			this.limit = limit;
			this.full = BigInteger.valueOf(limit).multiply(this.den);
			this.a = this.full;
			this.time = now;
		}

		void advance(long now) {
			if (now > this.time) {
				this.a = this.a.add(this.num.multiply(BigInteger.valueOf(now - this.time))).min(this.full);
				this.time = now;
			}
		}

		private BigInteger scaled(long n) {
			return BigInteger.valueOf(n).multiply(this.den);
		}

		/** The first whole nanosecond at which {@code n} tokens are there; 0 when they are now. */
		long timeWait(long n) {
			if (n == 0 || this.a.compareTo(scaled(n)) >= 0) {
				return 0;
			}
			return ceil(scaled(n).subtract(this.a), this.num).longValueExact();
		}

		/** Nanoseconds (exact, may be fractional: rounded up) for the rate to make {@code n} tokens. */
		BigInteger nanosFor(long n) {
			return ceil(scaled(n), this.num);
		}

		/** Nanoseconds until full, rounded up to a whole nanosecond (0 when full). */
		BigInteger nanosUntilFull() {
			return ceil(this.full.subtract(this.a), this.num);
		}

		private static BigInteger ceil(BigInteger x, BigInteger y) {
			BigInteger[] qr = x.divideAndRemainder(y);
			return (qr[1].signum() == 0) ? qr[0] : qr[0].add(BigInteger.ONE);
		}

		void take(long n) {
			this.a = this.a.subtract(scaled(n));
		}

		void refund(long n) {
			this.a = this.a.add(scaled(n)).min(this.full);
		}

		boolean full() {
			return this.a.equals(this.full);
		}

		long available() {
			return (this.a.signum() <= 0) ? 0 : this.a.divide(this.den).longValueExact();
		}

		long deficiency() {
			return (this.a.signum() >= 0) ? 0 : ceil(this.a.negate(), this.den).longValueExact();
		}

		@Override
		public String toString() {
			return new BigDecimal(this.a).divide(new BigDecimal(this.den), 9, java.math.RoundingMode.FLOOR)
				.stripTrailingZeros()
				.toPlainString();
		}
	}
}
