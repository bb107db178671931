package dev.ratelimit.spring.engine;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.Reservation;

/**
 * A key's bucket's reservation, whose refusal carries the key ({@link RateLimitExceededException#getKey()})
 * and the bucket that refused ({@link KeyedBucketExceeded}).
 */
final class KeyedReservation implements Reservation {

	private final Reservation reservation;

	private final Object key;

	private final RateLimiter target;

	KeyedReservation(Reservation reservation, Object key, RateLimiter target) {
		this.reservation = reservation;
		this.key = key;
		this.target = target;
	}

	/**
	 * The refusal of a key's bucket, with the key and the bucket that refused.
	 *
	 * @param target the key's own bucket, or the overflow bucket, that refused
	 */
	static RateLimitExceededException withKey(RateLimitExceededException refusal, Object key, RateLimiter target) {
		RateLimitExceededException keyed = new KeyedBucketExceeded(refusal, String.valueOf(key), target);
		keyed.setStackTrace(refusal.getStackTrace());
		return keyed;
	}

	@Override
	public long poll() {
		try {
			return this.reservation.poll();
		}
		catch (RateLimitExceededException ex) {
			throw withKey(ex, this.key, this.target);
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

	@Override
	public boolean awaitingAnswer() {
		return this.reservation.awaitingAnswer();
	}
}
