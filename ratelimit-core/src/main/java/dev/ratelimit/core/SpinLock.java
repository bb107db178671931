package dev.ratelimit.core;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * A test-and-test-and-set lock for critical sections of a few arithmetic steps, never held while a
 * caller waits: under contention it spins (backing off, then yielding) instead of inflating a monitor
 * and parking, which costs more than the section itself. Not reentrant.
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

	private static final int SPINS_BEFORE_YIELD = 1 << 10;

	@SuppressWarnings("unused")
	private volatile boolean held;

	void lock() {
		if (HELD.compareAndSet(this, false, true)) {
			return;
		}
		int spins = 0;
		int backoff = 16;
		for (;;) {
			while ((boolean) HELD.getOpaque(this)) {
				if (++spins < SPINS_BEFORE_YIELD) {
					Thread.onSpinWait();
				}
				else {
					Thread.yield(); // the holder may have been descheduled: let it run
				}
			}
			if (HELD.compareAndSet(this, false, true)) {
				return;
			}
			for (int i = 0; i < backoff; i++) {
				Thread.onSpinWait();
			}
			backoff = Math.min(backoff << 1, 1024);
		}
	}

	void unlock() {
		HELD.setRelease(this, false);
	}
}
