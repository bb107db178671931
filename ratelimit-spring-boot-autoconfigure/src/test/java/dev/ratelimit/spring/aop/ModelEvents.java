package dev.ratelimit.spring.aop;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;

/**
 * What callers saw in a step of a model test, as the application did it and as the reference says it
 * should have: the application's events come from its threads (methods run, futures completed), the
 * reference's from the test; after each step both are sorted in one order, logged to the trace, and
 * must be equal.
 *
 * <p>Read by {@link AsyncSingleBucketModelTests} and {@link SeveralBucketsPollModelTests}, each with an
 * event record of its own.
 *
 * @param <E> what an event is
 */
final class ModelEvents<E> {

	private final Comparator<E> order;

	private final String what;

	private final List<E> expected = new ArrayList<>();

	private final List<E> actual = Collections.synchronizedList(new ArrayList<>());

	/**
	 * @param order the order both sides are compared in (events at one instant may come in any order)
	 * @param what what the events are, for the failure's message
	 */
	ModelEvents(Comparator<E> order, String what) {
		this.order = order;
		this.what = what;
	}

	/** The reference says callers see this. */
	void expect(E event) {
		this.expected.add(event);
	}

	/** Callers saw this (on any thread). */
	void saw(E event) {
		this.actual.add(event);
	}

	/** Both sides of the step, sorted, logged (the application's only when they differ) and compared; then cleared. */
	void compare(ModelTrace trace) {
		List<E> actual;
		synchronized (this.actual) {
			actual = new ArrayList<>(this.actual);
			this.actual.clear();
		}
		actual.sort(this.order);
		List<E> expected = new ArrayList<>(this.expected);
		this.expected.clear();
		expected.sort(this.order);
		for (E event : expected) {
			trace.log("  reference: %s", event);
		}
		if (!actual.equals(expected)) {
			for (E event : actual) {
				trace.log("  application: %s", event);
			}
			throw new AssertionError(this.what + ": application " + actual + ", reference " + expected);
		}
	}
}
