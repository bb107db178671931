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
 * Striped mode, clock standing still, every stripe holding 2 tokens (so {@code 2 * COUNT} in all): on stripe 0
 * one caller takes 2 and the other takes {@code 2 * COUNT - 1}, which only a fold can cover. Together they
 * ask for one token more than there is: exactly one is granted, and granted plus left is {@code 2 * COUNT}
 * (r3: their sum less that).
 */
@JCStressTest
@Outcome(id = "true, false, 0", expect = ACCEPTABLE, desc = "the stripe's budget first; the fold finds one token short")
@Outcome(id = "false, true, 0", expect = ACCEPTABLE, desc = "the fold first; the stripe is empty and so is the bucket but for 1")
@Outcome(id = "true, true, .*", expect = FORBIDDEN, desc = "more tokens granted than there were")
@Outcome(id = "false, false, .*", expect = FORBIDDEN, desc = "tokens lost: neither granted")
@Outcome(expect = FORBIDDEN, desc = "granted plus left is not what there was")
@State
public class TwoCallersOnOneStripeAndTheLastTokens {

	private static final long ALL = 2L * StripedBuckets.COUNT;

	private final SharedTokenBucket bucket = StripedBuckets.striped(2, ALL + 1);

	@Actor
	public void budget(ZZJ_Result r) {
		StripedBuckets.on(0);
		r.r1 = this.bucket.tryAcquire(2);
	}

	@Actor
	public void rest(ZZJ_Result r) {
		StripedBuckets.on(0);
		r.r2 = this.bucket.tryAcquire(ALL - 1);
	}

	@Arbiter
	public void after(ZZJ_Result r) {
		long granted = (r.r1 ? 2 : 0) + (r.r2 ? ALL - 1 : 0);
		r.r3 = granted + (long) this.bucket.snapshot().available() - ALL;
	}
}
