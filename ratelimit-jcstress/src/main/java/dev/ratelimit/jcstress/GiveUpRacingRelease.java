package dev.ratelimit.jcstress;

import java.time.Duration;

import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.SharedTokenBucket;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.JJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A capped bucket of limit 2 has both tokens in flight and time to spare; a waiter for 1 token waits
 * for a release. One caller releases 1 token while the waiter gives up: in either order 1 token is in
 * flight and 1 available, never more than the limit together.
 */
@JCStressTest
@Outcome(id = "1, 1", expect = ACCEPTABLE, desc = "1 available and 1 in flight: the limit holds")
@Outcome(id = { "2, 1", "1, 2", "2, 2" }, expect = FORBIDDEN, desc = "more than the limit in flight and available")
@Outcome(id = "0, 1", expect = FORBIDDEN, desc = "the give-up kept the released token")
@Outcome(expect = FORBIDDEN, desc = "the count is wrong")
@State
public class GiveUpRacingRelease {

	private final long[] now = { 0 };

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofMillis(1))
		.limit(2)
		.cappedRelease(true)
		.clock(() -> this.now[0])
		.build();

	private final long waiter;

	{
		this.bucket.tryAcquire(2);
		this.bucket.replenish(Duration.ofMillis(10).toNanos());
		this.waiter = this.bucket.grab(1);
	}

	@Actor
	public void release() {
		this.bucket.release(1);
	}

	@Actor
	public void giveUp() {
		this.bucket.refund(this.waiter, 1);
	}

	@Arbiter
	public void counts(JJ_Result r) {
		RateLimiterSnapshot s = this.bucket.snapshot();
		r.r1 = (long) s.available();
		r.r2 = (long) s.inFlight();
	}
}
