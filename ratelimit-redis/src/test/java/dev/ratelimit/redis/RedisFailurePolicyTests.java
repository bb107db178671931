package dev.ratelimit.redis;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import dev.ratelimit.core.BackendHealth;
import dev.ratelimit.core.RateLimitExceededException;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.DefaultClientResources;
import io.lettuce.core.resource.Delay;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;

import org.springframework.data.redis.connection.RedisStandaloneConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceClientConfiguration;
import org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Redis stopped mid-run and started again: each failure policy does what it says within the timeout,
 * and the bucket goes back to Redis by itself.
 */
class RedisFailurePolicyTests {

	private EmbeddedRedis redis;

	private LettuceConnectionFactory factory;

	@BeforeEach
	void startRedis() {
		this.redis = new EmbeddedRedis();
		this.factory = this.redis.connectionFactory();
	}

	@AfterEach
	void stopRedis() {
		this.factory.destroy();
		try {
			this.redis.stop();
		}
		catch (RuntimeException ex) {
			// already stopped
		}
	}

	private RedisTokenBucket bucket(RedisTokenBucket.OnFailure onFailure) {
		return RedisTokenBucket.builder().name("policy-" + onFailure).connectionFactory(this.factory)
			.rate(1, Duration.ofHours(1)).limit(3).timeout(Duration.ofMillis(100)).onFailure(onFailure).build();
	}

	private static Duration timed(Runnable call) {
		long start = System.nanoTime();
		call.run();
		return Duration.ofNanos(System.nanoTime() - start);
	}

	@Test
	@ExtendWith(OutputCaptureExtension.class)
	void saysOnceAtWarnWhenABucketSwitchesToItsPolicyAndOnceAtInfoWhenItIsBack(CapturedOutput output)
			throws InterruptedException {
		RedisTokenBucket bucket = bucket(RedisTokenBucket.OnFailure.DENY);
		this.redis.stop();
		for (int i = 0; i < 20; i++) {
			bucket.tryAcquire(1);
		}
		this.redis.start();
		assertThat(recovered(bucket)).isTrue();
		String log = output.getOut() + output.getErr();
		assertThat(log).contains("Rate limit bucket 'policy-DENY' runs on its on-failure policy (deny) after "
				+ FailureDetector.FAILURES_TO_TRIP + " failed calls to Redis in a row");
		int warnings = log.split("runs on its on-failure policy", -1).length - 1;
		int recoveries = log.split("Rate limit bucket 'policy-DENY' is back on Redis", -1).length - 1;
		// once per switch, not once per call (20 calls failed); a busy machine may make it switch again
		assertThat(warnings).isBetween(1, 3);
		assertThat(recoveries).isBetween(1, warnings);
	}

	@Test
	void allowLetsCallsThroughWhileRedisIsDownAndRecovers() throws InterruptedException {
		RedisTokenBucket bucket = bucket(RedisTokenBucket.OnFailure.ALLOW);
		for (int i = 0; i < 3; i++) {
			assertThat(bucket.tryAcquire(1)).isTrue();
		}
		assertThat(bucket.tryAcquire(1)).isFalse();
		this.redis.stop();
		Duration first = timed(() -> assertThat(bucket.tryAcquire(1)).isTrue());
		assertThat(first).isLessThan(Duration.ofMillis(1000));
		// one failure is not an outage; several in a row are
		assertThat(bucket.isUp()).isTrue();
		for (int i = 1; i < FailureDetector.FAILURES_TO_TRIP; i++) {
			assertThat(bucket.tryAcquire(1)).isTrue();
		}
		assertThat(bucket.isUp()).isFalse();
		for (int i = 0; i < 100; i++) {
			assertThat(timed(() -> assertThat(bucket.tryAcquire(1)).isTrue())).isLessThan(Duration.ofMillis(1000));
		}
		this.redis.start();
		assertThat(recovered(bucket)).isTrue();
		// back on Redis (restarted without data, so the bucket there is full again) and limiting again
		int granted = 0;
		for (int i = 0; i < 10; i++) {
			if (bucket.tryAcquire(1)) {
				granted++;
			}
		}
		assertThat(granted).isEqualTo(3);
	}

	@Test
	void denyRefusesCallsWhileRedisIsDown() {
		RedisTokenBucket bucket = bucket(RedisTokenBucket.OnFailure.DENY);
		assertThat(bucket.tryAcquire(1)).isTrue();
		this.redis.stop();
		assertThat(timed(() -> assertThat(bucket.tryAcquire(1)).isFalse())).isLessThan(Duration.ofMillis(1000));
		assertThatThrownBy(() -> bucket.acquire(1, Duration.ofSeconds(5)))
			.isInstanceOfSatisfying(RateLimitExceededException.class,
					(ex) -> assertThat(ex.getBucket()).isEqualTo("policy-DENY"));
	}

