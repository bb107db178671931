package dev.ratelimit.spring.engine;

import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.Reservation;
import reactor.core.publisher.Mono;
import reactor.core.publisher.MonoSink;
import reactor.core.scheduler.Schedulers;

/**
 * Waits for a claim without blocking a thread: on subscription the claim is made, then polled on
 * Reactor's parallel scheduler (at once again when a caller ahead gives up, or tokens are released),
 * and the permit is emitted once the tokens are there. Cancelling gives the claim back. Shared by
 * {@code Mono}/{@code Flux} methods and the WebFlux filter of web rules; loaded only with Reactor.
 */
public final class ReactivePermits {

	private ReactivePermits() {
	}

	/**
	 * The permit of a claim, once it is covered.
	 *
	 * @param claim makes the claim (called on subscription); may throw a refusal
	 * @param refusal what a refusal (or another failure of the claim) becomes as an error signal
	 * @return the permit, or an error
	 */
	public static Mono<Permit> permit(Supplier<Reservation> claim, Function<RuntimeException, Throwable> refusal) {
		return Mono.<Permit>create((sink) -> {
			Reservation reservation;
			try {
				reservation = claim.get();
			}
			catch (RuntimeException ex) {
				sink.error(refusal.apply(ex));
				return;
			}
			sink.onCancel(reservation::cancel);
			new Polls(reservation, sink, refusal).start();
		})
			// a permit taken as the subscriber cancels (the claim granted, so its cancel gives nothing back) is
			// discarded by the sink and reaches nobody downstream: closed here, its tokens and pins go back
			.doOnDiscard(Permit.class, Permit::close);
	}

	/** The polls of one claim, in rounds ({@link PollRounds}) on Reactor's parallel scheduler. */
	private static final class Polls {

		private final Reservation reservation;

		private final MonoSink<Permit> sink;

		private final Function<RuntimeException, Throwable> refusal;

		private final PollRounds rounds = new PollRounds();

		Polls(Reservation reservation, MonoSink<Permit> sink, Function<RuntimeException, Throwable> refusal) {
			this.reservation = reservation;
			this.sink = sink;
			this.refusal = refusal;
		}

		void start() {
			this.reservation.onWake(this::wake);
			poll(0);
		}

		private void wake() {
			this.rounds.wake((task) -> schedule(task, 0), this::poll);
		}

		private void poll(long mine) {
			if (!this.rounds.inForce(mine)) {
				return;
			}
			long delay;
			try {
				delay = this.reservation.poll();
			}
			catch (IllegalStateException ex) {
				return; // granted by another round (a wake-up raced it), or cancelled: handled there
			}
			catch (RuntimeException ex) {
				this.sink.error(this.refusal.apply(ex));
				return;
			}
			if (delay > 0) {
				schedule(() -> poll(mine), delay);
				return;
			}
			Permit permit;
			try {
				permit = this.reservation.permit();
			}
			catch (IllegalStateException ex) {
				return; // cancelled meanwhile: the tokens went back with the cancel
			}
			this.sink.success(permit);
		}

		/**
		 * Schedules a poll on Reactor's parallel scheduler; when it refuses (disposed: the application is
		 * shutting down), nobody would poll the claim again, so its tokens go back and the call fails.
		 */
		private void schedule(Runnable poll, long delayNanos) {
			try {
				if (delayNanos == 0) {
					Schedulers.parallel().schedule(poll);
				}
				else {
					Schedulers.parallel().schedule(poll, delayNanos, TimeUnit.NANOSECONDS);
				}
			}
			catch (RejectedExecutionException ex) {
				if (this.reservation.cancel()) {
					this.sink.error(ex);
				}
			}
		}
	}
}
