package dev.ratelimit.spring.client;

import java.util.ArrayList;
import java.util.List;

/**
 * What the server said about one bucket (or one key's bucket) of outbound calls, kept in this JVM: a pause
 * (a 429 or 503 with {@code Retry-After}) and lowerings (a remaining count until a reset). The front end
 * asks it before a call is sent, alongside the engine's claim; it only ever holds calls back, never lets
 * through a call the bucket would not. The gate of a bucket whose backend keeps none ({@link SharedGates}).
 *
 * <pre>{@code
 * ServerGate gate = new ServerGate();
 * gate.pause(now + 30_000_000_000L, now);   // Retry-After: 30
 * gate.delay(1, now);                       // 30 s
 * }</pre>
 *
 * <p>Memory consistency effects: every method runs under the gate's monitor.
 */
public final class ServerGate implements Gate {

	/*
	 * State, all under the monitor (a gate is touched once per call and once per answer):
	 *
	 * sent        tokens of calls that passed the gate since it was made, a counter that only grows.
	 * pausedUntil clock reading before which no call passes (paused == false: no pause).
	 * steps       the lowerings in force, as caps on `sent`: an answer "r remain until reset" to a call
	 *             after whose passing `sent` was m caps `sent` at r + m until reset, so the calls that
	 *             passed after the answered one are subtracted from what the server said remains.
	 *
	 * G1. steps is sorted by reset, strictly increasing, and its caps are strictly increasing too: a
	 *     lowering with a cap no lower and a reset no later than another's is dominated (it never
	 *     decides anything) and is dropped, so the level in force is the first step's cap minus sent.
	 * G2. a lowering never raises a level: the level is the least cap of every lowering whose reset is
	 *     still ahead, which G1's dropping keeps (a dropped lowering's cap is never the least while the
	 *     one that dominates it is in force).
	 * G3. past a step's reset the step is gone: removed on the first look after it.
	 * G4. at most MAX_STEPS steps: beyond that, two neighbours become one with the lower cap and the later
	 *     reset (holding calls back longer, never letting more through).
	 * G5. an answer's cap also subtracts the calls that passed BEFORE the answered one and are still out
	 *     (their answers not heard yet): the server may have counted the answered call before them (two
	 *     connections, a busy server), so its `remaining` need not include them. Calls out are kept in
	 *     `flight` as {mark, cost, passed}: added on every pass, removed by done (the answer heard, or the
	 *     exchange failed), by unpass, and after FLIGHT_HORIZON (a call whose end was never reported holds
	 *     nothing back for ever). The cap of "r remain" answering the call of mark m is
	 *     r + m - (tokens of the calls out whose mark is below m), computed when the answer is heard; G1 to
	 *     G4 hold for these caps as they did (a cap is a number fixed when its answer is heard). A call
	 *     that the server counted before the answered one is then subtracted twice: the gate holds back
	 *     more, never less (ServerGateModelTests, "in flight").
	 */

	/** The most lowerings a gate keeps apart (G4). */
	public static final int MAX_STEPS = 16;

	/** How long a call is counted as out when its end is never reported (G5), as the Redis gate keeps it. */
	static final long FLIGHT_HORIZON = 60_000_000_000L;

	private long sent;

	private boolean paused;

	private long pausedUntil;

	private final List<long[]> steps = new ArrayList<>(); // {cap, reset}

	private final Flight flight = new Flight();

	/**
	 * Whether nothing holds calls back now (no pause and no lowering in force): the blocking path then
	 * takes its tokens the engine's fastest way.
	 */
	synchronized boolean quiet(long now) {
		expire(now);
		return !this.paused && this.steps.isEmpty();
	}

	/**
	 * How long a call of {@code cost} tokens waits before the gate lets it pass (the pause left, or the
	 * time until enough of the lowerings have reset), {@code 0} when it may pass now.
	 */
	@Override
	public synchronized long delay(long cost, long now) {
		expire(now);
		long pause = this.paused ? this.pausedUntil - now : 0;
		long lowered = 0;
		for (int i = 0; i < this.steps.size(); i++) {
			if (this.steps.get(i)[0] - this.sent >= cost) {
				break; // G1: every later step's cap is higher
			}
			lowered = this.steps.get(i)[1] - now; // wait for this step to reset
		}
		return Math.max(pause, lowered);
	}

	/**
	 * Lets a call pass when nothing holds it back: counts its tokens as sent.
	 *
	 * @return the count of sent tokens after it (the call's mark, for its answer), or {@code -1} when it
	 *         must wait ({@link #delay})
	 */
	@Override
	public synchronized long tryPass(long cost, long now) {
		if (delay(cost, now) > 0) {
			return -1;
		}
		return pass(cost, now);
	}

	/**
	 * Counts a call that the gate did not hold back (taken while the gate was {@link #quiet}).
	 *
	 * @return the call's mark
	 */
	synchronized long pass(long cost, long now) {
		this.sent += cost;
		this.flight.add(this.sent, cost, now); // G5
		return this.sent;
	}

