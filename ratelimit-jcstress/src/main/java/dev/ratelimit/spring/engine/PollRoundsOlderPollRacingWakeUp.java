package dev.ratelimit.spring.engine;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZZ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A waiting claim's round of polls has started (its first poll ran and scheduled the next one). A wake-up
 * starts a new round while the older round's next poll asks whether it goes on: once the wake-up has
 * returned, the older round is not in force (else two rounds poll the claim, and the backlog of polls
 * grows with every wake-up); the new round's poll is.
 * Result: whether the older poll saw the wake-up returned, whether it was in force after that, whether the
 * new round's poll went on.
 */
@JCStressTest
@Outcome(id = "false, true, true", expect = ACCEPTABLE, desc = "the older poll came before the wake-up; it went on")
@Outcome(id = "false, false, true", expect = ACCEPTABLE, desc = "the wake-up had started the new round, not returned yet")
@Outcome(id = "true, false, true", expect = ACCEPTABLE, desc = "the wake-up came first; the older poll stopped")
@Outcome(id = {"true, true, true", "true, true, false"}, expect = FORBIDDEN,
		desc = "the older round still in force after the wake-up returned")
@Outcome(expect = FORBIDDEN, desc = "the new round's poll did not go on")
@State
public class PollRoundsOlderPollRacingWakeUp {

	private final ObservedPollRounds claim = new ObservedPollRounds();

	/** The round that started before the wake-up. */
	private final long older;

	private volatile boolean woken;

	public PollRoundsOlderPollRacingWakeUp() {
		this.claim.wake();
		this.claim.runOne(); // the round started
		this.older = this.claim.lastRound();
	}

	@Actor
	public void waker() {
		this.claim.wake();
		this.woken = true;
	}

	@Actor
	public void olderPoll(ZZZ_Result r) {
		r.r1 = this.woken;
		r.r2 = this.claim.rounds.inForce(this.older);
	}

	@Arbiter
	public void drained(ZZZ_Result r) {
		this.claim.runAll();
		r.r3 = this.claim.lastRound() != this.older && this.claim.rounds.inForce(this.claim.lastRound());
	}
}
