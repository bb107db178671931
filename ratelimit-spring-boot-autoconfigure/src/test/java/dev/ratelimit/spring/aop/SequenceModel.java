package dev.ratelimit.spring.aop;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The part of a model test's model that runs seeded sequences, one after the other, on one application:
 * each first finishes what the previous one left (an hour later every waiting call is decided, then every
 * open call completes, each step checked), then moves the clock a day ahead (every bucket full), then plays
 * its random steps, each checked; a failure is thrown again with the seed, the configuration and the trace
 * ({@link ModelTrace}). What a step is, what a check compares and how a call completes are the test's.
 *
 * <p>Extended by the models of {@link AsyncSingleBucketModelTests} and {@link SeveralBucketsPollModelTests}.
 *
 * @param <C> a call, as the test's reference sees it
 */
abstract class SequenceModel<C> {

	private static final long HOUR = TimeUnit.HOURS.toNanos(1);

	private static final long DAY = TimeUnit.DAYS.toNanos(1);

	private final Object configuration;

	private final int steps;

	/** The fake clock the application reads. */
	final AtomicLong clock;

	/** How often each case came up, over every sequence (printed at the end). */
	final Map<String, Long> tally;

	/** The sequence's steps, rendered only when it fails. */
	final ModelTrace trace;

	/** Calls waiting or running, by id. */
	final Map<Long, C> open = new LinkedHashMap<>();

	/** The reference's time (the clock may not move backwards). */
	long now;

	long nextId;

	/** The sequence's draws. */
	SplittableRandom random;

	SequenceModel(Object configuration, int steps, AtomicLong clock, Map<String, Long> tally) {
		this.configuration = configuration;
		this.steps = steps;
		this.clock = clock;
		this.tally = tally;
		this.trace = new ModelTrace(clock);
		this.now = clock.get();
	}

	/** One sequence, drawn from the seed. */
	final void run(long seed) {
		this.random = new SplittableRandom(seed);
		this.trace.run(seed, this.configuration, () -> {
			finishPrevious();
			for (int step = 0; step < this.steps; step++) {
				step();
				check();
			}
		});
	}

	/** What the previous sequence left: waiting calls decided, open ones completed; then a day later. */
	private void finishPrevious() {
		moveTo(this.now + HOUR, "start: an hour later (waiting calls decided)");
		check();
		for (C call : new ArrayList<>(this.open.values())) {
			complete(call, false);
			check();
		}
		if (!this.open.isEmpty()) {
			throw new AssertionError("calls still open at the start: " + this.open.values());
		}
		moveTo(this.now + DAY, "a day later: every bucket full");
		check();
	}

	/** A random step: a call, a completion, a move of the clock, .... */
	abstract void step();

	/** Compares the application with the reference after a step. */
	abstract void check();

	/** A running call completes (with a value, or {@code failing}). */
	abstract void complete(C call, boolean failing);

	/** The clock moves to {@code target}: the application's polls run, the reference decides what falls due. */
	abstract void moveTo(long target, String what);

	/** One more of a case, for the tally. */
	final void count(String what) {
		this.tally.merge(what, 1L, Long::sum);
	}

	static void equal(String what, Object actual, Object expected) {
		if (!Objects.equals(actual, expected)) {
			throw new AssertionError(what + ": application " + actual + ", reference " + expected);
		}
	}
}
