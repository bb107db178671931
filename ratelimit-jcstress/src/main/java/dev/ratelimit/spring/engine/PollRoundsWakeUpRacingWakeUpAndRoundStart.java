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
 * Two changes are announced at once while no round of a waiting claim is queued, and the scheduler runs
 * the queued round meanwhile. The second waker is the scheduler too (it wakes, then runs the queued round):
 * jcstress runs no test of 3 actors on a machine of 2 CPUs, and so the first wake-up still races the other
 * wake-up and the round's start. The two wake-ups queue one round, or two when the round started between
 * them, never two queued and not started; and once every queued poll has run, the last poll that went on
 * saw both changes.
 * Result: the runnables queued in all, the most queued and not started at once, the changes the last poll
 * in force saw (of 2 made).
 */
@JCStressTest
@Outcome(id = "1, 1, 2", expect = ACCEPTABLE, desc = "one round for both wake-ups; it saw both changes")
@Outcome(id = "2, 1, 2", expect = ACCEPTABLE, desc = "the round started between the wake-ups; the later one queued another")
@Outcome(id = {"2, 2, 2", "2, 2, 1", "2, 2, 0", "2, 2, -1"}, expect = FORBIDDEN,
		desc = "a second round queued before the first started")
@Outcome(id = {"1, 1, 1", "2, 1, 1", "1, 1, 0", "2, 1, 0", "1, 1, -1", "2, 1, -1"}, expect = FORBIDDEN,
		desc = "lost wake-up: no poll in force saw the last change")
@Outcome(expect = FORBIDDEN, desc = "other (no round)")
@State
public class PollRoundsWakeUpRacingWakeUpAndRoundStart {

	private final ObservedPollRounds claim = new ObservedPollRounds();

	@Actor
	public void waker() {
		this.claim.changeAndWake();
	}

	@Actor
	public void wakerThenScheduler() {
		this.claim.changeAndWake();
		this.claim.runOne();
	}

	@Arbiter
	public void drained(III_Result r) {
		this.claim.runAll();
		r.r1 = this.claim.queued();
		r.r2 = this.claim.maxBacklog();
		r.r3 = this.claim.seen();
	}
}
