package dev.ratelimit.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.CalendarQuota;
import dev.ratelimit.core.HybridRateLimiter;
import dev.ratelimit.core.QuotaCalendar;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.SharedTokenBucket;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.fail;

/**
 * K1, K3, K5, K7 and K8 of {@link KeyedBuckets}, proved on seeded random sequences: a key's calls see exactly what
 * they would see if its bucket were never dropped, and at most {@code max} keys have a bucket.
 *
 * <p>The reference keeps, for each key, one bucket that is never dropped (made when the key first gets
 * a bucket of its own) and one overflow bucket; each call is checked against the reference bucket of
 * what served it. The buckets are the core's exact rover buckets (proved by their own model test), so
 * what this checks is the map: that dropping an idle bucket and making it again is invisible.
 *
 * <p>K5, plans: seeded sequences of calls naming random plans (listed, unlisted, {@code null},
 * {@code ""}), upgrades and downgrades, retunes of the template or of one plan, and drops, checked step by
 * step against a reference that keeps for each key a bucket never dropped and the plan it follows: a
 * plan change applies the new plan's settings to the key's reference bucket before the call takes its
 * tokens (the rate, then the limit, as a retune does), and a retune applies to the reference buckets of
 * the keys on that plan, and no other, at the retune's instant. A key whose bucket the map dropped was
 * idle (checked) and starts again full with its plan's settings in force.
 */
class KeyedBucketsModelTests {

	private static final int SEQUENCES = 3000;

	private static final int STEPS = 200;

	@Test
	void dropsAreInvisibleAndTheMapStaysBounded() {
		long base = System.nanoTime();
		for (int i = 0; i < SEQUENCES; i++) {
			run(base + i);
		}
	}

	private static void run(long seed) {
		SplittableRandom random = new SplittableRandom(seed);
		AtomicLong now = new AtomicLong();
		int max = 1 + random.nextInt(4);
		int keyCount = 1 + random.nextInt(7);
		long rate = 1 + random.nextInt(20);
		long limit = 1 + random.nextInt(6);
		List<RateLimiter> overflow = new ArrayList<>();
		KeyedBuckets keys = new KeyedBuckets(max, (key) -> {
			RateLimiter bucket = bucket(rate, limit, now);
			if (key == null) {
				overflow.add(bucket);
			}
			return bucket;
		}, (bucket) -> {
		});
		Map<Object, RateLimiter> reference = new HashMap<>();
		RateLimiter referenceOverflow = bucket(rate, limit, now);
		List<String> trace = new ArrayList<>();
		trace.add("max=" + max + " keys=" + keyCount + " rate=" + rate + "/s limit=" + limit);
		for (int step = 0; step < STEPS; step++) {
			if (random.nextInt(4) == 0) {
				long advance = random.nextLong(Duration.ofMillis(1500).toNanos());
				now.addAndGet(advance);
				trace.add("advance " + Duration.ofNanos(advance));
				continue;
			}
			Integer key = random.nextInt(keyCount);
			long n = 1 + random.nextInt((int) limit);
			KeyedBuckets.Entry entry = keys.pin(key);
			boolean got;
			boolean expected;
			String served;
			try {
				got = entry.limiter().tryAcquire(n);
				if (entry.limiter() == overflow.get(0)) {
					served = "overflow";
					expected = referenceOverflow.tryAcquire(n);
				}
				else {
					served = "own";
					expected = reference.computeIfAbsent(key, (k) -> bucket(rate, limit, now)).tryAcquire(n);
				}
			}
			finally {
				entry.unpin();
			}
			trace.add("key " + key + " takes " + n + " from its " + served + " bucket: " + got + " (buckets: "
					+ keys.size() + ")");
			if (got != expected) {
				fail("seed " + seed + ": expected " + expected + "\n" + String.join("\n", trace));
			}
			if (keys.size() > max) {
				fail("seed " + seed + ": " + keys.size() + " buckets with max " + max + "\n" + String.join("\n", trace));
			}
		}
	}

