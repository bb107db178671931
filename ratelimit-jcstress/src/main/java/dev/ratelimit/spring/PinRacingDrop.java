package dev.ratelimit.spring;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.SharedTokenBucket;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.IIII_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * K2 of {@link KeyedBuckets}: a call on key {@code k} races a new key that needs {@code k}'s room
 * ({@code keys.max} 1; {@code k}'s bucket is full, so it may be dropped). Either the call pins
 * {@code k}'s bucket first (which then is no longer full and stays: the newcomer shares the overflow
 * bucket), or the bucket is dropped first (the newcomer takes the room, and {@code k}'s call shares the
 * overflow bucket). Never does a call take from a bucket that was dropped: its token would vanish, and
 * {@code k}'s next bucket would start full.
 *
 * <p>Results: served by the overflow bucket (1) or its own (0), for {@code k} then the newcomer;
 * then the tokens left in {@code k}'s bucket and in the newcomer's (-1: none).
 */
@JCStressTest
@Outcome(id = "0, 1, 4, -1", expect = ACCEPTABLE, desc = "k pinned first: the newcomer overflows")
@Outcome(id = "1, 0, -1, 4", expect = ACCEPTABLE, desc = "k dropped first: k overflows")
@Outcome(expect = FORBIDDEN, desc = "a call took from a dropped bucket, or a bucket was dropped while busy")
@State
public class PinRacingDrop {

	private final List<RateLimiter> overflow = new ArrayList<>();

	private final KeyedBuckets keys = new KeyedBuckets(1, (key) -> {
		RateLimiter bucket = SharedTokenBucket.builder()
			.rate(1, Duration.ofHours(1))
			.limit(5)
			.clock(() -> 0L)
			.build();
		if (key == null) {
			this.overflow.add(bucket);
		}
		return bucket;
	}, (bucket) -> {
	});

	public PinRacingDrop() {
		this.keys.pin("k").unpin(); // k has its bucket, full
	}

	private int take(String key) {
		KeyedBuckets.Entry entry = this.keys.pin(key);
		try {
			entry.limiter().tryAcquire(1);
			return (entry.limiter() == this.overflow.get(0)) ? 1 : 0;
		}
		finally {
			entry.unpin();
		}
	}

	@Actor
	public void callOnK(IIII_Result r) {
		r.r1 = take("k");
	}

	@Actor
	public void newcomer(IIII_Result r) {
		r.r2 = take("newcomer");
	}

	@Arbiter
	public void left(IIII_Result r) {
		RateLimiter k = this.keys.find("k");
		RateLimiter newcomer = this.keys.find("newcomer");
		r.r3 = (k != null) ? (int) k.snapshot().available() : -1;
		r.r4 = (newcomer != null) ? (int) newcomer.snapshot().available() : -1;
	}
}
