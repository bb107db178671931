package dev.ratelimit.jcstress;

import java.time.Duration;

import dev.ratelimit.core.SharedTokenBucket;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.ZZ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * Two callers try for the last token of a bucket whose clock stands still: exactly one gets it.
 */
@JCStressTest
@Outcome(id = { "true, false", "false, true" }, expect = ACCEPTABLE, desc = "one caller gets the last token")
@Outcome(id = "true, true", expect = FORBIDDEN, desc = "one token granted twice")
@Outcome(id = "false, false", expect = FORBIDDEN, desc = "the last token was lost")
@State
public class TwoCallersOnTheLastToken {

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofDays(1))
		.limit(1)
		.clock(() -> 0L)
		.build();

	@Actor
	public void first(ZZ_Result r) {
		r.r1 = this.bucket.tryAcquire(1);
	}

	@Actor
	public void second(ZZ_Result r) {
		r.r2 = this.bucket.tryAcquire(1);
	}
}
