package dev.ratelimit.jcstress;

import java.time.Duration;

import dev.ratelimit.core.SharedTokenBucket;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A granted call gives back one token (a refund, under the lock) while another tries for two tokens
 * of a bucket of limit 2 holding one, on the lock-free fast path, whose clock stands still: the taker
 * gets both only when the refund came first, and no token is lost or counted twice (I7, I6).
 */
@JCStressTest
@Outcome(id = "true, 0", expect = ACCEPTABLE, desc = "the refund first: the bucket full, both taken")
@Outcome(id = "false, 2", expect = ACCEPTABLE, desc = "the try first, refused: then the refund fills the bucket")
@Outcome(id = { "true, 1", "true, 2" }, expect = FORBIDDEN, desc = "more granted than the bucket held")
@Outcome(expect = FORBIDDEN, desc = "the refund was lost, or lifted the bucket above its limit")
@State
public class RefundRacingFastClaim {

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofDays(1))
		.limit(2)
		.initial(1)
		.clock(() -> 0L)
		.build();

	@Actor
	public void take(ZJ_Result r) {
		r.r1 = this.bucket.tryAcquire(2);
	}

	@Actor
	public void refund() {
		this.bucket.refund(1);
	}

	@Arbiter
	public void after(ZJ_Result r) {
		r.r2 = (long) this.bucket.snapshot().available();
	}
}
