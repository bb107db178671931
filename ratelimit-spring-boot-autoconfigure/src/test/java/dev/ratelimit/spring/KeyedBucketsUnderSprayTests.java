package dev.ratelimit.spring;

import java.time.Duration;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.SharedTokenBucket;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

/**
 * K7 and K8 in numbers (contract revision 3, "per-key buckets under attack"): with 100,000 sprayed keys
 * owing tokens at once, at the default {@code keys.memory}, the keys that call within their rate are
 * refused because of them in fewer than one call in a million; this counts it exactly on a fake clock,
 * and checks every key's grants against {@code limit + rate * w} over every window.
 */
class KeyedBucketsUnderSprayTests {

	/** The template: 1 token per second, limit 10. */
	private static final long LIMIT = 10;

	private static final long TOKEN_NANOS = Duration.ofSeconds(1).toNanos();

	/** Sprayed keys per second of the fake clock: each takes 8 to 10 tokens and owes them 8 to 10 s, so over 100,000 owe at once. */
	private static final int SPRAY_PER_SECOND = 12_000;

	/** Keys within their rate, each calling every one to ten seconds. */
	private static final int GOOD_KEYS = 20_000;

	private static final long GOOD_CALLS = 1_500_000;

	/** A bound on the test's time whatever the machine's load. */
	private static final Duration MOST = Duration.ofSeconds(120);

	@Test
	void keysWithinTheirRateAreNotRefusedBecauseOf100000SprayedKeysOwingTokens() {
		long seed = System.nanoTime();
		SprayRun run = new SprayRun(seed, KeyedBuckets.DEFAULT_MEMORY, SPRAY_PER_SECOND, GOOD_KEYS);
		long deadline = System.nanoTime() + MOST.toNanos();
		int mostOwing = 0;
		while (run.goodCalls < GOOD_CALLS && System.nanoTime() - deadline < 0) {
			run.step();
			if (run.goodCalls % 100_000 == 0) {
				mostOwing = Math.max(mostOwing, run.sprayedOwing());
			}
		}
		System.out.printf("under spray (seed %d): %d calls within their rate, %d refused; %d sprayed keys, at most %d"
				+ " owing at once; %d live keys, %d forgotten keys owing%n", seed, run.goodCalls, run.goodRefused,
				run.sprayed, mostOwing, run.keys.size(), run.keys.owing());
		assertThat(mostOwing).as("the premise: 100,000 sprayed keys owing tokens at once").isGreaterThanOrEqualTo(100_000);
		assertThat(run.goodRefused).as("calls within their rate refused (seed " + seed + ")").isZero();
	}

	/**
	 * One run of the workload: a fake clock; sprayers making new keys (random sizes up to 200 characters)
	 * that each take a random amount, now and then an old sprayed key again; keys within their rate, each
	 * taking {@code n} tokens (up to the limit) and coming back {@code n} tokens' time later (their own
	 * bucket, never dropped, is full at each call, so a refusal is the store's doing). Every grant is
	 * checked against the key's bound.
	 */
	static final class SprayRun {

		final AtomicLong now = new AtomicLong(1L << 40);

		final KeyedBuckets keys;

		final SplittableRandom random;

		final int sprayPerSecond;

		/** Per key, the GCRA's theoretical arrival time: grants stay within limit + rate * w iff it never runs ahead of now by more than limit tokens. */
		private long[] sprayTat = new long[1 << 16];

		private final long[] goodTat;

		/** The keys within their rate by the time of their next call: {time, key}. */
		private final java.util.PriorityQueue<long[]> goodNext = new java.util.PriorityQueue<>(
				(a, b) -> Long.compare(a[0] - b[0], 0));

		private final String[] goodNames;

		final long start = this.now.get();

		long goodCalls;

		long goodRefused;

		int sprayed;

		private long sprayDebt;

