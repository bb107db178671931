package dev.ratelimit.spring.client;

import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;

import dev.ratelimit.spring.ModelSeeds;
import org.junit.jupiter.api.Test;

import org.springframework.http.HttpHeaders;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The listening, checked step by step against an exact reference written for the test: seeded random
 * sequences of servers' answers in every header form (Retry-After in seconds and as an HTTP date, the IETF
 * field with several policies, X-RateLimit-* in seconds and as an epoch, x-ratelimit-*-requests as Go
 * durations, malformed values of each), clock moves, calls passing with costs, pauses and resets, and the
 * max-pause cap. The reference keeps every answer as said (remaining, the mark of the answered call, its
 * reset) and computes the level and the wait from all of them; the gate keeps a compressed staircase.
 * In flight (G5): several calls are out at once and answered in any order (or end without an answer);
 * an answer's cap subtracts the calls out that passed before the answered one, as the reference computes
 * from the calls it knows are out when the answer comes (those passed within the horizon).
 */
class ServerGateModelTests {

	private static final long SECOND = 1_000_000_000L;

	private static final Instant ORIGIN = Instant.parse("2026-11-28T07:00:00Z");

	private static final Duration MAX_PAUSE = Duration.ofSeconds(20);

	private static final int STEPS = 300;

	@Test
	void fixedSequences() {
		run(ModelSeeds.fixed(2000));
	}

	@Test
	void randomSequences() {
		run(ModelSeeds.random(1000));
	}

	private void run(ModelSeeds.Seeds seeds) {
		for (long seed : seeds.list()) {
			List<String> trace = new ArrayList<>();
			try {
				sequence(seed, trace);
			}
			catch (AssertionError ex) {
				throw new AssertionError("seed " + seed + " (" + seeds.what() + ", -Dmodel.seed=" + seed
						+ " replays it)\n" + String.join("\n", trace), ex);
			}
		}
	}

	/** What the reference knows. */
	private static final class Reference {

		long sent;

		long pausedUntil = Long.MIN_VALUE;

		final List<long[]> answers = new ArrayList<>(); // {cap = remaining + mark, reset}

		long cap(long at) {
			long cap = Long.MAX_VALUE;
			for (long[] answer : this.answers) {
				if (answer[1] > at) {
					cap = Math.min(cap, answer[0]);
				}
			}
			return cap;
		}

		/** The earliest instant from now when a call of cost passes, minus now. */
		long delay(long cost, long now) {
			List<Long> candidates = new ArrayList<>();
			candidates.add(now);
			candidates.add(this.pausedUntil);
			for (long[] answer : this.answers) {
				candidates.add(answer[1]);
			}
			long best = Long.MAX_VALUE;
			for (long t : candidates) {
				if (t < now || t < this.pausedUntil) {
					continue;
				}
				long cap = cap(t);
				if (cap == Long.MAX_VALUE || cap - this.sent >= cost) {
					best = Math.min(best, t);
				}
			}
			return best - now;
		}

		long level(long now) {
			if (this.pausedUntil > now) {
				return 0;
			}
			long cap = cap(now);
			return (cap == Long.MAX_VALUE) ? Long.MAX_VALUE : Math.max(0, cap - this.sent);
		}

		/** Answers that decide something: not dominated by one with a cap no higher and a reset no earlier. */
		int steps(long now) {
			int steps = 0;
			for (long[] a : this.answers) {
				boolean dominated = a[1] <= now;
				for (long[] b : this.answers) {
					if (b != a && b[0] <= a[0] && b[1] >= a[1] && (b[0] < a[0] || b[1] > a[1] || b.hashCode() < a.hashCode())) {
						dominated = true;
					}
				}
				steps += dominated ? 0 : 1;
			}
			return steps;
		}
	}