	@Test
	void localLimitsCallsWithAnInMemoryBucketOfTheSameRateAndLimit() throws InterruptedException {
		RedisTokenBucket bucket = bucket(RedisTokenBucket.OnFailure.LOCAL);
		this.redis.stop();
		int granted = 0;
		for (int i = 0; i < 10; i++) {
			if (bucket.tryAcquire(1)) {
				granted++;
			}
		}
		assertThat(granted).isEqualTo(3);
		this.redis.start();
		assertThat(recovered(bucket)).isTrue();
	}

	@Test
	void localTakesEachCallsTokensOnceWhileRedisIsDown() throws InterruptedException {
		RedisTokenBucket bucket = RedisTokenBucket.builder().name("policy-local-waits").connectionFactory(this.factory)
			.rate(100, Duration.ofSeconds(1)).limit(1).timeout(Duration.ofMillis(100)).build(); // the default: local
		this.redis.stop();
		for (int i = 0; i < 10; i++) {
			bucket.acquire(1, Duration.ofSeconds(5)).close();
		}
		// every claim was granted or given back: nothing was claimed twice and left behind in the local bucket
		assertThat(bucket.snapshot().deficiency()).isZero();
		assertThat(bucket.snapshot().waiting()).isZero();
	}

	/**
	 * A user saw HTTP 500 (a NullPointerException from the claim's give-back) for every call the
	 * policy refused once the bucket was on its policy: an annotated method on a Redis bucket whose
	 * local fallback was empty, or whose policy is deny, failed instead of answering 429.
	 */
	@Test
	void aCallThePolicyRefusesWhileRedisIsDownIsARefusalNotAnError() {
		RedisTokenBucket local = bucket(RedisTokenBucket.OnFailure.LOCAL);
		RedisTokenBucket deny = bucket(RedisTokenBucket.OnFailure.DENY);
		this.redis.stop();
		for (int i = 0; i < FailureDetector.FAILURES_TO_TRIP + 5; i++) {
			local.tryAcquire(1);
			deny.tryAcquire(1);
		}
		assertThat(local.isUp()).isFalse();
		assertThat(deny.isUp()).isFalse();
		// the local fallback is empty by now (limit 3): its refusals are RateLimitExceededException
		for (int i = 0; i < 5; i++) {
			assertThatThrownBy(() -> local.acquire(1, Duration.ZERO).close())
				.isInstanceOf(RateLimitExceededException.class);
			assertThatThrownBy(() -> deny.acquire(1, Duration.ofMillis(50)).close())
				.isInstanceOf(RateLimitExceededException.class);
		}
	}

	/**
	 * Redis busy for a second (a script that runs that long): the calls sent meanwhile time out and the
	 * local bucket lets the limit's worth through; Redis runs them when it is free again and grants them
	 * too. Before, those late grants were given back to Redis, which then granted this instance the limit
	 * again: 6 calls within about a second and a half at 1 per second, limit 3. Now the late grants stay
	 * in Redis: the instance stays within {@code limit + rate * elapsed}.
	 */
	@Test
	void aRedisThatAnswersLateDoesNotLetOneInstanceTakeTheLimitTwice() throws Exception {
		RedisTokenBucket bucket = RedisTokenBucket.builder().name("policy-late")
			.connectionFactory(this.redis.connectionFactory(Duration.ofSeconds(30)))
			.rate(1, Duration.ofSeconds(1)).limit(3).timeout(Duration.ofMillis(50)).build(); // the default: local
		assertThat(bucket.snapshot().available()).isEqualTo(3); // connected, the script loaded
		RedisCommands<String, String> admin = this.redis.admin();
		admin.ping(); // connected
		String busy = "local t0 = redis.call('TIME') local now repeat now = redis.call('TIME') "
				+ "until (now[1] - t0[1]) * 1000000 + (now[2] - t0[2]) >= 1000000 return 1";
		Thread stall = new Thread(() -> admin.eval(busy, ScriptOutputType.INTEGER));
		long start = System.nanoTime();
		stall.start();
		Thread.sleep(50); // the script runs
		int granted = 0;
		long end = start + Duration.ofMillis(2500).toNanos();
		while (System.nanoTime() - end < 0) {
			if (bucket.tryAcquire(1)) {
				granted++;
			}
			Thread.sleep(5);
		}
		double elapsed = (System.nanoTime() - start) / 1e9;
		stall.join();
		assertThat((double) granted).as("granted in %.2f s at 1 per second, limit 3", elapsed)
			.isLessThanOrEqualTo(3 + elapsed);
	}

