package dev.ratelimit.core;

import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/** A nanosecond clock that moves only when a test says so; starts far from zero to exercise wrapping. */
final class FakeClock implements LongSupplier {

	private final AtomicLong now;

	FakeClock() {
		this(Long.MAX_VALUE - 1_000_000_000L);
	}

	FakeClock(long start) {
		this.now = new AtomicLong(start);
	}

	@Override
	public long getAsLong() {
		return this.now.get();
	}

	void advance(Duration d) {
		this.now.addAndGet(d.toNanos());
	}

	void advanceNanos(long nanos) {
		this.now.addAndGet(nanos);
	}
}