		SprayRun(long seed, long memory, int sprayPerSecond, int goodKeys) {
			this.random = new SplittableRandom(seed);
			this.sprayPerSecond = sprayPerSecond;
			this.keys = new KeyedBuckets(0, memory, true, this.now::get, (key) -> SharedTokenBucket.builder()
				.rate(1, Duration.ofSeconds(1))
				.limit(LIMIT)
				.clock(this.now::get)
				.build(), (bucket) -> {
				});
			this.goodTat = new long[goodKeys];
			this.goodNames = new String[goodKeys];
			for (int i = 0; i < goodKeys; i++) {
				this.goodNames[i] = "user-" + i + "@example.com";
				this.goodNext.add(new long[] { this.start + this.random.nextLong(TOKEN_NANOS), i });
			}
		}

		/** One well-behaved call, and the sprayed calls due by then; the clock moves to the call. */
		void step() {
			long[] next = this.goodNext.poll();
			int k = (int) next[1];
			long at = next[0];
			if (at - this.now.get() > 0) {
				spray(at - this.now.get());
				this.now.set(at);
			}
			// mostly 1 or 2 tokens, one call in 10 a burst of up to the limit
			long n = (this.random.nextInt(10) == 0) ? 1 + this.random.nextLong(LIMIT) : 1 + this.random.nextLong(2);
			boolean got = take(this.goodNames[k], n);
			this.goodCalls++;
			if (got) {
				this.goodTat[k] = checked(this.goodNames[k], this.goodTat[k], n);
			}
			else {
				this.goodRefused++;
			}
			// within its rate: back once its n tokens are made again, so that its own bucket is full at each call
			next[0] = this.now.get() + n * TOKEN_NANOS;
			this.goodNext.add(next);
		}

		private void spray(long nanos) {
			this.sprayDebt += nanos * this.sprayPerSecond;
			while (this.sprayDebt >= TOKEN_NANOS) {
				this.sprayDebt -= TOKEN_NANOS;
				int id = (this.sprayed > 0 && this.random.nextInt(16) == 0) ? this.random.nextInt(this.sprayed) : this.sprayed++;
				if (id >= this.sprayTat.length) {
					this.sprayTat = java.util.Arrays.copyOf(this.sprayTat, this.sprayTat.length * 2);
				}
				String key = sprayKey(id);
				long n = LIMIT - this.random.nextLong(3);
				if (take(key, n)) {
					this.sprayTat[id] = checked(key, this.sprayTat[id], n);
				}
			}
		}

		private static String sprayKey(int id) {
			int length = (int) ((id * 0x9E3779B97F4A7C15L) >>> 56) % 200; // a key's size is its own: 0 to 199
			StringBuilder key = new StringBuilder("s").append(id).append('-');
			while (key.length() < length) {
				key.append('x');
			}
			return key.toString();
		}

		private boolean take(String key, long n) {
			KeyedBuckets.Entry entry = this.keys.pin(key);
			try {
				return entry.limiter().tryAcquire(n);
			}
			finally {
				entry.unpin();
			}
		}

		/** The GCRA check of a grant of {@code n} tokens: {@code limit + rate * w} over every window. */
		private long checked(String key, long tat, long n) {
			long t = this.now.get();
			long next = ((tat == 0 || tat - t < 0) ? t : tat) + n * TOKEN_NANOS;
			if (next - t > LIMIT * TOKEN_NANOS) {
				fail("key " + key + " got more than limit + rate * w: " + n + " tokens at " + (t - this.start)
						+ " ns, " + (next - t - LIMIT * TOKEN_NANOS) + " ns of tokens beyond its bound");
			}
			return next;
		}

		/** Sprayed keys that owe tokens now (their grants ran ahead of the clock). */
		int sprayedOwing() {
			long t = this.now.get();
			int owing = 0;
			for (int i = 0; i < this.sprayed; i++) {
				if (this.sprayTat[i] != 0 && this.sprayTat[i] - t > 0) {
					owing++;
				}
			}
			return owing;
		}
	}
}
