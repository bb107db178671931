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
 * A bucket holds 2 tokens and a waiter claimed 3 (it misses 1). The waiter gives up while another
 * caller tries to take 2 at once: before the give-up the try is refused (the waiter is ahead), after
 * it the try takes both tokens; the bucket never hands the same tokens out twice and never loses them.
 */
@JCStressTest
@Outcome(id = "false, 2", expect = ACCEPTABLE, desc = "the try came first and was refused; the 2 tokens are back")
@Outcome(id = "true, 0", expect = ACCEPTABLE, desc = "the give-up came first; the try took both tokens")
@Outcome(id = "true, 2", expect = FORBIDDEN, desc = "two tokens granted twice")
@Outcome(id = "false, 0", expect = FORBIDDEN, desc = "the give-up lost the tokens")
@Outcome(expect = FORBIDDEN, desc = "the count is wrong")
@State
public class GiveUpRacingGrant {

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofMillis(1))
		.limit(10)
		.initial(2)
		.clock(() -> 0L)
		.build();

	private final long waiter = this.bucket.grab(3);

	@Actor
	public void giveUp() {
		this.bucket.refund(this.waiter, 3);
	}

	@Actor
	public void tryTwo(ZJ_Result r) {
		r.r1 = this.bucket.tryAcquire(2);
	}

	@Arbiter
	public void available(ZJ_Result r) {
		r.r2 = (long) this.bucket.snapshot().available();
	}
}
