package dev.ratelimit.spring.engine;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.LongConsumer;

/**
 * The rounds of polls of one claim that waits without a thread ({@code CompletionStage} and {@code Mono}
 * calls). A wake-up (a caller ahead gave up, a release, a retune) starts a new round at once, and polls of
 * older rounds, scheduled before it, do nothing. While a wake-up's round is queued and has not started,
 * later wake-ups add nothing: it polls after them, so it sees every change they announced. Otherwise a
 * burst of wake-ups queues a poll per wake-up per waiting claim on one scheduler, which falls behind, and
 * every waiting call is granted as late as it is behind.
 */
final class PollRounds {

	/** The round in force: polls of an older round do nothing. */
	private final AtomicLong round = new AtomicLong();

	/** Whether a wake-up's round is queued and has not started. */
	private final AtomicBoolean wakePending = new AtomicBoolean();

	/**
	 * A wake-up: queues a poll of a new round, unless a wake-up's round is queued already.
	 *
	 * @param queue where the round's first poll goes (the timer, or Reactor's scheduler)
	 * @param poll polls the claim as a poll of the given round
	 */
	void wake(Consumer<Runnable> queue, LongConsumer poll) {
		if (this.wakePending.getAndSet(true)) {
			return;
		}
		long next = this.round.incrementAndGet();
		queue.accept(() -> {
			this.wakePending.set(false); // wake-ups from now on queue another round
			poll.accept(next);
		});
	}

	/**
	 * Whether a poll of round {@code mine} is still in force (no wake-up has started a newer round).
	 *
	 * @param mine the poll's round ({@code 0} for the first)
	 * @return whether the poll goes on
	 */
	boolean inForce(long mine) {
		return this.round.get() == mine;
	}
}
