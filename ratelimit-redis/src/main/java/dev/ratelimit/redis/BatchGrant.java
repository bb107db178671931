package dev.ratelimit.redis;

import java.time.Duration;

import dev.ratelimit.core.AbstractReservation;
import dev.ratelimit.core.Permit;

/**
 * A reservation decided by this instance's batch when it was made (contract revision 3): covered by the hand
 * (ready at once; a caller that gives it up puts its tokens back in the hand), or refused here because Redis
 * said when the next token will be there and the caller does not wait that long (B7: no Redis call).
 */
final class BatchGrant extends AbstractReservation {

	private final RedisBatch batch;

	private final boolean covered;

	private final long refusedNanos;

	BatchGrant(RedisTokenBucket bucket, RedisBatch batch, long n, Duration maxWait, long start, long refusedNanos) {
		super(bucket.name(), n, maxWait, bucket.clock(), start, bucket.stats(), bucket.waiting());
		this.batch = batch;
		this.covered = refusedNanos == 0;
		this.refusedNanos = refusedNanos;
	}

	@Override
	protected long delayNanos(long nowNanos) {
		// refused: the wait Redis said, longer than the caller's max-wait (its first poll refuses it)
		return this.covered ? 0 : this.refusedNanos;
	}

	@Override
	protected void giveBack() {
		if (this.covered) {
			this.batch.giveBackToHand(tokens());
		}
	}

	@Override
	protected Permit grantedPermit() {
		return Permit.noop();
	}
}
