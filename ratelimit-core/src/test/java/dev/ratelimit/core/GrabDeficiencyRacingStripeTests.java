package dev.ratelimit.core;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * S6 and {@link SharedTokenBucket#deficiency}: on a clock that stands still, a ticket grabbed beyond the tokens
 * there are is never covered, so {@code deficiency} must never say 0 for it, while another thread's covered
 * claim stripes the bucket (the eager hook) at the same moment. Round after round, each on a new bucket, the two
 * threads start together (as jcstress {@code GrabRacingStripeReservation}, which finds it in seconds): the grab
 * can move the tail after the striper read it and before it published its striped state, then return its
 * ticket (the rover state was unchanged after its CAS); a {@code deficiency} that reads the striped state before
 * the striper gives up and puts a rover state back must still see the ticket uncovered (16 readings a round,
 * after a spin that differs from round to round). Fails within a few hundred rounds; passes in about 3 s.
 */
class GrabDeficiencyRacingStripeTests {

	private static final long RUN_NANOS = 3_000_000_000L;

	@Test
	void aGrabbedTicketBeyondTheTokensIsNeverReadAsCoveredWhileTheBucketStripes() throws Exception {
		int count = SharedTokenBucket.builder().rate(1, Duration.ofDays(1)).limit(1).clock(() -> 0L).build().stripes();
		AtomicReference<SharedTokenBucket> current = new AtomicReference<>();
		AtomicInteger go = new AtomicInteger(); // round number both threads start on
		AtomicInteger done = new AtomicInteger(); // threads done with the round
		AtomicReference<String> failure = new AtomicReference<>();
		long[] rounds = new long[1];
		Thread striper = new Thread(() -> {
			for (int round = 1;; round++) {
				while (go.get() < round) {
					if (go.get() < 0) {
						return;
					}
					Thread.onSpinWait();
				}
				current.get().tryAcquire(1);
				done.incrementAndGet();
			}
		});
		striper.setDaemon(true);
		striper.start();
		long deadline = System.nanoTime() + RUN_NANOS;
		try {
			for (int round = 1; System.nanoTime() - deadline < 0 && failure.get() == null; round++) {
				SharedTokenBucket bucket = SharedTokenBucket.builder()
					.rate(1, Duration.ofDays(1))
					.limit(1_000L * count)
					.initial(2L * count)
					.clock(() -> 0L)
					.build();
				bucket.stripeEagerly(() -> 0);
				current.set(bucket);
				done.set(0);
				go.set(round);
				for (int spin = round % 32; spin > 0; spin--) {
					Thread.onSpinWait(); // a different alignment each round
				}
				long ticket = bucket.grab(10L * count);
				long least = Long.MAX_VALUE;
				for (int i = 0; i < 16; i++) {
					least = Math.min(least, bucket.deficiency(ticket));
				}
				while (done.get() < 1) {
					Thread.onSpinWait();
				}
				long after = bucket.deficiency(ticket);
				if (least == 0) {
					failure.set("round " + round + ": deficiency 0 while the bucket striped, "
							+ after + " after (clock standing still, " + 2 * count + " tokens, grabbed " + 10 * count
							+ ", striped " + bucket.isStriped() + ")");
				}
				rounds[0] = round;
			}
		}
		finally {
			go.set(-1);
		}
		assertThat(failure.get()).as("after " + rounds[0] + " rounds").isNull();
	}
}
