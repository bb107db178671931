package dev.ratelimit.core;

import java.util.function.ToLongFunction;

/**
 * Waking the callers asleep on a limiter's claims, the same for every limiter of the core: all of them
 * (the level rose for everyone), or only those behind a ticket (a claim given back moves up the claims
 * behind it and leaves those ahead where they are). A woken caller looks again; waking one that has
 * nothing to gain costs it a look, never a grant.
 */
final class Sleepers {

	private Sleepers() {
	}

	static void wakeAll(Iterable<? extends AbstractReservation> sleepers) {
		for (AbstractReservation claim : sleepers) {
			claim.wake();
		}
	}

	static <C extends AbstractReservation> void wakeBehind(Iterable<C> sleepers, long ticket, ToLongFunction<C> ticketOf) {
		for (C claim : sleepers) {
			if (ticketOf.applyAsLong(claim) - ticket > 0) {
				claim.wake();
			}
		}
	}
}