	@Test
	void keysFollowTheirCallsPlansAndEachPlansRetunes() {
		long base = System.nanoTime() ^ 0x5DEECE66DL;
		for (int i = 0; i < SEQUENCES; i++) {
			runPlans(base + i);
		}
	}

	/** One plan's settings in force (a retune makes new ones). */
	private record Settings(long rate, long limit) {
	}

	/** A key's reference: its bucket, never dropped, the plan it follows and the settings it has. */
	private static final class Followed {

		final RateLimiter bucket;

		@org.jspecify.annotations.Nullable String plan;

		Settings settings;

		Followed(RateLimiter bucket, @org.jspecify.annotations.Nullable String plan, Settings settings) {
			this.bucket = bucket;
			this.plan = plan;
			this.settings = settings;
		}
	}

	private static final String[] PLANS = { "pro", "slow", "team" };

	private static void runPlans(long seed) {
		SplittableRandom random = new SplittableRandom(seed);
		AtomicLong now = new AtomicLong();
		int max = 1 + random.nextInt(4);
		int keyCount = 1 + random.nextInt(6);
		int planCount = 1 + random.nextInt(PLANS.length);
		// the settings in force by plan (null: the template)
		Map<String, Settings> settings = new HashMap<>();
		settings.put(null, new Settings(1 + random.nextInt(20), 1 + random.nextInt(6)));
		Map<String, java.time.Duration> maxWaits = new HashMap<>();
		for (int p = 0; p < planCount; p++) {
			settings.put(PLANS[p], new Settings(1 + random.nextInt(40), 1 + random.nextInt(10)));
			maxWaits.put(PLANS[p], null);
		}
		List<RateLimiter> overflow = new ArrayList<>();
		KeyedBuckets keys = new KeyedBuckets(max, new KeyedBuckets.Maker() {

			@Override
			public RateLimiter make(String plan, Object key) {
				Settings s = settings.get(plan);
				RateLimiter bucket = bucket(s.rate(), s.limit(), now);
				if (key == null) {
					overflow.add(bucket);
				}
				return bucket;
			}

			@Override
			public void follow(String plan, RateLimiter bucket) {
				apply(bucket, settings.get(plan));
			}
		}, maxWaits);
		Map<Integer, Followed> reference = new HashMap<>();
		Settings template = settings.get(null);
		Followed referenceOverflow = new Followed(bucket(template.rate(), template.limit(), now), null, template);
		List<String> trace = new ArrayList<>();
		trace.add("max=" + max + " keys=" + keyCount + " settings=" + settings);
		for (int step = 0; step < STEPS; step++) {
			int op = random.nextInt(10);
			if (op < 2) {
				long advance = random.nextLong(Duration.ofMillis(1500).toNanos());
				now.addAndGet(advance);
				trace.add("advance " + Duration.ofNanos(advance));
				continue;
			}
			if (op == 2) {
				// a retune of the template or of one plan, through the map as the endpoint does it
				String plan = (random.nextInt(3) == 0) ? null : PLANS[random.nextInt(planCount)];
				Settings next = new Settings(1 + random.nextInt(40), 1 + random.nextInt(10));
				settings.put(plan, next);
				forgetDropped(keys, reference, seed, trace);
				if (plan == null) {
					keys.retuned();
					follow(referenceOverflow, null, next);
				}
				else {
					keys.retuned(plan);
				}
				for (Followed followed : reference.values()) {
					if (Objects.equals(followed.plan, plan)) {
						follow(followed, plan, next);
					}
				}
				trace.add("retune " + ((plan != null) ? plan : "the template") + " to " + next);
				continue;
			}
			Integer key = random.nextInt(keyCount);
			String named = switch (random.nextInt(6)) {
				case 0 -> null;
				case 1 -> "";
				case 2 -> "gold"; // not a plan
				default -> PLANS[random.nextInt(PLANS.length)]; // may be one not configured in this run
			};
			String plan = (named != null && settings.containsKey(named) && !named.isEmpty()) ? named : null;
			long n = 1 + random.nextInt(10);
			forgetDropped(keys, reference, seed, trace);
			KeyedBuckets.Entry entry = keys.pin(PlannedKey.of(key, named));
			boolean got;
			boolean expected;
			String served;
			try {
				got = entry.limiter().tryAcquire(n);
				if (entry.limiter() == overflow.get(0)) {
					served = "overflow";
					expected = referenceOverflow.bucket.tryAcquire(n);
					if (entry.plan() != null) {
						fail("seed " + seed + ": the overflow bucket follows plan " + entry.plan() + "\n"
								+ String.join("\n", trace));
					}
				}
				else {
					served = "own";
					Followed followed = reference.get(key);
					if (followed == null) {
						Settings s = settings.get(plan);
						followed = new Followed(bucket(s.rate(), s.limit(), now), plan, s);
						reference.put(key, followed);
					}
					else if (!Objects.equals(followed.plan, plan) || followed.settings != settings.get(plan)) {
						follow(followed, plan, settings.get(plan));
					}
					expected = followed.bucket.tryAcquire(n);
					if (!Objects.equals(entry.plan(), plan)) {
						fail("seed " + seed + ": key " + key + " follows " + entry.plan() + ", expected " + plan + "\n"
								+ String.join("\n", trace));
					}
				}
			}
			finally {
				entry.unpin();
			}
			trace.add("key " + key + " on " + named + " takes " + n + " from its " + served + " bucket: " + got
					+ " (buckets: " + keys.size() + ")");
			if (got != expected) {
				fail("seed " + seed + ": expected " + expected + "\n" + String.join("\n", trace));
			}
			if (keys.size() > max) {
				fail("seed " + seed + ": " + keys.size() + " buckets with max " + max + "\n" + String.join("\n", trace));
			}
		}
	}

