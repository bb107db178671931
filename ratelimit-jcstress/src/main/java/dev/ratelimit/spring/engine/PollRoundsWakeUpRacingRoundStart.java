package dev.ratelimit.spring.engine;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A waiting claim's wake-up round is queued and has not started. A change is announced (a caller ahead gave
 * up) and its wake-up races the start of the queued round: before the start, the wake-up adds nothing (the
 * queued round polls after the change); after it, the wake-up queues a new round. Either way, never two
 * rounds queued and not started, and once every queued poll has run, the last poll that went on saw the
 * change: no wake-up is lost.
 * Result: the changes the last poll in force saw (of 1 made), the runnables queued in all, the most queued
 * and not started at once.
 */
@JCStressTest
@Outcome(id = "1, 1, 1", expect = ACCEPTABLE, desc = "the wake-up came before the round started; the round saw the change")
@Outcome(id = "1, 2, 1", expect = ACCEPTABLE, desc = "the round had started; the wake-up queued a new round, which saw the change")
@Outcome(id = {"0, 1, 1", "0, 2, 1", "-1, 1, 1", "-1, 2, 1"}, expect = FORBIDDEN,
		desc = "lost wake-up: no poll in force saw the change")
@Outcome(id = {"1, 2, 2", "0, 2, 2", "-1, 2, 2"}, expect = FORBIDDEN, desc = "a second round queued before the first started")
@Outcome(expect = FORBIDDEN, desc = "other")
@State
public class PollRoundsWakeUpRacingRoundStart {

	private final ObservedPollRounds claim = new ObservedPollRounds();

	public PollRoundsWakeUpRacingRoundStart() {
		this.claim.wake(); // a round queued, not started
	}

	@Actor
	public void waker() {
		this.claim.changeAndWake();
	}

	@Actor
	public void scheduler() {
		this.claim.runOne();
	}

	@Arbiter
	public void drained(III_Result r) {
		this.claim.runAll();
		r.r1 = this.claim.seen();
		r.r2 = this.claim.queued();
		r.r3 = this.claim.maxBacklog();
	}
}
