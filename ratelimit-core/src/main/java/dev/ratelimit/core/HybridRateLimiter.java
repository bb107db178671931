package dev.ratelimit.core;

import java.time.Duration;
import java.util.function.LongSupplier;

// SCAFFOLD: public surface only, so that other modules compile; the implementation replaces this file.
public final class HybridRateLimiter implements RateLimiter {

	private HybridRateLimiter(Builder b) {
		throw new UnsupportedOperationException("SCAFFOLD");
	}

	public static Builder builder() {
		return new Builder();
	}

	public static HybridRateLimiter parse(String spec) { throw new UnsupportedOperationException("SCAFFOLD"); }
	public Duration behindSchedule() { throw new UnsupportedOperationException("SCAFFOLD"); }
	public void updateBurstRatio(double burstRatio) { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public String name() { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public boolean tryAcquire(long n) { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public Permit acquire(long n, Duration maxWait) throws InterruptedException { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public Reservation reserve(long n, Duration maxWait) { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public RateLimiterSnapshot snapshot() { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public void updateRate(long tokens, Duration period) { throw new UnsupportedOperationException("SCAFFOLD"); }
	@Override public void updateLimit(long limit) { throw new UnsupportedOperationException("SCAFFOLD"); }

	public static final class Builder {
		public Builder name(String name) { return this; }
		public Builder rate(long operations, Duration period) { return this; }
		public Builder burstRatio(double burstRatio) { return this; }
		public Builder limit(long limit) { return this; }
		public Builder clock(LongSupplier nanoClock) { return this; }
		public Builder stats(StatsRecorder stats) { return this; }
		public HybridRateLimiter build() { return new HybridRateLimiter(this); }
	}
}
