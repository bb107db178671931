package dev.ratelimit.redis;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

import dev.ratelimit.core.QuotaCalendar;
import io.lettuce.core.ScriptOutputType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.fail;

/**
 * {@code quota.lua} checked step by step against a reference written here, on a real Redis and a fake
 * clock (the script's two lines that read {@code TIME} replaced by {@code ARGV[9]}; the test checks that
 * exactly this replacement was made, so it breaks when the script changes shape).
 *
 * <p>Each sequence draws a calendar (minute to year, in zones with daylight-saving changes and with none),
 * a limit, and a run of operations ({@code take} with and without a wait allowed, {@code refund},
 * {@code charge}, {@code cancel} of an earlier grant, {@code peek}, {@code reset}) at instants that move
 * within a period, across one or several boundaries, and now and then back; the caller's guess of the
 * time is sometimes off by up to two periods (the script then says its time, and the call is made again
 * with the periods of that time, as {@link RedisCalendarQuota} does). After each call the whole reply and
 * the stored hash are compared with {@link Model}; over each sequence, the tokens granted in each period
 * (at once, or to a caller waiting for its start) are at most the limit plus what was given back in it.
 * A failure prints the seed and the trace; {@code -Dmodel.seed=<seed>} replays one sequence,
 * {@code -Dmodel.sequences=<count>} sets how many a run draws (default 400). The last test breaks the
 * copy of the script on purpose and checks that the model notices.
 */
class QuotaScriptModelTests {

	@RegisterExtension
	static final EmbeddedRedis redis = new EmbeddedRedis();

	private static final String CLOCK = "local clock = redis.call('TIME')\n"
			+ "local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])\n";

	private static final String FAKE_CLOCK = "local now = tonumber(ARGV[9])\n";

	private static final ZoneId[] ZONES = { ZoneId.of("UTC"), ZoneId.of("Europe/Berlin"),
			ZoneId.of("America/Sao_Paulo"), ZoneId.of("Australia/Lord_Howe"), ZoneId.of("Asia/Kolkata") };

	/** Instants from 2100 on: the script's PEXPIREAT lies in the real future. */
	private static final long BASE_SECONDS = Instant.parse("2100-01-01T00:00:00Z").getEpochSecond();

	private static final String SCRIPT = fakeClockScript();

	private static String fakeClockScript() {
		try (InputStream in = QuotaScriptModelTests.class.getClassLoader()
			.getResourceAsStream("dev/ratelimit/redis/quota.lua")) {
			String source = new String(in.readAllBytes(), StandardCharsets.UTF_8);
			assertThat(source).as("the script reads TIME in exactly these two lines").containsOnlyOnce(CLOCK);
			return source.replace(CLOCK, FAKE_CLOCK);
		}
		catch (IOException ex) {
			throw new UncheckedIOException(ex);
		}
	}

	@Test
	void theScriptAgreesWithTheReferenceStepByStep() {
		String fixed = System.getProperty("model.seed");
		if (fixed != null) {
			run(Long.parseLong(fixed), SCRIPT);
			return;
		}
		long start = Long.getLong("model.start", new SplittableRandom().nextLong(1L << 40));
		int sequences = Integer.getInteger("model.sequences", 400);
		for (long seed = start; seed < start + sequences; seed++) {
			run(seed, SCRIPT);
		}
	}

	/** The model notices a script that grants one token too many, or keeps a refusal's wait. */
	@Test
	void aBrokenScriptIsNoticed() {
		for (String[] breaking : new String[][] { { "if used + n <= limit then", "if used + n <= limit + 1 then" },
				{ "elseif e == start then", "elseif e == start + 1 then" } }) {
			assertThat(SCRIPT).containsOnlyOnce(breaking[0]);
			String broken = SCRIPT.replace(breaking[0], breaking[1]);
			assertThatThrownBy(() -> {
				for (long seed = 0; seed < 400; seed++) {
					run(seed, broken);
				}
			}).as(breaking[1]).isInstanceOf(AssertionError.class);
		}
	}

	/** The stored state as the reference keeps it: nothing, or the period counted and its figures. */
	static final class Model {

		Long s;

		long e;

		long u;

		long w;

