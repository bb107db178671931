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
