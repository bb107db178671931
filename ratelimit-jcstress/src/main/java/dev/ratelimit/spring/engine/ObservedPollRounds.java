package dev.ratelimit.spring.engine;

import java.util.Queue;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One claim's {@link PollRounds} as the jcstress tests of this package drive it: a change (what a wake-up
 * announces: a give-up, a release, a retune) is a counter the waker increments before it wakes; the queue
 * (the timer, or Reactor's scheduler) is a queue the tests run by hand; a poll that goes on (its round is in
 * force) records the count of changes it saw. Not a test: jcstress runs only the {@code @JCStressTest}s.
 */
final class ObservedPollRounds {

	/** No poll went on. */
	static final int NONE = -1;

	final PollRounds rounds = new PollRounds();

	/** The changes announced so far. */
	private final AtomicInteger changes = new AtomicInteger();

	/** The queued runnables (the rounds' first polls), not yet run. */
	private final Queue<Runnable> queue = new ConcurrentLinkedQueue<>();

	/** How many runnables the wake-ups queued in all. */
	private final AtomicInteger queued = new AtomicInteger();

	/** How many queued runnables started. */
	private final AtomicInteger started = new AtomicInteger();

	/** The most runnables queued and not started at once, seen as each was queued. */
	private final AtomicInteger maxBacklog = new AtomicInteger();

	/** The changes seen by the last poll that went on. */
	private volatile int seen = NONE;

	/** The round of the last poll that ran, in force or not. */
	private volatile long lastRound = NONE;

	/** A change, announced by a wake-up. */
	void changeAndWake() {
		this.changes.incrementAndGet();
		wake();
	}

	/** A wake-up without a change. */
	void wake() {
		this.rounds.wake((task) -> {
			this.maxBacklog.accumulateAndGet(this.queued.incrementAndGet() - this.started.get(), Math::max);
			this.queue.add(() -> {
				// counted before the round starts (and lets a wake-up queue another): no false backlog
				this.started.incrementAndGet();
				task.run();
			});
		}, this::poll);
	}

	private void poll(long mine) {
		this.lastRound = mine;
		if (this.rounds.inForce(mine)) {
			this.seen = this.changes.get();
		}
	}

	/**
	 * Runs the oldest queued runnable, if any.
	 *
	 * @return whether one ran
	 */
	boolean runOne() {
		Runnable task = this.queue.poll();
		if (task == null) {
			return false;
		}
		task.run();
		return true;
	}

	/** Runs the queued runnables until none is left (the queue drains). */
	void runAll() {
		while (runOne()) {
			// next
		}
	}

	int changes() {
		return this.changes.get();
	}

	int queued() {
		return this.queued.get();
	}

	int maxBacklog() {
		return this.maxBacklog.get();
	}

	int seen() {
		return this.seen;
	}

	long lastRound() {
		return this.lastRound;
	}
}
