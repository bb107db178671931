package dev.ratelimit.core;

import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;
import java.util.function.LongSupplier;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A clock that forces an interleaving: one reading by the thread {@link #stall} starts (its first, or its
 * first at which a condition holds) blocks until {@link #release}, so that a test acts while that call is at
 * a chosen point. Bounded: every wait gives up after 10 seconds.
 */
final class StallingClock implements LongSupplier {

	private final LongSupplier time;

	private final AtomicBoolean armed = new AtomicBoolean();

	private final CountDownLatch blocked = new CountDownLatch(1);

	private final CountDownLatch released = new CountDownLatch(1);

	private volatile Thread stalled;

	private volatile BooleanSupplier when = () -> true;

	StallingClock(LongSupplier time) {
		this.time = time;
	}

	@Override
	public long getAsLong() {
		if (Thread.currentThread() == this.stalled && this.when.getAsBoolean() && this.armed.compareAndSet(true, false)) {
			this.blocked.countDown();
			try {
				this.released.await(10, TimeUnit.SECONDS);
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt();
			}
		}
		return this.time.getAsLong();
	}

	/** Starts {@code call} on a thread of its own and returns once that thread is blocked in the clock. */
	Thread stall(Runnable call) throws InterruptedException {
		return stall(() -> true, call);
	}

	/**
	 * Starts {@code call} on a thread of its own, whose first reading at which {@code when} holds blocks, and
	 * returns once it is blocked there.
	 */
	Thread stall(BooleanSupplier when, Runnable call) throws InterruptedException {
		Thread thread = new Thread(call, "stale");
		this.when = when;
		this.stalled = thread;
		this.armed.set(true);
		thread.start();
		assertThat(this.blocked.await(10, TimeUnit.SECONDS)).as("the caller read the clock").isTrue();
		return thread;
	}

	/** Lets the stalled reading go on and waits for its call to end. */
	void release(Thread thread) throws InterruptedException {
		this.released.countDown();
		thread.join(10_000);
		assertThat(thread.isAlive()).as("the stalled call ended").isFalse();
	}
}
