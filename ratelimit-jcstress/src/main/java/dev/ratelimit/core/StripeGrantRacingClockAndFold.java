package dev.ratelimit.core;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZJJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * Where the grant's time matters: 2 tokens per microsecond (a token every 500 ns), a bucket striped with 1 token
 * per stripe and then full (its limit, {@code COUNT + 1}, reached at {@code T0}, when the race starts). A take
 * of 1 on stripe 0 races a thread that moves the clock by 250 ns (half a token) and then takes a snapshot,
 * which folds. A full bucket wastes time (I2), so the grant's time decides the level: granted at {@code T0}, the
 * bucket has earned half a token again by {@code T0 + 250} (250 ns until full); granted at {@code T0 + 250},
 * nothing yet (500 ns until full). r2: the racing snapshot's time until full; r3: the time until full after both.
 */
@JCStressTest
@Outcome(id = "true, 250, 250", expect = ACCEPTABLE, desc = "granted at T0, then the snapshot")
@Outcome(id = "true, 500, 500", expect = ACCEPTABLE, desc = "granted at T0 + 250 (it read the moved clock), then the snapshot")
@Outcome(id = "true, 0, 500", expect = ACCEPTABLE, desc = "the snapshot, then granted at T0 + 250")
@Outcome(id = "true, 0, 250", expect = FORBIDDEN, desc = "the snapshot saw no grant at T0 + 250, yet the grant was counted at T0, before it")
@Outcome(expect = FORBIDDEN, desc = "a state no order of the calls gives")
@State
public class StripeGrantRacingClockAndFold {

	private final AtomicLong clock = new AtomicLong(1_000_000);

	private final SharedTokenBucket bucket;

	public StripeGrantRacingClockAndFold() {
		long limit = StripedBuckets.COUNT + 1L;
		this.bucket = SharedTokenBucket.builder()
			.rate(2, Duration.ofNanos(1_000))
			.limit(limit)
			.clock(this.clock::get)
			.build();
		this.bucket.stripeEagerly(() -> 0);
		if (!this.bucket.tryAcquire(1) || !this.bucket.isStriped()) {
			throw new IllegalStateException("the bucket did not stripe");
		}
		this.clock.addAndGet(500); // T0: the token taken is back, the bucket is full
	}

	@Actor
	public void stripeGrant(ZJJ_Result r) {
		r.r1 = this.bucket.tryAcquire(1);
	}

	@Actor
	public void clockThenSnapshot(ZJJ_Result r) {
		this.clock.addAndGet(250);
		r.r2 = this.bucket.snapshot().untilFull().toNanos();
	}

	@Arbiter
	public void after(ZJJ_Result r) {
		r.r3 = this.bucket.snapshot().untilFull().toNanos();
	}
}
