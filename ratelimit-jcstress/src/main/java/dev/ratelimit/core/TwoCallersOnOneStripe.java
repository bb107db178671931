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
 * Two callers on one stripe that holds one token, with one more token in the bucket outside the stripes
 * (S2, S3): one takes the stripe's token, the other finds the stripe short (or busy), folds, and takes the
 * bucket's. Both are granted; every other token is still there.
 */
@JCStressTest
@Outcome(id = "true, true, 0", expect = ACCEPTABLE, desc = "both granted, nothing lost or counted twice")
@Outcome(expect = FORBIDDEN, desc = "a token lost, or granted twice")
@State
public class TwoCallersOnOneStripe {

	private final SharedTokenBucket bucket = StripedBuckets.oneTokenPerStripe(1);

	private final long others = Stripes.defaultCount() - 1; // the other stripes' tokens, untouched

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
	public void left(ZZJ_Result r) {
		r.r3 = (long) this.bucket.snapshot().available() - this.others;
	}
}
