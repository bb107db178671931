package dev.ratelimit.spring.aop;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
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
		return Mono.create((sink) -> {
			Reservation reservation;
			try {
				reservation = claim.get();
			}
			catch (RuntimeException ex) {
				sink.error(refusal.apply(ex));
				return;
			}
			sink.onCancel(reservation::cancel);
			// woken when a caller ahead gives up: poll again at once; older scheduled polls do nothing
			AtomicLong round = new AtomicLong();
			reservation.onWake(() -> {
				long next = round.incrementAndGet();
				Schedulers.parallel().schedule(() -> poll(reservation, sink, refusal, round, next));
			});
			poll(reservation, sink, refusal, round, 0);
		});
	}

	private static void poll(Reservation reservation, MonoSink<Permit> sink,
			Function<RuntimeException, Throwable> refusal, AtomicLong round, long mine) {
		if (round.get() != mine) {
			return;
		}
		long delay;
		try {
			delay = reservation.poll();
		}
		catch (IllegalStateException ex) {
			return; // cancelled
		}
		catch (RuntimeException ex) {
			sink.error(refusal.apply(ex));
			return;
		}
		if (delay > 0) {
			Schedulers.parallel().schedule(() -> poll(reservation, sink, refusal, round, mine), delay,
					TimeUnit.NANOSECONDS);
			return;
		}
		try {
			sink.success(reservation.permit());
		}
		catch (IllegalStateException ex) {
			// cancelled meanwhile: the tokens went back with the cancel
		}
	}
}