		/** The reply the script must give, and the state after it; mirrors the protocol in the README. */
		long[] call(String mode, long n, long limit, long start, long end, long after, long maxWait, long counted,
				long now) {
			if (now < start || now >= after) {
				return new long[] { -1, 0, 0, now, 0, 0, 0 };
			}
			boolean knownNext = true;
			if (now >= end) {
				start = end;
				end = after;
				knownNext = false;
			}
			long used = 0;
			long waiting = 0;
			if (this.s != null) {
				if (this.s == start) {
					used = this.u;
					waiting = this.w;
				}
				else if (this.s > start) {
					start = this.s;
					end = this.e;
					used = this.u;
					waiting = this.w;
					knownNext = false;
				}
				else if (this.e == start) {
					used = Math.max(0, this.u - limit) + this.w;
				}
			}
			long code = 3;
			long micros = 0;
			boolean store = true;
			switch (mode) {
				case "take" -> {
					if (used + n <= limit) {
						used += n;
						code = 1;
					}
					else if (knownNext && waiting + n <= limit && end - now <= maxWait) {
						waiting += n;
						code = 2;
						micros = end - now;
					}
					else {
						code = 0;
						micros = (knownNext && waiting + n > limit) ? after - now : end - now;
						store = false;
					}
				}
				case "refund" -> used = Math.max(0, used - n);
				case "charge" -> used += n;
				case "cancel" -> {
					if (counted == start) {
						used = Math.max(0, used - n);
					}
					else if (counted == end) {
						waiting = Math.max(0, waiting - n);
					}
				}
				case "reset" -> used = 0;
				default -> store = false; // peek
			}
			if (store) {
				this.s = start;
				this.e = end;
				this.u = used;
				this.w = waiting;
			}
			return new long[] { code, used, micros, now, start, end, waiting };
		}
	}

	private static void run(long seed, String script) {
		SplittableRandom random = new SplittableRandom(seed);
		QuotaCalendar calendar = QuotaCalendar.of(QuotaCalendar.Unit.values()[random.nextInt(QuotaCalendar.Unit.values().length)],
				ZONES[random.nextInt(ZONES.length)]);
		long limit = 1 + random.nextInt(8);
		String key = "quota-model:{" + seed + "}";
		redis.admin().del(key);
		Model model = new Model();
		List<String> trace = new ArrayList<>();
		trace.add("seed " + seed + ", " + calendar + ", limit " + limit);
		long now = (BASE_SECONDS + random.nextLong(100L * 365 * 86_400)) * 1_000_000L + random.nextLong(1_000_000L);
		// what was granted in each period (by start), and given back in it, for the bound of Q1
		Map<Long, Long> granted = new HashMap<>();
		Map<Long, Long> givenBack = new HashMap<>();
		java.util.Set<Long> reset = new java.util.HashSet<>();
		List<long[]> grants = new ArrayList<>(); // {n, counted period start}
		int steps = 10 + random.nextInt(40);
		for (int step = 0; step < steps; step++) {
			now = move(random, calendar, now);
			if (random.nextInt(20) == 0) {
				limit = 1 + random.nextInt(8);
				trace.add("limit " + limit);
			}
			String mode;
			int pick = random.nextInt(20);
			long n = 1 + random.nextInt((int) limit);
			long counted = 0;
			long maxWait = 0;
			if (pick < 10) {
				mode = "take";
				maxWait = random.nextBoolean() ? 0 : random.nextLong(400L * 86_400 * 1_000_000);
			}
			else if (pick < 12) {
				mode = "refund";
			}
			else if (pick < 13) {
				mode = "charge";
			}
			else if (pick < 16 && !grants.isEmpty()) {
				mode = "cancel";
				long[] grant = grants.remove(random.nextInt(grants.size()));
				n = grant[0];
				counted = grant[1];
			}
			else if (pick < 17) {
				mode = "reset";
				n = 0;
			}
			else {
				mode = "peek";
				n = 0;
			}
			long guess = now + (random.nextInt(8) == 0 ? random.nextLong(-2 * period(calendar, now), 2 * period(calendar, now)) : 0);
			long[] expected = null;
			long[] actual = null;
			for (int attempt = 0; attempt < 2; attempt++) {
				QuotaCalendar.Period p = calendar.periodOf(micros(guess));
				QuotaCalendar.Period next = calendar.next(p);
				long[] args = { n, limit, micros(p.start()), micros(p.end()), micros(next.end()), maxWait, counted, now };
				expected = model.call(mode, n, limit, args[2], args[3], args[4], maxWait, counted, now);
				actual = script(script, key, mode, args);
				trace.add(mode + " n=" + n + " maxWait=" + maxWait + " counted=" + counted + " now=" + now + " guess="
						+ guess + " -> " + java.util.Arrays.toString(actual));
				if (!java.util.Arrays.equals(expected, actual)) {
					fail("reply differs: expected " + java.util.Arrays.toString(expected) + "\n" + String.join("\n", trace));
				}
				if (actual[0] != -1) {
					break;
				}
				guess = actual[3]; // the script's time: the caller's next guess
			}
			checkStored(key, model, trace);
			if (actual[0] == 1 || actual[0] == 2) {
				long period = (actual[0] == 1) ? actual[4] : actual[5];
				granted.merge(period, n, Long::sum);
				grants.add(new long[] { n, period });
			}
			if (mode.equals("cancel")) {
				// what a give-back may let through again: in the period the claim was counted in
				givenBack.merge(counted, n, Long::sum);
			}
			else if (mode.equals("refund")) {
				givenBack.merge(actual[4], n, Long::sum); // in the running period
			}
			else if (mode.equals("reset")) {
				reset.add(actual[4]); // a reset gives the whole allowance again: no bound on that period
			}
		}
		for (Map.Entry<Long, Long> period : granted.entrySet()) {
			long back = givenBack.getOrDefault(period.getKey(), 0L);
			if (!reset.contains(period.getKey()) && period.getValue() > 8 + back) {
				fail("period " + period.getKey() + " granted " + period.getValue() + " (given back " + back + ")\n"
						+ String.join("\n", trace));
			}
		}
	}

