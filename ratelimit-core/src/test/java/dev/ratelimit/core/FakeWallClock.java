package dev.ratelimit.core;

import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.util.concurrent.atomic.AtomicReference;

/** A wall clock that moves only when a test says so, forward or back. */
final class FakeWallClock implements InstantSource {

	private final AtomicReference<Instant> now;

	FakeWallClock(Instant start) {
		this.now = new AtomicReference<>(start);
	}

	@Override
	public Instant instant() {
		return this.now.get();
	}

	void set(Instant instant) {
		this.now.set(instant);
	}

	void advance(Duration d) {
		this.now.updateAndGet((t) -> t.plus(d));
	}
}
