package dev.ratelimit.spring;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.core.SharedTokenBucket;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Per-key buckets on a fake clock: what a key's caller sees never depends on whether its bucket was
 * dropped in between, and the map stays bounded whatever keys arrive.
 */
class KeyedBucketsTests {

	private final AtomicLong now = new AtomicLong();

	/** The template's settings: 10 per second, limit 10 (retuned by some tests). */
	private long rate = 10;

	private long limit = 10;

	private boolean capped;

	private KeyedBuckets keys(int max) {
		return new KeyedBuckets(max, (key) -> SharedTokenBucket.builder()
			.name("api")
			.rate(this.rate, Duration.ofSeconds(1))
			.limit(this.limit)
			.cappedRelease(this.capped)
			.clock(this.now::get)
			.build(), (bucket) -> {
				bucket.updateRate(this.rate, Duration.ofSeconds(1));
				bucket.updateLimit(this.limit);
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

	private void advance(Duration duration) {
		this.now.addAndGet(duration.toNanos());
	}

	@Test
	void twoKeysDoNotShareTokens() {
		KeyedBuckets keys = keys(100);
		assertThat(take(keys, "alice", 10)).isTrue();
		assertThat(take(keys, "alice", 1)).isFalse();
		assertThat(take(keys, "bob", 10)).isTrue();
		assertThat(take(keys, "bob", 1)).isFalse();
		assertThat(keys.size()).isEqualTo(2);
	}

	@Test
	void aDroppedBucketComesBackFullAndIdenticalToTheOneDropped() {
		KeyedBuckets keys = keys(1);
		assertThat(take(keys, "alice", 4)).isTrue();
		// alice's bucket is not full: another key finds no room and shares the overflow bucket
		assertThat(take(keys, "bob", 1)).isTrue();
		assertThat(keys.overflowCalls()).isEqualTo(1);
		assertThat(keys.find("alice")).isNotNull();
		advance(Duration.ofMillis(400)); // alice's bucket is full again: idle
		RateLimiterSnapshot before = keys.find("alice").snapshot();
		assertThat(take(keys, "bob", 1)).isTrue(); // bob gets alice's room
		assertThat(keys.find("alice")).isNull();
		assertThat(keys.find("bob")).isNotNull();
		advance(Duration.ofMillis(100));
		// alice comes back: a new bucket, as full as the one dropped, and the same from then on
		KeyedBuckets.Entry entry = keys.pin("alice");
		try {
			RateLimiterSnapshot after = entry.limiter().snapshot();
			assertThat(after.available()).isEqualTo(before.available()).isEqualTo(10);
			assertThat(after.deficiency()).isZero();
			assertThat(after.inFlight()).isZero();
		}
		finally {
			entry.unpin();
		}
	}

	@Test
	void aBucketWithFewerThanLimitTokensAWaiterOrTokensInFlightIsNeverDropped() throws Exception {
		this.capped = true;
		KeyedBuckets keys = keys(3);
		// fewer than limit tokens
		assertThat(take(keys, "spent", 1)).isTrue();
		// a waiter
		KeyedBuckets.Entry waiting = keys.pin("waiting");
		assertThat(waiting.limiter().tryAcquire(10)).isTrue();
		Reservation waiter = waiting.limiter().reserve(1, Duration.ofSeconds(10));
		waiting.unpin();
		// tokens in flight (capped release), time enough passed to be full otherwise
		KeyedBuckets.Entry inFlight = keys.pin("in-flight");
		Permit held = inFlight.limiter().acquire(1, Duration.ZERO);
		inFlight.unpin();
		for (int i = 0; i < 1000; i++) {
			take(keys, "stranger-" + i, 1);
		}
		assertThat(keys.find("spent")).isNotNull();
		assertThat(keys.find("waiting")).isNotNull();
		assertThat(keys.find("in-flight")).isNotNull();
		assertThat(keys.overflowCalls()).isEqualTo(1000);
		advance(Duration.ofSeconds(5));
		// still not idle: the waiter waits (its token is there now, but not taken) and one is in flight
		assertThat(keys.find("waiting")).isNotNull();
		waiter.cancel();
		held.close();
		take(keys, "newcomer", 1);
		assertThat(keys.find("newcomer")).isNotNull();
		assertThat(keys.size()).isEqualTo(3);
	}

	private static long usedHeapAfterGc() {
		Runtime runtime = Runtime.getRuntime();
		for (int i = 0; i < 3; i++) {
			System.gc();
		}
		return runtime.totalMemory() - runtime.freeMemory();
	}

	@Test
	void aMillionDistinctKeysNeverMakeMoreThanMaxBucketsAndTheHeapStaysFlat() {
		KeyedBuckets keys = keys(100);
		long heapBefore = usedHeapAfterGc();
		long overflowBefore = keys.overflowCalls();
		int most = 0;
		for (int i = 0; i < 1_000_000; i++) {
			take(keys, i, 1);
			most = Math.max(most, keys.size());
			if (i % 1000 == 0) {
				advance(Duration.ofMillis(100)); // buckets refill, so the sweep finds idle ones
			}
		}
		assertThat(most).isLessThanOrEqualTo(100);
		assertThat(keys.size()).isLessThanOrEqualTo(100);
		// a bucket per key would hold some 200 MB here; a hundred of them hold next to nothing
		assertThat(usedHeapAfterGc() - heapBefore).isLessThan(32L << 20);
		// while a hundred keys are busy, the others share the overflow bucket: counted
		assertThat(keys.overflowCalls()).isGreaterThan(overflowBefore);
	}

	@Test
	void retuningTheTemplateChangesEveryKeyAndTheOnesToCome() {
		KeyedBuckets keys = keys(100);
		take(keys, "alice", 1);
		take(keys, "bob", 1);
		this.rate = 20;
		this.limit = 4;
		keys.retuned();
		for (String key : new String[] { "alice", "bob" }) {
			RateLimiter bucket = keys.find(key);
			assertThat(bucket.snapshot().limit()).isEqualTo(4.0);
			assertThat(bucket.snapshot().rate()).isEqualTo(20);
		}
		take(keys, "carol", 1);
		assertThat(keys.find("carol").snapshot().limit()).isEqualTo(4.0);
	}

	@Test
	void aBucketPinnedByACallIsNotDroppedEvenWhenFullAndIsDroppedOnceTheCallIsDone() {
		KeyedBuckets keys = keys(1);
		KeyedBuckets.Entry pinned = keys.pin("hot"); // a call between its lookup and its grab
		assertThat(pinned.limiter().isIdle()).isTrue();
		assertThat(take(keys, "cold", 1)).isTrue();
		assertThat(keys.overflowCalls()).isEqualTo(1);
		assertThat(keys.find("hot")).isSameAs(pinned.limiter());
		assertThat(pinned.limiter().tryAcquire(1)).isTrue(); // the grab lands on the bucket the key keeps
		pinned.unpin();
		advance(Duration.ofSeconds(1));
		assertThat(take(keys, "cold", 1)).isTrue();
		assertThat(keys.find("hot")).isNull();
		assertThat(keys.find("cold")).isNotNull();
	}

	@Test
	void aKeyHammeredWhileOtherKeysComeAndGoStaysWithinItsBound() throws InterruptedException {
		// one key hammered by two threads while a third floods new keys and moves the clock: the hot
		// key's bucket is full (droppable) again and again, so drops race with its grabs
		KeyedBuckets keys = keys(2);
		AtomicLong granted = new AtomicLong();
		java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
		Thread[] hot = new Thread[2];
		for (int t = 0; t < hot.length; t++) {
			hot[t] = new Thread(() -> {
				while (!done.get()) {
					if (take(keys, "hot", 1)) {
						granted.incrementAndGet();
					}
				}
			});
			hot[t].start();
		}
		for (int i = 0; i < 100_000; i++) {
			take(keys, "cold-" + i, 1);
			if (i % 4 == 0) {
				advance(Duration.ofSeconds(1)); // every bucket full again: each may be dropped
			}
		}
		done.set(true);
		for (Thread thread : hot) {
			thread.join();
		}
		double elapsed = this.now.get() / 1e9;
		assertThat(granted.get()).isLessThanOrEqualTo((long) Math.floor(10 * elapsed + 10));
		assertThat(granted.get()).isPositive();
	}

	@Test
	void aResetDropsEveryIdleKeyAndFillsTheOthers() throws InterruptedException {
		this.capped = true;
		KeyedBuckets keys = keys(2);
		assertThat(take(keys, "alice", 10)).isTrue();
		((SharedTokenBucket) keys.find("alice")).release(10); // done: alice waits for time, not for releases
		KeyedBuckets.Entry bob = keys.pin("bob");
		Permit held = bob.limiter().acquire(4, Duration.ZERO); // in flight: bob's bucket is in use
		bob.unpin();
		assertThat(take(keys, "carol", 3)).isTrue(); // no room: the overflow bucket
		Reservation waiting = keys.bucketOf("alice").reserve(5, Duration.ofSeconds(10));
		assertThat(waiting.poll()).isPositive();

		keys.reset();

		assertThat(keys.find("alice")).isNotNull(); // a caller waits on it: kept, full, and its waiter claimed again
		assertThat(waiting.poll()).isZero();
		waiting.permit().close();
		assertThat(keys.find("alice").snapshot().available()).isEqualTo(5); // its claim came from the full bucket
		RateLimiter bobs = keys.find("bob");
		assertThat(bobs).isNotNull(); // tokens in flight: kept until released
		assertThat(bobs.snapshot().available()).isEqualTo(6);
		// the overflow bucket is full again too, but for carol's 3 still in flight
		assertThat(keys.bucketOf("carol").snapshot().available()).isEqualTo(7);
		held.close();
		keys.reset();
		assertThat(keys.size()).isZero(); // every key's bucket dropped, its room given back
		assertThat(take(keys, "dave", 10)).isTrue();
		assertThat(take(keys, "erin", 10)).isTrue();
	}

	private KeyedBuckets keysInMemory(long memory) {
		return new KeyedBuckets(0, memory, true, this.now::get, (key) -> SharedTokenBucket.builder()
			.name("api")
			.rate(this.rate, Duration.ofSeconds(1))
			.limit(this.limit)
			.clock(this.now::get)
			.build(), (bucket) -> {
				bucket.updateRate(this.rate, Duration.ofSeconds(1));
				bucket.updateLimit(this.limit);
			});
	}

	/** A store whose entries have room for {@code keys} keys of five characters (K3: 13/16 of the memory). */
	private KeyedBuckets keysWithRoomFor(double keys) {
		return keysInMemory((long) (keys * (KeyedBuckets.ENTRY_BYTES + 2 * 5)) * 16 / 13 + 16);
	}

	@Test
	void aForgottenKeyComesBackOwingWhatItOwedAndNoKeySharesABucket() {
		// room for two keys: the third forgets the one full soonest, remembering what it owes (K7)
		KeyedBuckets keys = keysWithRoomFor(2.5);
		assertThat(take(keys, "alice", 10)).isTrue();
		assertThat(take(keys, "bobby", 4)).isTrue();
		assertThat(take(keys, "carol", 1)).isTrue(); // bobby is full soonest: forgotten
		assertThat(keys.find("bobby")).isNull();
		assertThat(keys.owing()).isEqualTo(1);
		assertThat(keys.overflowCalls()).isZero();
		advance(Duration.ofMillis(100));
		// bobby comes back with 10 - 4 + 1 = 7 tokens, as his bucket would have, not 10
		assertThat(take(keys, "bobby", 8)).isFalse();
		assertThat(take(keys, "bobby", 7)).isTrue();
		assertThat(take(keys, "bobby", 1)).isFalse();
		// nobody's calls went to a shared bucket: alice has what 100 ms made, whoever else came
		assertThat(take(keys, "alice", 2)).isFalse();
		assertThat(take(keys, "alice", 1)).isTrue();
	}

	@Test
	void aForgottenKeyOwesNothingAfterAReset() {
		KeyedBuckets keys = keysWithRoomFor(2.5);
		assertThat(take(keys, "alice", 10)).isTrue();
		assertThat(take(keys, "bobby", 4)).isTrue();
		assertThat(take(keys, "carol", 1)).isTrue(); // bobby forgotten, owing 4
		assertThat(keys.owing()).isEqualTo(1);
		keys.reset(); // K6: full, nothing owed, whoever was forgotten
		assertThat(keys.owing()).isZero();
		assertThat(take(keys, "bobby", 10)).isTrue();
	}

	@Test
	void aForgottenKeyStillOwesWhatItOwedAfterARetuneAtTheNewRate() {
		KeyedBuckets keys = keysWithRoomFor(2.5);
		assertThat(take(keys, "alice", 10)).isTrue();
		assertThat(take(keys, "bobby", 4)).isTrue();
		assertThat(take(keys, "carol", 1)).isTrue(); // bobby forgotten: full again in 400 ms at 10/s
		this.rate = 1;
		keys.retuned(100_000_000, 1_000_000_000); // K4, K7: at 1/s he still misses his 4 tokens: 4 s
		advance(Duration.ofSeconds(2));
		assertThat(take(keys, "bobby", 9)).isFalse(); // 6 + 2 made at 1/s = 8
		assertThat(take(keys, "bobby", 8)).isTrue();
	}

	@Test
	void aLongKeyIsHeldByItsDigestAndFoundAgain() {
		KeyedBuckets keys = keysInMemory(KeyedBuckets.DEFAULT_MEMORY);
		String key = "u".repeat(100_000);
		assertThat(take(keys, key, 10)).isTrue();
		assertThat(take(keys, new String(key.toCharArray()), 1)).as("the same key, another string").isFalse();
		assertThat(take(keys, key + "v", 1)).as("another key").isTrue();
		assertThat(keys.find(key)).isNotNull();
		assertThat(KeyedBuckets.stored(key).toString()).startsWith("sha-256:").hasSize(8 + 32);
		assertThat(keys.load() * KeyedBuckets.DEFAULT_MEMORY / 16 * 13)
			.isEqualTo(2.0 * (KeyedBuckets.ENTRY_BYTES + KeyedBuckets.DIGEST_BYTES));
	}

	@Test
	void aKeyMadeAfterARetuneStartsFullAtTheNewLimit() {
		// issue #30: after {"rate": 10, "limit": 3} on a bucket of limit 1, a new key started with 1 token
		RateLimitProperties.Bucket configured = new RateLimitProperties.Bucket();
		configured.setRate(java.math.BigDecimal.ONE);
		configured.setLimit(1L);
		BucketDefinition.Shared retuned = (BucketDefinition.Shared) BucketDefinition.of("login", configured)
			.withRateAndLimit(java.math.BigDecimal.TEN, 3L);
		assertThat(retuned.initial()).as("a key's bucket starts full").isEqualTo(3);
		BucketDefinitions.checkUsableWithKey(retuned, "a key");
	}
}
