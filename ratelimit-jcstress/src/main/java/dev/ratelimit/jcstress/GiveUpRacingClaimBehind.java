package dev.ratelimit.jcstress;

import java.time.Duration;

import dev.ratelimit.core.Reservation;
import dev.ratelimit.core.SharedTokenBucket;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.IJJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * W1 (a give-back wakes only the claims behind it): an empty bucket at 1 token per millisecond, and a
 * waiter that claimed 3 tokens and was last in line gives up while a new caller claims 1 and polls, as
 * the asynchronous path does (claim, ask to be woken, poll). Whichever comes first, the new caller never
 * keeps a stale delay without being woken: if its claim came first it is behind a hole and is woken; if
 * the give-up came first the tail moved back, its claim sees it and nobody needs waking.
 * Results: wake-ups of the new caller, its poll's delay, its delay polled afterwards (nanoseconds).
 */
@JCStressTest
@Outcome(id = "0, 1000000, 1000000", expect = ACCEPTABLE, desc = "the give-up came before the claim, or before the wake-up was asked for")
@Outcome(id = "1, 1000000, 1000000", expect = ACCEPTABLE, desc = "the give-up came between the wake-up asked for and the poll")
@Outcome(id = "1, 4000000, 1000000", expect = ACCEPTABLE, desc = "the give-up came after the poll: woken, and moved up")
@Outcome(id = "0, 4000000, 1000000", expect = FORBIDDEN, desc = "a stale delay and no wake-up: it sleeps through the give-up")
@Outcome(expect = FORBIDDEN, desc = "a wrong delay or wake-ups")
@State
public class GiveUpRacingClaimBehind {

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofMillis(1))
		.limit(10)
		.initial(0)
		.clock(() -> 0L)
		.build();

	private final Reservation last = this.bucket.reserve(3, Duration.ofDays(1));

	private volatile Reservation behind;

	private volatile int woken;

	@Actor
	public void giveUp() {
		this.last.cancel();
	}

	@Actor
	public void claimAndPoll(IJJ_Result r) {
		Reservation claim = this.bucket.reserve(1, Duration.ofDays(1));
		claim.onWake(() -> this.woken++);
		r.r2 = claim.poll();
		this.behind = claim;
	}

	@Arbiter
	public void after(IJJ_Result r) {
		r.r1 = this.woken;
		r.r3 = this.behind.poll();
	}
}
