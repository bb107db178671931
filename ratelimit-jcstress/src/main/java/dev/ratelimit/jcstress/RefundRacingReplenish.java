package dev.ratelimit.jcstress;

import java.time.Duration;

import dev.ratelimit.core.SharedTokenBucket;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.J_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A caller gives back the 5 tokens it holds while another replenishes 8 ms of a 1 token/ms bucket of
 * limit 10 that held 5: in either order the bucket ends full, never above its limit (replenished
 * first, the refund lifts the head only the 2 tokens up to the limit, I7).
 */
@JCStressTest
@Outcome(id = "10", expect = ACCEPTABLE, desc = "the bucket ends full at its limit")
@Outcome(id = { "11", "12", "13", "14", "15", "16", "17", "18" }, expect = FORBIDDEN,
		desc = "the refund lifted the bucket above its limit")
@Outcome(expect = FORBIDDEN, desc = "tokens were lost")
@State
public class RefundRacingReplenish {

	private static final long NOW = Duration.ofMillis(8).toNanos();

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofMillis(1))
		.limit(10)
		.initial(5)
		.clock(() -> 0L)
		.build();

	{
		this.bucket.grab(5);
	}

	@Actor
	public void refund() {
		this.bucket.refund(5);
	}

	@Actor
	public void replenish() {
		this.bucket.replenish(NOW);
	}

	@Arbiter
	public void available(J_Result r) {
		r.r1 = (long) this.bucket.snapshot().available();
	}
}
