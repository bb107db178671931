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
 * Striped mode, clock standing still, every stripe holding 1 token ({@code COUNT} in all, at least 4 with 2
 * processors): a take of 1 on stripe 0 races {@code updateLimit(2)}, which folds and drops the excess. Take
 * first: {@code COUNT - 1} left, cut to 2. Limit first: 2 left, and the take leaves 1. r2: available.
 */
@JCStressTest
@Outcome(id = "true, 2", expect = ACCEPTABLE, desc = "the grant, then the new limit")
@Outcome(id = "true, 1", expect = ACCEPTABLE, desc = "the new limit, then the grant")
@Outcome(id = "false, .*", expect = FORBIDDEN, desc = "a take of a token that was there refused")
@Outcome(expect = FORBIDDEN, desc = "a state no order of the two calls gives (above the new limit, or a grant lost)")
@State
public class StripeGrantRacingUpdateLimit {

	private final SharedTokenBucket bucket = StripedBuckets.striped(1, StripedBuckets.COUNT + 1);

	@Actor
	public void stripeGrant(ZJ_Result r) {
		StripedBuckets.on(0);
		r.r1 = this.bucket.tryAcquire(1);
	}

	@Actor
	public void updateLimit() {
		this.bucket.updateLimit(2);
	}

	@Arbiter
	public void after(ZJ_Result r) {
		r.r2 = (long) this.bucket.snapshot().available();
	}
}
