package dev.ratelimit.redis;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.core.Rate;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.redis.BucketScript.Settings;
import dev.ratelimit.spring.BucketMode;
import dev.ratelimit.spring.BucketStats;
import io.lettuce.core.RedisCommandExecutionException;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@link TemplateTune} on a fake clock and a fake Redis (a {@link ScriptConnection} on a Lettuce
 * connection whose script calls the test answers): the thresholds of its javadoc exactly (read again in
 * the background from 400 ms, waited for from 800 ms, one read at a time, the bucket's own replies count
 * as reads, a reply sent before the current read is ignored), and a key's claim made with
 * {@link RedisTokenBucket#reserve} (what {@code Mono} and {@code CompletionStage} calls use) waiting for a
 * stale read without holding its thread.
 */
class TemplateTuneTests {

	private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);

	private static final Settings CONFIGURED = settings(10, 3);

	private final FakeScriptRedis redis = new FakeScriptRedis();

	private final ScriptConnection connection = this.redis.connection();

	private final long[] clock = { Long.MAX_VALUE - 500 * MS }; // the clock wraps during the test

	@AfterEach
	void close() {
		this.connection.close();
	}

	private static Settings settings(long perSecond, long limit) {
		return Settings.of(Rate.of(perSecond, Duration.ofSeconds(1)), limit, false, Duration.ofMinutes(1), "t");
	}

	private TemplateTune tune() {
		return new TemplateTune("t", CONFIGURED, "ratelimit:{t}", this.connection, TimeUnit.HOURS.toNanos(1),
				() -> this.clock[0]);
	}

	/** A reply of the script carrying a retune to {@code s}. */
	private static List<Object> replyOf(Settings s) {
		return List.of(1L, 0L, 1L, 0L, 0L, s.a(), s.b(), s.limit(), s.rate().tokens(), s.rate().period().toNanos());
	}

	/** A reply carrying a retune to {@code s} and the shared mode {@code mode} (0, 1 enforce, 2 shadow). */
	private static List<Object> replyOf(Settings s, long mode) {
		List<Object> values = new java.util.ArrayList<>(replyOf(s));
		values.add(0L); // at
		values.add(mode);
		return values;
	}

	/**
	 * Found on a Redis Cluster under load: one read of the template's settings that timed out logged a WARN
	 * ("cannot be read") and, 140 ms later, an INFO ("read again"). Like the buckets' calls, reads are said
	 * to fail after several failures in a row, once, and said back once.
	 */
	@Test
	@org.junit.jupiter.api.extension.ExtendWith(org.springframework.boot.test.system.OutputCaptureExtension.class)
	void oneFailedReadIsNotSaidSeveralInARowAreSaidOnce(org.springframework.boot.test.system.CapturedOutput output) {
		TemplateTune tune = tune();
		int reads = 0;
		// one failure, then an answer: nothing said
		CompletableFuture<Boolean> read = tune.read();
		this.redis.of(BucketScript.Mode.TUNE).get(reads++).completeExceptionally(new IllegalStateException("slow"));
		assertThat(read.join()).isFalse();
		read = tune.read();
		this.redis.of(BucketScript.Mode.TUNE).get(reads++).complete(replyOf(CONFIGURED));
		assertThat(read.join()).isTrue();
		assertThat(output.getOut()).doesNotContain("cannot be read").doesNotContain("read from Redis again");
		// failures in a row: said once, then back once
		for (int i = 0; i < FailureDetector.FAILURES_TO_TRIP + 2; i++) {
			read = tune.read();
			this.redis.of(BucketScript.Mode.TUNE).get(reads++).completeExceptionally(new IllegalStateException("down"));
			assertThat(read.join()).isFalse();
			assertThat(count(output.getOut(), "cannot be read")).as("after %d failed reads", i + 1)
				.isEqualTo((i + 1 < FailureDetector.FAILURES_TO_TRIP) ? 0 : 1);
		}
		read = tune.read();
		this.redis.of(BucketScript.Mode.TUNE).get(reads).complete(replyOf(CONFIGURED));
		assertThat(read.join()).isTrue();
		assertThat(count(output.getOut(), "read from Redis again")).isEqualTo(1);
	}

	private static int count(String text, String part) {
		int n = 0;
		for (int at = text.indexOf(part); at >= 0; at = text.indexOf(part, at + 1)) {
			n++;
		}
		return n;
	}

	/**
	 * The mode comes with the replies the tune adopts (an older script's reply, without it, means "as
	 * configured"); it stays while Redis does not answer (the failure policy still runs in that mode), and a
	 * switch Redis does not answer is refused, changing nothing.
	 */
	@Test
	void theModeComesWithTheRepliesAndStaysWhileRedisDoesNotAnswer() {
		TemplateTune tune = new TemplateTune("t", CONFIGURED, "ratelimit:{t}", this.connection,
				TimeUnit.MILLISECONDS.toNanos(50), () -> this.clock[0]);
		BucketStats stats = new BucketStats(StatsRecorder.concurrent(), BucketMode.ENFORCE, false);
		// as the backend shares the mode (RedisBucketBackend): true is shadow, false enforce, null as configured
		tune.onModeChange((shadow) -> stats
			.adoptShared((shadow == null) ? null : shadow ? BucketMode.SHADOW : BucketMode.ENFORCE));
		stats.shareModeThrough((mode) -> tune.switchMode(mode == BucketMode.SHADOW));
		long sent = this.clock[0];
		tune.adopt(BucketScript.Reply.of(replyOf(CONFIGURED, 2)), sent);
		assertThat(stats.isShadow()).isTrue();
		tune.adopt(BucketScript.Reply.of(replyOf(CONFIGURED, 0)), sent + MS);
		assertThat(stats.mode()).isEqualTo(BucketMode.ENFORCE);
		tune.adopt(BucketScript.Reply.of(replyOf(CONFIGURED, 2)), sent + 2 * MS);
		tune.adopt(BucketScript.Reply.of(replyOf(CONFIGURED)), sent + 3 * MS); // ten values: as configured
		assertThat(stats.mode()).isEqualTo(BucketMode.ENFORCE);
		tune.adopt(BucketScript.Reply.of(replyOf(CONFIGURED, 2)), sent + 4 * MS);
		// a read that fails changes nothing
		this.clock[0] = sent + 900 * MS;
		assertThat(tune.forKey(this.clock[0])).isNull();
		this.redis.of(BucketScript.Mode.TUNE).get(0).completeExceptionally(new IllegalStateException("down"));
		assertThat(stats.isShadow()).isTrue();
		// a switch nobody answers: refused, nothing changed
		assertThatThrownBy(() -> stats.mode(BucketMode.ENFORCE)).isInstanceOf(IllegalStateException.class)
			.hasMessageContaining("cannot be switched to enforce mode while Redis does not answer");
		assertThat(stats.isShadow()).isTrue();
		String[] arguments = this.redis.arguments(BucketScript.Mode.SWITCH).get(0);
		assertThat(arguments).hasSize(10);
		assertThat(arguments[9]).isEqualTo("enforce");
		// answered: the reply's mode is taken on
		CompletableFuture<Void> switching = CompletableFuture.runAsync(() -> stats.mode(BucketMode.ENFORCE));
		long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
		while (this.redis.of(BucketScript.Mode.SWITCH).size() < 2 && System.nanoTime() < until) {
			Thread.onSpinWait();
		}
		this.redis.of(BucketScript.Mode.SWITCH).get(1).complete(replyOf(CONFIGURED, 1));
		try {
			switching.get(5, TimeUnit.SECONDS);
		}
		catch (Exception ex) {
			// under heavy load the 50 ms timeout may pass first: refused then, and nothing changed
			assertThat(stats.isShadow()).isTrue();
			return;
		}
		assertThat(stats.mode()).isEqualTo(BucketMode.ENFORCE);
	}

	@Test
	void readsAgainFrom400msWithoutWaitingAndWaitsFrom800ms() {
		TemplateTune tune = tune();
		long start = this.clock[0];
		// never read: wait for the first read, one at a time
		assertThat(tune.forKey(start)).isNull();
		assertThat(tune.forKey(start)).isNull();
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(1);
		Settings first = settings(5, 2);
		this.redis.of(BucketScript.Mode.TUNE).get(0).complete(replyOf(first));
		assertThat(tune.current()).isEqualTo(first);
		// read at start: fresh below 400 ms
		assertThat(tune.forKey(start)).isEqualTo(first);
		assertThat(tune.forKey(start + 400 * MS - 1)).isEqualTo(first);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(1);
		// from 400 ms: used, and read again in the background (sent now)
		this.clock[0] = start + 400 * MS;
		assertThat(tune.forKey(this.clock[0])).isEqualTo(first);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(2);
		// the read under way is joined, up to 800 ms
		this.clock[0] = start + 800 * MS - 1;
		assertThat(tune.forKey(this.clock[0])).isEqualTo(first);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(2);
		// from 800 ms: waited for
		this.clock[0] = start + 800 * MS;
		assertThat(tune.forKey(this.clock[0])).isNull();
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(2);
		CompletableFuture<Boolean> read = tune.read();
		assertThat(read).isNotDone();
		Settings second = settings(7, 4);
		this.redis.of(BucketScript.Mode.TUNE).get(1).complete(replyOf(second));
		assertThat(read).isDone();
		// the second read was sent at start + 400 ms: its age counts from there
		assertThat(tune.forKey(start + 800 * MS - 1)).isEqualTo(second);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(2);
		assertThat(tune.forKey(start + 800 * MS)).isEqualTo(second);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(3);
		assertThat(tune.forKey(start + 1200 * MS - 1)).isEqualTo(second);
		assertThat(tune.forKey(start + 1200 * MS)).isNull();
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(3);
	}

	@Test
	void theBucketsOwnRepliesCountAsReads() {
		TemplateTune tune = tune();
		long sent = this.clock[0];
		Settings own = settings(5, 2);
		tune.adopt(BucketScript.Reply.of(replyOf(own)), sent);
		assertThat(tune.forKey(sent + 400 * MS - 1)).isEqualTo(own);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).isEmpty();
		assertThat(tune.forKey(sent + 400 * MS)).isEqualTo(own);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(1);
	}

	@Test
	void aReplySentBeforeTheCurrentReadIsIgnored() {
		TemplateTune tune = tune();
		long start = this.clock[0];
		assertThat(tune.forKey(start)).isNull(); // the background read is sent at start
		Settings later = settings(5, 2);
		tune.adopt(BucketScript.Reply.of(replyOf(later)), start + 10 * MS); // an own call sent later, answered first
		this.redis.of(BucketScript.Mode.TUNE).get(0).complete(replyOf(settings(7, 4)));
		assertThat(tune.current()).isEqualTo(later);
		tune.adopt(BucketScript.Reply.of(replyOf(settings(8, 8))), start + 5 * MS);
		assertThat(tune.current()).isEqualTo(later);
		// the settings are as old as the later call
		assertThat(tune.forKey(start + 410 * MS - 1)).isEqualTo(later);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(1);
		assertThat(tune.forKey(start + 810 * MS - 1)).isEqualTo(later);
		assertThat(tune.forKey(start + 810 * MS)).isNull();
	}

	@Test
	void aFailedReadChangesNothingNobodyWaitsAndTheNextReadGoesAfterABackOff() {
		TemplateTune tune = tune();
		long start = this.clock[0];
		Settings own = settings(5, 2);
		tune.adopt(BucketScript.Reply.of(replyOf(own)), start);
		this.clock[0] = start + 500 * MS;
		assertThat(tune.forKey(this.clock[0])).isEqualTo(own);
		this.redis.of(BucketScript.Mode.TUNE).get(0).completeExceptionally(new IllegalStateException("down"));
		assertThat(tune.current()).isEqualTo(own);
		// failing: no read for 100 ms, and no call waits for one, however old the settings
		this.clock[0] += 99 * MS;
		assertThat(tune.forKey(this.clock[0])).isEqualTo(own);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(1);
		this.clock[0] += MS;
		assertThat(tune.forKey(this.clock[0])).isEqualTo(own);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(2);
		// failing again: the back-off doubles
		this.redis.of(BucketScript.Mode.TUNE).get(1).completeExceptionally(new IllegalStateException("down"));
		this.clock[0] += 199 * MS;
		assertThat(tune.forKey(this.clock[0])).isEqualTo(own);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(2);
		this.clock[0] += MS;
		assertThat(tune.forKey(this.clock[0])).isEqualTo(own);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(3);
		// answered: the settings are fresh, and a call waits again once they are 800 ms old
		this.redis.of(BucketScript.Mode.TUNE).get(2).complete(replyOf(own));
		this.clock[0] += 800 * MS;
		assertThat(tune.forKey(this.clock[0])).isNull();
	}

	/**
	 * A read of the template's settings is a call to Redis: it is timed in {@code ratelimit.backend.calls}
	 * of the bucket, with the bucket's own calls and as the meters register them, by outcome (contract
	 * revision 2: a backend that degrades says so in a meter, not only in the log).
	 */
	@Test
	void theReadsOfTheTemplateAreTimedWithTheBucketsCallsByOutcome() throws Exception {
		long timeout = TimeUnit.MILLISECONDS.toNanos(50);
		TemplateTune tune = new TemplateTune("t", CONFIGURED, "ratelimit:{t}", this.connection, timeout,
				System::nanoTime);
		RedisTokenBucket template = RedisTokenBucket.builder()
			.name("t")
			.rate(10, Duration.ofSeconds(1))
			.limit(3)
			.timeout(Duration.ofNanos(timeout))
			.connection(this.connection)
			.tune(tune)
			.build();
		SimpleMeterRegistry meters = new SimpleMeterRegistry();
		template.onCall((outcome, nanos) -> Timer.builder("ratelimit.backend.calls")
			.tags("bucket", "t", "outcome", outcome.tag())
			.register(meters)
			.record(nanos, TimeUnit.NANOSECONDS));
		// answered
		CompletableFuture<Boolean> read = tune.read();
		this.redis.of(BucketScript.Mode.TUNE).get(0).complete(replyOf(settings(5, 2)));
		assertThat(read.get(30, TimeUnit.SECONDS)).isTrue();
		// an error reply
		read = tune.read();
		this.redis.of(BucketScript.Mode.TUNE).get(1)
			.completeExceptionally(new RedisCommandExecutionException("ERR something went wrong"));
		assertThat(read.get(30, TimeUnit.SECONDS)).isFalse();
		// no answer within the timeout (the fake never answers this one)
		read = tune.read();
		assertThat(read.get(30, TimeUnit.SECONDS)).isFalse();
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(3);
		assertThat(meters.get("ratelimit.backend.calls").tags("bucket", "t", "outcome", "ok").timer().count())
			.isEqualTo(1);
		assertThat(meters.get("ratelimit.backend.calls").tags("bucket", "t", "outcome", "error").timer().count())
			.isEqualTo(1);
		Timer timedOut = meters.get("ratelimit.backend.calls").tags("bucket", "t", "outcome", "timeout").timer();
		assertThat(timedOut.count()).isEqualTo(1);
		assertThat(timedOut.totalTime(TimeUnit.NANOSECONDS)).as("timed as the timeout").isEqualTo(timeout);
		// reads do not switch the bucket to its failure policy: they have a back-off of their own
		assertThat(template.isUp()).isTrue();
	}

	@Test
	void aKeysClaimWaitsForAStaleReadWithoutHoldingItsThread() throws Exception {
		TemplateTune tune = new TemplateTune("t", CONFIGURED, "ratelimit:{t}", this.connection,
				TimeUnit.HOURS.toNanos(1), System::nanoTime);
		RedisTokenBucket bucket = FakeScriptRedis.aliceOf(tune, this.connection).build();
		// never read: the claim must wait for the read, and reserve returns at once
		Reservation claim = bucket.reserve(1, Duration.ZERO);
		CountDownLatch woken = new CountDownLatch(1);
		claim.onWake(woken::countDown);
		assertThat(this.redis.of(BucketScript.Mode.TUNE)).hasSize(1);
		assertThat(this.redis.of(BucketScript.Mode.ACQUIRE)).isEmpty();
		assertThat(claim.poll()).isPositive();
		assertThat(this.redis.of(BucketScript.Mode.ACQUIRE)).isEmpty();
		Settings retuned = settings(1, 1);
		this.redis.of(BucketScript.Mode.TUNE).get(0).complete(replyOf(retuned));
		assertThat(woken.await(30, TimeUnit.SECONDS)).isTrue();
		assertThat(claim.poll()).isPositive(); // the acquire is out now, with the settings read
		assertThat(this.redis.of(BucketScript.Mode.ACQUIRE)).hasSize(1);
		String[] arguments = this.redis.arguments(BucketScript.Mode.ACQUIRE).get(0);
		assertThat(arguments[0]).isEqualTo(Long.toString(retuned.a()));
		assertThat(arguments[1]).isEqualTo(Long.toString(retuned.b()));
		assertThat(arguments[2]).isEqualTo(Long.toString(retuned.limit()));
		this.redis.of(BucketScript.Mode.ACQUIRE).get(0).complete(List.of(1L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L));
		assertThat(claim.poll()).isZero();
		claim.permit().close();
	}
}
