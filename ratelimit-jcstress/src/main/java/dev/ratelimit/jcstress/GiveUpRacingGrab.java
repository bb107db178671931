package dev.ratelimit.jcstress;

import java.time.Duration;

import dev.ratelimit.core.SharedTokenBucket;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.JJ_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * An empty bucket of 1 token/ms has two waiters of 2 tokens each, A then B. A gives up while C claims
 * 1 token. Then 2 ms pass: B, moved up into A's place, has its 2 tokens, and C, behind B whichever
 * came first, misses exactly 1.
 */
@JCStressTest
@Outcome(id = "0, 1", expect = ACCEPTABLE, desc = "B moved up into A's place; C waits for its token behind B")
@Outcome(id = "2, .*", expect = FORBIDDEN, desc = "B did not move up when A gave up")
@Outcome(id = "0, 0", expect = FORBIDDEN, desc = "C was paid with tokens B was owed")
@Outcome(expect = FORBIDDEN, desc = "the line is wrong")
@State
public class GiveUpRacingGrab {

	private final long[] now = { 0 };

	private final SharedTokenBucket bucket = SharedTokenBucket.builder()
		.rate(1, Duration.ofMillis(1))
		.limit(10)
		.initial(0)
		.clock(() -> this.now[0])
		.build();

	private final long a = this.bucket.grab(2);

	private final long b = this.bucket.grab(2);

	private long c;

	@Actor
	public void aGivesUp() {
		this.bucket.refund(this.a, 2);
	}

	@Actor
	public void cClaims() {
		this.c = this.bucket.grab(1);
	}

	@Arbiter
	public void twoMillisecondsLater(JJ_Result r) {
		this.bucket.replenish(Duration.ofMillis(2).toNanos());
		r.r1 = this.bucket.deficiency(this.b);
		r.r2 = this.bucket.deficiency(this.c);
	}
}
