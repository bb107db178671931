package dev.ratelimit.redis;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

import dev.ratelimit.spring.client.ServerGate;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The Redis gate ({@code gate.lua} through {@link RedisServerGate}, on a real Redis) agrees with the
 * starter's local {@link ServerGate} step by step: seeded random sequences of calls passing with costs (and
 * passes taken back), pauses, lowerings answering earlier calls, and clock moves, on a clock of the test's
 * own (the script's clock argument, in place of Redis's {@code TIME}). After every step the level and the
 * wait of calls of cost 0 to 3 are the same, and every call's mark is the local one offset by the hash's
 * start. The local gate is checked against an exact reference by {@code ServerGateModelTests}; the design
 * notes' guarantees hold in Redis as they hold there, and each is checked here on what is stored too:
 * G1 (the stored lowerings sorted by reset with increasing caps), G2 (a lowering never raises: the level
 * after an answer is never above the level before it, at the same instant), G3 (past its reset a step
 * decides nothing: the waits agree), G4 (at most {@link RedisServerGate#MAX_STEPS} stored), G5 (several
 * calls out at once, answered in any order or ending without an answer: an answer subtracts the calls out
 * that passed before the answered one, in Redis as in the local gate).
 *
 * <p>{@code -Dmodel.seed=<seed>} replays one sequence; {@code -Dmodel.sequences=<count>} sets how many a
 * run draws (60 by default: each step is a few round trips to Redis).
 */
class RedisGateModelTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();

	private static final long SECOND = 1_000_000_000L;

	private static final int STEPS = 200;

	private static ScriptConnection connection;

	@BeforeAll
	static void connect() {
		connection = ScriptConnection.of(redis.connectionFactory(Duration.ofSeconds(5)));
	}

	@AfterAll
	static void close() {
		connection.close();
	}

	@Test
	void theRedisGateAgreesWithTheLocalGate() {
		Long replay = Long.getLong("model.seed");
		if (replay != null) {
			runSequence(replay);
			return;
		}
		int sequences = Integer.getInteger("model.sequences", 60);
		long start = Long.getLong("model.start", new Random().nextLong());
		long began = System.nanoTime();
		for (int i = 0; i < sequences; i++) {
			runSequence(start + i);
		}
		System.out.printf("RedisGateModelTests: %d sequences (seeds %d..%d), %d ms%n", sequences, start,
				start + sequences - 1, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - began));
	}

	/**
	 * G4: more lowerings in force than a gate keeps apart (each with a higher cap and a later reset, so
	 * none dominates another): the two earliest become one, in Redis as in the local gate, and the waits
	 * agree as the resets pass.
	 */
	@Test
	void moreLoweringsThanAGateKeepsMergeAsTheLocalGateMergesThem() {
		long[] clock = { 7 * SECOND };
		String key = RedisServerGate.key("model:", "many-lowerings", null);
		redis.admin().del(key);
		RedisServerGate stored = new RedisServerGate(connection, key, "model", Duration.ofSeconds(5),
				() -> clock[0] / 1000, TimeUnit.HOURS.toMicros(1));
		ServerGate local = new ServerGate();
		long offset = stored.tryPass(1) - local.tryPass(1, clock[0]);
		int lowerings = RedisServerGate.MAX_STEPS + 4;
		for (int i = 1; i <= lowerings; i++) {
			local.lower(i, 1, clock[0] + i * SECOND, clock[0]);
			stored.lower(i, 1 + offset, i * SECOND);
		}
		assertThat(redis.admin().hget(key, "l").split(";")).as("G4: stored steps").hasSize(RedisServerGate.MAX_STEPS);
		for (int second = 0; second <= lowerings; second++) {
			assertThat(stored.level()).as("level at +%d s", second).isEqualTo(local.level(clock[0]));
			for (long cost = 0; cost < 25; cost += 3) {
				assertThat(stored.delay(cost)).as("delay of %d at +%d s", cost, second).isEqualTo(local.delay(cost, clock[0]));
			}
			clock[0] += SECOND;
		}
		redis.admin().del(key);
	}

	private void runSequence(long seed) {
		List<String> trace = new ArrayList<>();
		try {
			sequence(seed, trace);
		}
		catch (AssertionError | RuntimeException ex) {
			throw new AssertionError("Model sequence failed, seed " + seed + " (replay with -Dmodel.seed=" + seed
					+ ")\n" + String.join("\n", trace), ex);
		}
	}

	private void sequence(long seed, List<String> trace) {
		SplittableRandom random = new SplittableRandom(seed);
		long[] clock = { 5 * SECOND + random.nextLong(1_000_000) * 1000 }; // whole microseconds
		String key = RedisServerGate.key("model:", "gate-" + seed, random.nextBoolean() ? null : "k");
		redis.admin().del(key);
		// kept an hour after each write: real time never expires the hash while the test's clock runs
		RedisServerGate stored = new RedisServerGate(connection, key, "model", Duration.ofSeconds(5),
				() -> clock[0] / 1000, TimeUnit.HOURS.toMicros(1));
		ServerGate local = new ServerGate();
		List<long[]> out = new ArrayList<>(); // the calls out: {local mark, stored mark, cost}
		Long offset = null;
		try {
			for (int step = 0; step < STEPS; step++) {
				long now = clock[0];
				int op = random.nextInt(10);
				if (op < 2) {
					long by = random.nextBoolean() ? random.nextLong(3_000_000) * 1000 : random.nextInt(3) * SECOND;
					clock[0] += by;
					trace.add("clock +" + by);
				}
				else if (op < 5) {
					long cost = random.nextInt(3);
					long expected = local.tryPass(cost, now);
					long mark = stored.tryPass(cost);
					trace.add("pass " + cost + " -> local " + expected + ", stored " + mark);
					if (expected < 0) {
						assertThat(mark).as("held back").isEqualTo(-1);
					}
					else {
						assertThat(mark).as("passed").isNotNegative();
						if (offset == null) {
							offset = mark - expected;
						}
						assertThat(mark - offset).as("mark").isEqualTo(expected);
						if (random.nextInt(5) == 0) {
							local.unpass(expected, cost);
							stored.unpass(mark, cost);
							trace.add("unpass " + cost);
						}
						else {
							out.add(new long[] { expected, mark, cost });
						}
					}
				}
				else if (op < 7) {
					long pause = (random.nextInt(4) == 0) ? 0 : random.nextInt(30) * SECOND + random.nextLong(1000) * 1000;
					trace.add("pause " + pause);
					local.pause(now + pause, now);
					stored.pause(pause);
				}
				else if (op == 7 && !out.isEmpty() && random.nextBoolean()) { // a call ends without an answer
					long[] call = out.remove(random.nextInt(out.size()));
					trace.add("done " + call[0] + " / " + call[1]);
					local.done(call[0], call[2], now);
					stored.done(call[1], call[2]);
				}
				else {
					// any call out may be answered first; with none out, an answer to the hash's start
					long[] mark = out.isEmpty() ? new long[] { 0, 0, 0 } : out.get(random.nextInt(out.size()));
					long remaining = random.nextInt(6);
					long reset = random.nextInt(30) * SECOND + (random.nextBoolean() ? random.nextLong(1000) * 1000 : 0);
					trace.add("lower to " + remaining + " for " + reset + " answering " + mark[0] + " / " + mark[1]);
					long before = local.level(now);
					local.lower(remaining, mark[0], now + reset, now);
					stored.lower(remaining, mark[1], reset);
					assertThat(stored.level()).as("G2: a lowering never raises").isLessThanOrEqualTo(before);
					assertStoredSteps(key, trace);
					if (out.remove(mark)) {
						local.done(mark[0], mark[2], now);
						stored.done(mark[1], mark[2]);
					}
				}
				long at = clock[0];
				assertThat(stored.level()).as("level").isEqualTo(local.level(at));
				for (long cost = 0; cost < 4; cost++) {
					assertThat(stored.delay(cost)).as("delay of cost " + cost).isEqualTo(local.delay(cost, at));
				}
			}
		}
		finally {
			redis.admin().del(key);
		}
	}

	/**
	 * G1 and G4 on what is stored: sorted by reset, caps increasing, at most MAX_STEPS (steps past their
	 * reset may stay stored until the next write: the script reads past them, G3).
	 */
	private static void assertStoredSteps(String key, List<String> trace) {
		String stored = redis.admin().hget(key, "l");
		trace.add("  stored " + stored);
		if (stored == null || stored.isEmpty()) {
			return;
		}
		String[] steps = stored.split(";");
		assertThat(steps.length).as("G4: stored steps").isLessThanOrEqualTo(RedisServerGate.MAX_STEPS);
		long lastCap = Long.MIN_VALUE;
		long lastReset = Long.MIN_VALUE;
		for (String step : steps) {
			long cap = Long.parseLong(step.substring(0, step.indexOf(',')));
			long reset = Long.parseLong(step.substring(step.indexOf(',') + 1));
			assertThat(reset).as("G1: resets strictly increasing").isGreaterThan(lastReset);
			assertThat(cap).as("G1: caps strictly increasing").isGreaterThan(lastCap);
			lastCap = cap;
			lastReset = reset;
		}
	}
}
