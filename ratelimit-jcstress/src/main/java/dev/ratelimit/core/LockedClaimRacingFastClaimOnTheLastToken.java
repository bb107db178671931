package dev.ratelimit.core;

import java.time.Duration;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * The lock's covered claim (S1: a caller that lost the tail, or, here, any covered claim of a bucket that
 * stripes eagerly, takes the lock to decide and then stripe) racing a lock-free claim on the tail
 * ({@code reserve}, which needs a ticket, never stripes, and claims with one CAS when its tokens are there), on
 * a bucket holding its last token, clock standing still. Exactly one of them gets it; after both the bucket
 * owes nothing (r3: the snapshot's deficiency). A lock holder that decides on the tail it read and then claims
 * on the tail as it is by then takes a token the other caller already took.
 */
@JCStressTest
@Outcome(id = "true, false, 0", expect = ACCEPTABLE, desc = "the locked claim first; the reservation is refused")
@Outcome(id = "false, true, 0", expect = ACCEPTABLE, desc = "the reservation first; the locked claim is refused")
@Outcome(id = "true, true, .*", expect = FORBIDDEN, desc = "one token granted twice (the locked claim went into debt)")
@Outcome(id = "false, false, .*", expect = FORBIDDEN, desc = "the last token lost")
@Outcome(expect = FORBIDDEN, desc = "the bucket owes tokens after both")
@State
public class LockedClaimRacingFastClaimOnTheLastToken {

	private final SharedTokenBucket bucket;

	public LockedClaimRacingFastClaimOnTheLastToken() {
		this.bucket = SharedTokenBucket.builder().rate(1, Duration.ofDays(1)).limit(1).clock(() -> 0L).build();
		this.bucket.stripeEagerly(() -> 0);
	}

	@Actor
	public void lockedClaim(ZZJ_Result r) {
		r.r1 = this.bucket.tryAcquire(1);
	}

	@Actor
	public void fastClaim(ZZJ_Result r) {
		try {
			Reservation reservation = this.bucket.reserve(1, Duration.ZERO);
			r.r2 = reservation.poll() == 0;
		}
		catch (RateLimitExceededException ex) {
			r.r2 = false;
		}
	}

	@Arbiter
	public void after(ZZJ_Result r) {
		r.r3 = (long) this.bucket.snapshot().deficiency();
	}
}
