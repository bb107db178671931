package dev.ratelimit.spring.engine;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.II_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A burst: two changes are announced at once (two callers ahead give up) while no round of a waiting claim
 * is queued, and nothing runs the queue meanwhile. The two wake-ups queue exactly one round (a round per
 * wake-up is the backlog that makes a scheduler fall behind), and that round, run once the burst is over,
 * sees both changes.
 * Result: the runnables queued by the burst, the changes the last poll in force saw (of 2 made).
 */
@JCStressTest
@Outcome(id = "1, 2", expect = ACCEPTABLE, desc = "one round queued for the burst; it saw both changes")
@Outcome(id = {"2, 2", "2, 1", "2, 0", "2, -1"}, expect = FORBIDDEN, desc = "two rounds queued for one burst")
@Outcome(id = {"1, 1", "1, 0", "1, -1"}, expect = FORBIDDEN, desc = "lost wake-up: the round missed a change")
@Outcome(id = {"0, 2", "0, 1", "0, 0", "0, -1"}, expect = FORBIDDEN, desc = "lost wake-up: no round queued")
@Outcome(expect = FORBIDDEN, desc = "other")
@State
public class PollRoundsWakeUpRacingWakeUp {

	private final ObservedPollRounds claim = new ObservedPollRounds();

	@Actor
	public void waker1() {
		this.claim.changeAndWake();
	}

	@Actor
	public void waker2() {
		this.claim.changeAndWake();
	}

	@Arbiter
	public void drained(II_Result r) {
		r.r1 = this.claim.queued();
		this.claim.runAll();
		r.r2 = this.claim.seen();
	}
}
