package dev.ratelimit.jcstress;

import java.time.Duration;

import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.SharedTokenBucket;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * A capped bucket of limit 2 has both tokens in flight and plenty of time to replenish; one call
 * completes (releases a token) while another tries for one. Tokens in flight plus available never
 * exceed the limit, and a release makes a token that time already earned available at once.
 */
@JCStressTest
@Outcome(id = "true, 2", expect = ACCEPTABLE, desc = "the released token went to the new caller")
@Outcome(id = "false, 2", expect = ACCEPTABLE,
		desc = "the caller came before the release; the released token is available at once, time having earned it")
@Outcome(id = { "true, 3", "true, 4", "false, 3", "false, 4" }, expect = FORBIDDEN,
		desc = "in flight plus available exceed the limit")
@Outcome(expect = FORBIDDEN, desc = "a released token was lost")
@State
public class ReleaseRacingGrabWithCappedRelease {

	private static final long NOW = Duration.ofMillis(10).toNanos();

	private volatile long now;

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofMillis(1))
		.limit(2)
		.cappedRelease(true)
		.clock(() -> this.now)
		.build();

	{
		this.bucket.tryAcquire(2);
		this.now = NOW;
	}

	@Actor
	public void release() {
		this.bucket.release(1);
	}

	@Actor
	public void tryAcquire(ZJ_Result r) {
		r.r1 = this.bucket.tryAcquire(1);
	}

	@Arbiter
	public void inFlightPlusAvailable(ZJ_Result r) {
		RateLimiterSnapshot snapshot = this.bucket.snapshot();
		r.r2 = (long) (snapshot.available() + snapshot.inFlight());
	}
}
