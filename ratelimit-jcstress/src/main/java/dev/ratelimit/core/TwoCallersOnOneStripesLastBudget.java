package dev.ratelimit.core;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * Striped mode, clock standing still, every stripe holding 1 token (so {@code COUNT} in all): two callers
 * take 1 each from stripe 0. One gets the stripe's last token, the other finds it spent (or busy) and folds,
 * which finds the other stripes' tokens: both are granted, and {@code COUNT - 2} are left (r3: available less
 * that).
 */
@JCStressTest
@Outcome(id = "true, true, 0", expect = ACCEPTABLE, desc = "one from the stripe, the other after a fold")
@Outcome(id = "true, true, .*", expect = FORBIDDEN, desc = "both granted, but the tokens left are wrong (one grant lost or counted twice)")
@Outcome(expect = FORBIDDEN, desc = "a caller refused though the bucket held tokens for both")
@State
public class TwoCallersOnOneStripesLastBudget {

	private final SharedTokenBucket bucket = StripedBuckets.striped(1, StripedBuckets.COUNT + 1);

	@Actor
	public void first(ZZJ_Result r) {
		StripedBuckets.on(0);
		r.r1 = this.bucket.tryAcquire(1);
	}

	@Actor
	public void second(ZZJ_Result r) {
		StripedBuckets.on(0);
		r.r2 = this.bucket.tryAcquire(1);
	}

	@Arbiter
	public void after(ZZJ_Result r) {
		r.r3 = (long) this.bucket.snapshot().available() - (StripedBuckets.COUNT - 2);
	}
}