	/**
	 * Found stopping a Redis for 20 s under load: the bucket came back 18 s after Redis answered again. Its
	 * probes, sent while Lettuce was reconnecting, waited in Lettuce's buffer and timed out, doubling the
	 * back-off each time; then Lettuce's own reconnect delay (up to 30 s) kept the connection closed. Now no
	 * probe is sent while Lettuce reconnects, and the first call after it has reconnected probes at once.
	 * (Lettuce reconnects every 200 ms here; the starter caps the delay of the client resources Spring Boot
	 * makes at 5 s: {@code RateLimitRedisAutoConfigurationTests}.)
	 */
	@Test
	void noProbeWaitsInLettucesBufferAndTheFirstCallAfterItReconnectsProbes() throws InterruptedException {
		ClientResources resources = DefaultClientResources.builder()
			.reconnectDelay(Delay.constant(Duration.ofMillis(200)))
			.build();
		LettuceConnectionFactory factory = new LettuceConnectionFactory(
				new RedisStandaloneConfiguration("127.0.0.1", this.redis.port()),
				LettuceClientConfiguration.builder().clientResources(resources).build());
		factory.afterPropertiesSet();
		factory.start();
		try {
			List<BackendHealth.Outcome> calls = new CopyOnWriteArrayList<>();
			RedisTokenBucket bucket = RedisTokenBucket.builder().name("reconnecting").connectionFactory(factory)
				.rate(1, Duration.ofHours(1)).limit(1000).timeout(Duration.ofMillis(500)).build();
			bucket.onCall((outcome, nanos) -> calls.add(outcome));
			assertThat(bucket.tryAcquire(1)).isTrue();
			this.redis.stop();
			for (int i = 0; i < 2 * FailureDetector.FAILURES_TO_TRIP && bucket.isUp(); i++) {
				bucket.tryAcquire(1);
			}
			assertThat(bucket.isUp()).isFalse();
			// calls on the policy for longer than the first back-offs (100 + 200 + 400 + 800 ms): no probe is sent
			int before = calls.size();
			long until = System.nanoTime() + Duration.ofMillis(1600).toNanos();
			while (System.nanoTime() < until) {
				assertThat(bucket.tryAcquire(1)).isTrue(); // local policy, 1,000 tokens
				Thread.sleep(20);
			}
			assertThat(calls.subList(before, calls.size())).as("calls sent while Lettuce reconnects").isEmpty();
			this.redis.start();
			long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
			while (bucket.connection().reconnecting() && System.nanoTime() < deadline) {
				Thread.sleep(20);
			}
			assertThat(bucket.connection().reconnecting()).as("Lettuce reconnected within 20 s").isFalse();
			// the first call probes, whatever the back-off; its answer puts the bucket back on Redis
			int sent = calls.size();
			assertThat(bucket.tryAcquire(1)).isTrue();
			// the call is recorded as it is settled, on Lettuce's thread, maybe just after the caller has its answer
			long recorded = System.nanoTime() + Duration.ofSeconds(5).toNanos();
			while (calls.size() == sent && System.nanoTime() < recorded) {
				Thread.sleep(10);
			}
			assertThat(calls.size()).as("calls sent by the first call after Lettuce reconnected").isEqualTo(sent + 1);
			assertThat(recovered(bucket)).isTrue();
		}
		finally {
			factory.destroy();
			resources.shutdown();
		}
	}

	/**
	 * Found by a user with {@code ratelimit.health.backend-down-status: DOWN}: a bucket said down got no more
	 * calls (its instance was out of rotation) and its health said {@code down} forever after Redis was back,
	 * since only calls probed. A health read probes when a probe is due.
	 */
	@Test
	void aHealthReadFindsRedisBackWithoutAnyCall() throws InterruptedException {
		RedisTokenBucket bucket = bucket(RedisTokenBucket.OnFailure.DENY);
		this.redis.stop();
		for (int i = 0; i < 20 && bucket.isUp(); i++) {
			bucket.tryAcquire(1);
		}
		assertThat(bucket.health()).startsWith("down: ");
		this.redis.start();
		long deadline = System.nanoTime() + Duration.ofSeconds(20).toNanos();
		String health = bucket.health();
		while (!health.equals("up") && System.nanoTime() < deadline) {
			Thread.sleep(100);
			health = bucket.health();
		}
		assertThat(health).isEqualTo("up");
		assertThat(bucket.isUp()).isTrue();
	}

	private static boolean recovered(RedisTokenBucket bucket) throws InterruptedException {
		long deadline = System.nanoTime() + Duration.ofSeconds(15).toNanos();
		while (System.nanoTime() < deadline) {
			bucket.snapshot();
			if (bucket.isUp()) {
				return true;
			}
			Thread.sleep(50);
		}
		return false;
	}
}
