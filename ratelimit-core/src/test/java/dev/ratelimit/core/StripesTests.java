package dev.ratelimit.core;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** A stripe logs its grants in time order (S2), is a thread's own, and its log grows with its use (S5). */
class StripesTests {

	/**
	 * S2: a grant is logged at a time never before its stripe's previous entry nor its opening, whatever time
	 * its caller read (a caller may read the clock, then lose the race to a caller that read it later): the
	 * fold walks each log from its end and stops at the first entry too old to matter
	 * (jcstress {@code TwoGrantsOnOneStripeAcrossAClockMove} shows what a grant out of order costs).
	 */
	@Test
	void aStripeLogsNoTimeBeforeItsPreviousEntryOrItsOpening() {
		Stripes stripes = new Stripes(2, () -> 0);
		stripes.open(10, 100);
		assertThat(stripes.take(1, 50)).isEqualTo(Stripes.TAKEN);
		assertThat(stripes.take(1, 500)).isEqualTo(Stripes.TAKEN);
		assertThat(stripes.take(1, 300)).isEqualTo(Stripes.TAKEN);
		stripes.closeAll();
		assertThat(stripes.entries(0)).isEqualTo(3);
		assertThat(new long[] { stripes.time(0, 0), stripes.time(0, 1), stripes.time(0, 2) })
			.as("the times logged").containsExactly(100, 500, 500);
		assertThat(stripes.granted(0)).isEqualTo(3);
	}

	/**
	 * A thread that finds that another thread took from its stripe last moves to another stripe (two threads
	 * on one stripe move its cache line to and fro on every take); the first taker stays.
	 */
	@Test
	void aThreadMovesToAnotherStripeWhenAnotherThreadTookFromItsStripeLast() throws Exception {
		Stripes stripes = new Stripes(8, null);
		stripes.open(1_000, 0);
		int[] probes = new int[3];
		int[] outcomes = new int[2];
		run(() -> {
			probes[0] = Stripes.PROBE.get()[0];
			outcomes[0] = stripes.take(1, 0);
			probes[1] = Stripes.PROBE.get()[0];
		});
		run(() -> {
			Stripes.PROBE.get()[0] = probes[0]; // on the first thread's stripe
			outcomes[1] = stripes.take(1, 0);
			probes[2] = Stripes.PROBE.get()[0];
		});
		assertThat(outcomes).containsOnly(Stripes.TAKEN);
		stripes.closeAll();
		assertThat(stripes.granted(probes[0] & 7)).as("both took from one stripe").isEqualTo(2);
		assertThat(probes[1]).as("the first taker stays on its stripe").isEqualTo(probes[0]);
		assertThat(probes[2]).as("the second moves on").isNotEqualTo(probes[0]);
	}

	/** A log that fills before its budget holds twice as many entries when the stripe opens again, up to 2,048. */
	@Test
	void aStripesLogThatFillsBeforeItsBudgetGrowsUpToItsLargestSize() {
		Stripes stripes = new Stripes(2, () -> 0);
		int capacity = Stripes.FIRST_LOG;
		for (int round = 0; round < 8; round++) {
			stripes.open(1_000_000, 0);
			int taken = 0;
			while (taken <= Stripes.MAX_LOG && stripes.take(1, 0) == Stripes.TAKEN) {
				taken++;
			}
			assertThat(taken).as("entries in round %d", round).isEqualTo(capacity);
			stripes.closeAll();
			capacity = Math.min(2 * capacity, Stripes.MAX_LOG);
		}
	}

	private static void run(Runnable body) throws InterruptedException {
		Thread thread = new Thread(body);
		thread.start();
		thread.join(10_000);
		assertThat(thread.isAlive()).isFalse();
	}
}
