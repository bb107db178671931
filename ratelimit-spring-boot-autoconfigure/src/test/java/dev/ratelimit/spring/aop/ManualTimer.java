package dev.ratelimit.spring.aop;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.PriorityQueue;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.Callable;
import java.util.concurrent.Delayed;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The starter's timer (and, for {@code Mono} tests, Reactor's parallel scheduler), run by the test: a task
 * runs when the test moves the clock past its due time, with the clock at that time (never back), in due
 * order (then in the order they were scheduled). So a model test is one thread, deterministic, and takes no
 * real time. Shared by the model tests of this package.
 */
final class ManualTimer extends AbstractExecutorService implements ScheduledExecutorService {

	/** Polls run in one move of the clock before the test calls it a runaway. */
	private static final int MOST_POLLS = 200_000;

	private final AtomicLong clock;

	private final PriorityQueue<Task> tasks = new PriorityQueue<>(
			Comparator.comparingLong((Task t) -> t.due).thenComparingLong((t) -> t.sequence));

	private long sequence;

	private long ran;

	private boolean shutdown;

	ManualTimer(AtomicLong clock) {
		this.clock = clock;
	}

	/** Tasks waiting to run (cancelled ones included until their time comes). */
	int queued() {
		return this.tasks.size();
	}

	/** Tasks run so far. */
	long ran() {
		return this.ran;
	}

	/** Runs every task due by {@code until}, each at its due time; then the clock is at {@code until}. */
	void runUntil(long until) {
		int ran = 0;
		for (;;) {
			Task task = this.tasks.peek();
			if (task == null || task.due > until) {
				break;
			}
			this.tasks.poll();
			if (task.cancelled) {
				continue;
			}
			if (task.due > this.clock.get()) {
				this.clock.set(task.due);
			}
			task.done = true;
			this.ran++;
			task.runnable.run();
			if (++ran > MOST_POLLS) {
				throw new AssertionError("more than " + MOST_POLLS + " polls before " + until + ": a runaway");
			}
		}
		if (until > this.clock.get()) {
			this.clock.set(until);
		}
	}

	@Override
	public void execute(Runnable command) {
		schedule(command, 0, TimeUnit.NANOSECONDS);
	}

	@Override
	public ScheduledFuture<?> schedule(Runnable command, long delay, TimeUnit unit) {
		if (this.shutdown) {
			throw new RejectedExecutionException("shut down");
		}
		Task task = new Task(this.clock.get() + Math.max(0, unit.toNanos(delay)), this.sequence++, command);
		this.tasks.add(task);
		return task;
	}

	@Override
	@SuppressWarnings("unchecked")
	public <V> ScheduledFuture<V> schedule(Callable<V> callable, long delay, TimeUnit unit) {
		// (how Reactor's schedulers schedule a delayed task)
		return (ScheduledFuture<V>) schedule(() -> {
			try {
				callable.call();
			}
			catch (Exception ex) {
				throw new IllegalStateException(ex);
			}
		}, delay, unit);
	}

	@Override
	public ScheduledFuture<?> scheduleAtFixedRate(Runnable command, long initialDelay, long period, TimeUnit unit) {
		throw new UnsupportedOperationException();
	}

	@Override
	public ScheduledFuture<?> scheduleWithFixedDelay(Runnable command, long initialDelay, long delay,
			TimeUnit unit) {
		throw new UnsupportedOperationException();
	}

	@Override
	public void shutdown() {
		this.shutdown = true;
	}

	@Override
	public List<Runnable> shutdownNow() {
		this.shutdown = true;
		List<Runnable> left = new ArrayList<>();
		this.tasks.forEach((task) -> left.add(task.runnable));
		this.tasks.clear();
		return left;
	}

	@Override
	public boolean isShutdown() {
		return this.shutdown;
	}

	@Override
	public boolean isTerminated() {
		return this.shutdown;
	}

	@Override
	public boolean awaitTermination(long timeout, TimeUnit unit) {
		return true;
	}

	private final class Task implements ScheduledFuture<Object> {

		final long due;

		final long sequence;

		final Runnable runnable;

		boolean cancelled;

		boolean done;

		Task(long due, long sequence, Runnable runnable) {
			this.due = due;
			this.sequence = sequence;
			this.runnable = runnable;
		}

		@Override
		public long getDelay(TimeUnit unit) {
			return unit.convert(this.due - ManualTimer.this.clock.get(), TimeUnit.NANOSECONDS);
		}

		@Override
		public int compareTo(Delayed other) {
			return Long.compare(getDelay(TimeUnit.NANOSECONDS), other.getDelay(TimeUnit.NANOSECONDS));
		}

		@Override
		public boolean cancel(boolean mayInterruptIfRunning) {
			if (this.done || this.cancelled) {
				return false;
			}
			this.cancelled = true;
			return true;
		}

		@Override
		public boolean isCancelled() {
			return this.cancelled;
		}

		@Override
		public boolean isDone() {
			return this.done || this.cancelled;
		}

		@Override
		public Object get() {
			return null;
		}

		@Override
		public Object get(long timeout, TimeUnit unit) {
			return null;
		}
	}
}
