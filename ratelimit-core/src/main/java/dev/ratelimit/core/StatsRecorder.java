package dev.ratelimit.core;

import java.util.concurrent.atomic.LongAdder;

/**
 * Counts what a {@link RateLimiter} grants and refuses, for its {@link RateLimiterSnapshot} and for
 * meters built on top of it.
 *
 * <p>Limiters record nothing unless given a recorder (as a cache records no statistics unless asked
 * to), so that the bare try path costs no more than its atomic operations. {@link #concurrent()} is
 * the ready-made recorder: striped counters that many threads update without contention.
 * Implementations must be thread-safe and cheap: they run on the hot path of every call.
 */
public interface StatsRecorder {

	/**
	 * Records a call that was let through.
	 *
	 * @param waitedNanos how long the caller waited for its tokens; {@code 0} when it did not wait
	 */
	void recordGranted(long waitedNanos);

	/**
	 * Records a call that was refused (at once, after waiting, or by interruption).
	 */
	void recordRejected();

	/**
	 * Calls let through so far.
	 *
	 * @return the count
	 */
	long granted();

	/**
	 * Calls refused so far.
	 *
	 * @return the count
	 */
	long rejected();

	/**
	 * The recorder that records nothing and counts zero: the default.
	 *
	 * @return the shared disabled recorder
	 */
	static StatsRecorder disabled() {
		return DisabledStats.INSTANCE;
	}

	/**
	 * A new recorder that counts calls in striped counters.
	 *
	 * @return a new recorder
	 */
	static StatsRecorder concurrent() {
		return new ConcurrentStats();
	}
}

enum DisabledStats implements StatsRecorder {

	INSTANCE;

	@Override
	public void recordGranted(long waitedNanos) {
	}

	@Override
	public void recordRejected() {
	}

	@Override
	public long granted() {
		return 0;
	}

	@Override
	public long rejected() {
		return 0;
	}
}

final class ConcurrentStats implements StatsRecorder {

	private final LongAdder granted = new LongAdder();

	private final LongAdder rejected = new LongAdder();

	@Override
	public void recordGranted(long waitedNanos) {
		this.granted.increment();
	}

	@Override
	public void recordRejected() {
		this.rejected.increment();
	}

	@Override
	public long granted() {
		return this.granted.sum();
	}

	@Override
	public long rejected() {
		return this.rejected.sum();
	}
}
