package dev.ratelimit.core;

import java.time.Duration;
import java.util.function.LongSupplier;

// SCAFFOLD: public surface only, so that other modules compile; the implementation replaces this file.
public final class SharedTokenBucket implements RateLimiter {

	private SharedTokenBucket(Builder b) {
		throw new UnsupportedOperationException("SCAFFOLD");
	}

	public static Builder builder() {
		return new Builder();
	}

	public long grab(long n) { throw new UnsupportedOperationException("SCAFFOLD"); }
	public long deficiency(long ticket) { throw new UnsupportedOperationException("SCAFFOLD"); }
	public void replenish(long nowNanos) { throw new UnsupportedOperationException("SCAFFOLD"); }
	public void release(long n) { throw new UnsupportedOperationException("SCAFFOLD"); }
	public void refund(long n) { throw new UnsupportedOperationException("SCAFFOLD"); }
	public long durationFor(long missing) { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public String name() { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public boolean tryAcquire(long n) { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public Permit acquire(long n, Duration maxWait) throws InterruptedException { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public Reservation reserve(long n, Duration maxWait) { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public RateLimiterSnapshot snapshot() { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public void updateRate(long tokens, Duration period) { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public void updateLimit(long limit) { throw new UnsupportedOperationException("SCAFFOLD"); }

	public static final class Builder {
		public Builder name(String name) { return this; }
		public Builder rate(long tokens, Duration period) { return this; }
		public Builder limit(long limit) { return this; }
		public Builder initial(long initial) { return this; }
		public Builder cappedRelease(boolean cappedRelease) { return this; }
		public Builder threshold(long threshold) { return this; }
		public Builder clock(LongSupplier nanoClock) { return this; }
		public Builder stats(StatsRecorder stats) { return this; }
		public SharedTokenBucket build() { return new SharedTokenBucket(this); }
	}
}
