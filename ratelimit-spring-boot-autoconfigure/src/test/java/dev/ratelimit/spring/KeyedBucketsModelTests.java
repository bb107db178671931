package dev.ratelimit.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.SharedTokenBucket;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.fail;

/**
 * K1 and K3 of {@link KeyedBuckets}, proved on seeded random sequences: a key's calls see exactly what
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

	private static RateLimiter bucket(long rate, long limit, AtomicLong now) {
		return SharedTokenBucket.builder().rate(rate, Duration.ofSeconds(1)).limit(limit).clock(now::get).build();
	}
}
