package dev.ratelimit.jcstress;

import java.time.Duration;

import dev.ratelimit.core.Reservation;
import dev.ratelimit.core.SharedTokenBucket;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A caller waits for 2 tokens of an empty bucket of 1 token/ms. It cancels while another thread lets
 * 5 ms pass and takes the caller's permit as soon as its claim is covered: exactly one wins; the
 * tokens are either handed out once (3 left) or given back once (5 left), never above the limit.
 */
@JCStressTest
@Outcome(id = "true, false, 5", expect = ACCEPTABLE, desc = "cancelled: the 2 tokens are back")
@Outcome(id = "false, true, 3", expect = ACCEPTABLE, desc = "granted first: the cancel does nothing")
@Outcome(id = "true, true, .*", expect = FORBIDDEN, desc = "cancelled and granted")
@Outcome(expect = FORBIDDEN, desc = "tokens lost or counted twice")
@State
public class CancelRacingReplenish {

	private final long[] now = { 0 };

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofMillis(1))
		.limit(10)
		.initial(0)
		.clock(() -> this.now[0])
		.build();

	private final Reservation claim = this.bucket.reserve(2, Duration.ofHours(1));

	@Actor
	public void cancel(ZZJ_Result r) {
		r.r1 = this.claim.cancel();
	}

	@Actor
	public void replenishAndTake(ZZJ_Result r) {
		this.bucket.replenish(Duration.ofMillis(5).toNanos());
		try {
			if (this.claim.poll() == 0) {
				this.claim.permit();
				r.r2 = true;
			}
		}
		catch (IllegalStateException ex) {
			r.r2 = false; // cancelled first
		}
	}

	@Arbiter
	public void available(ZZJ_Result r) {
		r.r3 = (long) this.bucket.snapshot().available();
	}
}