	/** The next instant: within the period, across boundaries, or back. */
	private static long move(SplittableRandom random, QuotaCalendar calendar, long now) {
		long length = period(calendar, now);
		return switch (random.nextInt(6)) {
			case 0 -> now;
			case 1 -> now + random.nextLong(1 + length / 10);
			case 2 -> micros(calendar.periodOf(micros(now)).end()) + random.nextInt(3) - 1;
			case 3 -> now + random.nextLong(1 + 3 * length);
			case 4 -> now - random.nextLong(1 + length / 2);
			default -> now + random.nextLong(1_000_000);
		};
	}

	private static long period(QuotaCalendar calendar, long now) {
		QuotaCalendar.Period p = calendar.periodOf(micros(now));
		return micros(p.end()) - micros(p.start());
	}

	private static long[] script(String script, String key, String mode, long[] args) {
		List<Object> reply = redis.admin()
			.eval(script, ScriptOutputType.MULTI, new String[] { key }, mode, Long.toString(args[0]),
					Long.toString(args[1]), Long.toString(args[2]), Long.toString(args[3]), Long.toString(args[4]),
					Long.toString(args[5]), Long.toString(args[6]), Long.toString(args[7]));
		long[] values = new long[reply.size()];
		for (int i = 0; i < values.length; i++) {
			values[i] = (Long) reply.get(i);
		}
		return values;
	}

	private static void checkStored(String key, Model model, List<String> trace) {
		Map<String, String> hash = redis.admin().hgetall(key);
		if (model.s == null) {
			if (!hash.isEmpty()) {
				fail("stored " + hash + ", expected nothing\n" + String.join("\n", trace));
			}
			return;
		}
		Map<String, String> expected = Map.of("s", Long.toString(model.s), "e", Long.toString(model.e), "u",
				Long.toString(model.u), "w", Long.toString(model.w));
		if (!expected.equals(hash)) {
			fail("stored " + hash + ", expected " + expected + "\n" + String.join("\n", trace));
		}
	}

	private static long micros(Instant instant) {
		return instant.getEpochSecond() * 1_000_000L + instant.getNano() / 1000;
	}

	private static Instant micros(long micros) {
		return Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000L);
	}
}
