package dev.ratelimit.spring.aop;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.Reservation;

/**
 * A key's bucket's reservation, whose refusal carries the key ({@link RateLimitExceededException#getKey()}).
 */
final class KeyedReservation implements Reservation {

	private final Reservation reservation;

	private final Object key;

	KeyedReservation(Reservation reservation, Object key) {
		this.reservation = reservation;
		this.key = key;
	}

	static RateLimitExceededException withKey(RateLimitExceededException refusal, Object key) {
		RateLimitExceededException keyed = new RateLimitExceededException(refusal.getBucket(), String.valueOf(key),
				refusal.getCost(), refusal.getRetryAfter(), refusal.getMessage());
		keyed.setStackTrace(refusal.getStackTrace());
		return keyed;
	}

	@Override
	public long poll() {
		try {
			return this.reservation.poll();
		}
		catch (RateLimitExceededException ex) {
			throw withKey(ex, this.key);
		}
	}

	@Override
	public Permit permit() {
		return this.reservation.permit();
	}

	@Override
	public boolean cancel() {
		return this.reservation.cancel();
	}

	@Override
	public void onWake(Runnable action) {
		this.reservation.onWake(action);
	}
}
