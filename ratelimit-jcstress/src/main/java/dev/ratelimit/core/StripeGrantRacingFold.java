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
 * Striped mode, clock standing still, every stripe holding 1 token and the bucket nothing else (so
 * {@code COUNT} tokens in all): a take of 1 on stripe 0 races a take of all {@code COUNT} tokens on stripe 1,
 * which its stripe cannot cover, so it folds the stripes. Exactly one of them is granted, and the tokens
 * granted plus those left (r3: their sum less {@code COUNT}) are the tokens there were.
 */
@JCStressTest
@Outcome(id = "true, false, 0", expect = ACCEPTABLE, desc = "the stripe's grant first; the fold finds one token short")
@Outcome(id = "false, true, 0", expect = ACCEPTABLE, desc = "the fold first takes every token; the stripe's take finds none")
@Outcome(id = "true, true, .*", expect = FORBIDDEN, desc = "more tokens granted than there were (the fold missed the stripe's grant)")
@Outcome(id = "false, false, .*", expect = FORBIDDEN, desc = "tokens lost: neither granted")
@Outcome(expect = FORBIDDEN, desc = "granted plus left is not what there was: the fold is not exact")
@State
public class StripeGrantRacingFold {

	private final SharedTokenBucket bucket = StripedBuckets.striped(1, StripedBuckets.COUNT + 1);

	@Actor
	public void stripeGrant(ZZJ_Result r) {
		StripedBuckets.on(0);
		r.r1 = this.bucket.tryAcquire(1);
	}

	@Actor
	public void foldingTake(ZZJ_Result r) {
		StripedBuckets.on(1);
		r.r2 = this.bucket.tryAcquire(StripedBuckets.COUNT);
	}

	@Arbiter
	public void after(ZZJ_Result r) {
		long granted = (r.r1 ? 1 : 0) + (r.r2 ? StripedBuckets.COUNT : 0);
		r.r3 = granted + (long) this.bucket.snapshot().available() - StripedBuckets.COUNT;
	}
}
