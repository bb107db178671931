package dev.ratelimit.redis;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.StatsRecorder;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;
import org.springframework.data.redis.core.StringRedisTemplate;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Against a real Redis server that the tests start themselves.
 */
class RedisTokenBucketTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();

	/** A client of its own: each bucket made with one is another instance of the application. */
	private static LettuceConnectionFactory client() {
		return redis.connectionFactory();
	}

	private static RedisTokenBucketBuilder bucket(String name, long perSecond, long limit) {
		return RedisTokenBucket.builder().name(name).connectionFactory(client()).rate(perSecond, Duration.ofSeconds(1))
			.limit(limit).stats(StatsRecorder.concurrent());
	}

	@Test
	void grantsItsLimitThenRefusesAndKeepsOneExpiringHashKey() {
		RedisTokenBucket bucket = bucket("first", 1, 5).build();
		for (int i = 0; i < 5; i++) {
			assertThat(bucket.tryAcquire(1)).isTrue();
		}
		assertThat(bucket.tryAcquire(1)).isFalse();
		assertThat(bucket.key()).isEqualTo("ratelimit:{first}");
		StringRedisTemplate template = new StringRedisTemplate(client());
		assertThat(template.type(bucket.key()).code()).isEqualTo("hash");
		// empty at 1 per second with limit 5: full again in 5 s, so it expires in about 6 s
		assertThat(template.getExpire(bucket.key())).isBetween(4L, 7L);
		assertThat(bucket.snapshot().available()).isZero();
		assertThat(bucket.snapshot().granted()).isEqualTo(5);
		assertThat(bucket.snapshot().rejected()).isEqualTo(1);
	}

	/**
	 * 2 tokens per 3 s: a token taken from a full bucket is back 1.5 s after the take, whatever instant
	 * the snapshot is taken at; counting whole tokens would say 1.5 s at any instant of that time.
	 */
	@Test
	void untilFullCountsThePartOfTheNextTokenAlreadyMade() {
		RedisTokenBucket bucket = RedisTokenBucket.builder().name("until-full").connectionFactory(client())
			.rate(2, Duration.ofSeconds(3)).limit(2).build();
		assertThat(bucket.snapshot().untilFull()).isZero();
		long start = System.nanoTime();
		assertThat(bucket.tryAcquire(1)).isTrue();
		Duration untilFull = bucket.snapshot().untilFull();
		Duration elapsed = Duration.ofNanos(System.nanoTime() - start);
		assertThat(untilFull).isLessThan(Duration.ofMillis(1500))
			.isGreaterThanOrEqualTo(Duration.ofMillis(1499).minus(elapsed));
	}

	/**
	 * The round trip to Redis is not a wait for tokens: only a call that Redis told to wait records its
	 * wait (before, every granted call recorded the time to its answer, so the {@code ratelimit.wait} timer
	 * of a Redis bucket counted every call).
	 */
	@Test
	void onlyACallThatRedisToldToWaitRecordsAWait() throws InterruptedException {
		List<Long> waits = new java.util.concurrent.CopyOnWriteArrayList<>();
		StatsRecorder counts = StatsRecorder.concurrent();
		StatsRecorder recorder = new StatsRecorder() {

			@Override
			public void recordGranted(long waitedNanos) {
				waits.add(waitedNanos);
				counts.recordGranted(waitedNanos);
			}

			@Override
			public void recordRejected() {
				counts.recordRejected();
			}

			@Override
			public long granted() {
				return counts.granted();
			}

			@Override
			public long rejected() {
				return counts.rejected();
			}
		};
		RedisTokenBucket bucket = RedisTokenBucket.builder().name("waits").connectionFactory(client())
			.rate(2, Duration.ofSeconds(1)).limit(2).stats(recorder).build();
		bucket.acquire(1, Duration.ofSeconds(1)).close();
		dev.ratelimit.core.Reservation reservation = bucket.reserve(1, Duration.ofSeconds(1));
		Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> reservation.poll() == 0);
		reservation.permit().close();
		assertThat(waits).containsExactly(0L, 0L);
		while (bucket.tryAcquire(1)) {
			// empty it: less than a token is left
		}
		waits.clear();
		bucket.acquire(2, Duration.ofSeconds(2)).close(); // more than 500 ms to wait at 2 per second
		assertThat(waits).hasSize(1);
		assertThat(waits.get(0)).isGreaterThan(Duration.ofMillis(400).toNanos());
	}

	@Test
	void aCallerWaitsLocallyForTheTimeRedisComputedInOneRoundTrip() throws InterruptedException {
		RedisTokenBucket bucket = bucket("wait", 50, 1).build();
		bucket.acquire(1, Duration.ZERO).close();
		long start = System.nanoTime();
		bucket.acquire(1, Duration.ofSeconds(1)).close();
		Duration waited = Duration.ofNanos(System.nanoTime() - start);
		assertThat(waited).isBetween(Duration.ofMillis(10), Duration.ofMillis(500));
	}

	@Test
	void refusesAtOnceWhenTheWaitExceedsTheBudgetAndKeepsNothing() {
		RedisTokenBucket bucket = bucket("refuse", 1, 1).build();
		assertThat(bucket.tryAcquire(1)).isTrue();
		long start = System.nanoTime();
		assertThatThrownBy(() -> bucket.acquire(1, Duration.ofMillis(100)))
			.isInstanceOfSatisfying(RateLimitExceededException.class, (ex) -> {
				assertThat(ex.getBucket()).isEqualTo("refuse");
				assertThat(ex.getRetryAfter()).isBetween(Duration.ofMillis(500), Duration.ofSeconds(1));
			});
		assertThat(Duration.ofNanos(System.nanoTime() - start)).isLessThan(Duration.ofMillis(500));
		assertThat(bucket.snapshot().deficiency()).isZero();
	}

	@Test
	void instancesSharingABucketNeverExceedRateTimesElapsedPlusLimitAndReachIt() throws InterruptedException {
		long rate = 300;
		long limit = 30;
		List<RedisTokenBucket> instances = List.of(bucket("shared", rate, limit).build(),
				bucket("shared", rate, limit).build(), bucket("shared", rate, limit).build());
		AtomicLong granted = new AtomicLong();
		long start = System.nanoTime();
		long end = start + Duration.ofSeconds(2).toNanos();
		List<Thread> threads = new ArrayList<>();
		for (RedisTokenBucket instance : instances) {
			for (int i = 0; i < 3; i++) {
				Thread thread = new Thread(() -> {
					while (System.nanoTime() < end) {
						try {
							instance.acquire(1, Duration.ofMillis(200)).close();
							granted.incrementAndGet();
						}
						catch (RateLimitExceededException ex) {
							// queue longer than 200 ms: allowed
						}
						catch (InterruptedException ex) {
							return;
						}
					}
				});
				thread.start();
				threads.add(thread);
			}
		}
		for (Thread thread : threads) {
			thread.join();
		}
		double elapsed = (System.nanoTime() - start) / 1e9;
		// an upper bound only: how many calls a busy machine lets the callers make is not the bucket's business
		assertThat((double) granted.get()).isLessThanOrEqualTo(rate * elapsed + limit);
		assertThat(granted.get()).isPositive();
	}

	@Test
	void twoHundredConcurrentCallersAreLoadNotAnOutage() throws InterruptedException {
		long rate = 500;
		long limit = 50;
		// a timeout long enough that a busy machine cannot make Redis look down: only load is tested
		RedisTokenBucket bucket = bucket("crowd", rate, limit).timeout(Duration.ofSeconds(5)).build();
		AtomicLong granted = new AtomicLong();
		long start = System.nanoTime();
		long end = start + Duration.ofMillis(1500).toNanos();
		List<Thread> threads = new ArrayList<>();
		for (int i = 0; i < 200; i++) {
			Thread thread = new Thread(() -> {
				while (System.nanoTime() < end) {
					if (bucket.tryAcquire(1)) {
						granted.incrementAndGet();
					}
				}
			});
			thread.start();
			threads.add(thread);
		}
		for (Thread thread : threads) {
			thread.join();
		}
		double elapsed = (System.nanoTime() - start) / 1e9;
		// 0.1 let 200 callers through as if Redis were down: 46x the bound with 100 threads
		assertThat((double) granted.get()).isLessThanOrEqualTo(rate * elapsed + limit);
		assertThat(bucket.isUp()).isTrue();
	}

	@Test
	void cappedReleaseCountsTokensInFlightAcrossInstances() throws InterruptedException {
		RedisTokenBucket a = bucket("capped", 1000, 2).cappedRelease(true).build();
		RedisTokenBucket b = bucket("capped", 1000, 2).cappedRelease(true).build();
		Permit first = a.acquire(1, Duration.ZERO);
		Permit second = a.acquire(1, Duration.ZERO);
		assertThat(b.tryAcquire(1)).isFalse();
		assertThat(b.snapshot().inFlight()).isEqualTo(2);
		first.close();
		long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
		boolean got = false;
		while (!got && System.nanoTime() < deadline) {
			got = b.tryAcquire(1);
			Thread.sleep(5);
		}
		assertThat(got).isTrue();
		b.release(1);
		second.close();
	}

	@Test
	void refundAndChargeChangeTheLevelEveryInstanceShares() throws InterruptedException {
		RedisTokenBucket a = RedisTokenBucket.builder().name("settle").connectionFactory(client())
			.rate(1, Duration.ofHours(1)).limit(5).build();
		RedisTokenBucket b = RedisTokenBucket.builder().name("settle").connectionFactory(client())
			.rate(1, Duration.ofHours(1)).limit(5).build();
		for (int i = 0; i < 5; i++) {
			assertThat(a.tryAcquire(1)).isTrue();
		}
		a.refund(2);
		Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> b.snapshot().available() == 2);
		// never above the limit
		a.refund(100);
		Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> b.snapshot().available() == 5);
		b.charge(7);
		Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> a.snapshot().available() == 0);
		// 2 tokens of debt: the next token is three hours away
		assertThatThrownBy(() -> a.acquire(1, Duration.ZERO)).isInstanceOfSatisfying(
				RateLimitExceededException.class,
				(ex) -> assertThat(ex.getRetryAfter()).isBetween(Duration.ofMinutes(179), Duration.ofMinutes(181)));
		assertThatThrownBy(() -> a.refund(-1)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("n");
	}

	@Test
	void withCappedReleaseARefundActsOnTheRateAndTheLeaseIsStillReleasedOnce() throws InterruptedException {
		RedisTokenBucket bucket = RedisTokenBucket.builder().name("capped-refund").connectionFactory(client())
			.rate(1, Duration.ofHours(1)).limit(2).cappedRelease(true).build();
		Permit permit = bucket.acquire(2, Duration.ZERO);
		bucket.refund(2);
		Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> bucket.snapshot().available() == 0
				&& bucket.snapshot().inFlight() == 2 && levelOf(bucket) == 2);
		permit.close();
		permit.close();
		Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> bucket.snapshot().inFlight() == 0);
		assertThat(bucket.snapshot().available()).isEqualTo(2);
	}

	private static long levelOf(RedisTokenBucket bucket) {
		String level = (String) new StringRedisTemplate(client()).opsForHash().get(bucket.key(), "l");
		return (level != null) ? Long.parseLong(level) : -1;
	}

	@Test
	void aBadConfigurationIsRefusedNamingTheArgument() {
		assertThatThrownBy(() -> RedisTokenBucket.builder().connectionFactory(client()).rate(1, Duration.ofSeconds(1))
			.build()).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("name");
		assertThatThrownBy(() -> bucket("bad", 0, 1).build()).isInstanceOf(IllegalArgumentException.class)
			.hasMessageContaining("rate");
		assertThatThrownBy(() -> bucket("bad", 1, 1).timeout(Duration.ZERO).build())
			.isInstanceOf(IllegalArgumentException.class).hasMessageContaining("timeout");
	}
}