	private void sequence(long seed, List<String> trace) {
		SplittableRandom random = new SplittableRandom(seed);
		long[] clock = { 5 * SECOND + random.nextLong(SECOND) };
		InstantSource wall = () -> ORIGIN.plusNanos(clock[0]);
		ServerAnswers answers = new ServerAnswers(MAX_PAUSE, wall);
		ServerGate gate = new ServerGate();
		Reference reference = new Reference();
		List<long[]> out = new ArrayList<>(); // {mark, cost, passed}: the calls out, in the reference
		long maxPause = MAX_PAUSE.toNanos();
		for (int step = 0; step < STEPS; step++) {
			long now = clock[0];
			int op = random.nextInt(10);
			out.removeIf((call) -> call[2] <= now - ServerGate.FLIGHT_HORIZON);
			if (op == 9 && !out.isEmpty() && random.nextBoolean()) { // a call ends without an answer
				long[] call = out.remove(random.nextInt(out.size()));
				gate.done(call[0], call[1], now);
				trace.add("done without an answer: mark " + call[0] + " cost " + call[1]);
			}
			else if (op == 8 && !out.isEmpty() && random.nextInt(4) == 0) { // the latest pass taken back
				long[] call = out.remove(out.size() - 1);
				gate.unpass(call[0], call[1]);
				reference.sent -= call[1];
				trace.add("unpass: mark " + call[0] + " cost " + call[1]);
			}
			else if (op < 2) {
				long by = random.nextBoolean() ? random.nextLong(3 * SECOND) : random.nextInt(3) * SECOND;
				clock[0] += by;
				trace.add("clock +" + by);
			}
			else if (op < 5) {
				long cost = random.nextInt(3);
				long expectedDelay = reference.delay(cost, now);
				long mark = gate.tryPass(cost, now);
				trace.add("pass " + cost + " -> " + mark + " (reference delay " + expectedDelay + ")");
				if (expectedDelay == 0) {
					reference.sent += cost;
					assertThat(mark).as("mark").isEqualTo(reference.sent);
					out.add(new long[] { mark, cost, now });
				}
				else {
					assertThat(mark).as("held back").isEqualTo(-1);
				}
			}
			else {
				HttpHeaders headers = new HttpHeaders();
				int status = random.nextInt(3) == 0 ? (random.nextBoolean() ? 429 : 503) : 200;
				long expectedPause = 0;
				List<long[]> expectedLowerings = new ArrayList<>();
				int form = random.nextInt(7);
				// any call out may be answered first; with none out, a call whose mark is the count now
				long[] answered = out.isEmpty() ? new long[] { reference.sent, 0, now } : out.get(random.nextInt(out.size()));
				long mark = answered[0];
				long before = 0; // G5: the calls out that passed before the answered one
				for (long[] call : out) {
					if (call[0] < mark) {
						before += call[1];
					}
				}
				long remaining = random.nextInt(6);
				long seconds = random.nextInt(30);
				switch (form) {
					case 0 -> { // Retry-After seconds
						headers.set("Retry-After", String.valueOf(seconds));
						expectedPause = seconds * SECOND;
					}
					case 1 -> { // Retry-After HTTP date
						Instant target = wall.instant().truncatedTo(java.time.temporal.ChronoUnit.SECONDS)
							.plusSeconds(seconds - 2);
						headers.set("Retry-After",
								DateTimeFormatter.RFC_1123_DATE_TIME.format(target.atOffset(ZoneOffset.UTC)));
						expectedPause = Math.max(0, Duration.between(wall.instant(), target).toNanos());
					}
					case 2 -> { // IETF, one or two policies
						long r2 = random.nextInt(6);
						long t2 = random.nextInt(30);
						if (random.nextBoolean()) {
							headers.set("RateLimit", "\"a\";r=" + remaining + ";t=" + seconds + ", b;r=" + r2 + ";t=" + t2
									+ ";pk=:cHJvYmxlbQ==:");
							if (r2 < remaining || (r2 == remaining && t2 > seconds)) {
								remaining = r2;
								seconds = t2;
							}
						}
						else {
							headers.set("RateLimit", "\"default\";r=" + remaining + ";t=" + seconds);
						}
						expectedLowerings.add(new long[] { remaining, seconds * SECOND });
					}
					case 3 -> { // X-RateLimit, seconds or epoch
						headers.set("X-RateLimit-Remaining", String.valueOf(remaining));
						if (random.nextBoolean()) {
							headers.set("X-RateLimit-Reset", String.valueOf(seconds));
							expectedLowerings.add(new long[] { remaining, seconds * SECOND });
						}
						else {
							long epoch = wall.instant().getEpochSecond() + seconds;
							headers.set("X-RateLimit-Reset", String.valueOf(epoch));
							expectedLowerings.add(new long[] { remaining,
									Math.max(0, Duration.between(wall.instant(), Instant.ofEpochSecond(epoch)).toNanos()) });
						}
					}
					case 4 -> { // OpenAI
						headers.set("x-ratelimit-remaining-requests", String.valueOf(remaining));
						headers.set("x-ratelimit-reset-requests", (seconds / 60 > 0 ? (seconds / 60) + "m" : "")
								+ (seconds % 60) + "s");
						expectedLowerings.add(new long[] { remaining, seconds * SECOND });
					}
					case 5 -> { // malformed values of each form
						String[] bad = { "-5", "1.5", "soon", "" };
						String value = bad[random.nextInt(bad.length)];
						switch (random.nextInt(4)) {
							case 0 -> headers.set("Retry-After", value);
							case 1 -> headers.set("RateLimit", "\"a\";r=" + value + ";t=5");
							case 2 -> {
								headers.set("X-RateLimit-Remaining", value);
								headers.set("X-RateLimit-Reset", "5");
							}
							default -> {
								headers.set("x-ratelimit-remaining-requests", "1");
								headers.set("x-ratelimit-reset-requests", value + "x");
							}
						}
					}
					default -> { // a field without its pair
						headers.set(random.nextBoolean() ? "X-RateLimit-Remaining" : "x-ratelimit-reset-requests", "0");
					}
				}
				boolean pauses = status != 200 && expectedPause > 0;
				trace.add("answer " + status + " " + headers + " to mark " + mark + " (" + before + " out before it)");
				ServerAnswers.Heard heard = answers.read(status, headers);
				ClientLimits.obey(gate, heard, mark, now);
				if (out.remove(answered)) {
					gate.done(answered[0], answered[1], now);
				}
				if (pauses) {
					reference.pausedUntil = Math.max(reference.pausedUntil, now + Math.min(expectedPause, maxPause));
				}
				for (long[] lowering : expectedLowerings) {
					long reset = now + Math.min(lowering[1], maxPause);
					if (reset > now) {
						reference.answers.add(new long[] { lowering[0] + mark - before, reset });
					}
				}
			}
			long at = clock[0];
			long outstanding = 0;
			for (long[] call : out) {
				outstanding += (call[2] > at - ServerGate.FLIGHT_HORIZON) ? call[1] : 0;
			}
			assertThat(gate.outstanding(at)).as("tokens of the calls out").isEqualTo(outstanding);
			if (reference.steps(at) <= ServerGate.MAX_STEPS) {
				assertThat(gate.level(at)).as("level").isEqualTo(reference.level(at));
			}
			else {
				assertThat(gate.level(at)).as("level (compressed)").isLessThanOrEqualTo(reference.level(at));
			}
			for (long cost = 0; cost < 4; cost++) {
				long expected = reference.delay(cost, at);
				long delay = gate.delay(cost, at);
				if (reference.steps(at) <= ServerGate.MAX_STEPS) {
					assertThat(delay).as("delay of cost " + cost).isEqualTo(expected);
				}
				else {
					assertThat(delay).as("delay of cost " + cost + " (compressed)").isGreaterThanOrEqualTo(expected);
				}
			}
		}
	}
}
