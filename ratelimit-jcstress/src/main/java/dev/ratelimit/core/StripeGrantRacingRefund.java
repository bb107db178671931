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
 * A grant from a stripe races a refund, which folds (S3, I7): the bucket is one token short of full, its
 * tokens all in the stripes; a caller takes a stripe's token while another call gives one back. In either
 * order the caller is granted and the bucket ends one short of full.
 */
@JCStressTest
@Outcome(id = "true, 1", expect = ACCEPTABLE, desc = "granted; one short of full")
@Outcome(expect = FORBIDDEN, desc = "a token lost, or counted twice")
@State
public class StripeGrantRacingRefund {

	private final SharedTokenBucket bucket = StripedBuckets.oneTokenPerStripe(0);

	@Actor
	public void grant(ZJ_Result r) {
		StripedBuckets.on(0);
		r.r1 = this.bucket.tryAcquire(1);
	}

	@Actor
	public void refund() {
		this.bucket.refund(1);
	}

	@Arbiter
	public void left(ZJ_Result r) {
		r.r2 = this.bucket.limit() - (long) this.bucket.snapshot().available();
	}
}