	/**
	 * K1 for the reference: a key whose bucket the map dropped had an idle bucket; the reference forgets
	 * it too (the next one starts full with its plan's settings in force).
	 */
	private static void forgetDropped(KeyedBuckets keys, Map<Integer, Followed> reference, long seed,
			List<String> trace) {
		reference.entrySet().removeIf((each) -> {
			if (keys.findEntry(String.valueOf(each.getKey())) != null) {
				return false;
			}
			if (!each.getValue().bucket.isIdle()) {
				fail("seed " + seed + ": key " + each.getKey() + "'s bucket was dropped while not idle\n"
						+ String.join("\n", trace));
			}
			return true;
		});
	}

	private static void follow(Followed followed, String plan, Settings next) {
		apply(followed.bucket, next);
		followed.plan = plan;
		followed.settings = next;
	}

	/** As a retune: the rate (the time that passed at the old one), then the limit. */
	private static void apply(RateLimiter bucket, Settings settings) {
		bucket.updateRate(settings.rate(), Duration.ofSeconds(1));
		bucket.updateLimit(settings.limit());
	}

	/** Sequences of the sprayer model, and steps in each. */
	private static final int SPRAY_SEQUENCES = 1000;

	private static final int SPRAY_STEPS = 400;

	/**
	 * K7, K8 and K9 on seeded random sequences: sprayers (a new key per call, random key sizes up to 200
	 * characters, taking random amounts) interleaved with well-behaved keys that call within their rate
	 * (one token at least a token's time after their previous call), in a store whose memory holds only a
	 * few keys, so that buckets owing tokens are forgotten again and again. Each sequence draws the
	 * template's type: rover buckets, pacers (random burst ratio) or calendar quotas (a minute's allowance,
	 * on a wall clock that is the store's clock). Against per-key reference limiters that are never
	 * dropped: each key's grants are a history its own limiter, never dropped, grants too (its shadow takes
	 * what the store granted; for rover buckets also: no window's grants exceed {@code limit + rate * w}),
	 * no key has more keys in the store than its memory holds, and no well-behaved call is refused where
	 * its reference grants it.
	 */
	@Test
	void sprayersNeverPushAKeyOverItsBoundNorLockOutKeysWithinTheirRate() {
		long base = System.nanoTime();
		long[] tally = new long[6]; // well-behaved calls, their refusals, forgettings seen (all, pacers, quotas)
		for (int i = 0; i < SPRAY_SEQUENCES; i++) {
			spray(base + i, tally);
		}
		System.out.printf("sprayer model: %d sequences, %d well-behaved calls, %d refused, %d buckets forgotten"
				+ " (%d pacers, %d quotas)%n", SPRAY_SEQUENCES, tally[0], tally[1], tally[2], tally[3], tally[4]);
		if (tally[3] == 0 || tally[4] == 0) {
			fail("no pacer or no quota owing was ever forgotten: the model tests nothing of K9 (seeds from " + base + ")");
		}
		if (tally[1] != 0) {
			fail("well-behaved keys refused " + tally[1] + " times in " + tally[0] + " calls (seeds from " + base + ")");
		}
		if (tally[2] == 0) {
			fail("no bucket owing tokens was ever forgotten: the model tests nothing (seeds from " + base + ")");
		}
	}

