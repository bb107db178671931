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
 * The production path, no hooks: a bucket holding many more tokens than three callers ask for, clock standing
 * still. Two callers take tokens one at a time and race on the tail, so that one loses its CAS and stripes the
 * bucket (S1: the lock reserves every stripe's budget by moving the tail) while the other goes on taking on the
 * lock-free path. Every take must be granted (r1, r2: the grants of each). A take that reads the rover state from before the
 * stripes were published and the tail after their reservation counts the reserved budgets as taken, and is
 * refused though the tokens are there.
 */
@JCStressTest
@Outcome(id = "10, 10", expect = ACCEPTABLE, desc = "every take granted")
@Outcome(expect = FORBIDDEN, desc = "a take refused while the bucket held tokens for it")
@State
public class RoverRefusalRacingStripeReservation {

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofDays(1))
		.limit(64L * StripedBuckets.COUNT)
		.clock(() -> 0L)
		.build();

	@Actor
	public void first(II_Result r) {
		r.r1 = takes(10);
	}

	@Actor
	public void second(II_Result r) {
		r.r2 = takes(10);
	}

	private int takes(int count) {
		int granted = 0;
		for (int i = 0; i < count; i++) {
			granted += this.bucket.tryAcquire(1) ? 1 : 0;
		}
		return granted;
	}
}
