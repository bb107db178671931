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

	private static RateLimiter bucket(long rate, long limit, AtomicLong now) {
		return SharedTokenBucket.builder().rate(rate, Duration.ofSeconds(1)).limit(limit).clock(now::get).build();
	}
}
