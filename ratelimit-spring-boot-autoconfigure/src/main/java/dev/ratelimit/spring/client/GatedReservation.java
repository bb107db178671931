package dev.ratelimit.spring.client;

import java.time.Duration;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.Reservation;

/**
 * The engine's claim of an outbound call, held back also by what the servers said (the call's
 * {@link ServerGate}s): ready when the engine has the tokens and every gate lets the call pass, which it
 * then does (counted as sent); refused, giving the claim back, when a gate's wait goes beyond its
 * bucket's max-wait, counted from the call's start. A pause and a wait for tokens run together, so the
 * call waits for the longer one.
 */
final class GatedReservation implements Reservation {

	/**
	 * The longest a poll says to wait while a gate holds the call: the gate's wait is on the buckets'
	 * clock, which a test may move faster than time.
	 */
	static final long ROUND = 20_000_000L;

	private final Reservation claim;

	private final OutboundCall call;

	private final ClientLimits limits;

	private final long start;

	GatedReservation(Reservation claim, OutboundCall call, ClientLimits limits, long start) {
		this.claim = claim;
		this.call = call;
		this.limits = limits;
		this.start = start;
	}

	@Override
	public long poll() {
		long delay = this.claim.poll(); // a refusal cancels the claim
		long now = this.limits.now();
		int refusing = this.limits.refusing(this.call, now, now - this.start);
		if (refusing >= 0) {
			this.claim.cancel();
			throw this.limits.refusal(refusing, this.call, now);
		}
		long gate = this.limits.gateDelay(this.call, now);
		if (delay > 0 || gate > 0) {
			return Math.max(delay, Math.min(gate, ROUND));
		}
		if (!this.limits.tryPass(this.call, now)) {
			return 1; // another call took the lowered level first: look again
		}
		return 0;
	}

	@Override
	public Permit permit() {
		return this.claim.permit();
	}

	@Override
	public boolean cancel() {
		return this.claim.cancel();
	}

	@Override
	public void onWake(Runnable action) {
		this.claim.onWake(action);
	}

	@Override
	public boolean awaitingAnswer() {
		return this.claim.awaitingAnswer();
	}

	static RateLimitExceededException refusal(String bucket, @org.jspecify.annotations.Nullable Object key, long cost,
			long waitNanos) {
		Duration retryAfter = Duration.ofNanos(Math.max(waitNanos, 1));
		return (key != null) ? new RateLimitExceededException(bucket, String.valueOf(key), cost, retryAfter)
				: new RateLimitExceededException(bucket, cost, retryAfter);
	}
}
