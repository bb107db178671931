package dev.ratelimit.spring.engine;

import dev.ratelimit.core.RateLimitExceededException;

/**
 * A refusal on its way through a reactive pipeline to what answers it (a fallback, a 429): a type of
 * its own, so that other errors on the way, a refusal from a call the method makes itself included,
 * never reach it.
 */
public final class RefusalSignal extends RuntimeException {

	private static final long serialVersionUID = 1L;

	private final transient RateLimitExceededException refusal;

	private RefusalSignal(RateLimitExceededException refusal) {
		super(refusal.getMessage(), refusal, false, false);
		this.refusal = refusal;
	}

	/**
	 * What a failure of a claim becomes as an error signal: a refusal wrapped, anything else as it is.
	 *
	 * @param failure the claim's failure
	 * @return the signal
	 */
	public static Throwable of(RuntimeException failure) {
		return (failure instanceof RateLimitExceededException refusal) ? new RefusalSignal(refusal) : failure;
	}

	/**
	 * The refusal.
	 *
	 * @return the refusal the claim threw
	 */
	public RateLimitExceededException refusal() {
		return this.refusal;
	}
}
