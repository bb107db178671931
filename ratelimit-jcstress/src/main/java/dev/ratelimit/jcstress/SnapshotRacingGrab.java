package dev.ratelimit.jcstress;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.SharedTokenBucket;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZJJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A snapshot races a grab of two tokens from an empty bucket of limit 2 making one token per tick of a
 * clock that moves one tick per read (as a real clock moves between reads): the grab succeeds only when
 * its clock read comes second. The snapshot never shows tokens owed (nobody waits: a grab that does
 * not wait is never in debt), and never a time until full longer than the whole limit takes (2 ticks).
 * It would if it read the clock before the tail: a grab whose clock read came after its own would show
 * as a debt.
 */
@JCStressTest
@Outcome(id = { "true, 0, 2", "true, 0, 1", "true, 0, 0" }, expect = ACCEPTABLE, desc = "the grab after the snapshot's clock read, or before it")
@Outcome(id = { "false, 0, 1", "false, 0, 0" }, expect = ACCEPTABLE, desc = "the grab first, refused: one token made")
@Outcome(expect = FORBIDDEN, desc = "tokens owed with nobody waiting, or a fill longer than the limit takes")
@State
public class SnapshotRacingGrab {

	private final AtomicLong ticks = new AtomicLong();

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofNanos(1))
		.limit(2)
		.initial(0)
		.clock(this.ticks::getAndIncrement)
		.build();

	@Actor
	public void grab(ZJJ_Result r) {
		r.r1 = this.bucket.tryAcquire(2);
	}

	@Actor
	public void snapshot(ZJJ_Result r) {
		RateLimiterSnapshot s = this.bucket.snapshot();
		r.r2 = (long) s.deficiency();
		r.r3 = s.untilFull().toNanos();
	}
}
