package dev.ratelimit.core;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZJJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * Striped mode, clock standing still, every stripe holding 1 token and the bucket nothing else: a take of 1
 * on stripe 0 races a snapshot, which folds the stripes. The snapshot sees the bucket before the grant or
 * after it (r2: available less {@code COUNT}, 0 or -1), and after both exactly {@code COUNT - 1} are left
 * (r3: available less that).
 */
@JCStressTest
@Outcome(id = "true, 0, 0", expect = ACCEPTABLE, desc = "the snapshot before the grant")
@Outcome(id = "true, -1, 0", expect = ACCEPTABLE, desc = "the snapshot after the grant")
@Outcome(id = "false, .*", expect = FORBIDDEN, desc = "a take of a token that was there refused")
@Outcome(expect = FORBIDDEN, desc = "a snapshot or a state after both that no order of the two calls gives")
@State
public class SnapshotRacingStripeGrant {

	private final SharedTokenBucket bucket = StripedBuckets.striped(1, StripedBuckets.COUNT + 1);

	@Actor
	public void stripeGrant(ZJJ_Result r) {
		StripedBuckets.on(0);
		r.r1 = this.bucket.tryAcquire(1);
	}

	@Actor
	public void snapshot(ZJJ_Result r) {
		r.r2 = (long) this.bucket.snapshot().available() - StripedBuckets.COUNT;
	}

	@Arbiter
	public void after(ZJJ_Result r) {
		r.r3 = (long) this.bucket.snapshot().available() - (StripedBuckets.COUNT - 1);
	}
}
