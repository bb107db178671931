package dev.ratelimit.spring.aop;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The trace of one seeded sequence of a model test: what each step did, at which instant of the fake
 * clock, and the reference's buckets after it; rendered only when the sequence fails, in the failure's
 * message with the seed (and how to replay it) and the configuration.
 *
 * <p>Read by {@link AsyncSingleBucketModelTests} and {@link SeveralBucketsPollModelTests}.
 */
final class ModelTrace {

	private final AtomicLong clock;

	private final List<Line> lines = new ArrayList<>();

	ModelTrace(AtomicLong clock) {
		this.clock = clock;
	}

	/**
	 * Runs one sequence on a new trace; a failure (an assertion, or the application or the reference
	 * throwing) is thrown again with the seed, the configuration and the trace.
	 */
	void run(long seed, Object configuration, Runnable sequence) {
		this.lines.clear();
		try {
			sequence.run();
		}
		catch (AssertionError | RuntimeException ex) {
			StringBuilder message = new StringBuilder("seed ").append(seed)
				.append(" (replay with -Dmodel.seed=")
				.append(seed)
				.append(")\n  ")
				.append(configuration)
				.append('\n');
			for (Line line : this.lines) {
				message.append("  ").append(line).append('\n');
			}
			message.append("  => ").append(ex);
			throw new AssertionError(message.toString(), ex);
		}
	}

	/** A step, at the clock's instant: {@code t=<ns> <text>}, formatted when the trace is rendered. */
	void log(String format, Object... args) {
		this.lines.add(new Line(this.clock.get(), format, args, null));
	}

	/** The reference's buckets, on a line of their own: {@code [reference: name=state ...]}. */
	void reference(String[] names, Object[] states) {
		this.lines.add(new Line(-1, null, null, new Buckets("reference:", names, states)));
	}

	/** The reference's buckets after the last step, on its line: {@code [reference after: name=state ...]}. */
	void referenceAfter(String[] names, Object[] states) {
		this.lines.get(this.lines.size() - 1).after = new Buckets("reference after:", names, states);
	}

	/** The buckets' names and states (rendered by their {@code toString}). */
	private record Buckets(String what, String[] names, Object[] states) {

		@Override
		public String toString() {
			StringBuilder s = new StringBuilder("    [").append(this.what);
			for (int i = 0; i < this.names.length; i++) {
				s.append(' ').append(this.names[i]).append('=').append(this.states[i]);
			}
			return s.append(']').toString();
		}
	}

	/** A line of the trace: a step (and the buckets after it, when checked then), or buckets alone. */
	private static final class Line {

		private final long time;

		private final String format;

		private final Object[] args;

		private Buckets after;

		Line(long time, String format, Object[] args, Buckets after) {
			this.time = time;
			this.format = format;
			this.args = args;
			this.after = after;
		}

		@Override
		public String toString() {
			if (this.format == null) {
				return this.after.toString();
			}
			StringBuilder line = new StringBuilder("t=").append(this.time)
				.append(' ')
				.append(String.format(this.format, this.args));
			if (this.after != null) {
				line.append(this.after);
			}
			return line.toString();
		}
	}
}
