package dev.ratelimit.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
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

	/** Sequences of the sprayer model, and steps in each. */
	private static final int SPRAY_SEQUENCES = 1000;

	private static final int SPRAY_STEPS = 400;

	/**
	 * K5 and K6 on seeded random sequences: sprayers (a new key per call, random key sizes up to 200
	 * characters, taking random amounts) interleaved with well-behaved keys that call within their rate
	 * (one token at least a token's time after their previous call), in a store whose memory holds only a
	 * few keys, so that buckets owing tokens are forgotten again and again. Against per-key reference
	 * buckets that are never dropped: no key's grants over any window exceed {@code limit + rate * w}, and
	 * no well-behaved call is refused where its reference grants it.
	 */
	@Test
	void sprayersNeverPushAKeyOverItsBoundNorLockOutKeysWithinTheirRate() {
		long base = System.nanoTime();
		long[] tally = new long[3]; // well-behaved calls, their refusals, forgettings seen
		for (int i = 0; i < SPRAY_SEQUENCES; i++) {
			spray(base + i, tally);
		}
		System.out.printf("sprayer model: %d sequences, %d well-behaved calls, %d refused, %d buckets forgotten%n",
				SPRAY_SEQUENCES, tally[0], tally[1], tally[2]);
		if (tally[1] != 0) {
			fail("well-behaved keys refused " + tally[1] + " times in " + tally[0] + " calls (seeds from " + base + ")");
		}
		if (tally[2] == 0) {
			fail("no bucket owing tokens was ever forgotten: the model tests nothing (seeds from " + base + ")");
		}
	}

	private static void spray(long seed, long[] tally) {
		SplittableRandom random = new SplittableRandom(seed);
		AtomicLong now = new AtomicLong(random.nextLong());
		long start = now.get();
		long rate = 1 + random.nextInt(50);
		long limit = 2 + random.nextInt(8);
		int room = 2 + random.nextInt(6);
		long memory = (room * (KeyedBuckets.ENTRY_BYTES + 400L)) * 8 / 7;
		KeyedBuckets keys = new KeyedBuckets(0, memory, true, now::get, (key) -> bucket(rate, limit, now),
				(bucket) -> {
				});
		int wellBehaved = 1 + random.nextInt(3);
		Map<Object, RateLimiter> reference = new HashMap<>();
		Map<Object, List<long[]>> grants = new HashMap<>(); // key -> {time, tokens}
		long[] lastCall = new long[wellBehaved];
		java.util.Arrays.fill(lastCall, Long.MIN_VALUE);
		long tokenNanos = (Duration.ofSeconds(1).toNanos() + rate - 1) / rate;
		List<String> trace = new ArrayList<>();
		trace.add("rate=" + rate + "/s limit=" + limit + " memory=" + memory + " well-behaved=" + wellBehaved);
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
			try {
				got = entry.limiter().tryAcquire(n);
			}
			finally {
				entry.unpin();
			}
			boolean expected = reference.computeIfAbsent(key, (k) -> bucket(rate, limit, now)).tryAcquire(n);
			trace.add(((key.toString().length() > 20) ? key.toString().substring(0, 20) + "..." : key) + " takes " + n
					+ ": " + got + " (reference " + expected + ", keys " + keys.size() + ", load " + keys.load() + ")");
			if (got) {
				List<long[]> taken = grants.computeIfAbsent(key, (k) -> new ArrayList<>());
				taken.add(new long[] { now.get(), n });
				checkBound(seed, key, taken, rate, limit, trace);
			}
			if (good) {
				tally[0]++;
				if (!got && expected) {
					tally[1]++;
					fail("seed " + seed + ": a well-behaved key refused within its rate\n" + String.join("\n", trace));
				}
			}
			long most = (memory - memory / 8) / KeyedBuckets.ENTRY_BYTES; // every key costs at least that (K3)
			if (keys.size() > most) {
				fail("seed " + seed + ": " + keys.size() + " keys kept in room for " + most + "\n"
						+ String.join("\n", trace));
			}
		}
		tally[2] += sprayed - keys.size();
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
}