	/** Takes back a pass of a call that did not go out after all (another bucket held it back). */
	@Override
	public synchronized void unpass(long mark, long cost) {
		this.sent -= cost;
		this.flight.remove(mark, cost);
	}

	/** The call of {@code mark} is no longer out: its answer was heard, or its exchange failed (G5). */
	@Override
	public synchronized void done(long mark, long cost, long now) {
		this.flight.remove(mark, cost);
	}

	/** Pauses the gate until {@code until} (a longer pause already in force stays). */
	@Override
	public synchronized void pause(long until, long now) {
		if (until - now <= 0) {
			return;
		}
		if (!this.paused || until - this.pausedUntil > 0) {
			this.pausedUntil = until;
			this.paused = true;
		}
	}

	/**
	 * The server said {@code remaining} tokens remain until {@code reset}, answering the call whose mark
	 * was {@code mark}.
	 */
	@Override
	public synchronized void lower(long remaining, long mark, long reset, long now) {
		expire(now);
		if (reset - now <= 0) {
			return;
		}
		long cap = remaining + mark - this.flight.before(mark); // G5
		int at = 0;
		while (at < this.steps.size() && this.steps.get(at)[1] - reset < 0) {
			at++;
		}
		// G1: a step that resets no later with a cap no lower is dominated by this one
		for (int i = at - 1; i >= 0; i--) {
			if (this.steps.get(i)[0] >= cap) {
				this.steps.remove(i);
				at--;
			}
		}
		// this one is dominated by a step that resets no earlier with a cap no higher
		for (int i = at; i < this.steps.size(); i++) {
			if (this.steps.get(i)[0] <= cap) {
				return;
			}
		}
		if (at < this.steps.size() && this.steps.get(at)[1] == reset) {
			this.steps.set(at, new long[] { cap, reset });
		}
		else {
			this.steps.add(at, new long[] { cap, reset });
		}
		if (this.steps.size() > MAX_STEPS) { // G4: merge the two earliest
			long[] first = this.steps.remove(0);
			this.steps.set(0, new long[] { first[0], this.steps.get(0)[1] });
		}
	}

	/** The level the lowerings leave now ({@code Long.MAX_VALUE} without one); 0 while paused. */
	@Override
	public synchronized long level(long now) {
		expire(now);
		if (this.paused) {
			return 0;
		}
		return this.steps.isEmpty() ? Long.MAX_VALUE : Math.max(0, this.steps.get(0)[0] - this.sent);
	}

	/** Tokens of the calls out now (G5), for tests. */
	synchronized long outstanding(long now) {
		expire(now);
		return this.flight.before(Long.MAX_VALUE);
	}

	/** G3, and G5's horizon. */
	private void expire(long now) {
		this.flight.expire(now - FLIGHT_HORIZON);
		if (this.paused && this.pausedUntil - now <= 0) {
			this.paused = false;
		}
		while (!this.steps.isEmpty() && this.steps.get(0)[1] - now <= 0) {
			this.steps.remove(0);
		}
	}

	/**
	 * The calls out (G5), in three parallel arrays in the order they passed: no allocation per call once
	 * the arrays are as large as the calls out at once.
	 */
	private static final class Flight {

		private long[] marks = new long[8];

		private long[] costs = new long[8];

		private long[] passed = new long[8];

		private int size;

		void add(long mark, long cost, long now) {
			if (this.size == this.marks.length) {
				this.marks = java.util.Arrays.copyOf(this.marks, this.size * 2);
				this.costs = java.util.Arrays.copyOf(this.costs, this.size * 2);
				this.passed = java.util.Arrays.copyOf(this.passed, this.size * 2);
			}
			this.marks[this.size] = mark;
			this.costs[this.size] = cost;
			this.passed[this.size] = now;
			this.size++;
		}

		/** Removes one call of that mark and cost (the latest such, as an unpass takes back the latest). */
		void remove(long mark, long cost) {
			for (int i = this.size - 1; i >= 0; i--) {
				if (this.marks[i] == mark && this.costs[i] == cost) {
					removeAt(i);
					return;
				}
			}
		}

		/** Tokens of the calls out whose mark is below {@code mark}. */
		long before(long mark) {
			long tokens = 0;
			for (int i = 0; i < this.size; i++) {
				if (this.marks[i] < mark) {
					tokens += this.costs[i];
				}
			}
			return tokens;
		}

		/** Drops the calls that passed at or before {@code horizon}. */
		void expire(long horizon) {
			for (int i = this.size - 1; i >= 0; i--) {
				if (this.passed[i] - horizon <= 0) {
					removeAt(i);
				}
			}
		}

		private void removeAt(int i) {
			int tail = this.size - i - 1;
			System.arraycopy(this.marks, i + 1, this.marks, i, tail);
			System.arraycopy(this.costs, i + 1, this.costs, i, tail);
			System.arraycopy(this.passed, i + 1, this.passed, i, tail);
			this.size--;
		}
	}
}
