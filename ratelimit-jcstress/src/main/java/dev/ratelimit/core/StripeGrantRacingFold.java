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
 * A grant from a stripe races a fold (S2, S3): every token of the bucket is in the stripes, one each; the
 * first caller takes its stripe's token, the second asks for all of them, which its stripe cannot give, so
 * it folds and decides exactly. Exactly one of them gets tokens, and what is left is exact.
 */
@JCStressTest
@Outcome(id = "true, false, -1", expect = ACCEPTABLE, desc = "the stripe's grant first: all of them are no longer there")
@Outcome(id = "false, true, 0", expect = ACCEPTABLE, desc = "the fold first: all taken, the stripe's token with them")
@Outcome(expect = FORBIDDEN, desc = "a token granted twice, tokens lost, or what is left is wrong")
@State
public class StripeGrantRacingFold {

	private final SharedTokenBucket bucket = StripedBuckets.oneTokenPerStripe(0);

	private final long all = Stripes.defaultCount();

	@Actor
	public void grant(ZZJ_Result r) {
		StripedBuckets.on(0);
		r.r1 = this.bucket.tryAcquire(1);
	}

	@Actor
	public void fold(ZZJ_Result r) {
		StripedBuckets.on(1);
		r.r2 = this.bucket.tryAcquire(this.all);
	}

	@Arbiter
	public void left(ZZJ_Result r) {
		long available = (long) this.bucket.snapshot().available();
		// -1 stands for the one right answer after the stripe's grant: all less one
		r.r3 = (r.r1 && available == this.all - 1) ? -1 : available;
	}
}