	private static void spray(long seed, long[] tally) {
		SplittableRandom random = new SplittableRandom(seed);
		int type = random.nextInt(3); // 0: rover buckets, 1: pacers, 2: calendar quotas (K9)
		// a quota's wall clock is the store's: nanoseconds since the epoch, from some instant of 2023 on
		AtomicLong now = new AtomicLong((type == 2) ? 1_700_000_000_000_000_000L + random.nextLong(1L << 50)
				: random.nextLong());
		long start = now.get();
		long limit = 2 + random.nextInt(8);
		long rate = (type == 2) ? limit : 1 + random.nextInt(50);
		Duration period = (type == 2) ? Duration.ofMinutes(1) : Duration.ofSeconds(1);
		double burstRatio = 1 + random.nextInt(6) / 10.0;
		java.util.function.Supplier<RateLimiter> limiter = () -> limiter(type, rate, limit, burstRatio, now);
		int room = 2 + random.nextInt(6);
		long memory = (room * (KeyedBuckets.ENTRY_BYTES + 400L)) * 16 / 13;
		KeyedBuckets keys = new KeyedBuckets(0, memory, true, now::get, (key) -> limiter.get(), (bucket) -> {
		});
		int wellBehaved = 1 + random.nextInt(3);
		Map<Object, RateLimiter> reference = new HashMap<>();
		Map<Object, RateLimiter> shadow = new HashMap<>(); // never dropped, takes what the store granted
		Map<Object, List<long[]>> grants = new HashMap<>(); // key -> {time, tokens}
		long[] lastCall = new long[wellBehaved];
		java.util.Arrays.fill(lastCall, Long.MIN_VALUE);
		long tokenNanos = (period.toNanos() + rate - 1) / rate;
		List<String> trace = new ArrayList<>();
		trace.add(new String[] { "buckets", "pacers (burst ratio " + burstRatio + ")", "quotas" }[type] + " rate=" + rate
				+ "/" + period + " limit=" + limit + " memory=" + memory + " well-behaved=" + wellBehaved);
		int sprayed = 0;
		for (int step = 0; step < SPRAY_STEPS; step++) {
			int what = random.nextInt(10);
			if (what == 0) {
				long advance = random.nextLong(3 * tokenNanos);
				now.addAndGet(advance);
				trace.add("advance " + advance + " ns");
				continue;
			}
			boolean good = what < 4;
			Object key;
			long n;
			if (good) {
				int k = random.nextInt(wellBehaved);
				if (lastCall[k] != Long.MIN_VALUE && now.get() - lastCall[k] < tokenNanos) {
					now.addAndGet(tokenNanos - (now.get() - lastCall[k])); // within its rate
				}
				lastCall[k] = now.get();
				key = "user-" + k;
				n = 1;
			}
			else {
				// a new key, or now and then a sprayed key again (a sprayer may come back over its bound)
				int id = (sprayed > 0 && random.nextInt(4) == 0) ? random.nextInt(sprayed) : sprayed++;
				key = "spray-" + id + "-" + "x".repeat(new SplittableRandom(id).nextInt(200));
				n = 1 + random.nextInt((int) limit);
			}
			KeyedBuckets.Entry entry = keys.pin(key);
			boolean got;
			String before = (good) ? entry.limiter().snapshot().toString() : "";
			try {
				got = entry.limiter().tryAcquire(n);
			}
			finally {
				entry.unpin();
			}
			RateLimiter own = reference.computeIfAbsent(key, (k) -> limiter.get());
			String referenceBefore = (good) ? own.snapshot().toString() : "";
			boolean expected = own.tryAcquire(n);
			if (good && got != expected) {
				trace.add("store's " + before + "\nreference's " + referenceBefore);
			}
			trace.add(((key.toString().length() > 20) ? key.toString().substring(0, 20) + "..." : key) + " takes " + n
					+ ": " + got + " (reference " + expected + ", keys " + keys.size() + ", load " + keys.load() + ", owing "
					+ keys.owing() + ")");
			if (got) {
				if (!shadow.computeIfAbsent(key, (k) -> limiter.get()).tryAcquire(n)) {
					fail("seed " + seed + ": key " + key + " got " + n + " its own limiter, never dropped, refuses\n"
							+ String.join("\n", trace));
				}
				if (type == 0) {
					List<long[]> taken = grants.computeIfAbsent(key, (k) -> new ArrayList<>());
					taken.add(new long[] { now.get(), n });
					checkBound(seed, key, taken, rate, limit, trace);
				}
			}
			if (good) {
				tally[0]++;
				if (!got && expected) {
					tally[1]++;
					fail("seed " + seed + ": a well-behaved key refused within its rate\n" + String.join("\n", trace));
				}
			}
			long most = memory / 16 * 13 / KeyedBuckets.ENTRY_BYTES; // every key costs at least that (K3)
			if (keys.size() > most) {
				fail("seed " + seed + ": " + keys.size() + " keys kept in room for " + most + "\n"
						+ String.join("\n", trace));
			}
		}
		tally[2] += sprayed - keys.size();
		if (type > 0) {
			tally[2 + type] += sprayed - keys.size();
		}
		if (now.get() - start < 0) {
			fail("seed " + seed + ": the clock went backwards");
		}
	}

