package dev.ratelimit.redis;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ratelimit.core.Permit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Capped release across instances against a real Redis: leases, the queue of waiters in arrival
 * order, their wake-ups, and retuning every instance at once. Each bucket stands for one instance of
 * an application, with a connection of its own.
 */
class RedisLeasesAndQueueTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();


	private static RedisTokenBucketBuilder instance(String name) {
		LettuceConnectionFactory factory = redis.connectionFactory();
		return RedisTokenBucket.builder().name(name).connectionFactory(factory).timeout(Duration.ofSeconds(1));
	}

	private static RedisTokenBucketBuilder capped(String name, long limit) {
		return instance(name).rate(1_000_000, Duration.ofSeconds(1)).limit(limit).cappedRelease(true);
	}

	@Test
	void tokensOfAnInstanceThatNeverReleasesThemComeBackWhenTheLeaseRunsOutAndALateReleaseChangesNothing()
			throws InterruptedException {
		RedisTokenBucket dying = capped("leased", 2).lease(Duration.ofMillis(300)).build();
		RedisTokenBucket survivor = capped("leased", 2).lease(Duration.ofMillis(300)).build();
		Permit first = dying.acquire(1, Duration.ZERO);
		Permit second = dying.acquire(1, Duration.ZERO);
		assertThat(survivor.tryAcquire(1)).isFalse();
		// the dying instance never closes its permits: within the lease (and well past it) they come back
		Permit a = survivor.acquire(1, Duration.ofSeconds(5));
		Permit b = survivor.acquire(1, Duration.ofSeconds(5));
		assertThat(survivor.snapshot().inFlight()).isEqualTo(2.0);
		// releases that come after the lease ran out free nothing: the survivor's tokens stay counted
		first.close();
		second.close();
		assertThat(survivor.snapshot().inFlight()).isEqualTo(2.0);
		assertThat(survivor.tryAcquire(1)).isFalse();
		a.close();
		b.close();
		assertThat(survivor.snapshot().inFlight()).isZero();
	}

	@Test
	void aPermitReleasesItsTokensExactlyOnce() throws InterruptedException {
		RedisTokenBucket bucket = capped("once", 2).build();
		Permit first = bucket.acquire(1, Duration.ZERO);
		Permit second = bucket.acquire(1, Duration.ZERO);
		first.close();
		first.close();
		assertThat(bucket.snapshot().inFlight()).isEqualTo(1.0);
		second.close();
		assertThat(bucket.snapshot().inFlight()).isZero();
	}

	@Test
	void waitersOnSeveralInstancesAreServedInArrivalOrder() throws InterruptedException {
		List<RedisTokenBucket> instances = List.of(capped("fifo", 1).build(), capped("fifo", 1).build(),
				capped("fifo", 1).build());
		Permit holder = instances.get(0).acquire(1, Duration.ZERO);
		List<Integer> served = new CopyOnWriteArrayList<>();
		List<Thread> waiters = new ArrayList<>();
		for (int i = 1; i <= 6; i++) {
			int arrival = i;
			RedisTokenBucket bucket = instances.get(i % 3);
			Thread waiter = new Thread(() -> {
				try (Permit permit = bucket.acquire(1, Duration.ofSeconds(30))) {
					served.add(arrival);
					Thread.sleep(20);
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
				}
			});
			waiters.add(waiter);
			waiter.start();
			// the next one arrives once this one holds its ticket in Redis
			awaitQueueLength(instances.get(0).key(), i);
		}
		holder.close();
		for (Thread waiter : waiters) {
			waiter.join(30_000);
		}
		assertThat(served).containsExactly(1, 2, 3, 4, 5, 6);
	}

	@Test
	void aWaiterIsWokenByAReleaseOnAnotherInstanceWithoutPollingRedis() throws InterruptedException {
		RedisTokenBucket holderInstance = capped("woken", 1).build();
		RedisTokenBucket waiterInstance = capped("woken", 1).build();
		AtomicInteger waiterCalls = new AtomicInteger();
		Permit held = holderInstance.acquire(1, Duration.ZERO);
		waiterInstance.onCall((outcome, nanos) -> waiterCalls.incrementAndGet());
		Thread waiter = new Thread(() -> {
			try {
				waiterInstance.acquire(1, Duration.ofSeconds(30)).close();
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
			}
		});
		waiter.start();
		Thread.sleep(500);
		// at most one ask every 100 ms while nothing is released (not one a millisecond)
		assertThat(waiterCalls.get()).isBetween(1, 8);
		held.close();
		waiter.join(30_000);
		assertThat(waiter.isAlive()).isFalse();
	}

	@Test
	void aRetuneThroughOneInstanceChangesTheBucketForEveryInstanceUntilTheConfigurationChanges() {
		RedisTokenBucket first = instance("retuned").rate(1, Duration.ofHours(1)).limit(5).build();
		RedisTokenBucket second = instance("retuned").rate(1, Duration.ofHours(1)).limit(5).build();
		assertThat(second.tryAcquire(1)).isTrue();
		first.updateLimit(2);
		first.updateRate(2, Duration.ofHours(1));
		// the other instance's next call uses the new limit: 4 tokens left are cut to 2
		assertThat(second.tryAcquire(1)).isTrue();
		assertThat(second.tryAcquire(1)).isTrue();
		assertThat(second.tryAcquire(1)).isFalse();
		assertThat(second.snapshot().limit()).isEqualTo(2.0);
		assertThat(second.snapshot().rate()).isEqualTo(2);
		// an instance started with another configuration drops the retune: its settings are in effect
		RedisTokenBucket restarted = instance("retuned").rate(1, Duration.ofHours(1)).limit(7).build();
		assertThat(restarted.snapshot().limit()).isEqualTo(7.0);
		assertThat(restarted.tryAcquire(1)).isFalse(); // no token came back: still none banked
		assertThat(first.snapshot().limit()).isEqualTo(5.0); // the others see their own configuration again
	}

	private static void awaitQueueLength(String key, long length) throws InterruptedException {
		long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
		while (redis.admin().zcard(key + ":queue") < length && System.nanoTime() < deadline) {
			Thread.sleep(2);
		}
		assertThat(redis.admin().zcard(key + ":queue")).isEqualTo(length);
	}
}
