package dev.ratelimit.redis;

import java.time.Duration;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.core.Rate;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.redis.BucketScript.Settings;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The wake-ups of capped keys' buckets: each key's bucket has its own channel,
 * {@code <key-prefix>{<bucket>:<key>}:woken}. Seen on a Redis Cluster with {@code per-user} capped and
 * {@code keys.max: 100}: 3110 distinct keys in 10 s left one instance subscribed to 3113 channels, and
 * 3117 {@code RedisTokenBucket}s alive after a full GC (each subscription holds its bucket), for 100 keys
 * with a bucket: memory grew with every key ever seen (contract: memory stays bounded whatever keys
 * callers send). Redis is a fake whose replies the tests give.
 */
class CappedKeySubscriptionTests {

	private final FakeScriptRedis redis = new FakeScriptRedis();

	private final ScriptConnection connection = this.redis.connectionWithPubSub();

	private final TemplateTune tune = new TemplateTune("t", Settings.of(Rate.of(10, Duration.ofSeconds(1)), 3, true,
			Duration.ofMinutes(1), "t"), "ratelimit:{t}", this.connection, TimeUnit.HOURS.toNanos(1), System::nanoTime);

	@AfterEach
	void close() {
		this.connection.close();
	}

	/** The sweep of the keys' buckets drops idle ones: none of them may stay subscribed. */
	@Test
	void idleCappedKeysBucketsHoldNoSubscription() {
		for (int k = 0; k < 50; k++) {
			RedisTokenBucket bucket = FakeScriptRedis.aliceOf(this.tune, this.connection).cappedRelease(true)
				.perKey("user-" + k).build();
			assertThat(bucket.isIdle()).isTrue(); // as the sweep asks before it drops the bucket
		}
		assertThat(this.redis.subscribed()).as("channels subscribed to for 50 idle (dropped) keys' buckets")
			.isEmpty();
	}

	/** A key's claim queued for releases is woken by its channel while it waits, and only then. */
	@Test
	void aCappedKeysBucketIsSubscribedWhileAClaimWaitsForReleases() {
		RedisTokenBucket bucket = FakeScriptRedis.aliceOf(this.tune, this.connection).cappedRelease(true).build();
		Reservation claim = bucket.reserve(1, Duration.ofSeconds(30));
		this.redis.of(BucketScript.Mode.TUNE).get(0).complete(FakeScriptRedis.reply(3));
		claim.poll();
		this.redis.of(BucketScript.Mode.ACQUIRE).get(0).complete(FakeScriptRedis.reply(2)); // queued for releases
		claim.poll();
		assertThat(this.redis.subscribed()).containsExactly("ratelimit:{t:alice}:woken");
		assertThat(claim.cancel()).isTrue();
		assertThat(bucket.isIdle()).isTrue();
		assertThat(this.redis.subscribed()).isEmpty();
	}
}
