package dev.ratelimit.core;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * Capped release: the permit of a {@link SharedTokenBucket} call, which releases what the call still holds,
 * once (I8 of the bucket's design notes): what it was granted less what it refunded through
 * {@link SharedTokenBucket#refund(long, Permit)}. Package-private, as the bucket's other parts.
 */
final class CappedPermit implements Permit {

	private static final VarHandle HELD;

	static {
		try {
			HELD = MethodHandles.lookup().findVarHandle(CappedPermit.class, "held", long.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	final SharedTokenBucket bucket;

	/** Tokens the call still holds: 0 once closed. */
	@SuppressWarnings("unused")
	private volatile long held;

	CappedPermit(SharedTokenBucket bucket, long n) {
		this.bucket = bucket;
		this.held = n;
	}

	/** Takes up to {@code n} of the tokens still held off the permit, for a refund: the tokens taken. */
	long takeBack(long n) {
		for (;;) {
			long h = (long) HELD.getVolatile(this);
			long take = Math.min(n, h);
			if (take <= 0 || HELD.compareAndSet(this, h, h - take)) {
				return Math.max(take, 0);
			}
		}
	}

	@Override
	public void close() {
		long h = (long) HELD.getAndSet(this, 0L);
		if (h > 0) {
			this.bucket.release(h);
		}
	}
}
