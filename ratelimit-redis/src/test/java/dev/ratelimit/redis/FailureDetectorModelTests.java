package dev.ratelimit.redis;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import dev.ratelimit.core.BackendHealth.Outcome;
import dev.ratelimit.redis.BucketScript.Reply;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.slf4j.LoggerFactory;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Model-based tests of {@link FailureDetector}: seeded random sequences of sends, replies, failures,
 * timeouts found by callers, late replies, discards and clock moves, on a fake clock, each step checked
 * against a reference state machine written from the class's rules 1-4 and the contract's Redis
 * section (the failure policy is for Redis being down, never for load; the way back is by itself).
 *
 * <p>Replay one sequence with {@code -Dmodel.seed=<seed>}; {@code -Dmodel.runs=<n>} changes how many
 * sequences a run tries (each failure prints its seed and its trace).
 */
class FailureDetectorModelTests {

	private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);

	/** Rule 1, and the contract's "several failed or timed-out calls in a row": the model's own number. */
	private static final int FAILURES_TO_TRIP = 4;

	private static final long MIN_BACKOFF = 100 * MS;

	private static final long MAX_BACKOFF = 5000 * MS;

	private final ListAppender<ILoggingEvent> log = new ListAppender<>();

	private final Logger logger = (Logger) LoggerFactory.getLogger(RedisTokenBucket.class);

	private Level level;

	@BeforeEach
	void captureLog() {
		this.level = this.logger.getLevel();
		this.logger.setLevel(Level.INFO);
		this.logger.setAdditive(false); // thousands of switches: kept here, not printed
		this.log.start();
		this.logger.addAppender(this.log);
	}

	@AfterEach
	void releaseLog() {
		this.logger.detachAppender(this.log);
		this.logger.setLevel(this.level);
		this.logger.setAdditive(true);
	}

	@Test
	void randomSequencesFollowTheModel() {
		Long fixed = Long.getLong("model.seed");
		int runs = (fixed != null) ? 1 : Integer.getInteger("model.runs", 10000);
		long base = (fixed != null) ? fixed : new SplittableRandom().nextLong();
		long steps = 0;
		long started = System.nanoTime();
		for (int i = 0; i < runs; i++) {
			long seed = base + i;
			Run run = new Run(seed);
			try {
				run.play();
			}
			catch (Throwable ex) {
				throw new AssertionError("Model run failed, replay with -Dmodel.seed=" + seed + "\n" + ex.getMessage()
						+ "\ntrace:\n" + String.join("\n", run.trace), ex);
			}
			steps += run.steps;
			this.log.list.clear();
		}
		System.out.printf("FailureDetector model: %d sequences, %d steps, %d ms (first seed %d)%n", runs, steps,
				TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - started), base);
	}

	/**
	 * Seed -8293211951852537118, by hand: a reply from a call sent before the trip puts the bucket back on
	 * Redis while the probe sent after a reconnect is still out; then an older call is found past its timeout,
	 * two calls fail at once and the probe fails, all at one reading of the clock. Those are four failed calls
	 * in a row (rule 1: each sent no earlier than the previous failure was seen), so the bucket switches to
	 * its policy again; the detector used to skip the switch because the fourth was a probe.
	 */
	@Test
	void aProbeThatFailsAfterAnOlderReplyBroughtTheBucketBackCountsTowardsTheNextSwitch() {
		long timeout = 100 * MS;
		long[] clock = { -4208956612763064654L };
		boolean[] reconnecting = { false };
		FailureDetector detector = new FailureDetector("probe-run", "LOCAL", timeout, () -> clock[0], (reply, sent) -> {
		}, new FailureDetector.Said(), false, () -> reconnecting[0]);
		// three calls fail at once, and three are sent that nothing answers yet
		for (int i = 0; i < FAILURES_TO_TRIP - 1; i++) {
			assertThat(detector.send(FailureDetectorModelTests::notConnected, null)).isNotNull();
		}
		CompletableFuture<List<Object>> timesOut = new CompletableFuture<>();
		CompletableFuture<List<Object>> lateTimeout = new CompletableFuture<>();
		CompletableFuture<List<Object>> answered = new CompletableFuture<>();
		FailureDetector.Call first = detector.send(() -> timesOut, null);
		FailureDetector.Call second = detector.send(() -> lateTimeout, null);
		assertThat(detector.send(() -> answered, null)).isNotNull();
		assertThat(detector.isUp()).isTrue();
		// the fourth failure in a row: a caller finds the first past its timeout
		clock[0] += 167 * MS;
		assertThat(first.isSettled(clock[0])).isTrue();
		assertThat(detector.isUp()).as("switched after %d failures", FAILURES_TO_TRIP).isFalse();
		assertThat(warns()).isEqualTo(1);
		// Lettuce reconnects: no probe meanwhile, then one at once
		clock[0] += 10 * MS;
		reconnecting[0] = true;
		assertThat(detector.send(() -> new CompletableFuture<>(), null)).isNull();
		clock[0] += 163 * MS;
		reconnecting[0] = false;
		CompletableFuture<List<Object>> probeFuture = new CompletableFuture<>();
		FailureDetector.Call probe = detector.send(() -> probeFuture, null);
		assertThat(probe).as("the probe after the reconnect").isNotNull();
		// the call sent before the switch, that nobody found past its timeout, is answered: back on Redis
		answered.complete(List.of(Reply.REFUSED, 0L, 1L, 0L, 0L, 0L, 0L, 0L, 0L, 0L));
		assertThat(detector.isUp()).isTrue();
		assertThat(infos()).isEqualTo(1);
		// a new run of failures at the same reading: a call failing, two more failing at once, then the probe (a
		// timeout found now would not count: Redis answered since that call was sent, revision 3)
		lateTimeout.completeExceptionally(new IllegalStateException("RedisConnectionException"));
		assertThat(second.isSettled(clock[0])).isTrue();
		assertThat(detector.send(FailureDetectorModelTests::notConnected, null)).isNotNull();
		assertThat(detector.send(FailureDetectorModelTests::notConnected, null)).isNotNull();
		assertThat(detector.isUp()).as("three failures in a row do not switch").isTrue();
		probeFuture.completeExceptionally(new IllegalStateException("RedisConnectionException"));
		assertThat(detector.isUp()).as("the probe's failure is the fourth in a row").isFalse();
		assertThat(warns()).isEqualTo(2);
		assertThat(this.log.list.get(this.log.list.size() - 1).getFormattedMessage())
			.contains("after " + FAILURES_TO_TRIP + " failed calls to Redis in a row");
		// the first back-off of a new switch, not the next one of the old
		assertThat(detector.remainingBackoffNanos()).isEqualTo(MIN_BACKOFF);
		assertThat(detector.send(() -> new CompletableFuture<>(), null)).as("in the back-off").isNull();
	}

	/**
	 * The other side of the seed above: the probe's failure counts once, like any failure. Alone after the
	 * answer that put the bucket back, it starts a run; it does not switch the bucket by itself.
	 */
	@Test
	void aProbeThatFailsAloneAfterAnOlderReplyBroughtTheBucketBackDoesNotSwitch() {
		long[] clock = { Long.MAX_VALUE - 50 * MS };
		FailureDetector detector = new FailureDetector("probe-alone", "LOCAL", 100 * MS, () -> clock[0],
				(reply, sent) -> {
				}, new FailureDetector.Said(), false, () -> false);
		CompletableFuture<List<Object>> answered = new CompletableFuture<>();
		assertThat(detector.send(() -> answered, null)).isNotNull();
		for (int i = 0; i < FAILURES_TO_TRIP; i++) {
			clock[0] += MS;
			assertThat(detector.send(FailureDetectorModelTests::notConnected, null)).isNotNull();
		}
		assertThat(detector.isUp()).isFalse();
		clock[0] += MIN_BACKOFF; // (wraps: nanoTime may)
		CompletableFuture<List<Object>> probeFuture = new CompletableFuture<>();
		assertThat(detector.send(() -> probeFuture, null)).as("the probe").isNotNull();
		answered.complete(List.of(Reply.GRANTED, 0L, 1L, 0L, 0L, 0L, 0L, 0L, 0L, 0L));
		assertThat(detector.isUp()).isTrue();
		probeFuture.completeExceptionally(new IllegalStateException("RedisConnectionException"));
		assertThat(detector.isUp()).as("one failure after an answer").isTrue();
		for (int i = 1; i < FAILURES_TO_TRIP - 1; i++) {
			clock[0] += MS;
			assertThat(detector.send(FailureDetectorModelTests::notConnected, null)).isNotNull();
		}
		assertThat(detector.isUp()).as("%d failures in a row", FAILURES_TO_TRIP - 1).isTrue();
		clock[0] += MS;
		assertThat(detector.send(FailureDetectorModelTests::notConnected, null)).isNotNull();
		assertThat(detector.isUp()).as("%d failures in a row", FAILURES_TO_TRIP).isFalse();
		assertThat(detector.remainingBackoffNanos()).isEqualTo(MIN_BACKOFF);
	}

	/**
	 * Revision 3, "never for load": calls that time out in the client's queue while Redis answers the calls
	 * ahead of them, however late, are load. A long run of them never switches the bucket; the same run with
	 * nothing answered at all does.
	 */
	@Test
	void repliesThatKeepArrivingLateNeverSwitchTheBucketAndSilenceDoes() {
		long[] clock = { 0 };
		FailureDetector loaded = new FailureDetector("late", "LOCAL", 100 * MS, () -> clock[0], (reply, sent) -> {
		});
		FailureDetector silent = new FailureDetector("silent", "LOCAL", 100 * MS, () -> clock[0], (reply, sent) -> {
		});
		List<CompletableFuture<List<Object>>> out = new ArrayList<>();
		for (int i = 0; i < 20; i++) {
			CompletableFuture<List<Object>> late = new CompletableFuture<>();
			FailureDetector.Call call = loaded.send(() -> late, null);
			FailureDetector.Call unanswered = silent.send(CompletableFuture::new, null);
			clock[0] += 150 * MS;
			assertThat(call.isSettled(clock[0])).isTrue(); // timed out in the queue
			if (unanswered != null) { // (null: in its back-off, once switched)
				unanswered.isSettled(clock[0]);
			}
			out.add(late);
			// the call ahead is answered at last: Redis answers, late
			out.get(i).complete(List.of(Reply.GRANTED, 0L, 1L, 0L, 0L, 0L, 0L, 0L, 0L, 0L));
			assertThat(loaded.isUp()).as("after %d calls answered late", i + 1).isTrue();
		}
		assertThat(silent.isUp()).as("after 20 calls nothing answered").isFalse();
		assertThat(warns()).isEqualTo(1);
	}

	/**
	 * The calls of one connection share what it heard: a call of one bucket that times out while another
	 * bucket's calls on the same connection are answered is load, and never counts.
	 */
	@Test
	void aTimeoutWhileAnotherBucketOnTheConnectionIsAnsweredDoesNotCount() {
		long[] clock = { 0 };
		FailureDetector.Answers answers = new FailureDetector.Answers();
		FailureDetector quiet = new FailureDetector("quiet", "LOCAL", 100 * MS, () -> clock[0], (reply, sent) -> {
		}, new FailureDetector.Said(), false, () -> false, answers);
		FailureDetector busy = new FailureDetector("busy", "LOCAL", 100 * MS, () -> clock[0], (reply, sent) -> {
		}, new FailureDetector.Said(), false, () -> false, answers);
		for (int i = 0; i < 10; i++) {
			FailureDetector.Call stuck = quiet.send(CompletableFuture::new, null);
			clock[0] += 50 * MS;
			busy.send(() -> CompletableFuture.completedFuture(List.of(Reply.REFUSED, 0L, 1L, 0L, 0L, 0L, 0L, 0L, 0L, 0L)),
					null);
			clock[0] += 60 * MS;
			assertThat(stuck.isSettled(clock[0])).isTrue();
		}
		assertThat(quiet.isUp()).isTrue();
		// the same without the other bucket's answers: a switch
		for (int i = 0; i < FAILURES_TO_TRIP; i++) {
			FailureDetector.Call stuck = quiet.send(CompletableFuture::new, null);
			clock[0] += 110 * MS;
			assertThat(stuck.isSettled(clock[0])).isTrue();
		}
		assertThat(quiet.isUp()).isFalse();
	}

	/**
	 * Revision 3: the detector is per bucket, keys included. Keys' detectors that fail once each count in the
	 * bucket's run together: the key whose failure completes it switches, every key after it switches at its
	 * first failure, and WARN is said once; an answer to any of them starts the bucket's run again. Before,
	 * each key counted only its own failures, and a bucket whose keys are called a few times each never
	 * switched.
	 */
	@Test
	void keysThatFailOnceEachSwitchTheirBucketTogether() {
		long[] clock = { 0 };
		FailureDetector.Said said = new FailureDetector.Said();
		List<FailureDetector> keys = new ArrayList<>();
		for (int i = 0; i < FAILURES_TO_TRIP + 2; i++) {
			keys.add(new FailureDetector("per-user", "LOCAL", 100 * MS, () -> clock[0], (reply, sent) -> {
			}, said, true));
		}
		FailureDetector answering = new FailureDetector("per-user", "LOCAL", 100 * MS, () -> clock[0], (reply, sent) -> {
		}, said, true);
		for (int i = 0; i < FAILURES_TO_TRIP - 1; i++) {
			keys.get(i).send(FailureDetectorModelTests::notConnected, null);
			clock[0] += MS;
			assertThat(keys.get(i).isUp()).as("key %d after one failure, the bucket's run at %d", i, i + 1).isTrue();
		}
		// an answer to another key of the bucket starts the run again
		answering.send(() -> CompletableFuture.completedFuture(List.of(Reply.GRANTED, 0L, 1L, 0L, 0L, 0L, 0L, 0L, 0L, 0L)),
				null);
		keys.get(FAILURES_TO_TRIP - 1).send(FailureDetectorModelTests::notConnected, null);
		clock[0] += MS;
		assertThat(keys.get(FAILURES_TO_TRIP - 1).isUp()).as("after an answer, the run at 1").isTrue();
		assertThat(said.error()).isNull();
		for (int i = 0; i < FAILURES_TO_TRIP - 1; i++) {
			keys.get(i).send(FailureDetectorModelTests::notConnected, null);
			clock[0] += MS;
		}
		assertThat(keys.get(FAILURES_TO_TRIP - 2).isUp()).as("the key that completed the bucket's run").isFalse();
		assertThat(said.error()).as("the bucket, said down").isNotNull();
		for (int i = FAILURES_TO_TRIP; i < keys.size(); i++) {
			keys.get(i).send(FailureDetectorModelTests::notConnected, null);
			clock[0] += MS;
			assertThat(keys.get(i).isUp()).as("key %d at its first failure", i).isFalse();
		}
		assertThat(warns()).isEqualTo(1);
	}

	private static CompletableFuture<List<Object>> notConnected() {
		throw new IllegalStateException("not connected");
	}

	private long warns() {
		return this.log.list.stream().filter((e) -> e.getLevel() == Level.WARN).count();
	}

	private long infos() {
		return this.log.list.stream().filter((e) -> e.getLevel() == Level.INFO).count();
	}

	enum Scenario {

		MIXED, LATE, SILENT

	}

	/** One call as the model sees it. */
	static final class ModelCall {

		final int id;

		final long sent;

		final boolean probe;

		final CompletableFuture<java.util.List<Object>> future;

		final FailureDetector.Call call;

		/** 0 pending, 1 ok, 2 failed. */
		int state;

		boolean futureDone;

		long code = -1;

		boolean validReply;

		boolean decided;

		boolean discarded;

		/** Whether the caller took the grant (it then never discards the call). */
		boolean taken;

		int givenBack;

		ModelCall(int id, long sent, boolean probe, CompletableFuture<List<Object>> future, FailureDetector.Call call) {
			this.id = id;
			this.sent = sent;
			this.probe = probe;
			this.future = future;
			this.call = call;
		}

		@Override
		public String toString() {
			return "#" + this.id + (this.probe ? "(probe)" : "");
		}

	}

	final class Run {

		final long seed;

		final SplittableRandom random;

		final List<String> trace = new ArrayList<>();

		final String bucket;

		final long timeout;

		final long[] clock = new long[1];

		final FailureDetector detector;

		final List<String> outcomes = new ArrayList<>();

		final List<String> replies = new ArrayList<>();

		final List<ModelCall> calls = new ArrayList<>();

		/** Calls whose give-back (late reply, or a discarded call's reply) ran, by id. */
		final List<Integer> givenBack = new ArrayList<>();

		int steps;

		// the reference state
		boolean down;

		long downUntil;

		int failures;

		long lastCounted;

		int failedProbes;

		boolean probing;

		/** Whether Lettuce is reconnecting the connection (the detector reads it; the test sets it). */
		volatile boolean reconnecting;

		/** The reference: whether a send found the connection being reconnected since the last probe. */
		boolean sawReconnecting;

		/** The reference: whether, and when last, Redis answered a call (in time or late). */
		boolean heard;

		long heardAt;

		/**
		 * What the sequence plays: {@code MIXED} anything; {@code LATE} Redis answers every call, but only
		 * after its timeout (replies keep arriving late: load, never a switch); {@code SILENT} the connection
		 * never answers (nothing but timeouts: a switch after {@value #FAILURES_TO_TRIP} in a row).
		 */
		final Scenario scenario;

		int warns;

		int infos;

		String lastError;

		final List<String> expectedOutcomes = new ArrayList<>();

		final List<String> expectedReplies = new ArrayList<>();

		// what the next command does
		int nextCommand;

		CompletableFuture<List<Object>> nextFuture;

		Run(long seed) {
			this.seed = seed;
			this.random = new SplittableRandom(seed);
			this.bucket = "model-" + seed;
			long[] timeouts = { MS, 10 * MS, 50 * MS, 100 * MS, 500 * MS, 2000 * MS };
			this.timeout = timeouts[this.random.nextInt(timeouts.length)];
			// nanoTime may be anywhere, and may wrap
			this.clock[0] = this.random.nextBoolean() ? this.random.nextLong()
					: Long.MAX_VALUE - this.random.nextLong(10_000 * MS);
			this.detector = new FailureDetector(this.bucket, "LOCAL", this.timeout, () -> this.clock[0],
					(reply, sent) -> this.replies.add(reply.code() + "@" + sent), new FailureDetector.Said(), false,
					() -> this.reconnecting);
			this.detector.addListener((outcome, nanos) -> this.outcomes.add(outcome + ":" + nanos));
			int pick = this.random.nextInt(10);
			this.scenario = (pick < 6) ? Scenario.MIXED : (pick < 8) ? Scenario.LATE : Scenario.SILENT;
			this.trace.add("timeout=" + this.timeout + "ns start=" + this.clock[0] + " scenario=" + this.scenario);
		}

		long now() {
			return this.clock[0];
		}

		void play() {
			int n = 20 + this.random.nextInt(200);
			for (this.steps = 0; this.steps < n; this.steps++) {
				step();
				check();
			}
		}

		List<ModelCall> where(java.util.function.Predicate<ModelCall> test) {
			List<ModelCall> found = new ArrayList<>();
			for (ModelCall c : this.calls) {
				if (test.test(c)) {
					found.add(c);
				}
			}
			return found;
		}

		ModelCall pick(List<ModelCall> from) {
			return from.get(this.random.nextInt(from.size()));
		}

		void step() {
			if (this.scenario != Scenario.MIXED) {
				stepOneWay();
				return;
			}
			int action = this.random.nextInt(106);
			if (action < 18) {
				advance();
			}
			else if (action < 38) {
				send();
			}
			else if (action < 52) {
				List<ModelCall> open = where((c) -> !c.futureDone);
				if (!open.isEmpty()) {
					reply(pick(open));
				}
			}
			else if (action < 60) {
				List<ModelCall> open = where((c) -> !c.futureDone);
				if (!open.isEmpty()) {
					fail(pick(open), "RedisConnectionException");
				}
			}
			else if (action < 78) {
				List<ModelCall> held = where((c) -> !c.discarded && c.state == 0);
				if (!held.isEmpty()) {
					checkSettled(pick(held));
				}
			}
			else if (action < 83) {
				List<ModelCall> held = where((c) -> !c.discarded
						&& (c.futureDone || c.state != 0 || now() - c.sent >= this.timeout));
				if (!held.isEmpty()) {
					await(pick(held));
				}
			}
			else if (action < 88) {
				// a caller gives up whenever it likes, unaware of a late reply given back already
				List<ModelCall> held = where((c) -> !c.discarded && !c.taken);
				if (!held.isEmpty()) {
					discard(pick(held));
				}
			}
			else if (action < 93) {
				List<ModelCall> held = where(
						(c) -> !c.discarded && c.state == 1 && c.code == Reply.GRANTED && !c.taken);
				if (!held.isEmpty()) {
					take(pick(held));
				}
			}
			else if (action < 97) {
				// a stall ends: Redis answers every call out, in the order they were sent
				this.trace.add("stall ends");
				for (ModelCall c : where((c) -> !c.futureDone)) {
					reply(c);
				}
			}
			else if (action >= 100) {
				// Lettuce starts or ends reconnecting the connection
				this.reconnecting = !this.reconnecting;
				this.trace.add(this.reconnecting ? "reconnecting" : "reconnected");
			}
			else {
				// the connection drops: every call out fails
				this.trace.add("connection drops");
				for (ModelCall c : where((c) -> !c.futureDone)) {
					fail(c, "RedisConnectionException");
				}
			}
		}

		/**
		 * A step of the {@code LATE} or {@code SILENT} sequences: callers send, the clock moves, callers find
		 * their calls past the timeout, and (only {@code LATE}) Redis answers the calls found so, oldest first.
		 */
		void stepOneWay() {
			int action = this.random.nextInt(100);
			if (action < 25) {
				advance();
			}
			else if (action < 55) {
				send();
			}
			else if (action < 80) {
				List<ModelCall> held = where((c) -> !c.discarded && c.state == 0);
				if (!held.isEmpty()) {
					ModelCall c = pick(held);
					if (this.scenario == Scenario.LATE && now() - c.sent >= this.timeout) {
						// replies keep arriving: one for an older call comes before this one is found late
						List<ModelCall> older = where((o) -> o != c && !o.futureDone && o.sent - c.sent <= 0);
						// (none older: it is answered itself, just in time)
						reply(older.isEmpty() ? c : older.get(0));
					}
					checkSettled(c);
				}
			}
			else if (action < 85) {
				List<ModelCall> held = where((c) -> !c.discarded && !c.taken);
				if (!held.isEmpty()) {
					discard(pick(held));
				}
			}
			else if (this.scenario == Scenario.LATE) {
				// replies keep arriving, each after its call timed out
				for (ModelCall c : where((c) -> !c.futureDone && c.state != 0)) {
					reply(c);
				}
			}
			if (this.scenario == Scenario.LATE) {
				assertThat(this.detector.isUp()).as("up while replies keep arriving, however late").isTrue();
			}
		}

		void advance() {
			long by = switch (this.random.nextInt(6)) {
				case 0 -> 0;
				case 1 -> 1;
				case 2 -> this.random.nextLong(this.timeout / 4 + 1);
				case 3 -> this.timeout - 1 + this.random.nextInt(3);
				case 4 -> this.random.nextLong(2 * this.timeout + 1);
				default -> (this.random.nextBoolean() || !this.down) ? this.random.nextLong(6000 * MS)
						: Math.max(this.downUntil - now(), 0) + this.random.nextInt(3) - 1;
			};
			by = Math.max(by, 0);
			this.clock[0] += by;
			this.trace.add("advance " + by + " -> " + now());
		}

		void send() {
			// one-way sequences send only calls that the connection takes (no error)
			int kind = (this.scenario == Scenario.MIXED) ? this.random.nextInt(100) : 7 + this.random.nextInt(93);
			long now = now();
			// the reference: in a back-off, nothing is sent; after it, exactly one probe at a time
			boolean expectSent;
			boolean probe = false;
			if (this.down && this.probing) {
				// a probe past its timeout is failed by the send (its caller may have gone away)
				for (ModelCall c : this.calls) {
					if (c.probe && c.state == 0 && now - c.sent >= this.timeout) {
						this.trace.add("  (send times out " + c + ")");
						timedOut(c);
					}
				}
			}
			if (this.down && this.reconnecting) {
				// no probe while Lettuce reconnects: it would wait in its buffer and time out
				expectSent = false;
				this.sawReconnecting = true;
			}
			else if (this.down) {
				if (this.sawReconnecting) {
					// reopened: the first send probes at once, whatever the back-off
					this.sawReconnecting = false;
					this.downUntil = now;
				}
				expectSent = now - this.downUntil >= 0 && !this.probing;
				probe = expectSent;
			}
			else {
				expectSent = true;
			}
			this.nextFuture = new CompletableFuture<>();
			int[] commands = { 0 };
			int id = this.calls.size();
			FailureDetector.Call call = this.detector.send(() -> {
				commands[0]++;
				if (kind < 4) {
					throw new IllegalStateException("not connected");
				}
				if (kind < 7) {
					return CompletableFuture.failedFuture(new IllegalStateException("closed"));
				}
				return this.nextFuture;
			}, (reply) -> this.givenBack.add(id));
			this.trace.add("send -> " + ((call != null) ? "#" + id + (probe ? " probe" : "") : "null") + " kind=" + kind);
			assertThat(call != null).as("send returned a call (down=%s, downUntil=%s, probing=%s, now=%s)", this.down,
					this.downUntil, this.probing, now).isEqualTo(expectSent);
			assertThat(commands[0]).as("commands run by send").isEqualTo(expectSent ? 1 : 0);
			if (call == null) {
				return;
			}
			if (probe) {
				this.probing = true;
			}
			ModelCall c = new ModelCall(id, now, probe, (kind < 7) ? null : this.nextFuture, call);
			this.calls.add(c);
			if (kind < 4) {
				c.futureDone = true;
				failed(c, Outcome.ERROR, "IllegalStateException: not connected");
			}
			else if (kind < 7) {
				c.futureDone = true;
				failed(c, Outcome.ERROR, "IllegalStateException: closed");
			}
		}

		void reply(ModelCall c) {
			int kind = this.random.nextInt(100);
			long code = (kind < 50) ? Reply.GRANTED : (kind < 75) ? Reply.REFUSED : Reply.AWAITING_RELEASE;
			boolean valid = kind < 97 || this.scenario == Scenario.LATE;
			this.trace.add("reply " + c + (valid ? " code=" + code : " invalid"));
			List<Object> values = valid ? List.of(code, 0L, 1L, 0L, 0L, 0L, 0L, 0L, 0L, 0L) : List.of("junk");
			c.futureDone = true;
			c.code = valid ? code : -1;
			c.validReply = valid;
			// the reference, before completing: the completion runs the class at once
			if (!valid) {
				if (c.state == 0) {
					failed(c, Outcome.ERROR, null);
				}
			}
			else {
				this.expectedReplies.add(code + "@" + c.sent);
				// Redis answered: a timeout of a call sent before now is load, not silence (rule 1)
				this.heard = true;
				this.heardAt = now();
				if (c.state == 0) {
					c.state = 1;
					succeeded(c);
					if (c.discarded) {
						giveBack(c);
					}
				}
				else {
					this.failures = 0; // a late reply starts the run again (rule 1)
					giveBack(c);
				}
			}
			c.future.complete(values);
		}

		void fail(ModelCall c, String error) {
			this.trace.add("fail " + c);
			c.futureDone = true;
			if (c.state == 0) {
				failed(c, Outcome.ERROR, "IllegalStateException: " + error);
			}
			c.future.completeExceptionally(new IllegalStateException(error));
		}

		void checkSettled(ModelCall c) {
			long now = now();
			boolean expect = c.state != 0 || now - c.sent >= this.timeout;
			this.trace.add("isSettled " + c + " -> expect " + expect);
			if (c.state == 0 && expect) {
				timedOut(c);
			}
			assertThat(c.call.isSettled(now)).as("isSettled of %s", c).isEqualTo(expect);
		}

		void await(ModelCall c) {
			this.trace.add("await " + c);
			if (c.state == 0) {
				timedOut(c);
			}
			Reply reply = c.call.awaitUninterruptibly();
			assertThat(reply != null).as("await of %s has a reply", c).isEqualTo(c.state == 1);
			if (reply != null) {
				assertThat(reply.code()).isEqualTo(c.code);
			}
		}

		void discard(ModelCall c) {
			this.trace.add("discard " + c);
			c.discarded = true;
			if (c.futureDone && c.validReply) {
				giveBack(c);
			}
			c.call.discard();
		}

		void take(ModelCall c) {
			this.trace.add("take " + c);
			boolean expect = !c.decided;
			c.decided = true;
			c.taken = true;
			assertThat(c.call.take()).as("take of %s", c).isEqualTo(expect);
		}

		void giveBack(ModelCall c) {
			if ((c.code == Reply.GRANTED || c.code == Reply.AWAITING_RELEASE) && !c.decided) {
				c.decided = true;
				c.givenBack++;
			}
		}

		void timedOut(ModelCall c) {
			// the class names the timeout by the duration; only the outcome matters here. It counts only when
			// nothing was answered since the call was sent (rule 1)
			boolean silence = !(this.heard && this.heardAt - c.sent > 0);
			failed(c, Outcome.TIMEOUT, null, silence);
		}

		void succeeded(ModelCall c) {
			this.failures = 0;
			if (c.probe) {
				this.probing = false;
			}
			if (this.down) {
				this.down = false;
				this.infos++;
			}
			this.lastError = null;
			this.expectedOutcomes.add(Outcome.OK + ":" + (now() - c.sent));
		}

		void failed(ModelCall c, Outcome outcome, String error) {
			failed(c, outcome, error, true);
		}

		void failed(ModelCall c, Outcome outcome, String error, boolean silence) {
			long now = now();
			c.state = 2;
			this.lastError = error;
			// in a row: sent after the last counted failure was seen
			boolean counts = silence && (this.failures == 0 || c.sent - this.lastCounted >= 0);
			if (counts) {
				this.failures++;
				this.lastCounted = now;
			}
			if (c.probe) {
				this.probing = false;
				if (this.down) {
					this.failedProbes++;
					long backoff = MIN_BACKOFF;
					for (int i = 0; i < this.failedProbes; i++) {
						backoff = Math.min(backoff * 2, MAX_BACKOFF);
					}
					this.downUntil = now + backoff;
				}
			}
			if (!this.down && counts && this.failures >= FAILURES_TO_TRIP) {
				this.down = true;
				this.failedProbes = 0;
				this.sawReconnecting = false;
				this.downUntil = now + MIN_BACKOFF;
				this.warns++;
				this.trace.add("  (model trips)");
			}
			this.expectedOutcomes
				.add(outcome + ":" + ((outcome == Outcome.TIMEOUT) ? this.timeout : now - c.sent));
		}

		void check() {
			assertThat(this.outcomes).as("outcomes recorded (ok/timeout/error, nanos)")
				.isEqualTo(this.expectedOutcomes);
			assertThat(this.replies).as("replies told to the bucket").isEqualTo(this.expectedReplies);
			assertThat(this.detector.isUp()).as("up gauge").isEqualTo(!this.down);
			if (this.down) {
				assertThat(this.detector.remainingBackoffNanos()).as("remaining back-off")
					.isEqualTo(Math.max(this.downUntil - now(), 1));
			}
			for (ModelCall c : this.calls) {
				long given = this.givenBack.stream().filter((id) -> id == c.id).count();
				assertThat(given).as("give-backs of %s", c).isEqualTo(c.givenBack);
			}
			int warn = 0;
			int info = 0;
			for (ILoggingEvent event : FailureDetectorModelTests.this.log.list) {
				if (!event.getFormattedMessage().contains("'" + this.bucket + "'")) {
					continue;
				}
				if (event.getLevel() == Level.WARN) {
					warn++;
					assertThat(event.getFormattedMessage()).contains("local").contains("in a row");
				}
				else if (event.getLevel() == Level.INFO) {
					info++;
					assertThat(event.getFormattedMessage()).contains("back on Redis");
				}
			}
			assertThat(warn).as("WARN switches to the policy").isEqualTo(this.warns);
			assertThat(info).as("INFO switches back").isEqualTo(this.infos);
		}

	}

}
