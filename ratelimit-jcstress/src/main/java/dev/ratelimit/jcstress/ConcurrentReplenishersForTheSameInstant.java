package dev.ratelimit.jcstress;

import java.time.Duration;

import dev.ratelimit.core.SharedTokenBucket;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.J_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * Two threads replenish an empty bucket (1 token/ms) for the same instant, 10 ms after it was built:
 * the instant's ten tokens go in once.
 */
@JCStressTest
@Outcome(id = "10", expect = ACCEPTABLE, desc = "the instant's tokens were added once")
@Outcome(id = "20", expect = FORBIDDEN, desc = "the instant's tokens were added twice")
@Outcome(expect = FORBIDDEN, desc = "tokens were lost or invented")
@State
public class ConcurrentReplenishersForTheSameInstant {

	private static final long NOW = Duration.ofMillis(10).toNanos();

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofMillis(1))
		.limit(100)
		.initial(0)
		.clock(() -> 0L)
		.build();

	@Actor
	public void first() {
		this.bucket.replenish(NOW);
	}

	@Actor
	public void second() {
		this.bucket.replenish(NOW);
	}

	@Arbiter
	public void available(J_Result r) {
		r.r1 = (long) this.bucket.snapshot().available();
	}
}
