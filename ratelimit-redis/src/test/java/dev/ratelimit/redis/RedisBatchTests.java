package dev.ratelimit.redis;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Batches on a real Redis (contract revision 3, "Batches on Redis"; the invariants B1-B7 of {@link RedisBatch}):
 * instances of their own (each a {@link RedisBuckets} on a client of its own) sharing one batched bucket.
 * Every load loop is bounded in time; the bounds asserted are upper bounds on grants (exact), and a loose
 * lower bound on the share of the rate granted (printed as measured).
 */
class RedisBatchTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();

	private static final long RATE = 400;

	private static final long LIMIT = 40;

	private static final Duration RUN = Duration.ofSeconds(3);

	/** B1 on real Redis: every window of grants, over two and three instances hammering the bucket. */
	@ParameterizedTest(name = "{0} instances")
	@ValueSource(ints = { 2, 3 })
	void instancesSharingABatchedBucketGrantAtMostTheBoundOverEveryWindow(int count) throws InterruptedException {
		List<RedisBuckets> instances = new ArrayList<>();
		List<RedisTokenBucket> buckets = new ArrayList<>();
		AtomicLong calls = new AtomicLong();
		String name = "shared" + count;
		for (int i = 0; i < count; i++) {
			RedisBuckets instance = new RedisBuckets(redis.connectionFactory(Duration.ofSeconds(30)));
			instances.add(instance);
			RedisTokenBucket bucket = instance.build(RedisTokenBucket.builder().name(name).keyPrefix("batch:")
				.rate(RATE, Duration.ofSeconds(1)).limit(LIMIT).timeout(Duration.ofSeconds(2))
				.batch((i % 2 == 0) ? "auto" : "8"), null, (first) -> {
				});
			bucket.onCall((outcome, nanos) -> calls.incrementAndGet());
			buckets.add(bucket);
		}
		try {
			int threadsPer = 3;
			// each grant: the time before the call and after it (its instant lies between)
			List<long[]> grants = new ArrayList<>();
			List<Thread> threads = new ArrayList<>();
			long start = System.nanoTime();
			long end = start + RUN.toNanos();
			List<List<long[]>> perThread = new ArrayList<>();
			for (RedisTokenBucket bucket : buckets) {
				for (int t = 0; t < threadsPer; t++) {
					List<long[]> mine = new ArrayList<>();
					perThread.add(mine);
					Thread thread = new Thread(() -> {
						for (long now = System.nanoTime(); now - end < 0; now = System.nanoTime()) {
							if (bucket.tryAcquire(1)) {
								mine.add(new long[] { now, System.nanoTime() });
							}
						}
					});
					threads.add(thread);
					thread.start();
				}
			}
			for (Thread thread : threads) {
				thread.join();
			}
			double elapsed = (System.nanoTime() - start) / 1e9;
			perThread.forEach(grants::addAll);
			long[] worst = worstWindow(grants);
			System.out.printf("RedisBatchTests: %d instances, %d granted in %.2f s at %d/s, limit %d: %.1f %% of the rate,"
					+ " %d Redis calls; worst window: %d grants over %d us%n", count, grants.size(), elapsed, RATE,
					LIMIT, 100.0 * grants.size() / (RATE * elapsed), calls.get(), worst[0], worst[1] / 1000);
			assertThat(worst[0]).as("grants over %d us (limit %d + %d/s)", worst[1] / 1000, LIMIT, RATE)
				.isLessThanOrEqualTo(LIMIT + (long) Math.floor(RATE * worst[1] / 1e9));
			// demand far above the rate: most of it granted (95 % on a quiet machine; loose here, CI is busy)
			assertThat((double) grants.size()).isGreaterThanOrEqualTo(0.5 * RATE * elapsed);
			// demand above the rate: each instance asks about once per token there (each call takes what is there,
			// or learns when the next will be) and once per hold; a quarter more for a busy machine, where an
			// instance that learned when the next token is there may ask a little before another took it
			assertThat(calls.get()).as("Redis calls")
				.isLessThanOrEqualTo((long) (1.25 * count * (RATE * elapsed + LIMIT + 2 * elapsed / 0.1 + 20)));
		}
		finally {
			instances.forEach(RedisBuckets::close);
		}
	}

	/**
	 * The window of grants that comes closest to the bound: {@code {grants, nanoseconds}}, the nanoseconds
	 * from the earliest instant one of them may have been granted (before its call) to the latest (after).
	 */
	private static long[] worstWindow(List<long[]> grants) {
		long[][] sorted = grants.toArray(new long[0][]);
		Arrays.sort(sorted, (x, y) -> Long.compare(x[1], y[1]));
		long[] worst = { 0, 0 };
		double worstExcess = Double.NEGATIVE_INFINITY;
		for (int j = 0; j < sorted.length; j++) {
			long earliest = Long.MAX_VALUE;
			for (int i = j; i >= 0; i--) {
				earliest = Math.min(earliest, sorted[i][0]);
				long w = sorted[j][1] - earliest;
				double excess = (j - i + 1) - (LIMIT + RATE * w / 1e9);
				if (excess > worstExcess) {
					worstExcess = excess;
					worst = new long[] { j - i + 1, w };
				}
				if (RATE * w / 1e9 > sorted.length) {
					break; // no longer window can come closer
				}
			}
		}
		return worst;
	}

	/**
	 * B6: a bucket whose rate is far above the demand (every call granted): the grants are local, a Redis call
	 * per many grants.
	 */
	@Test
	void aBucketAboveTheDemandGrantsLocallyWithAFewCalls() throws InterruptedException {
		RedisBuckets instance = new RedisBuckets(redis.connectionFactory(Duration.ofSeconds(30)));
		try {
			RedisTokenBucket fast = instance.build(RedisTokenBucket.builder().name("fast").keyPrefix("batch:")
				.rate(10_000_000, Duration.ofSeconds(1)).limit(1_000_000).timeout(Duration.ofSeconds(2)).batch("auto"),
					null, (first) -> {
					});
			AtomicLong calls = new AtomicLong();
			fast.onCall((outcome, nanos) -> calls.incrementAndGet());
			AtomicLong granted = new AtomicLong();
			AtomicLong refused = new AtomicLong();
			long end = System.nanoTime() + Duration.ofSeconds(2).toNanos();
			List<Thread> threads = new ArrayList<>();
			for (int t = 0; t < 2; t++) {
				Thread thread = new Thread(() -> {
					long mine = 0;
					long no = 0;
					while (System.nanoTime() - end < 0) {
						if (fast.tryAcquire(1)) {
							mine++;
						}
						else {
							no++;
						}
					}
					granted.addAndGet(mine);
					refused.addAndGet(no);
				});
				threads.add(thread);
				thread.start();
			}
			for (Thread thread : threads) {
				thread.join();
			}
			System.out.printf("RedisBatchTests: 10,000,000/s: %d granted, %d refused, %d Redis calls (1 per %d grants)%n",
					granted.get(), refused.get(), calls.get(), granted.get() / Math.max(1, calls.get()));
			assertThat(refused.get()).as("refused with tokens to spare").isZero();
			assertThat(calls.get() * 10).as("Redis calls, times 10").isLessThan(granted.get());
		}
		finally {
			instance.close();
		}
	}

	/** B4: an instance that dies holding a batch loses it once, and nothing more. */
	@Test
	void aKilledInstanceLosesAtMostOneBatchOnce() throws InterruptedException {
		RedisTokenBucket killed = RedisTokenBucket.builder().name("killed").keyPrefix("batch:")
			.rate(1, Duration.ofHours(1)).limit(100).timeout(Duration.ofSeconds(10)).batch("10")
			// a hold long enough that the idle hand does not go back (B5) before the crash on a busy machine
			.batchHold(Duration.ofSeconds(1)).connectionFactory(redis.connectionFactory()).build();
		RedisBuckets other = new RedisBuckets(redis.connectionFactory());
		try {
			RedisTokenBucket survivor = other.build(RedisTokenBucket.builder().name("killed").keyPrefix("batch:")
				.rate(1, Duration.ofHours(1)).limit(100).timeout(Duration.ofSeconds(2)), null, (first) -> {
				});
			// both connections open first (a busy machine may take seconds): a call that timed out would apply the
			// failure policy
			assertThat(killed.snapshot().available()).isEqualTo(100);
			assertThat(survivor.snapshot().available()).isEqualTo(100);
			assertThat(killed.tryAcquire(1)).isTrue();
			assertThat(fields("batch:{killed}")).containsEntry("h", "10");
			// killed: nothing is given back, its connection goes
			killed.batch().crash();
			killed.connection().close();
			assertThat(survivor.snapshot().available()).as("the batch held elsewhere counts against the limit")
				.isEqualTo(90);
			// its lease (3 holds + the timeout: 13 s) runs out: the batch counts as spent, once
			long deadline = System.nanoTime() + Duration.ofSeconds(30).toNanos();
			while (!"0".equals(fields("batch:{killed}").get("h")) && System.nanoTime() - deadline < 0) {
				survivor.tryAcquire(0);
				survivor.snapshot();
				assertThat(survivor.tryAcquire(1)).isTrue();
				survivor.refund(1);
				Thread.sleep(50);
			}
			assertThat(fields("batch:{killed}")).containsEntry("h", "0");
			assertThat(survivor.snapshot().available()).as("lost: the batch, once").isEqualTo(90);
			Thread.sleep(200);
			assertThat(survivor.snapshot().available()).isEqualTo(90);
		}
		finally {
			other.close();
		}
	}

	/** B5: close gives the unspent tokens back, and the view of the instance counts its batch. */
	@Test
	void closeGivesTheUnspentTokensBack() {
		RedisBuckets closing = new RedisBuckets(redis.connectionFactory());
		RedisBuckets other = new RedisBuckets(redis.connectionFactory());
		try {
			RedisTokenBucket batched = closing.build(RedisTokenBucket.builder().name("closing").keyPrefix("batch:")
				.rate(1, Duration.ofHours(1)).limit(100).timeout(Duration.ofSeconds(10)).batch("10"), null, (first) -> {
				});
			RedisTokenBucket watcher = other.build(RedisTokenBucket.builder().name("closing").keyPrefix("batch:")
				.rate(1, Duration.ofHours(1)).limit(100).timeout(Duration.ofSeconds(2)), null, (first) -> {
				});
			assertThat(batched.tryAcquire(1)).isTrue();
			assertThat(batched.snapshot().available()).as("Redis's 90 and the 9 in hand").isEqualTo(99);
			assertThat(watcher.snapshot().available()).isEqualTo(90);
			closing.close();
			assertThat(watcher.snapshot().available()).as("the 9 unspent back").isEqualTo(99);
			assertThat(fields("batch:{closing}")).containsEntry("h", "0");
		}
		finally {
			closing.close();
			other.close();
		}
	}

	/** B5: a batch nobody uses goes back within its hold (a sweep every hold). */
	@Test
	void anIdleBatchGoesBackWithinItsHold() throws InterruptedException {
		RedisBuckets instance = new RedisBuckets(redis.connectionFactory());
		try {
			RedisTokenBucket batched = instance.build(RedisTokenBucket.builder().name("idle").keyPrefix("batch:")
				.rate(1, Duration.ofHours(1)).limit(100).timeout(Duration.ofSeconds(10)).batch("10")
				.batchHold(Duration.ofMillis(50)), null, (first) -> {
				});
			assertThat(batched.tryAcquire(1)).isTrue();
			assertThat(fields("batch:{idle}")).containsEntry("h", "10");
			long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
			while (!"0".equals(fields("batch:{idle}").get("h")) && System.nanoTime() - deadline < 0) {
				Thread.sleep(20);
			}
			assertThat(fields("batch:{idle}")).containsEntry("h", "0").containsEntry("l", "99");
			assertThat(batched.isIdle()).isTrue();
		}
		finally {
			instance.close();
		}
	}

	/**
	 * B5: a retune made on another instance takes this instance's batch back without a call here: the sweep reads
	 * the retune record at least every half second while the hand holds tokens (the hold, 30 s, never comes).
	 */
	@Test
	void aRetuneOnAnotherInstanceTakesBackThisInstancesBatchWithinASecond() throws InterruptedException {
		RedisBuckets holding = new RedisBuckets(redis.connectionFactory());
		RedisBuckets other = new RedisBuckets(redis.connectionFactory());
		try {
			RedisTokenBucket batched = holding.build(RedisTokenBucket.builder().name("retuned").keyPrefix("batch:")
				.rate(1, Duration.ofHours(1)).limit(100).timeout(Duration.ofSeconds(10)).batch("10")
				.batchHold(Duration.ofSeconds(30)), null, (first) -> {
				});
			RedisTokenBucket tuner = other.build(RedisTokenBucket.builder().name("retuned").keyPrefix("batch:")
				.rate(1, Duration.ofHours(1)).limit(100).timeout(Duration.ofSeconds(10)), null, (first) -> {
				});
			assertThat(tuner.snapshot().available()).isEqualTo(100);
			assertThat(batched.tryAcquire(1)).isTrue();
			assertThat(fields("batch:{retuned}")).containsEntry("h", "10");
			tuner.updateLimit(50);
			long start = System.nanoTime();
			long deadline = start + Duration.ofSeconds(10).toNanos();
			while (!"0".equals(fields("batch:{retuned}").get("h")) && System.nanoTime() - deadline < 0) {
				Thread.sleep(10);
			}
			System.out.printf("RedisBatchTests: a retune elsewhere took the batch back in %d ms%n",
					(System.nanoTime() - start) / 1_000_000);
			assertThat(fields("batch:{retuned}")).as("the batch taken under the old limit, back").containsEntry("h", "0");
			// the retune cut the level to 50 - 10 held; the 9 unspent came back, the one granted stays spent
			assertThat(tuner.snapshot().available()).isEqualTo(49);
			assertThat(batched.snapshot().available()).isEqualTo(49);
		}
		finally {
			holding.close();
			other.close();
		}
	}

	/** B7: a bucket hammered far above its rate refuses here, asking Redis about once per token or per hold. */
	@Test
	void aHammeredBucketRefusesLocallyWithFewCalls() throws InterruptedException {
		RedisBuckets instance = new RedisBuckets(redis.connectionFactory(Duration.ofSeconds(30)));
		try {
			RedisTokenBucket hammered = instance.build(RedisTokenBucket.builder().name("hammered").keyPrefix("batch:")
				.rate(20, Duration.ofSeconds(1)).limit(20).timeout(Duration.ofSeconds(2)).batch("auto"), null,
					(first) -> {
					});
			AtomicLong calls = new AtomicLong();
			hammered.onCall((outcome, nanos) -> calls.incrementAndGet());
			AtomicLong granted = new AtomicLong();
			AtomicLong refused = new AtomicLong();
			long start = System.nanoTime();
			long end = start + Duration.ofSeconds(2).toNanos();
			List<Thread> threads = new ArrayList<>();
			for (int t = 0; t < 2; t++) {
				Thread thread = new Thread(() -> {
					while (System.nanoTime() - end < 0) {
						if (hammered.tryAcquire(1)) {
							granted.incrementAndGet();
						}
						else {
							refused.incrementAndGet();
						}
					}
				});
				threads.add(thread);
				thread.start();
			}
			for (Thread thread : threads) {
				thread.join();
			}
			double elapsed = (System.nanoTime() - start) / 1e9;
			System.out.printf("RedisBatchTests: hammered 20/s: %d granted, %d refused, %d Redis calls in %.2f s%n",
					granted.get(), refused.get(), calls.get(), elapsed);
			assertThat(granted.get()).isLessThanOrEqualTo(20 + (long) Math.floor(20 * elapsed));
			// about one call per token (each takes what is there) plus one per hold (100 ms): far fewer than refusals
			assertThat(calls.get()).isLessThanOrEqualTo(granted.get() + (long) (elapsed * 10) * 2 + 10);
			assertThat(refused.get()).isGreaterThan(10 * calls.get());
		}
		finally {
			instance.close();
		}
	}

	/** B7: once Redis said when the next token comes, callers are refused here, with no Redis call. */
	@Test
	void aBucketThatRedisSaidIsEmptyRefusesHereUntilTheNextToken() {
		RedisBuckets instance = new RedisBuckets(redis.connectionFactory());
		try {
			RedisTokenBucket empty = instance.build(RedisTokenBucket.builder().name("empty").keyPrefix("batch:")
				.rate(1, Duration.ofHours(1)).limit(1).timeout(Duration.ofSeconds(10)).batch("1")
				.batchHold(Duration.ofSeconds(30)), null, (first) -> {
				});
			// the connection open first (a busy machine may take seconds): a call that timed out would apply the
			// failure policy, whose local bucket grants on its own
			assertThat(empty.snapshot().available()).isEqualTo(1);
			AtomicLong calls = new AtomicLong();
			empty.onCall((outcome, nanos) -> calls.incrementAndGet());
			assertThat(empty.tryAcquire(1)).isTrue();
			assertThat(empty.tryAcquire(1)).as("Redis says the next token is an hour away").isFalse();
			long asked = calls.get();
			assertThat(empty.tryAcquire(1)).isFalse();
			assertThatThrownBy(() -> empty.reserve(1, Duration.ZERO).poll())
				.isInstanceOf(dev.ratelimit.core.RateLimitExceededException.class);
			assertThatThrownBy(() -> empty.acquire(1, Duration.ofMillis(1)))
				.isInstanceOf(dev.ratelimit.core.RateLimitExceededException.class);
			assertThat(calls.get()).as("Redis calls after it said so").isEqualTo(asked);
		}
		finally {
			instance.close();
		}
	}

	@Test
	void aBatchThatIsNotNoneAutoOrAWholeNumberUpToTheLimitIsRefusedNamingTheProperty() {
		for (String bad : List.of("0", "101", "lots", "-1", "2.5")) {
			assertThatThrownBy(() -> RedisTokenBucket.builder().name("bad").rate(1, Duration.ofSeconds(1)).limit(100)
				.batch(bad).connectionFactory(redis.connectionFactory()).build())
				.isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("ratelimit.buckets.bad.redis.batch")
				.hasMessageContaining("none, auto or a whole number from 1 to the limit (100)")
				.hasMessageContaining("'" + bad + "'");
		}
		assertThatThrownBy(() -> RedisTokenBucket.builder().name("capped").rate(1, Duration.ofSeconds(1)).limit(10)
			.cappedRelease(true).batch("auto").connectionFactory(redis.connectionFactory()).build())
			.isInstanceOf(IllegalArgumentException.class)
			.hasMessageContaining("ratelimit.buckets.capped.redis.batch is not available with capped-release");
	}

	private static Map<String, String> fields(String key) {
		return redis.admin().hgetall(key);
	}
}
