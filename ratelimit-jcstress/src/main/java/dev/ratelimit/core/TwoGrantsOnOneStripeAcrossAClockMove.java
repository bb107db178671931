package dev.ratelimit.core;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * S2: a stripe logs its grants in order, the time of each never before the stripe's previous entry. A token
 * every microsecond, limit {@code L = 2 * COUNT + 1}, striped with 2 tokens per stripe and then full. One caller
 * takes 1 on stripe 0; the other moves the clock by 5 us (5 tokens, more than the 2 us the two grants take to
 * come back) and takes 1 on stripe 0; then a snapshot folds at the moved time. The first caller may read the
 * clock before the move and take after the second: its grant then counts at the moved time (both grants there,
 * {@code L - 2} left). Logged at the time it read, it would sit after a later entry in the stripe's log, and
 * the fold, which walks each log from its end and stops at the first entry too old to bound the level, would
 * skip the second grant and find the bucket full. r3: available less {@code L - 2}.
 */
@JCStressTest
@Outcome(id = "true, true, 1", expect = ACCEPTABLE, desc = "the first grant before the move, the second 5 tokens later")
@Outcome(id = "true, true, 0", expect = ACCEPTABLE, desc = "both grants at the moved time")
@Outcome(id = "true, true, 2", expect = FORBIDDEN, desc = "a grant logged before its stripe's previous entry: the fold skipped a grant")
@Outcome(expect = FORBIDDEN, desc = "a take of a token that was there refused, or a level no order of the grants gives")
@State
public class TwoGrantsOnOneStripeAcrossAClockMove {

	private final AtomicLong clock = new AtomicLong(1_000_000);

	private final long limit = 2L * StripedBuckets.COUNT + 1;

	private final SharedTokenBucket bucket;

	public TwoGrantsOnOneStripeAcrossAClockMove() {
		this.bucket = SharedTokenBucket.builder()
			.rate(1, Duration.ofNanos(1_000))
			.limit(this.limit)
			.clock(this.clock::get)
			.build();
		this.bucket.stripeEagerly(() -> 0);
		if (!this.bucket.tryAcquire(1) || !this.bucket.isStriped()) {
			throw new IllegalStateException("the bucket did not stripe");
		}
		this.clock.addAndGet(100_000); // full again, the stripes still open
	}

	@Actor
	public void takeOnStripe(ZZJ_Result r) {
		r.r1 = this.bucket.tryAcquire(1);
	}

	@Actor
	public void moveClockThenTakeOnStripe(ZZJ_Result r) {
		this.clock.addAndGet(5_000);
		r.r2 = this.bucket.tryAcquire(1);
	}

	@Arbiter
	public void after(ZZJ_Result r) {
		r.r3 = (long) this.bucket.snapshot().available() - (this.limit - 2);
	}
}
