package dev.ratelimit.core;

import java.time.Duration;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.II_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * S6 and {@code deficiency}: a clock that stands still, a bucket in rover mode holding {@code 2 * COUNT} tokens
 * that stripes at the first covered claim (the eager hook). One caller takes 1 token, and stripes; the other
 * grabs {@code 10 * COUNT} tokens, far more than there are, and asks {@code deficiency} of its ticket. The clock
 * stands still, so that ticket is never covered, whatever the order: {@code deficiency} must never say 0
 * (r2: how many of its three readings said 0).
 *
 * <p>The race: the grab moves the tail on the lock-free path after the striper read it and before the
 * striper published its striped state (S1), so the grab sees the rover state unchanged after its CAS and returns
 * its ticket; the striper publishes the striped state, then finds the tail moved and nothing to reserve and
 * puts a rover state back. A {@code deficiency} that reads the striped state in between treats it as "every
 * ticket covered" ({@code State.marker()}), though this ticket was handed out, uncovered, before it.
 */
@JCStressTest
@Outcome(id = { "0, 0", "1, 0" }, expect = ACCEPTABLE, desc = "the grab's ticket never read as covered")
@Outcome(expect = FORBIDDEN, desc = "deficiency said 0 for a ticket that was never covered")
@State
public class GrabRacingStripeReservation {

	private final SharedTokenBucket bucket;

	public GrabRacingStripeReservation() {
		this.bucket = SharedTokenBucket.builder()
			.rate(1, Duration.ofDays(1))
			.limit(1_000L * StripedBuckets.COUNT)
			.initial(2L * StripedBuckets.COUNT)
			.clock(() -> 0L)
			.build();
		this.bucket.stripeEagerly(() -> 0);
	}

	@Actor
	public void striper(II_Result r) {
		r.r1 = this.bucket.tryAcquire(1) ? 1 : 0;
	}

	@Actor
	public void grabber(II_Result r) {
		long ticket = this.bucket.grab(10L * StripedBuckets.COUNT);
		int zeros = 0;
		for (int i = 0; i < 3; i++) {
			zeros += (this.bucket.deficiency(ticket) == 0) ? 1 : 0;
		}
		r.r2 = zeros;
	}
}
