package dev.ratelimit.spring.aop;

import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.engine.ReactivePermits;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Found by a reviewer: a subscriber that cancels while its claim is being granted (between Reservation.permit() and
 * sink.success) loses the permit: Call.cancel() returns false once granted, Mono.create discards the
 * value, and Mono.usingWhen never got it to release. Since 4741522 such a Call also holds its keys' pins
 * (holdKeys), so the key's bucket can never be retired again (a lost place under keys.max).
 */
class ReactivePermitAtCancelTests {

	@Test
	void aPermitGrantedAsTheSubscriberCancelsIsClosed() throws InterruptedException {
		AtomicReference<Disposable> subscription = new AtomicReference<>();
		AtomicInteger closes = new AtomicInteger();
		AtomicBoolean granted = new AtomicBoolean();
		AtomicInteger polls = new AtomicInteger();
		Reservation reservation = new Reservation() {

			@Override
			public long poll() {
				return (polls.getAndIncrement() == 0) ? 5_000_000L : 0; // the grant comes on the scheduler
			}

			@Override
			public Permit permit() {
				granted.set(true);
				// the subscriber cancels on another thread at this instant; here, deterministically, the same
				subscription.get().dispose();
				return closes::incrementAndGet;
			}

			@Override
			public boolean cancel() {
				return !granted.get(); // as Call.cancel: false once granted
			}
		};
		subscription.set(ReactivePermits.permit(() -> reservation, (ex) -> ex)
			.flatMap((permit) -> reactor.core.publisher.Mono.using(() -> permit, (p) -> reactor.core.publisher.Mono.just(1),
					Permit::close))
			.subscribe());
		long deadline = System.nanoTime() + 2_000_000_000L;
		while (!granted.get() && System.nanoTime() < deadline) {
			Thread.sleep(10);
		}
		// the release runs on the scheduler after the grant: wait for it (a busy machine may take a while), then a
		// little more, so that a second release would be seen
		long released = System.nanoTime() + 10_000_000_000L;
		while (closes.get() == 0 && System.nanoTime() < released) {
			Thread.sleep(10);
		}
		Thread.sleep(200);
		assertThat(granted).isTrue();
		assertThat(closes.get()).as("the granted permit is released once").isEqualTo(1);
	}
}
