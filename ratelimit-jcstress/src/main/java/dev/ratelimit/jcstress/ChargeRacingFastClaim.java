package dev.ratelimit.jcstress;

import java.time.Duration;

import dev.ratelimit.core.SharedTokenBucket;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZJJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A call settles one token more (a charge, under the lock) while another takes the last two tokens
 * of a bucket whose clock stands still on the lock-free fast path (one CAS on the tail): the two are
 * ordered one way or the other, and never both get the tokens (I7, I6).
 */
@JCStressTest
@Outcome(id = "true, 0, 1", expect = ACCEPTABLE, desc = "the take first: the charge is owed")
@Outcome(id = "false, 1, 0", expect = ACCEPTABLE, desc = "the charge first: one token is left, too few to take two")
@Outcome(id = { "true, 0, 0", "true, 1, 0" }, expect = FORBIDDEN, desc = "more granted than the bucket held")
@Outcome(expect = FORBIDDEN, desc = "tokens lost or counted twice")
@State
public class ChargeRacingFastClaim {

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofDays(1))
		.limit(10)
		.initial(2)
		.clock(() -> 0L)
		.build();

	@Actor
	public void take(ZJJ_Result r) {
		r.r1 = this.bucket.tryAcquire(2);
	}

	@Actor
	public void charge() {
		this.bucket.charge(1);
	}

	@Arbiter
	public void after(ZJJ_Result r) {
		r.r2 = (long) this.bucket.snapshot().available();
		r.r3 = (long) this.bucket.snapshot().deficiency();
	}
}
