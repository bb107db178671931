package dev.ratelimit.jcstress;

import java.time.Duration;

import dev.ratelimit.core.HybridRateLimiter;
import dev.ratelimit.core.Reservation;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZI_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A drained pacer of 1 operation/ms with an active pool of 2 (no burst) has a caller waiting for 2
 * operations. It cancels while another thread lets 2 ms pass and takes its permit as soon as the
 * claim is covered: exactly one wins, and the pools never hold more than their size of 2.
 */
@JCStressTest
@Outcome(id = "true, false, 2", expect = ACCEPTABLE, desc = "cancelled: the time fills the pool, 2 available")
@Outcome(id = "false, true, 0", expect = ACCEPTABLE, desc = "granted first: the cancel does nothing")
@Outcome(id = "true, true, .*", expect = FORBIDDEN, desc = "cancelled and granted")
@Outcome(id = ".*, .*, [3-9]", expect = FORBIDDEN, desc = "the pool holds more than its size")
@Outcome(expect = FORBIDDEN, desc = "operations lost or counted twice")
@State
public class PacerCancelRacingFill {

	private final long[] now = { 0 };

	private final HybridRateLimiter pacer = HybridRateLimiter.builder()
		.rate(1, Duration.ofMillis(1))
		.limit(2)
		.burstRatio(1.0)
		.clock(() -> this.now[0])
		.build();

	private final Reservation claim;

	{
		this.pacer.tryAcquire(2);
		this.claim = this.pacer.reserve(2, Duration.ofHours(1));
	}

	@Actor
	public void cancel(ZZI_Result r) {
		r.r1 = this.claim.cancel();
	}

	@Actor
	public void timePassesAndTake(ZZI_Result r) {
		this.now[0] = Duration.ofMillis(2).toNanos();
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
	public void available(ZZI_Result r) {
		this.now[0] = Duration.ofMillis(2).toNanos();
		r.r3 = (int) this.pacer.snapshot().available();
	}
}
