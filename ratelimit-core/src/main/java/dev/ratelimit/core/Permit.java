package dev.ratelimit.core;

/**
 * Proof of tokens taken from a {@link RateLimiter}; closing it ends the guarded work.
 *
 * <p>For a bucket with capped release, {@link #close()} releases the tokens so that they may be
 * replenished again; for every other limiter it does nothing. Either way it throws nothing, and it
 * releases at most once however often it is called, from however many threads.
 */
public interface Permit extends AutoCloseable {

	/**
	 * Ends the guarded work: releases the tokens (capped release) exactly once.
	 */
	@Override
	void close();

	/**
	 * The permit that has nothing to release, shared by every call that needs one.
	 *
	 * @return the shared no-op permit
	 */
	static Permit noop() {
		return NoopPermit.INSTANCE;
	}

	/**
	 * A permit whose close runs {@code release} exactly once, however often and from however many
	 * threads it is closed: what a limiter with capped release hands out.
	 *
	 * @param release what closing the permit does
	 * @return the permit
	 */
	static Permit once(Runnable release) {
		return new OncePermit(release);
	}
}

final class OncePermit implements Permit {

	private static final java.lang.invoke.VarHandle CLOSED;

	static {
		try {
			CLOSED = java.lang.invoke.MethodHandles.lookup().findVarHandle(OncePermit.class, "closed", boolean.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	private final Runnable release;

	@SuppressWarnings("unused")
	private volatile boolean closed;

	OncePermit(Runnable release) {
		this.release = release;
	}

	@Override
	public void close() {
		if (CLOSED.compareAndSet(this, false, true)) {
			this.release.run();
		}
	}
}

enum NoopPermit implements Permit {

	INSTANCE;

	@Override
	public void close() {
	}

	@Override
	public String toString() {
		return "Permit.noop()";
	}
}
