package dev.ratelimit.core;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * Striped mode, clock standing still, every stripe holding 1 token ({@code COUNT} in all), limit
 * {@code COUNT + 1}: a take of 1 on stripe 0 races {@code refund(2)}, which folds. A refund never lifts the
 * bucket above its limit, so the order matters: take first, {@code COUNT - 1 + 2 = COUNT + 1} are left;
 * refund first, the bucket fills to {@code COUNT + 1} (one token of the refund is lost at the limit) and the
 * take leaves {@code COUNT}. r2: available less {@code COUNT}.
 */
@JCStressTest
@Outcome(id = "true, 1", expect = ACCEPTABLE, desc = "the grant, then the refund")
@Outcome(id = "true, 0", expect = ACCEPTABLE, desc = "the refund (capped at the limit), then the grant")
@Outcome(id = "true, 2", expect = FORBIDDEN, desc = "above the limit, or the stripe's grant lost by the fold")
@Outcome(id = "false, .*", expect = FORBIDDEN, desc = "a take of a token that was there refused")
@Outcome(expect = FORBIDDEN, desc = "a state no order of the two calls gives")
@State
public class StripeGrantRacingRefund {

	private final SharedTokenBucket bucket = StripedBuckets.striped(1, StripedBuckets.COUNT + 1);

	@Actor
	public void stripeGrant(ZJ_Result r) {
		StripedBuckets.on(0);
		r.r1 = this.bucket.tryAcquire(1);
	}

	@Actor
	public void refund() {
		this.bucket.refund(2);
	}

	@Arbiter
	public void after(ZJ_Result r) {
		r.r2 = (long) this.bucket.snapshot().available() - StripedBuckets.COUNT;
	}
}
