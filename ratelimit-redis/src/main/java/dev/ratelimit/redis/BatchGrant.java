package dev.ratelimit.redis;

import java.time.Duration;

import dev.ratelimit.core.AbstractReservation;
import dev.ratelimit.core.Permit;

/**
 * A reservation covered by this instance's batch when it was made (contract revision 3): ready at once; a
 * caller that gives it up puts its tokens back in the batch's hand.
 */
final class BatchGrant extends AbstractReservation {

	private final RedisBatch batch;

	BatchGrant(RedisTokenBucket bucket, RedisBatch batch, long n, Duration maxWait, long start) {
		super(bucket.name(), n, maxWait, bucket.clock(), start, bucket.stats(), bucket.waiting());
		this.batch = batch;
	}

	@Override
	protected long delayNanos(long nowNanos) {
		return 0;
	}

	@Override
	protected void giveBack() {
		this.batch.giveBackToHand(tokens());
	}

	@Override
	protected Permit grantedPermit() {
		return Permit.noop();
	}
}
