package dev.ratelimit.spring;

import java.lang.ref.Reference;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.CalendarQuota;
import dev.ratelimit.core.HybridRateLimiter;
import dev.ratelimit.core.QuotaCalendar;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.SharedTokenBucket;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * K3 of {@link KeyedBuckets} on the heap: the store takes at most {@code keys.memory} whatever the keys'
 * sizes (a key longer than {@value KeyedBuckets#KEY_CHARS} characters is held by its digest), and a key
 * costs at most the bytes the store charges for it. Measured as the heap in use after a full collection,
 * before and after, so that what other threads allocate meanwhile does not count.
 */
class KeyedBucketsHeapTests {

	private final AtomicLong now = new AtomicLong();

	private KeyedBuckets keysInMemory(long memory) {
		return new KeyedBuckets(0, memory, true, this.now::get, (key) -> SharedTokenBucket.builder()
			.rate(1, Duration.ofSeconds(1))
			.limit(10)
			.clock(this.now::get)
			.build(), (bucket) -> {
			});
	}

	private static boolean take(KeyedBuckets keys, Object key, long n) {
		KeyedBuckets.Entry entry = keys.pin(key);
		try {
			return entry.limiter().tryAcquire(n);
		}
		finally {
			entry.unpin();
		}
	}

	@Test
	void keysOfEverySizeUpToAMegabyteKeepTheHeapWithinKeysMemory() {
		long memory = KeyedBuckets.MAX_MEMORY;
		long before = usedHeapAfterGc();
		KeyedBuckets keys = keysInMemory(memory);
		SplittableRandom random = new SplittableRandom(31);
		char[] text = new char[1 << 20];
		int made = 0;
		long characters = 0;
		// 120,000 keys, each owing tokens: more than the store holds live, so buckets are forgotten too; their
		// sizes are spread over 1 to 2^10 characters, and one in 50 over 2^10 to 2^20 (uniform in the logarithm)
		for (int i = 0; i < 120_000; i++) {
			double log = (i % 50 == 0) ? 10 + random.nextDouble(10.0001) : random.nextDouble(10);
			int length = (int) Math.min(1 << 20, Math.max(1, Math.round(Math.pow(2, log))));
			Arrays.fill(text, 0, length, (char) ('a' + (i % 26)));
			String prefix = Integer.toString(i);
			System.arraycopy(prefix.toCharArray(), 0, text, 0, Math.min(prefix.length(), length));
			String key = new String(text, 0, length) + ((length < prefix.length()) ? prefix : "");
			characters += key.length();
			take(keys, key, 1 + random.nextInt(10));
			made++;
			this.now.addAndGet(1_000); // 1 µs a key: they all owe for seconds
		}
		text = null; // (the test's own megabyte)
		long retained = usedHeapAfterGc() - before;
		System.out.printf("%d keys, %d MB of characters: %d live, %d forgotten owing; retained %.1f MB of %d MB%n",
				made, characters >> 20, keys.size(), keys.owing(), retained / 1048576.0, memory >> 20);
		assertThat(characters).as("keys of up to a megabyte went by").isGreaterThan(2 * memory);
		assertThat(keys.owing()).as("buckets were forgotten too").isPositive();
		// the store's own bound, plus a margin for the map's table and what the measure cannot tell apart
		assertThat(retained).isLessThan(memory + (4L << 20));
		Reference.reachabilityFence(keys);
	}

	@Test
	void aKeyCostsAtMostItsStatedBytes() {
		int n = 50_000;
		String pad = "k".repeat(KeyedBuckets.KEY_CHARS - 8);
		long before = usedHeapAfterGc();
		KeyedBuckets keys = keysInMemory(KeyedBuckets.DEFAULT_MEMORY);
		for (int i = 0; i < n; i++) {
			take(keys, String.format("%08d", i) + pad, 1); // every key owes a token: none may be dropped
		}
		long perKey = (usedHeapAfterGc() - before) / n;
		System.out.printf("a key of %d characters: %d bytes on the heap (charged %d)%n", KeyedBuckets.KEY_CHARS, perKey,
				KeyedBuckets.ENTRY_BYTES + 2 * KeyedBuckets.KEY_CHARS);
		assertThat(keys.size()).isEqualTo(n); // all kept, none forgotten
		assertThat(perKey).isLessThanOrEqualTo(KeyedBuckets.ENTRY_BYTES + 2 * KeyedBuckets.KEY_CHARS);
		Reference.reachabilityFence(keys);
	}

	/**
	 * K3 and K9 for pacers and quotas: a key's pacer or quota, owing (so that none is dropped), costs at most
	 * what the store charges for it; and a store of them sprayed with more keys than it holds (so that
	 * they are forgotten with their debts, K9) keeps the heap within {@code keys.memory}.
	 */
	@Test
	void pacersAndQuotasCostAtMostTheirStatedBytesAndKeepTheHeapWithinKeysMemory() {
		for (int type = 1; type <= 2; type++) {
			int kind = type;
			int n = 20_000;
			String pad = "k".repeat(KeyedBuckets.KEY_CHARS - 8);
			long before = usedHeapAfterGc();
			long charged = (kind == 1) ? KeyedBuckets.ENTRY_BYTES : KeyedBuckets.QUOTA_ENTRY_BYTES;
			KeyedBuckets keys = new KeyedBuckets(0, KeyedBuckets.DEFAULT_MEMORY, true, this.now::get,
					new KeyedBuckets.Maker() {

						@Override
						public RateLimiter make(String plan, Object key) {
							return limiter(kind);
						}

						@Override
						public void follow(String plan, RateLimiter bucket) {
						}

						@Override
						public long entryBytes() {
							return charged;
						}
					}, java.util.Map.of());
			for (int i = 0; i < n; i++) {
				take(keys, String.format("%08d", i) + pad, 1);
			}
			long perKey = (usedHeapAfterGc() - before) / n;
			String what = (kind == 1) ? "pacer" : "quota";
			System.out.printf("a %s's key of %d characters: %d bytes on the heap (charged %d)%n", what,
					KeyedBuckets.KEY_CHARS, perKey, charged + 2 * KeyedBuckets.KEY_CHARS);
			assertThat(keys.size()).as(what).isEqualTo(n);
			assertThat(perKey).as(what).isLessThanOrEqualTo(charged + 2 * KeyedBuckets.KEY_CHARS);
			// twice the keys the memory holds, each owing: forgotten with their debts, the heap bounded
			for (int i = n; i < 2 * KeyedBuckets.DEFAULT_MEMORY / charged; i++) {
				take(keys, "sprayed-" + i, 1);
				this.now.addAndGet(1_000);
			}
			long retained = usedHeapAfterGc() - before;
			System.out.printf("%ss sprayed: %d live, %d forgotten owing; retained %.1f MB of %d MB%n", what, keys.size(),
					keys.owing(), retained / 1048576.0, KeyedBuckets.DEFAULT_MEMORY >> 20);
			assertThat(keys.owing()).as(what + "s forgotten owing").isPositive();
			assertThat(retained).as(what).isLessThan(KeyedBuckets.DEFAULT_MEMORY + (4L << 20));
			Reference.reachabilityFence(keys);
		}
	}

	private RateLimiter limiter(int type) {
		if (type == 1) {
			return HybridRateLimiter.builder().rate(1, Duration.ofSeconds(1)).limit(10).clock(this.now::get).build();
		}
		return CalendarQuota.builder()
			.limit(10)
			.calendar(QuotaCalendar.Unit.DAY)
			.zone(ZoneOffset.UTC)
			.clock(() -> Instant.ofEpochSecond(1_700_000_000L, this.now.get()))
			.build();
	}

	/** The heap in use after full collections: the least of a few readings (other threads allocate too). */
	private static long usedHeapAfterGc() {
		long least = Long.MAX_VALUE;
		for (int i = 0; i < 3; i++) {
			System.gc();
			Runtime runtime = Runtime.getRuntime();
			least = Math.min(least, runtime.totalMemory() - runtime.freeMemory());
		}
		return least;
	}
}