	/** Grants of one key in every window ending at its last grant: at most limit + rate * w. */
	private static void checkBound(long seed, Object key, List<long[]> taken, long rate, long limit,
			List<String> trace) {
		long[] last = taken.get(taken.size() - 1);
		long sum = 0;
		for (int i = taken.size() - 1; i >= 0; i--) {
			sum += taken.get(i)[1];
			long window = last[0] - taken.get(i)[0];
			// floor(rate * w / 1 s), exact in 128 bits
			long earned = java.math.BigInteger.valueOf(rate)
				.multiply(java.math.BigInteger.valueOf(window))
				.divide(java.math.BigInteger.valueOf(Duration.ofSeconds(1).toNanos()))
				.longValue();
			if (sum > limit + earned) {
				fail("seed " + seed + ": key " + key + " got " + sum + " tokens in " + window + " ns, bound "
						+ (limit + earned) + "\n" + String.join("\n", trace));
			}
		}
	}


	private static RateLimiter bucket(long rate, long limit, AtomicLong now) {
		return SharedTokenBucket.builder().rate(rate, Duration.ofSeconds(1)).limit(limit).clock(now::get).build();
	}

	/** A rover bucket, a pacer ({@code rate} per second) or a calendar quota ({@code limit} a minute, UTC). */
	private static RateLimiter limiter(int type, long rate, long limit, double burstRatio, AtomicLong now) {
		return switch (type) {
			case 0 -> bucket(rate, limit, now);
			case 1 -> HybridRateLimiter.builder()
				.rate(rate, Duration.ofSeconds(1))
				.limit(limit)
				.burstRatio(burstRatio)
				.clock(now::get)
				.build();
			default -> CalendarQuota.builder()
				.limit(limit)
				.calendar(QuotaCalendar.Unit.MINUTE)
				.zone(java.time.ZoneOffset.UTC)
				.clock(() -> java.time.Instant.ofEpochSecond(0, now.get()))
				.build();
		};
	}
}
