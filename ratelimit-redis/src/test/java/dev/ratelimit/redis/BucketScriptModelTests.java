package dev.ratelimit.redis;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisFuture;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The arithmetic of {@code bucket.lua}, checked step by step against an exact reference written here,
 * on a real Redis and a fake clock.
 *
 * <p>The script's only clock is {@code redis.call('TIME')}. The tests run a copy of it in which the two
 * lines that read {@code TIME} and compute {@code now} are replaced by {@code local now =
 * tonumber(ARGV[15])} (the position after the documented arguments); every other line is the script
 * as shipped, and the tests check that exactly this replacement was made, so that they break when the
 * script changes shape.
 *
 * <p>Each sequence, on a key of its own ({@code model:{<seed>}}), draws a bucket (rate as {@code A}
 * tokens per {@code B} microseconds, limit, uncapped or capped with a lease) and then a random run of
 * time moves (none, 1 us, fractions of a token's interval, whole intervals, hours, and now and then
 * backwards), calls in every mode ({@code acquire}, {@code refund} with and without a lease,
 * {@code charge}, {@code release}, {@code leave}, {@code sync}, {@code peek}, {@code retune}, {@code reset}) and
 * restarts with another configuration. After every call it compares the whole reply and the stored
 * state (the hash's fields, the retune, the leases and the queue with their scores, and the keys' time
 * to live within a second) with {@link Model}, which keeps the bucket as a content of
 * {@code level + remainder / B} tokens in {@link BigInteger}s: replenished at {@code A} units of
 * {@code 1/B} per microsecond up to the limit, never above the limit, waits rounded up to whole
 * microseconds, a refusal changes nothing, leases give their tokens back when they run out, and a
 * clock that steps back credits nothing.
 *
 * <p>A failure prints the seed and the trace of the sequence. Replay one sequence with
 * {@code -Dmodel.seed=<seed>}; {@code -Dmodel.sequences=<count>} sets how many sequences a run draws
 * (default 2000, of 10 to 49 calls) and {@code -Dmodel.start=<seed>} where they start (default: random). The last tests
 * break the copy of the script on purpose and check that the model notices.
 */
class BucketScriptModelTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();

	private static final String RESOURCE = "dev/ratelimit/redis/bucket.lua";

	/** The two lines of the script that read Redis's clock. */
	private static final String CLOCK = "local clock = redis.call('TIME')\n"
			+ "local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])\n";

	/** What the test copy reads instead: the time the test gives, after the documented arguments. */
	private static final String FAKE_CLOCK = "local now = tonumber(ARGV[15])\n";

	/** Everything the script writes, in one round trip, read after each call. */
	private static final String DUMP = "return {redis.call('HGETALL', KEYS[1]), redis.call('HGETALL', KEYS[2]),"
			+ " redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES'), redis.call('ZRANGE', KEYS[4], 0, -1, 'WITHSCORES'),"
			+ " redis.call('PTTL', KEYS[1]), redis.call('PTTL', KEYS[3]), redis.call('PTTL', KEYS[4])}";

	/** How far a key's time to live (real milliseconds) may have run down since the script set it. */
	private static final long TTL_SLACK_MS = 1000;

	private static final long MAX_EXACT = 1L << 50;

	private static final long HOUR = 3_600_000_000L;

	private static RedisClient client;

	private static StatefulRedisConnection<String, String> connection;

	private static String dumpSha;

	@BeforeAll
	static void connect() {
		client = RedisClient.create("redis://127.0.0.1:" + redis.port());
		connection = client.connect();
		dumpSha = connection.sync().scriptLoad(DUMP);
	}

	@AfterAll
	static void disconnect() {
		connection.close();
		client.shutdown();
	}

	@Test
	void theTestCopyDiffersFromTheScriptOnlyInItsClock() {
		String source = source();
		assertThat(source).isEqualTo(BucketScript.SOURCE);
		String copy = testCopy(source);
		List<String> lines = new ArrayList<>(source.lines().toList());
		int at = lines.indexOf(CLOCK.lines().findFirst().orElseThrow());
		assertThat(at).isPositive();
		assertThat(lines.subList(at, at + 2)).isEqualTo(CLOCK.lines().toList());
		lines.subList(at, at + 2).clear();
		lines.add(at, FAKE_CLOCK.strip());
		assertThat(copy.lines().toList()).isEqualTo(lines);
		assertThat(copy).doesNotContain("redis.call('TIME')");
		assertThat(copy.split("ARGV\\[15\\]", -1)).hasSize(2);
		assertThat(source.split("redis.call\\('TIME'\\)", -1)).hasSize(2);
		assertThat(source).doesNotContain("ARGV[15]");
	}

	@Test
	void everyReplyAndTheStoredStateFollowTheReference() {
		String sha = load(testCopy(source()));
		Long replay = Long.getLong("model.seed");
		if (replay != null) {
			runSequence(sha, replay, true);
			return;
		}
		int sequences = Integer.getInteger("model.sequences", 2000);
		long start = Long.getLong("model.start", new Random().nextLong());
		long began = System.nanoTime();
		long steps = 0;
		for (int i = 0; i < sequences; i++) {
			steps += runSequence(sha, start + i, false);
		}
		System.out.printf("BucketScriptModelTests: %d sequences (seeds %d..%d), %d calls, %d ms%n", sequences, start,
				start + sequences - 1, steps, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - began));
	}

	/**
	 * The buckets of a template's keys across retunes of the template ({@link #runKeyedSequence}):
	 * {@code -Dmodel.keyed.seed=<seed>} replays one sequence; {@code -Dmodel.sequences} and
	 * {@code -Dmodel.start} as above.
	 */
	@Test
	void theBucketsOfKeysFollowTheReferenceAcrossRetunesOfTheirTemplate() {
		String sha = load(testCopy(source()));
		Long replay = Long.getLong("model.keyed.seed");
		if (replay != null) {
			runKeyedSequence(sha, replay, true);
			return;
		}
		int sequences = Integer.getInteger("model.sequences", 2000);
		long start = Long.getLong("model.start", new Random().nextLong());
		long began = System.nanoTime();
		long steps = 0;
		for (int i = 0; i < sequences; i++) {
			steps += runKeyedSequence(sha, start + i, false);
		}
		System.out.printf("BucketScriptModelTests (keyed): %d sequences (seeds %d..%d), %d calls, %d ms%n", sequences,
				start, start + sequences - 1, steps, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - began));
	}

	/**
	 * Batches (contract revision 3, {@link #runBatchSequence}): {@code -Dmodel.batch.seed=<seed>} replays one
	 * sequence; {@code -Dmodel.sequences} and {@code -Dmodel.start} as above.
	 */
	@Test
	void batchesOfSeveralInstancesFollowTheReferenceAndKeepTheBound() {
		String sha = load(testCopy(source()));
		Long replay = Long.getLong("model.batch.seed");
		if (replay != null) {
			runBatchSequence(sha, replay, true);
			return;
		}
		int sequences = Integer.getInteger("model.sequences", 2000);
		long start = Long.getLong("model.start", new Random().nextLong());
		long began = System.nanoTime();
		long steps = 0;
		for (int i = 0; i < sequences; i++) {
			steps += runBatchSequence(sha, start + i, false);
		}
		System.out.printf("BucketScriptModelTests (batches): %d sequences (seeds %d..%d), %d calls, %d ms%n", sequences,
				start, start + sequences - 1, steps, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - began));
	}

	/**
	 * Sequences that found defects, run on every build. The batch sequence: a retune to a faster rate while a
	 * caller waited paid its debt sooner than its wait, and a later caller was granted 96 ms after it where the
	 * new rate allowed one token in 143 ms (bucket.lua carries a debt by time since). The other two: the debt
	 * carried by time from a very slow rate to a very fast one left the exact range of a double (capped at 2^50
	 * credit units since).
	 */
	@Test
	void theSequencesThatFoundDefectsFollowTheReference() {
		String sha = load(testCopy(source()));
		runBatchSequence(sha, 1031765914237061259L, false);
		runSequence(sha, 2002081046322332787L, false);
		runKeyedSequence(sha, -7122385123874672759L, false);
	}

	/**
	 * The model notices a script broken on purpose: each row replaces one piece of the test copy, and the
	 * sequences of seeds 0 to 1999 must find it (fixed seeds, so that the outcome is the same on every run).
	 */
	@ParameterizedTest(name = "{0}")
	@CsvSource(delimiter = '|', quoteCharacter = '"', textBlock = """
			replenish rounds up             | local add = math.floor(units / b)             | local add = math.ceil(units / b)
			wait rounds down                | wait = math.ceil(((0 - level) * B - rem) / A) | wait = math.floor(((0 - level) * B - rem) / A)
			refund over the limit           | level = level + n\\n  if level >= limit - held then | level = level + n\\n  if false then
			remainder kept at the limit     | if level >= limit - held then\\n  level = limit - held\\n  rem = 0\\nend | if level > limit - held then\\n  level = limit - held\\n  rem = 0\\nend
			peek counts dead leases in flight | if capped then\\n  -- leases that ran out | if capped and writes then\\n  -- leases that ran out
			refusal at the max-wait         | if wait > maxwait or                          | if wait >= maxwait or
			clock back stalls               | elseif elapsed < 0 then                       | elseif false then
			remainder kept in other units   | elseif wb ~= B then                           | elseif false then
			retune keeps the remainder      | elseif b1 ~= B then                           | elseif false then
			a debt paid sooner at a faster rate | level, rem = carry_debt(level, rem, wa, wb) | rem = 0
			a retune pays a debt sooner     | level, rem = carry_debt(level, rem, a1, b1)   | rem = 0
			a carried debt rounded down     | local due = math.ceil(((0 - level) * b - rem) / a) | local due = math.floor(((0 - level) * b - rem) / a)
			full at one interval too soon   | elseif elapsed >= math.ceil(need / a) then    | elseif elapsed >= math.floor(need / a) then
			a retune counts from the last write | local switched = math.min(math.max(last, since), now) | local switched = last
			a retune counts from now        | local switched = math.min(math.max(last, since), now) | local switched = now
			a write after the retune ignored | local switched = math.min(math.max(last, since), now) | local switched = math.min(since, now)
			old settings above their limit  | if level >= wlimit - held then\\n      level = wlimit - held | if false then\\n      level = wlimit - held
			overflow without the retune's time | since = tonumber(tune[7]) or 0             | since = 0
			key without the retune's time   | since = tonumber(ARGV[10]) or 0               | since = 0
			lease without the wait          | redis.call('ZADD', leases, now + wait + lease, id) | redis.call('ZADD', leases, now + lease, id)
			lease runs out a microsecond late | redis.call('ZRANGEBYSCORE', leases, '-inf', now) | redis.call('ZRANGEBYSCORE', leases, '-inf', now - 1)
			queue jumped                    | if capped and ((head and head ~= id) or inflight + n > limit) then | if capped and (inflight + n > limit) then
			charge forgotten                | never in flight\\n  level = level - n         | never in flight\\n  level = level
			batch refills over held tokens | level, rem = replenish(level, rem, elapsed, A, B, limit - held) | level, rem = replenish(level, rem, elapsed, A, B, limit)
			batch ran out from its last call | if at > last then                           | if false then
			batch keeps what it did not hold | local kept = math.min(tonumber(keep), had - back) | local kept = tonumber(keep)
			batch gives back what it did not hold | local back = math.min(maxwait, had)     | local back = maxwait
			debt while batches hold tokens  | if wait > maxwait or (held > 0 and wait > 0) then | if wait > maxwait then
			""")
	void theModelCatchesABrokenScript(String name, String from, String to) {
		String copy = testCopy(source());
		String target = from.replace("\\n", "\n");
		String replacement = to.replace("\\n", "\n");
		assertThat(copy.split(java.util.regex.Pattern.quote(target), -1)).as("occurrences of " + target).hasSize(2);
		String sha = load(copy.replace(target, replacement));
		// fixed seeds: whether the model catches a given break must not depend on the run
		long start = 0;
		assertThatThrownBy(() -> {
			for (int i = 0; i < 2000; i++) {
				runSequence(sha, start + i, false);
				runKeyedSequence(sha, start + i, false);
				runBatchSequence(sha, start + i, false);
			}
		}).isInstanceOf(AssertionError.class).hasMessageContaining("-Dmodel.seed=");
	}

	// ---- the sequences

	/** Runs one sequence; returns its number of calls. */
	private static int runSequence(String sha, long seed, boolean verbose) {
		Random random = new Random(seed);
		List<String> trace = new ArrayList<>();
		String key = "model:{" + seed + "}";
		String[] keys = { key, key + ":retuned", key + ":leases", key + ":queue" };
		boolean capped = random.nextBoolean();
		long[] rate = rate(random);
		long limit = limit(random, rate[1]);
		long lease = 1 + (long) (random.nextDouble() * 4 * interval(rate));
		Model model = new Model(rate[0], rate[1], limit, capped, lease);
		long now = 1_700_000_000_000_000L + random.nextInt(1_000_000_000);
		trace.add("bucket A=" + rate[0] + " B=" + rate[1] + " limit=" + limit + (capped ? " capped lease=" + lease : "")
				+ " key=" + key);
		int steps = 10 + random.nextInt(40);
		int calls = 0;
		int claims = 0;
		List<String> claimed = new ArrayList<>();
		try {
			for (int step = 0; step < steps; step++) {
				long move = move(random, model.interval());
				if (move != 0) {
					now += move;
					trace.add("time " + (move > 0 ? "+" : "") + move + " us");
				}
				if (random.nextInt(40) == 0) {
					long[] next = random.nextBoolean() ? model.original : rate(random);
					long nextLimit = random.nextBoolean() && next == model.original ? model.original[2]
							: limit(random, next[1]);
					model.restart(next[0], next[1], nextLimit);
					trace.add("restart with A=" + next[0] + " B=" + next[1] + " limit=" + nextLimit);
				}
				Call call = call(random, model, claims, claimed);
				if (call.mode.equals("acquire") && !call.id.isEmpty() && !model.queue.containsKey(call.id)) {
					claims++;
					claimed.add(call.id);
				}
				long[] expected = model.step(call, now);
				// the call and the read of what it stored, pipelined on one connection: one round trip
				RedisFuture<List<Object>> replied = eval(sha, keys, model, call, now);
				RedisFuture<List<Object>> stored = dump(keys);
				List<Object> reply = await(replied);
				calls++;
				trace.add(call + " -> " + reply);
				long[] actual = new long[reply.size()];
				for (int i = 0; i < actual.length; i++) {
					actual[i] = (Long) reply.get(i);
				}
				assertThat(actual).as("reply, expected " + java.util.Arrays.toString(expected)).isEqualTo(expected);
				check(model, await(stored), trace);
			}
			if (verbose) {
				System.out.println("seed " + seed + "\n" + String.join("\n", trace));
			}
			return calls;
		}
		catch (AssertionError | RuntimeException ex) {
			throw new AssertionError("Model sequence failed, seed " + seed + " (replay with -Dmodel.seed=" + seed
					+ "):\n  " + String.join("\n  ", trace) + "\n" + ex.getMessage(), ex);
		}
	}

	/**
	 * Runs one sequence on a bucket used with a key: its template ({@code keyed:{<seed>}}, four keys), its
	 * overflow bucket (four keys, the template's retune) and two keys' buckets ({@code keyed:{<seed>:k0}},
	 * three keys), with retunes of the template between the keys' calls. Two instances call the keys with
	 * the template's settings as each last read them (mode {@code tune}, or the reply of a call on the
	 * template or the overflow bucket), so that a key is also written by an instance that has not learned
	 * of a retune yet. Returns its number of calls.
	 */
	private static int runKeyedSequence(String sha, long seed, boolean verbose) {
		Random random = new Random(seed);
		List<String> trace = new ArrayList<>();
		String template = "keyed:{" + seed + "}";
		String[] templateKeys = { template, template + ":retuned", template + ":leases", template + ":queue" };
		String overflow = template + ":overflow";
		String[] overflowKeys = { overflow, template + ":retuned", overflow + ":leases", overflow + ":queue" };
		boolean capped = random.nextBoolean();
		long[] rate = rate(random);
		long limit = limit(random, rate[1]);
		long lease = 1 + (long) (random.nextDouble() * 4 * interval(rate));
		Model.Settings settings = new Model.Settings(rate[0], rate[1], limit);
		Model templateModel = new Model(settings, capped, lease);
		Model overflowModel = new Model(settings, capped, lease);
		Model[] keyModels = { new Model(rate[0], rate[1], limit, capped, lease),
				new Model(rate[0], rate[1], limit, capped, lease) };
		String[][] keyKeys = new String[keyModels.length][];
		String[][] keyDumps = new String[keyModels.length][];
		for (int k = 0; k < keyModels.length; k++) {
			String key = "keyed:{" + seed + ":k" + k + "}";
			keyKeys[k] = new String[] { key, key + ":leases", key + ":queue" };
			keyDumps[k] = new String[] { key, key + ":none", key + ":leases", key + ":queue" };
		}
		// what each instance last read of the template: A, B, limit and the retune's time (0: configuration)
		long[][] known = { { rate[0], rate[1], limit, 0 }, { rate[0], rate[1], limit, 0 } };
		// contract revision 3, plans: a plan's settings (its record's, as configured), and whether each key is on it
		long[] planRate = rate(random);
		long[] plan = { planRate[0], planRate[1], limit(random, planRate[1]), 0 };
		boolean[] onPlan = new boolean[keyModels.length];
		long now = 1_700_000_000_000_000L + random.nextInt(1_000_000_000);
		trace.add("template A=" + rate[0] + " B=" + rate[1] + " limit=" + limit
				+ (capped ? " capped lease=" + lease : "") + " key=" + template);
		int steps = 10 + random.nextInt(60);
		int calls = 0;
		int claims = 0;
		List<String> claimed = new ArrayList<>();
		try {
			for (int step = 0; step < steps; step++) {
				long move = move(random, templateModel.interval());
				if (move != 0) {
					now += move;
					trace.add("time " + (move > 0 ? "+" : "") + move + " us");
				}
				if (random.nextInt(60) == 0) {
					long[] next = random.nextBoolean() ? settings.original : rate(random);
					long nextLimit = random.nextBoolean() && next == settings.original ? settings.original[2]
							: limit(random, next[1]);
					templateModel.restart(next[0], next[1], nextLimit);
					known = new long[][] { { next[0], next[1], nextLimit, 0 }, { next[0], next[1], nextLimit, 0 } };
					trace.add("restart with A=" + next[0] + " B=" + next[1] + " limit=" + nextLimit);
				}
				int instance = random.nextInt(2);
				int pick = random.nextInt(20);
				Model model;
				String[] keys;
				String[] dumpKeys;
				String target;
				long[] passed = null;
				Call call;
				if (pick < 3) {
					model = templateModel;
					keys = templateKeys;
					target = "template";
					call = retune(random, model);
				}
				else if (pick < 5) {
					model = templateModel;
					keys = templateKeys;
					target = "template";
					call = new Call("tune", 0, 0, "", null);
				}
				else if (pick < 7) {
					model = templateModel;
					keys = templateKeys;
					target = "template";
					call = call(random, model, claims, claimed, false);
				}
				else if (pick < 9) {
					model = overflowModel;
					keys = overflowKeys;
					target = "overflow";
					call = call(random, model, claims, claimed, false);
				}
				else {
					int k = random.nextInt(keyModels.length);
					model = keyModels[k];
					keys = keyKeys[k];
					// the key's plan changes (RedisTokenBucket.followPlan): one sync with the new settings and the
					// time of the change "now", then its calls pass the new settings as any key's
					boolean switching = random.nextInt(8) == 0;
					if (switching) {
						onPlan[k] = !onPlan[k];
					}
					passed = known[instance].clone();
					if (onPlan[k]) {
						long reset = (passed.length > 4) ? passed[4] : 0;
						passed = new long[] { plan[0], plan[1], plan[2], plan[3], reset };
					}
					if (switching) {
						passed[3] = TemplateTune.PLAN_CHANGED_NOW;
					}
					model.restart(passed[0], passed[1], passed[2]); // its calls' settings
					target = "key k" + k + (switching ? (onPlan[k] ? " moves to the plan" : " leaves the plan") : "")
							+ " with A=" + passed[0] + " B=" + passed[1] + " limit=" + passed[2] + " since=" + passed[3];
					call = switching ? new Call("sync", 0, 0, "", null) : call(random, model, claims, claimed, false);
				}
				dumpKeys = (passed == null) ? keys : keyDumps[java.util.Arrays.asList(keyModels).indexOf(model)];
				if (call.mode.equals("acquire") && !call.id.isEmpty() && !model.queue.containsKey(call.id)) {
					claims++;
					claimed.add(call.id);
				}
				long[] expected = model.step(call, now, passed);
				RedisFuture<List<Object>> replied = (passed == null) ? eval(sha, keys, model, call, now)
						: evalKey(sha, keys, passed, model, call, now);
				RedisFuture<List<Object>> stored = dump(dumpKeys);
				List<Object> reply = await(replied);
				calls++;
				trace.add("instance " + instance + ", " + target + ": " + call + " -> " + reply);
				long[] actual = new long[reply.size()];
				for (int i = 0; i < actual.length; i++) {
					actual[i] = (Long) reply.get(i);
				}
				assertThat(actual).as("reply, expected " + java.util.Arrays.toString(expected)).isEqualTo(expected);
				check(model, await(stored), trace);
				if (passed == null) {
					// the instance takes on the settings the reply says are in force (TemplateTune.adopt)
					known[instance] = (actual[6] == 0)
							? new long[] { settings.configured[0], settings.configured[1], settings.configured[2], 0,
									actual[12] }
							: new long[] { actual[5], actual[6], actual[7], actual[10], actual[12] };
				}
			}
			if (verbose) {
				System.out.println("seed " + seed + "\n" + String.join("\n", trace));
			}
			return calls;
		}
		catch (AssertionError | RuntimeException ex) {
			throw new AssertionError("Keyed model sequence failed, seed " + seed + " (replay with -Dmodel.keyed.seed="
					+ seed + "):\n  " + String.join("\n  ", trace) + "\n" + ex.getMessage(), ex);
		}
	}

	/**
	 * Runs one sequence of batches (contract revision 3) on an uncapped bucket ({@code batch:{<seed>}}, four
	 * keys): two to four simulated instances take batches (mode {@code batch}), grant from them locally, give
	 * unspent tokens back, report stale counts, crash (their batch runs out as spent) and restart, while a
	 * service without batches takes tokens with mode {@code acquire} and the bucket is retuned; time only moves
	 * forward. Every reply and the stored state must be the reference's ({@link Model}), and after every step:
	 * <ul>
	 * <li>no token is created: {@code level + h <= limit} in the hash;</li>
	 * <li>over every window of grants {@code [t1, t2]} (every local grant of a batch and every grant of
	 * {@code acquire}, each with its time), the tokens granted are at most {@code limit + rate * (t2 - t1)},
	 * with the largest limit and rate the sequence used (one limit and rate when it was not retuned).</li>
	 * </ul>
	 * Returns its number of calls.
	 */
	private static int runBatchSequence(String sha, long seed, boolean verbose) {
		Random random = new Random(seed);
		List<String> trace = new ArrayList<>();
		String key = "batch:{" + seed + "}";
		String[] keys = { key, key + ":retuned", key + ":leases", key + ":queue" };
		long[] rate = rate(random);
		long limit = limit(random, rate[1]);
		long lease = 1 + (long) (random.nextDouble() * 4 * interval(rate));
		Model model = new Model(rate[0], rate[1], limit, false, lease);
		long now = 1_700_000_000_000_000L + random.nextInt(1_000_000_000);
		int instances = 2 + random.nextInt(3);
		long[] inHand = new long[instances];
		// when each instance's batch runs out locally: the time of its last batch call plus the lease (Redis's
		// deadline; the Java side counts from when it sent the call, earlier); it grants nothing from then on
		long[] deadline = new long[instances];
		int[] generation = new int[instances];
		// the bound's largest limit and rate (A/B) so far
		long maxLimit = limit;
		long[] maxRate = rate.clone();
		// every grant: {time, tokens, 1 when its time is a wait rounded up to a whole microsecond}
		List<long[]> grants = new ArrayList<>();
		trace.add("bucket A=" + rate[0] + " B=" + rate[1] + " limit=" + limit + " batch lease=" + lease + ", "
				+ instances + " instances, key=" + key);
		int steps = 10 + random.nextInt(60);
		int calls = 0;
		try {
			for (int step = 0; step < steps; step++) {
				long move = Math.max(0, move(random, model.interval()));
				if (move != 0) {
					now += move;
					trace.add("time +" + move + " us");
				}
				int k = random.nextInt(instances);
				String holder = "i" + k + "g" + generation[k];
				if (inHand[k] > 0 && now >= deadline[k]) {
					trace.add("instance " + k + " drops the " + inHand[k] + " in hand: its batch ran out");
					inHand[k] = 0;
				}
				long limitNow = model.limitInEffect();
				int pick = random.nextInt(100);
				Call call;
				long gaveBack = 0;
				long reported = 0;
				if (pick < 30) {
					// a refill: up to n more, maybe giving some back, the kept count now and then stale (too high)
					long n = 1 + random.nextInt((int) Math.min(Math.max(limitNow / 2, 1), 1000));
					gaveBack = (inHand[k] > 0 && random.nextInt(4) == 0) ? random.nextLong(inHand[k] + 1) : 0;
					reported = inHand[k] - gaveBack + ((random.nextInt(5) == 0) ? random.nextInt(3) : 0);
					call = new Call("batch", n, gaveBack, holder + "#" + reported, null);
				}
				else if (pick < 40) {
					// gives back all it holds (batch-hold ran out, or close)
					gaveBack = inHand[k];
					call = new Call("batch", 0, gaveBack, holder + "#0", null);
				}
				else if (pick < 62) {
					// grants locally from its batch: no call
					if (inHand[k] > 0) {
						long g = 1 + random.nextLong(inHand[k]);
						inHand[k] -= g;
						grants.add(new long[] { now, g, 0 });
						trace.add("instance " + k + " grants " + g + " at " + now + " (" + inHand[k] + " left in hand)");
						checkWindows(grants, maxLimit, maxRate);
					}
					continue;
				}
				else if (pick < 67) {
					// crashes (no call: its batch stays in Redis until its lease runs out) and starts again
					trace.add("instance " + k + " crashes with " + inHand[k] + " in hand; restarts as i" + k + "g"
							+ (generation[k] + 1));
					inHand[k] = 0;
					generation[k]++;
					continue;
				}
				else if (pick < 82) {
					// a service without batches
					long n = 1 + random.nextInt((int) Math.min(limitNow, 5));
					call = new Call("acquire", n, maxwait(random, model.interval(), model.aInEffect()), "", null);
				}
				else if (pick < 90) {
					call = new Call(random.nextBoolean() ? "peek" : "sync", 0, 0, "", null);
				}
				else {
					call = retune(random, model);
				}
				long[] expected = model.step(call, now);
				RedisFuture<List<Object>> replied = eval(sha, keys, model, call, now);
				RedisFuture<List<Object>> stored = dump(keys);
				List<Object> reply = await(replied);
				calls++;
				trace.add((call.mode.equals("batch") ? "instance " + k + " (" + holder + "): " : "") + call + " -> "
						+ reply);
				long[] actual = new long[reply.size()];
				for (int i = 0; i < actual.length; i++) {
					actual[i] = (Long) reply.get(i);
				}
				assertThat(actual).as("reply, expected " + java.util.Arrays.toString(expected)).isEqualTo(expected);
				List<Object> dump = await(stored);
				check(model, dump, trace);
				if (call.mode.equals("batch")) {
					// what Redis did not keep of what it said it kept counts as spent there: dropped here
					inHand[k] = Math.max(0, inHand[k] - gaveBack - (reported - actual[14])) + actual[13];
					deadline[k] = now + lease;
				}
				else if (call.mode.equals("acquire") && actual[0] == 1) {
					// at the end of its wait, rounded up to a whole microsecond: its token came earlier within it
					grants.add(new long[] { now + actual[1], call.n, (actual[1] > 0) ? 1 : 0 });
				}
				else if (call.mode.equals("retune")) {
					maxLimit = Math.max(maxLimit, call.retune[2]);
					if (BigInteger.valueOf(call.retune[0]).multiply(BigInteger.valueOf(maxRate[1]))
						.compareTo(BigInteger.valueOf(maxRate[0]).multiply(BigInteger.valueOf(call.retune[1]))) > 0) {
						maxRate = new long[] { call.retune[0], call.retune[1] };
					}
				}
				if (model.exists) {
					assertThat(model.level + model.held).as("level + held, never above the limit in force")
						.isLessThanOrEqualTo(model.limitInEffect());
				}
				checkWindows(grants, maxLimit, maxRate);
			}
			if (verbose) {
				System.out.println("seed " + seed + "\n" + String.join("\n", trace));
			}
			return calls;
		}
		catch (AssertionError | RuntimeException ex) {
			throw new AssertionError("Batch model sequence failed, seed " + seed + " (replay with -Dmodel.batch.seed="
					+ seed + "):\n  " + String.join("\n  ", trace) + "\n" + ex.getMessage(), ex);
		}
	}

	/**
	 * Over every window {@code [t1, t2]} whose ends are grants, the tokens granted in it are at most
	 * {@code limit + A / B * (t2 - t1)}: checked as {@code (granted - limit) * B <= A * (t2 - t1)}, exactly. A
	 * grant of {@code acquire} after a wait is timed at the end of its wait, which the script rounds up to a
	 * whole microsecond (its token was there up to a microsecond before): a window with such a grant is
	 * allowed that microsecond more.
	 */
	private static void checkWindows(List<long[]> grants, long limit, long[] rate) {
		List<long[]> sorted = new ArrayList<>(grants);
		sorted.sort((x, y) -> Long.compare(x[0], y[0]));
		for (int i = 0; i < sorted.size(); i++) {
			long granted = 0;
			long rounded = 0;
			for (int j = i; j < sorted.size(); j++) {
				granted += sorted.get(j)[1];
				rounded |= sorted.get(j)[2];
				if (j + 1 < sorted.size() && sorted.get(j + 1)[0] == sorted.get(j)[0]) {
					continue; // a window ends after every grant at its last instant
				}
				long w = sorted.get(j)[0] - sorted.get(i)[0] + rounded;
				BigInteger over = BigInteger.valueOf(granted - limit).multiply(BigInteger.valueOf(rate[1]));
				BigInteger allowed = BigInteger.valueOf(rate[0]).multiply(BigInteger.valueOf(w));
				assertThat(over.compareTo(allowed) <= 0)
					.as("%d tokens granted over the %d us from %d to %d: more than limit %d + %d/%d per us", granted, w,
							sorted.get(i)[0], sorted.get(j)[0], limit, rate[0], rate[1])
					.isTrue();
			}
		}
	}

	/** A rate as A tokens per B microseconds, reduced, with limit * B and n * B well below 2^50. */
	private static long[] rate(Random random) {
		long a;
		long b;
		switch (random.nextInt(6)) {
			case 0 -> { // 1 per second and the like
				a = 1 + random.nextInt(5);
				b = 1_000_000L * (1 + random.nextInt(3));
			}
			case 1 -> { // fast: 500 per second is 1 per 2000 us
				a = 1;
				b = 1 + random.nextInt(5000);
			}
			case 2 -> { // faster than a token per microsecond
				a = 1 + random.nextInt(1000);
				b = 1 + random.nextInt(7);
			}
			case 3 -> { // slow: a token per minutes
				a = 1;
				b = 60_000_000L * (1 + random.nextInt(30));
			}
			case 4 -> { // odd primes
				a = 7;
				b = 999_983;
			}
			default -> {
				a = 1 + random.nextInt(100);
				b = 1 + random.nextInt(2_000_000);
			}
		}
		long gcd = BigInteger.valueOf(a).gcd(BigInteger.valueOf(b)).longValueExact();
		return new long[] { a / gcd, b / gcd };
	}

	private static long limit(Random random, long b) {
		long limit = switch (random.nextInt(4)) {
			case 0 -> 1;
			case 1 -> 1 + random.nextInt(5);
			case 2 -> 1 + random.nextInt(50);
			default -> 1 + random.nextInt(100_000);
		};
		return Math.max(1, Math.min(limit, (1L << 36) / b));
	}

	/** Microseconds per token, at least 1. */
	private static long interval(long[] rate) {
		return Math.max(1, ceilDiv(rate[1], rate[0]));
	}

	/** {@code x / y} rounded up, for {@code y > 0}. */
	static long ceilDiv(long x, long y) {
		return -Math.floorDiv(-x, y);
	}

	private static long move(Random random, long interval) {
		return switch (random.nextInt(20)) {
			case 0, 1, 2, 3, 4, 5 -> 0;
			case 6, 7 -> 1;
			case 8, 9, 10 -> (long) (random.nextDouble() * interval);
			case 11, 12 -> interval * (1 + random.nextInt(3));
			case 13, 14 -> (long) (random.nextDouble() * interval * 10);
			case 15 -> random.nextBoolean() ? interval - 1 : interval + 1;
			case 16 -> HOUR * (1 + random.nextInt(3));
			case 17 -> -(1 + (long) (random.nextDouble() * interval * 3));
			default -> random.nextInt(1000);
		};
	}

	private static long maxwait(Random random, long interval, long a) {
		long cap = MAX_EXACT / a - 1;
		long wait = switch (random.nextInt(6)) {
			case 0 -> 0;
			case 1 -> (long) (random.nextDouble() * interval);
			case 2 -> interval * random.nextInt(4);
			case 3 -> interval * random.nextInt(4) - 1;
			case 4 -> (long) (random.nextDouble() * interval * 50);
			default -> HOUR * 10;
		};
		return Math.max(0, Math.min(wait, cap));
	}

	private static Call call(Random random, Model model, int claims, List<String> claimed) {
		return call(random, model, claims, claimed, true);
	}

	/** A call of any mode; {@code retunes}: mode retune among them, else a sync in its place. */
	private static Call call(Random random, Model model, int claims, List<String> claimed, boolean retunes) {
		long limit = model.limitInEffect();
		long interval = model.interval();
		long n = switch (random.nextInt(5)) {
			case 0 -> 1;
			case 1 -> random.nextInt(3);
			case 2 -> 1 + random.nextInt((int) Math.min(limit, 1000));
			case 3 -> limit + random.nextInt(2);
			default -> 1 + random.nextInt(5);
		};
		long maxwait = maxwait(random, interval, model.aInEffect());
		int pick = random.nextInt(100);
		if (pick < 40) {
			if (!model.capped) {
				return new Call("acquire", n, maxwait, "", null);
			}
			if (!model.queue.isEmpty() && random.nextInt(3) == 0) {
				List<String> queued = new ArrayList<>(model.queue.keySet());
				String id = queued.get(random.nextInt(queued.size()));
				return new Call("acquire", Model.tokensOf(id), maxwait, id, null);
			}
			return new Call("acquire", n, maxwait, "c" + claims + "#" + n, null);
		}
		String some = claimed.isEmpty() ? "" : claimed.get(random.nextInt(claimed.size()));
		if (pick < 52) {
			String id = model.capped && random.nextBoolean() ? some : "";
			long tokens = !id.isEmpty() && random.nextBoolean() ? Model.tokensOf(id) : n;
			return new Call("refund", tokens, 0, id, null);
		}
		if (pick < 60) {
			return new Call("charge", n, 0, "", null);
		}
		if (pick < 70) {
			return new Call("release", 0, 0, some, null);
		}
		if (pick < 75) {
			return new Call("leave", 0, 0, some, null);
		}
		if (pick < 82) {
			return new Call("sync", 0, 0, "", null);
		}
		if (pick < 90) {
			return new Call("peek", 0, 0, "", null);
		}
		if (pick < 92) {
			return new Call("reset", 0, 0, "", null); // contract revision 3
		}
		return retunes ? retune(random, model) : new Call("sync", 0, 0, "", null);
	}

	private static Call retune(Random random, Model model) {
		long[] next = random.nextInt(3) == 0 ? new long[] { model.aInEffect(), model.bInEffect() } : rate(random);
		long nextLimit = random.nextInt(3) == 0 ? model.limitInEffect() : limit(random, next[1]);
		long tokens = 1 + random.nextInt(1000);
		return new Call("retune", 0, 0, "", new long[] { next[0], next[1], nextLimit, tokens, 1000L * next[1] });
	}

	// ---- Redis

	private static String source() {
		try (InputStream in = BucketScriptModelTests.class.getClassLoader().getResourceAsStream(RESOURCE)) {
			assertThat(in).as(RESOURCE + " on the class path").isNotNull();
			return new String(in.readAllBytes(), StandardCharsets.UTF_8);
		}
		catch (IOException ex) {
			throw new UncheckedIOException(ex);
		}
	}

	/** The script with its clock replaced by the test's: fails unless the clock is read exactly once, as expected. */
	static String testCopy(String source) {
		assertThat(source.split(java.util.regex.Pattern.quote(CLOCK), -1)).as("the clock lines of " + RESOURCE)
			.hasSize(2);
		return source.replace(CLOCK, FAKE_CLOCK);
	}

	private static String load(String script) {
		return connection.sync().scriptLoad(script);
	}

	private static RedisFuture<List<Object>> eval(String sha, String[] keys, Model model, Call call, long now) {
		long[] retune = call.retune;
		String[] tail = (retune == null) ? new String[] { "", "", "", "", "" }
				: new String[] { Long.toString(retune[0]), Long.toString(retune[1]), Long.toString(retune[2]),
						Long.toString(retune[3]), Long.toString(retune[4]) };
		return eval(sha, keys, model.configured, model, call, tail, now);
	}

	/** A call on a key's bucket (three keys) with the settings {@code passed}: A, B, limit, the retune's time. */
	private static RedisFuture<List<Object>> evalKey(String sha, String[] keys, long[] passed, Model model, Call call,
			long now) {
		return eval(sha, keys, passed, model, call,
				new String[] { Long.toString(passed[3]), (passed.length > 4) ? Long.toString(passed[4]) : "", "", "", "" },
				now);
	}

	private static RedisFuture<List<Object>> eval(String sha, String[] keys, long[] settings, Model model, Call call,
			String[] tail, long now) {
		String[] args = { Long.toString(settings[0]), Long.toString(settings[1]), Long.toString(settings[2]),
				Long.toString(call.n), Long.toString(call.maxwait), model.capped ? "1" : "0", call.mode, call.id,
				Long.toString(model.lease), tail[0], tail[1], tail[2], tail[3], tail[4], Long.toString(now) };
		return connection.async().evalsha(sha, ScriptOutputType.MULTI, keys, args);
	}

	private static RedisFuture<List<Object>> dump(String[] keys) {
		return connection.async().evalsha(dumpSha, ScriptOutputType.MULTI, keys);
	}

	private static <T> T await(RedisFuture<T> future) {
		try {
			return future.get(5, TimeUnit.SECONDS);
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			throw new IllegalStateException(ex);
		}
		catch (ExecutionException | TimeoutException ex) {
			throw new IllegalStateException(ex);
		}
	}

	@SuppressWarnings("unchecked")
	private static void check(Model model, List<Object> dump, List<String> trace) {
		Map<String, String> hash = pairs((List<Object>) dump.get(0));
		Map<String, String> tune = pairs((List<Object>) dump.get(1));
		List<Object> leases = (List<Object>) dump.get(2);
		List<Object> queue = (List<Object>) dump.get(3);
		Map<String, Long> fields = new TreeMap<>();
		hash.forEach((field, value) -> fields.put(field, Long.parseLong(value)));
		assertThat(fields).as("fields of the hash").isEqualTo(model.fields());
		assertThat(tune).as("the retune").isEqualTo(model.retuneFields());
		Map<String, Long> leaseScores = new HashMap<>();
		for (int i = 0; i < leases.size(); i += 2) {
			leaseScores.put((String) leases.get(i), Long.parseLong((String) leases.get(i + 1)));
		}
		assertThat(leaseScores).as("the leases").isEqualTo(model.leases);
		List<String> queued = new ArrayList<>();
		for (int i = 0; i < queue.size(); i += 2) {
			queued.add(queue.get(i) + "=" + Long.parseLong((String) queue.get(i + 1)));
		}
		List<String> expectedQueue = new ArrayList<>();
		model.queue.forEach((id, entry) -> expectedQueue.add(id + "=" + entry[0]));
		assertThat(queued).as("the queue in order").isEqualTo(expectedQueue);
		if (model.exists) {
			assertThat((Long) dump.get(4)).as("time to live of the hash (ms)")
				.isBetween(model.ttlLow - TTL_SLACK_MS, model.ttlHigh);
		}
		if (!model.leases.isEmpty()) {
			assertThat((Long) dump.get(5)).as("time to live of the leases (ms)")
				.isBetween(model.ttlLow - TTL_SLACK_MS, model.ttlHigh);
		}
		if (!model.queue.isEmpty()) {
			assertThat((Long) dump.get(6)).as("time to live of the queue (ms)")
				.isBetween(model.ttlLow - TTL_SLACK_MS, model.ttlHigh);
		}
	}

	private static Map<String, String> pairs(List<Object> flat) {
		Map<String, String> map = new TreeMap<>();
		for (int i = 0; i < flat.size(); i += 2) {
			map.put((String) flat.get(i), (String) flat.get(i + 1));
		}
		return map;
	}

	// ---- the reference

	/** One call: the mode and its arguments ({@code retune}: A2, B2, limit2, tokens, period). */
	record Call(String mode, long n, long maxwait, String id, long[] retune) {

		@Override
		public String toString() {
			StringBuilder text = new StringBuilder(this.mode);
			if (this.mode.equals("acquire") || this.mode.equals("refund") || this.mode.equals("charge")) {
				text.append(" n=").append(this.n);
			}
			if (this.mode.equals("acquire")) {
				text.append(" maxwait=").append(this.maxwait);
			}
			if (this.mode.equals("batch")) {
				text.append(" n=").append(this.n).append(" back=").append(this.maxwait);
			}
			if (!this.id.isEmpty()) {
				text.append(" id=").append(this.id);
			}
			if (this.retune != null) {
				text.append(" A=").append(this.retune[0]).append(" B=").append(this.retune[1]).append(" limit=")
					.append(this.retune[2]);
			}
			return text.toString();
		}
	}

	/**
	 * The bucket as the README describes it, computed exactly: the content is {@code level + rem / B}
	 * tokens, kept here as a number of units of {@code 1/B}.
	 */
	static final class Model {

		/**
		 * The configuration and the retune record: shared by a template's bucket and its overflow bucket
		 * (the overflow bucket reads its template's retune); a key's bucket has one of its own, whose
		 * configuration is the settings its calls pass and which never holds a retune.
		 */
		static final class Settings {

			final long[] original;

			final long[] configured;

			/** K:retuned: a, b, limit, tokens, period, at, and the configuration it was made for. */
			long[] tune;

			String tuneCfg;

			/** K:retuned's rst (contract revision 3): the time of the last reset, 0 for none. */
			long resetAt;

			Settings(long a, long b, long limit) {
				this.original = new long[] { a, b, limit };
				this.configured = this.original.clone();
			}
		}

		final Settings settings;

		final long[] original;

		final long[] configured;

		final boolean capped;

		final long lease;

		boolean exists;

		long level;

		long last;

		long rem;

		long u;

		/** The A and the limit the hash was written with ({@code u} is its B). */
		long ra;

		long rm;

		long inflight;

		/** The reset the hash last followed (contract revision 3). */
		long z;

		/** Tokens held by batches ({@code h}), and whether the hash has the field (it has once a batch was taken). */
		long held;

		boolean hasHeld;

		/** The tokens each holder's batch holds ({@code b:<holder>}); their deadlines are in {@link #leases}. */
		final Map<String, Long> batches = new HashMap<>();

		long arrivals;

		final Map<String, Long> leases = new HashMap<>();

		/** Queued waiters in arrival order: id to {arrival, deadline}. */
		final LinkedHashMap<String, long[]> queue = new LinkedHashMap<>();

		long ttlLow;

		long ttlHigh;

		Model(long a, long b, long limit, boolean capped, long lease) {
			this(new Settings(a, b, limit), capped, lease);
		}

		Model(Settings settings, boolean capped, long lease) {
			this.settings = settings;
			this.original = settings.original;
			this.configured = settings.configured;
			this.capped = capped;
			this.lease = lease;
		}

		void restart(long a, long b, long limit) {
			this.configured[0] = a;
			this.configured[1] = b;
			this.configured[2] = limit;
		}

		private boolean tuned() {
			return this.settings.tune != null && this.settings.tuneCfg.equals(cfg());
		}

		private String cfg() {
			return this.configured[0] + ":" + this.configured[1] + ":" + this.configured[2];
		}

		long aInEffect() {
			return tuned() ? this.settings.tune[0] : this.configured[0];
		}

		long bInEffect() {
			return tuned() ? this.settings.tune[1] : this.configured[1];
		}

		long limitInEffect() {
			return tuned() ? this.settings.tune[2] : this.configured[2];
		}

		long interval() {
			return BucketScriptModelTests.interval(new long[] { aInEffect(), bInEffect() });
		}

		static long tokensOf(String id) {
			int hash = id.lastIndexOf('#');
			return hash < 0 ? 0 : Long.parseLong(id.substring(hash + 1));
		}

		/** The reply the script must give to a call with four keys; applies the call unless it writes nothing. */
		long[] step(Call call, long now) {
			return step(call, now, null);
		}

		/**
		 * The reply the script must give; applies the call to the model unless it writes nothing.
		 *
		 * @param passed with three keys (a key's bucket), the settings the call passes: A, B, limit, the
		 *        time of the retune they come from (0: the configuration) and, when given, the template's last
		 *        reset; {@code null} with four keys
		 */
		long[] step(Call call, long now, long[] passed) {
			boolean tuneMode = call.mode.equals("tune");
			boolean resetMode = call.mode.equals("reset");
			boolean writes = !call.mode.equals("peek") && !tuneMode;
			long[] tuned = new long[6];
			boolean dropTune = false;
			long resetAt = 0;
			long a;
			long b;
			long limit;
			long since;
			if (passed == null) {
				if (this.settings.tuneCfg != null) {
					if (this.settings.tuneCfg.equals(cfg())) {
						if (this.settings.tune != null) {
							tuned = this.settings.tune.clone();
						}
						resetAt = this.settings.resetAt;
					}
					else if (writes || tuneMode) {
						dropTune = true;
					}
				}
				a = aInEffect();
				b = bInEffect();
				limit = limitInEffect();
				since = tuned[5];
			}
			else {
				a = passed[0];
				b = passed[1];
				limit = passed[2];
				since = passed[3];
				resetAt = (passed.length > 4) ? passed[4] : 0;
			}
			if (tuneMode) {
				// reads the retune and nothing else; drops one made for another configuration
				if (dropTune) {
					this.settings.tune = null;
					this.settings.tuneCfg = null;
					this.settings.resetAt = 0;
				}
				// then the mode switched through an endpoint, never here (0, as configured), and the last reset
				return new long[] { 3, 0, 0, 0, 0, tuned[0], tuned[1], tuned[2], tuned[3], tuned[4], tuned[5], 0,
						resetAt };
			}
			if (resetMode) {
				resetAt = now; // (recorded with four keys below, once a record of another configuration is dropped)
			}
			BigInteger bigB = BigInteger.valueOf(b);
			long held = this.exists ? this.held : 0;
			// tokens held by batches count against the limit: the bucket is full at limit - held
			BigInteger full = BigInteger.valueOf(limit - held).multiply(bigB);
			BigInteger content;
			long last;
			long inflight;
			if (!this.exists) {
				content = full;
				last = now;
				inflight = 0;
			}
			else if (this.z < resetAt) {
				// reset since its last write: full now, what was owed forgotten, what is in flight stays
				content = full;
				last = now;
				inflight = this.inflight;
			}
			else {
				last = this.last;
				inflight = this.inflight;
				BigInteger u = BigInteger.valueOf(this.u);
				BigInteger old = BigInteger.valueOf(this.level).multiply(u).add(BigInteger.valueOf(this.rem))
					.min(BigInteger.valueOf(this.rm - held).multiply(u));
				if (this.ra != a || this.u != b || this.rm != limit) {
					// written with other settings: they hold up to the retune (or the last update, when that
					// came after it: a writer that had not learned of the retune yet), then these; exact for
					// one change of settings between two writes of the hash
					long switched = Math.min(Math.max(last, since), now);
					if (switched > last) {
						old = old.add(BigInteger.valueOf(switched - last).multiply(BigInteger.valueOf(this.ra)))
							.min(BigInteger.valueOf(this.rm - held).multiply(u));
						last = switched;
					}
				}
				if (old.signum() < 0 && (this.ra != a || this.u != b)) {
					// a debt: the callers waiting keep their times, so it is paid at the same instant at these
					// settings (a faster rate would otherwise grant a token next to a waiter's)
					content = carriedDebt(old, this.ra, a);
				}
				else {
					// the level stays; the remainder only while B does
					BigInteger[] parts = floorSplit(old, u);
					content = parts[0].multiply(bigB).add(this.u == b ? parts[1] : BigInteger.ZERO);
				}
			}
			// never above the limit (a lowered limit drops the excess)
			content = content.min(full);
			Map<String, Long> leases = writes ? this.leases : new HashMap<>(this.leases);
			Map<String, Long> batches = writes ? this.batches : new HashMap<>(this.batches);
			if (held > 0) {
				// batches whose lease ran out count as spent, from their deadline: the bucket refilled over them
				// until then (in deadline order)
				List<Map.Entry<String, Long>> expired = new ArrayList<>();
				for (var lease : leases.entrySet()) {
					if (lease.getKey().startsWith("b:") && lease.getValue() <= now) {
						expired.add(lease);
					}
				}
				expired.sort(Map.Entry.<String, Long>comparingByValue().thenComparing(Map.Entry.comparingByKey()));
				for (var lease : List.copyOf(expired)) {
					long at = lease.getValue();
					if (at > last) {
						content = content.add(BigInteger.valueOf(at - last).multiply(BigInteger.valueOf(a))).min(full);
						last = at;
					}
					String holder = lease.getKey().substring(2);
					held -= batches.getOrDefault(holder, 0L);
					full = BigInteger.valueOf(limit - held).multiply(bigB);
					leases.remove(lease.getKey());
					batches.remove(holder);
				}
				held = Math.max(held, 0);
				full = BigInteger.valueOf(limit - held).multiply(bigB);
			}
			long elapsed = now - last;
			if (elapsed > 0) {
				content = content.add(BigInteger.valueOf(elapsed).multiply(BigInteger.valueOf(a))).min(full);
			}
			// a clock that stepped back: count from the new reading, credit nothing
			last = now;

			LinkedHashMap<String, long[]> queue = writes ? this.queue : new LinkedHashMap<>(this.queue);
			long arrivals = this.arrivals;
			if (this.capped) {
				long gone = 0;
				for (var it = leases.entrySet().iterator(); it.hasNext();) {
					var lease = it.next();
					if (lease.getValue() <= now) {
						gone += tokensOf(lease.getKey());
						it.remove();
					}
				}
				inflight = Math.max(0, inflight - gone);
				// waiters whose deadline passed leave the head of the queue
				while (!queue.isEmpty()) {
					var head = queue.entrySet().iterator().next();
					if (head.getValue()[1] >= now) {
						break;
					}
					queue.remove(head.getKey());
				}
			}

			long code = 3;
			long wait = 0;
			long taken = 0;
			long batchKept = 0;
			BigInteger nUnits = BigInteger.valueOf(call.n).multiply(bigB);
			switch (call.mode) {
				case "acquire" -> {
					String head = queue.isEmpty() ? null : queue.keySet().iterator().next();
					if (this.capped && ((head != null && !head.equals(call.id)) || inflight + call.n > limit)) {
						code = 2;
						if (call.maxwait > 0 && !queue.containsKey(call.id)) {
							arrivals++;
							queue.put(call.id, new long[] { arrivals, now + call.maxwait + 1_000_000 });
						}
					}
					else {
						BigInteger after = content.subtract(nUnits);
						wait = after.signum() >= 0 ? 0
								: after.negate().add(BigInteger.valueOf(a - 1)).divide(BigInteger.valueOf(a))
									.longValueExact();
						// while batches hold tokens, no debt: only tokens that are there
						if (wait > call.maxwait || (held > 0 && wait > 0)) {
							code = 0;
						}
						else {
							code = 1;
							content = after;
							if (this.capped) {
								inflight += call.n;
								leases.put(call.id, now + wait + this.lease);
							}
						}
						if (this.capped) {
							queue.remove(call.id);
						}
					}
				}
				case "refund" -> {
					content = content.add(nUnits).min(full);
					if (this.capped && leases.remove(call.id) != null) {
						inflight = Math.max(0, inflight - tokensOf(call.id));
					}
				}
				case "charge" -> content = content.subtract(nUnits);
				case "release" -> {
					if (leases.remove(call.id) != null) {
						inflight = Math.max(0, inflight - tokensOf(call.id));
					}
				}
				case "leave" -> queue.remove(call.id);
				case "sync", "peek", "reset" -> {
				}
				case "retune" -> {
					// the level stays; the remainder only while B does; never above the new limit
					long[] next = call.retune;
					BigInteger[] split = floorSplit(content, bigB);
					BigInteger kept = (next[1] == b) ? split[1] : BigInteger.ZERO;
					// a debt is carried at the instant it is paid (the callers waiting keep their times)
					BigInteger carried = (content.signum() < 0 && (next[0] != a || next[1] != b))
							? carriedDebt(content, a, next[0]) : null;
					a = next[0];
					b = next[1];
					limit = next[2];
					bigB = BigInteger.valueOf(b);
					full = BigInteger.valueOf(limit).multiply(bigB);
					full = BigInteger.valueOf(limit - held).multiply(bigB);
					content = ((carried != null) ? carried : split[0].multiply(bigB).add(kept)).min(full);
					tuned = java.util.Arrays.copyOf(next, 6);
					tuned[5] = now;
					this.pendingTune = tuned.clone();
				}
				case "batch" -> {
					// what the holder held: given back (n at most what it held), kept, and the rest spent
					int hash = call.id.lastIndexOf('#');
					String holder = call.id.substring(0, hash);
					long had = batches.getOrDefault(holder, 0L);
					long back = Math.min(call.maxwait, had);
					long kept = Math.min(Long.parseLong(call.id.substring(hash + 1)), had - back);
					held = held - had + kept;
					batchKept = kept;
					full = BigInteger.valueOf(limit - held).multiply(bigB);
					content = content.add(BigInteger.valueOf(back).multiply(bigB)).min(full);
					long whole = floorSplit(content, bigB)[0].longValueExact();
					if (call.n > 0 && whole >= 1) {
						taken = Math.min(call.n, whole);
						content = content.subtract(BigInteger.valueOf(taken).multiply(bigB));
						held += taken;
						full = BigInteger.valueOf(limit - held).multiply(bigB);
						code = 1;
					}
					else if (call.n > 0) {
						code = 0;
						wait = bigB.subtract(content).add(BigInteger.valueOf(a - 1)).divide(BigInteger.valueOf(a))
							.longValueExact();
					}
					if (kept + taken > 0) {
						batches.put(holder, kept + taken);
						leases.put("b:" + holder, now + this.lease);
					}
					else {
						batches.remove(holder);
						leases.remove("b:" + holder);
					}
				}
				default -> throw new IllegalArgumentException(call.mode);
			}
			BigInteger[] split = floorSplit(content, bigB);
			long level = split[0].longValueExact();
			long rem = split[1].longValueExact();
			long[] reply = call.mode.equals("batch")
					? new long[] { code, wait, level, rem, inflight, tuned[0], tuned[1], tuned[2], tuned[3], tuned[4],
							tuned[5], 0, resetAt, taken, batchKept }
					: new long[] { code, wait, level, rem, inflight, tuned[0], tuned[1], tuned[2], tuned[3], tuned[4],
							tuned[5], 0, resetAt };
			if (!writes) {
				this.pendingTune = null;
				return reply;
			}
			if (dropTune) {
				this.settings.tune = null;
				this.settings.tuneCfg = null;
				this.settings.resetAt = 0;
			}
			if (resetMode && passed == null) {
				this.settings.resetAt = now;
				this.settings.tuneCfg = cfg();
			}
			this.z = Math.max(this.exists ? this.z : 0, resetAt);
			if (this.pendingTune != null) {
				this.settings.tune = this.pendingTune;
				this.settings.tuneCfg = cfg();
				this.pendingTune = null;
			}
			this.exists = true;
			this.level = level;
			this.last = last;
			this.rem = rem;
			this.u = b;
			this.ra = a;
			this.rm = limit;
			this.inflight = inflight;
			this.arrivals = arrivals;
			this.hasHeld = this.hasHeld || call.mode.equals("batch");
			this.held = held;
			// the keys expire when the bucket would be full again, plus a second; leases and waiters keep them
			long ttl = ceilDiv(Math.max(0, full.subtract(content).longValueExact()), a * 1000) + 1000;
			long high = ttl;
			if (this.capped || held > 0) {
				for (long deadline : leases.values()) {
					ttl = Math.max(ttl, ceilDiv(deadline - now, 1000) + 1000);
				}
				high = ttl;
				if (!queue.isEmpty()) {
					ttl = Math.max(ttl, ceilDiv(call.maxwait, 1000) + 2000);
					high = Math.max(ttl, this.ttlHigh);
				}
			}
			this.ttlLow = ttl;
			this.ttlHigh = high;
			return reply;
		}

		private long[] pendingTune;

		/**
		 * A debt ({@code content} below zero, in units of 1/B of a token of the rate {@code fromA} per B) at the
		 * rate {@code toA} per B': paid the microsecond the old one would have been (the last waiter's grant),
		 * {@code ceil(-content / fromA)} microseconds from the last update, so the new content is minus that
		 * many microseconds of the new rate's credit, at most 2^50 units (the script's bound of exactness).
		 */
		private static BigInteger carriedDebt(BigInteger content, long fromA, long toA) {
			BigInteger[] due = content.negate().divideAndRemainder(BigInteger.valueOf(fromA));
			BigInteger micros = due[1].signum() > 0 ? due[0].add(BigInteger.ONE) : due[0];
			return micros.multiply(BigInteger.valueOf(toA)).min(BigInteger.ONE.shiftLeft(50)).negate();
		}

		private static BigInteger[] floorSplit(BigInteger content, BigInteger b) {
			BigInteger[] qr = content.divideAndRemainder(b);
			if (qr[1].signum() < 0) {
				qr[0] = qr[0].subtract(BigInteger.ONE);
				qr[1] = qr[1].add(b);
			}
			return qr;
		}

		/** The hash's fields as they must be stored. */
		Map<String, Long> fields() {
			Map<String, Long> fields = new TreeMap<>();
			if (!this.exists) {
				return fields;
			}
			fields.put("l", this.level);
			fields.put("t", this.last);
			fields.put("r", this.rem);
			fields.put("u", this.u);
			fields.put("a", this.ra);
			fields.put("m", this.rm);
			fields.put("f", this.inflight);
			fields.put("z", this.z);
			if (this.arrivals > 0) {
				fields.put("q", this.arrivals);
			}
			if (this.hasHeld) {
				fields.put("h", this.held);
			}
			this.batches.forEach((holder, tokens) -> fields.put("b:" + holder, tokens));
			this.queue.forEach((id, entry) -> fields.put("d:" + id, entry[1]));
			return fields;
		}

		Map<String, String> retuneFields() {
			Map<String, String> fields = new TreeMap<>();
			long[] tune = this.settings.tune;
			if (tune != null) {
				fields.put("a", Long.toString(tune[0]));
				fields.put("b", Long.toString(tune[1]));
				fields.put("limit", Long.toString(tune[2]));
				fields.put("tokens", Long.toString(tune[3]));
				fields.put("period", Long.toString(tune[4]));
				fields.put("at", Long.toString(tune[5]));
			}
			if (this.settings.tuneCfg != null) {
				fields.put("cfg", this.settings.tuneCfg);
			}
			if (this.settings.resetAt != 0) {
				fields.put("rst", Long.toString(this.settings.resetAt));
			}
			return fields;
		}
	}
}
