package dev.ratelimit.core;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The production path (the bucket stripes on its own when callers contend on the tail; no test hook but
 * {@link SharedTokenBucket#isStriped()}, only sampled and printed), real clock, 4 to 8 threads calling
 * {@code tryAcquire} as fast as they can, at rates from 10^6 to 10^9 per second. Every grant is recorded with
 * the thread's {@code System.nanoTime()} just before the call ({@code b}) and just after it returns ({@code a}).
 *
 * <p>The contract: over any window of length {@code w}, the tokens handed out never exceed
 * {@code limit + rate * w}, in the bucket's own time, here {@code System.nanoTime()}. The bucket reads its clock
 * inside the call, so the instant at which it counts a grant, {@code t}, lies in {@code [b, a]} (nanoTime is
 * monotonic across threads; a stripe's grant is logged at the caller's reading or, if it read the clock before
 * the stripe was opened, at the opening, which is also before its grant returned). Hence, for every {@code s}
 * and {@code e}, the grants with {@code s <= b} and {@code a <= e} were counted at instants in {@code [s, e]}
 * and sum to at most {@code limit + rate * (e - s)}. That is what is checked, exactly (integers scaled by the
 * rate's period, no rounding), for every such pair: {@code s} ranging over the recorded {@code b}s and
 * {@code e} over the recorded {@code a}s (the only windows that can be the tightest), with a sweep over
 * {@code e} and a segment tree over {@code s}. The slack this allows is exactly the time each call took: a
 * thread descheduled inside its call widens only its own grant's interval, so the check holds on a machine
 * whose cores are all busy, and no lower bound (throughput, striping) is asserted.
 */
class StripedBucketStressTests {

	/** Grants recorded over all threads of one case: memory, and the check's time, stay small. */
	private static final int MOST_GRANTS = 1 << 20;

	private static final long RUN_NANOS = Duration.ofMillis(220).toNanos();

	@Test
	void grantsNeverExceedLimitPlusRateTimesTheWindowAtAMillionPerSecond() throws Exception {
		hammer(1_000_000, 1_000);
	}

	@Test
	void grantsNeverExceedLimitPlusRateTimesTheWindowAtTenMillionPerSecondWithASmallLimit() throws Exception {
		hammer(10_000_000, 200);
	}

	@Test
	void grantsNeverExceedLimitPlusRateTimesTheWindowAtAHundredMillionPerSecond() throws Exception {
		hammer(100_000_000, 50_000);
	}

	@Test
	void grantsNeverExceedLimitPlusRateTimesTheWindowAtAnOddRateNearABillionPerSecond() throws Exception {
		hammer(999_999_937, 1_000_000);
	}

	/** The sweep above finds a violation exactly when comparing every pair of readings does (random small cases). */
	@Test
	void theWindowCheckAgreesWithComparingEveryWindow() {
		java.util.SplittableRandom random = new java.util.SplittableRandom(42);
		int violations = 0;
		for (int round = 0; round < 3_000; round++) {
			int count = 1 + random.nextInt(12);
			long tokens = 1 + random.nextInt(5);
			long period = 1 + random.nextInt(7);
			long limit = 1 + random.nextInt(4);
			long[] b = new long[count];
			long[] a = new long[count];
			long[] n = new long[count];
			for (int i = 0; i < count; i++) {
				b[i] = 1_000 + random.nextInt(30);
				a[i] = b[i] + random.nextInt(6);
				n[i] = 1 + random.nextInt(3);
			}
			boolean brute = false;
			for (long s : b) {
				for (long e : a) {
					long sum = 0;
					for (int j = 0; j < count; j++) {
						if (b[j] >= s && a[j] <= e) {
							sum += n[j];
						}
					}
					if (e >= s && sum * period > limit * period + tokens * (e - s)) {
						brute = true;
					}
				}
			}
			boolean swept = tokenBucketBoundViolation(b, a, n, tokens, period, limit) != null;
			assertThat(swept).as("round %d", round).isEqualTo(brute);
			violations += brute ? 1 : 0;
		}
		assertThat(violations).as("cases with a violation").isBetween(300, 2_700);
	}

	private static void hammer(long tokensPerSecond, long limit) throws Exception {
		int threads = Math.max(4, Math.min(8, 2 * Runtime.getRuntime().availableProcessors()));
		SharedTokenBucket bucket = SharedTokenBucket.builder()
			.rate(tokensPerSecond, Duration.ofSeconds(1))
			.limit(limit)
			.build();
		int perThread = MOST_GRANTS / threads;
		long[][] before = new long[threads][perThread];
		long[][] after = new long[threads][perThread];
		long[][] tokens = new long[threads][perThread];
		int[] counts = new int[threads];
		AtomicBoolean sawStriped = new AtomicBoolean();
		AtomicReference<Throwable> failure = new AtomicReference<>();
		CountDownLatch ready = new CountDownLatch(threads);
		CountDownLatch go = new CountDownLatch(1);
		List<Thread> workers = new ArrayList<>();
		for (int i = 0; i < threads; i++) {
			int id = i;
			// most threads take 1, one takes 1 to 3: the stripes' budgets run out unevenly
			boolean mixed = (i == threads - 1);
			Thread t = new Thread(() -> {
				try {
					ready.countDown();
					go.await();
					long[] b = before[id];
					long[] a = after[id];
					long[] n = tokens[id];
					int c = 0;
					long end = System.nanoTime() + RUN_NANOS;
					ThreadLocalRandom random = ThreadLocalRandom.current();
					for (long calls = 0; c < perThread; calls++) {
						long k = mixed ? 1 + random.nextInt(3) : 1;
						long t0 = System.nanoTime();
						if (t0 - end > 0) {
							break;
						}
						boolean granted = bucket.tryAcquire(k);
						long t1 = System.nanoTime();
						if (granted) {
							b[c] = t0;
							a[c] = t1;
							n[c] = k;
							c++;
						}
						if (id == 0 && (calls & 1023) == 0 && bucket.isStriped()) {
							sawStriped.set(true);
						}
					}
					counts[id] = c;
				}
				catch (Throwable ex) {
					failure.set(ex);
				}
			}, "striped-stress-" + i);
			t.start();
			workers.add(t);
		}
		ready.await();
		go.countDown();
		for (Thread t : workers) {
			t.join();
		}
		if (failure.get() != null) {
			throw new AssertionError(failure.get());
		}
		long[] bs = joined(before, counts);
		long[] as = joined(after, counts);
		long[] ns = joined(tokens, counts);
		int total = bs.length;
		System.out.printf("striped stress: %d/s limit %d, %d threads, %d grants (%d tokens), striped seen: %s%n",
				tokensPerSecond, limit, threads, total, Arrays.stream(ns).sum(), sawStriped.get());
		String violation = tokenBucketBoundViolation(bs, as, ns, tokensPerSecond, 1_000_000_000L, limit);
		assertThat(violation).as("the token-bucket bound over windows bracketed by the callers' clock readings")
			.isNull();
		assertThat((long) bucket.snapshot().available()).isLessThanOrEqualTo(limit);
	}

	/** The first {@code counts[i]} values of each {@code parts[i]}, one after the other. */
	static long[] joined(long[][] parts, int[] counts) {
		long[] all = new long[Arrays.stream(counts).sum()];
		int at = 0;
		for (int i = 0; i < counts.length; i++) {
			System.arraycopy(parts[i], 0, all, at, counts[i]);
			at += counts[i];
		}
		return all;
	}

	/**
	 * The first window {@code [s, e]} ({@code s} a grant's reading before its call, {@code e} one after) in
	 * which the grants made entirely inside it exceed {@code limit + tokens / period * (e - s)}, or {@code null}.
	 * Sweeps the grants by {@code a}; a segment tree over the sorted {@code b}s holds, for each candidate
	 * {@code s}, {@code period * (grants with b >= s so far) + tokens * (s - origin)}, and each step asks for the
	 * largest over {@code s <= e}.
	 */
	static String tokenBucketBoundViolation(long[] b, long[] a, long[] n, long tokens, long period, long limit) {
		int count = b.length;
		if (count == 0) {
			return null;
		}
		long origin = Long.MAX_VALUE;
		for (long t : b) {
			origin = Math.min(origin, t);
		}
		long[] starts = b.clone();
		Arrays.sort(starts);
		Integer[] order = new Integer[count];
		for (int i = 0; i < count; i++) {
			order[i] = i;
		}
		Arrays.sort(order, (x, y) -> Long.compare(a[x], a[y]));
		long[] leaves = new long[count];
		for (int i = 0; i < count; i++) {
			leaves[i] = Math.multiplyExact(tokens, starts[i] - origin);
		}
		MaxTree tree = new MaxTree(leaves);
		for (int k = 0; k < count; k++) {
			int g = order[k];
			// s <= b[g]: every leaf whose start is at most b[g]
			int last = upperBound(starts, b[g]) - 1;
			tree.add(0, last, Math.multiplyExact(n[g], period));
			long e = a[g];
			int upTo = upperBound(starts, e) - 1;
			long worst = tree.max(0, upTo);
			long bound = Math.addExact(Math.multiplyExact(limit, period), Math.multiplyExact(tokens, e - origin));
			if (worst > bound) {
				int s = tree.argMax(0, upTo);
				long sum = 0;
				int grants = 0;
				for (int j = 0; j < count; j++) {
					if (b[j] >= starts[s] && a[j] <= e) {
						sum += n[j];
						grants++;
					}
				}
				return String.format(
						"window [%d, %d] ns after the first call's start (%d ns long): %d grants, %d tokens, bound %s",
						starts[s] - origin, e - origin, e - starts[s], grants, sum,
						limit + " + " + tokens + "/" + period + " * " + (e - starts[s]));
			}
		}
		return null;
	}

	private static int upperBound(long[] sorted, long key) {
		int lo = 0;
		int hi = sorted.length;
		while (lo < hi) {
			int mid = (lo + hi) >>> 1;
			if (sorted[mid] <= key) {
				lo = mid + 1;
			}
			else {
				hi = mid;
			}
		}
		return lo;
	}

	/** Range add, range max, over fixed leaves (recursive, lazy). */
	private static final class MaxTree {

		private final int size;

		private final long[] max;

		private final long[] lazy;

		MaxTree(long[] leaves) {
			this.size = leaves.length;
			this.max = new long[4 * this.size];
			this.lazy = new long[4 * this.size];
			build(1, 0, this.size - 1, leaves);
		}

		private void build(int node, int lo, int hi, long[] leaves) {
			if (lo == hi) {
				this.max[node] = leaves[lo];
				return;
			}
			int mid = (lo + hi) >>> 1;
			build(2 * node, lo, mid, leaves);
			build(2 * node + 1, mid + 1, hi, leaves);
			this.max[node] = Math.max(this.max[2 * node], this.max[2 * node + 1]);
		}

		void add(int from, int to, long value) {
			if (from <= to) {
				add(1, 0, this.size - 1, from, to, value);
			}
		}

		private void add(int node, int lo, int hi, int from, int to, long value) {
			if (to < lo || hi < from) {
				return;
			}
			if (from <= lo && hi <= to) {
				this.max[node] += value;
				this.lazy[node] += value;
				return;
			}
			int mid = (lo + hi) >>> 1;
			add(2 * node, lo, mid, from, to, value);
			add(2 * node + 1, mid + 1, hi, from, to, value);
			this.max[node] = Math.max(this.max[2 * node], this.max[2 * node + 1]) + this.lazy[node];
		}

		long max(int from, int to) {
			return (from <= to) ? max(1, 0, this.size - 1, from, to) : Long.MIN_VALUE;
		}

		private long max(int node, int lo, int hi, int from, int to) {
			if (to < lo || hi < from) {
				return Long.MIN_VALUE;
			}
			if (from <= lo && hi <= to) {
				return this.max[node];
			}
			int mid = (lo + hi) >>> 1;
			long m = Math.max(max(2 * node, lo, mid, from, to), max(2 * node + 1, mid + 1, hi, from, to));
			return (m == Long.MIN_VALUE) ? m : m + this.lazy[node];
		}

		/** A leaf where the max over {@code [from, to]} is reached (for the message). */
		int argMax(int from, int to) {
			long target = max(from, to);
			for (int i = from; i <= to; i++) {
				if (max(i, i) == target) {
					return i;
				}
			}
			return from;
		}
	}
}
