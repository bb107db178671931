package dev.ratelimit.core;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A lock for critical sections of a few arithmetic steps, never held while a caller waits: under
 * contention it backs off (spinning, then yielding) instead of inflating a monitor and parking, which
 * costs more than the section itself. Not reentrant, not fair.
 *
 * <p>A caller that finds the lock held does not watch it: it waits a back-off that doubles after each
 * failed attempt before it looks again. Watching (test-and-test-and-set) keeps pulling the lock's and
 * the section's cache lines to the waiting core while the holder works, so that every section pays for
 * moving them back; backing off lets the holder run several sections with the lines in its own cache.
 * On two threads taking the pacer's try path this gave 7 operations per microsecond watching and about
 * 24 backing off ({@code TryPathBenchmark -p limiter=HYBRID -t 2}, see docs/benchmarks.md).
 *
 * <p>Memory consistency effects: as for {@link java.util.concurrent.locks.Lock}: actions before
 * {@link #unlock()} happen-before actions after a later {@link #lock()}.
 */
final class SpinLock {

	private static final VarHandle HELD;

	static {
		try {
			HELD = MethodHandles.lookup().findVarHandle(SpinLock.class, "held", boolean.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	/** Spin-waits before the second attempt, doubling after each failed one up to {@link #MAX_BACKOFF}. */
	private static final int FIRST_BACKOFF = 128;

	private static final int MAX_BACKOFF = 4096;

	/** Spin-waits after which a caller yields once: the holder may have been descheduled, let it run. */
	private static final int SPINS_BEFORE_YIELD = 1 << 14;

	@SuppressWarnings("unused")
	private volatile boolean held;

	void lock() {
		if (HELD.compareAndSet(this, false, true)) {
			return;
		}
		int backoff = FIRST_BACKOFF;
		int spins = 0;
		for (;;) {
			for (int i = 0; i < backoff; i++) {
				Thread.onSpinWait();
			}
			spins += backoff;
			if (!(boolean) HELD.getOpaque(this) && HELD.compareAndSet(this, false, true)) {
				return;
			}
			if (spins >= SPINS_BEFORE_YIELD) {
				Thread.yield();
				spins = 0;
			}
			backoff = Math.min(backoff << 1, MAX_BACKOFF);
		}
	}

	void unlock() {
		HELD.setRelease(this, false);
	}
}
