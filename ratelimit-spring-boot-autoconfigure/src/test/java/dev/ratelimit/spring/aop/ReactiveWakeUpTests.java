package dev.ratelimit.spring.aop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.SharedTokenBucket;
import dev.ratelimit.spring.engine.ReactivePermits;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import reactor.core.Disposable;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The work a waiting {@code Mono} call gives Reactor's parallel scheduler: one poll round per claim
 * however many wake-ups come while it is queued (as {@link AsyncWakeUpTests} for the
 * {@code CompletionStage} path), and a scheduler that refuses work ends the call with its tokens given
 * back instead of leaving its claim held.
 *
 * <p>Nothing runs on its own: the bucket reads a fake clock, and Reactor's parallel scheduler is a
 * queue of tasks run by the test as it moves the clock.
 */
class ReactiveWakeUpTests {

	private static final long MS = TimeUnit.MILLISECONDS.toNanos(1);

	private final AtomicLong clock = new AtomicLong(TimeUnit.SECONDS.toNanos(1));

	private final ManualScheduler parallel = new ManualScheduler(this.clock);

	@BeforeEach
	void useTheCountingScheduler() {
		Schedulers.setFactory(new Schedulers.Factory() {
			@Override
			public Scheduler newParallel(int parallelism, java.util.concurrent.ThreadFactory threadFactory) {
				return ReactiveWakeUpTests.this.parallel;
			}
		});
	}

	@AfterEach
	void resetTheSchedulers() {
		Schedulers.resetFactory();
	}

	private void advance(long nanos) {
		long until = this.clock.get() + nanos;
		// step a microsecond at a time, so that each poll runs with the clock at its due time
		while (this.clock.get() < until) {
			this.parallel.runDue();
			this.clock.set(Math.min(until, this.clock.get() + 1_000));
		}
		this.parallel.runDue();
	}

	@Test
	void releasesThatComeWhileAPollIsQueuedAddNoOtherPoll() throws InterruptedException {
		// 3 calls in flight at most, a token a millisecond
		SharedTokenBucket bucket = SharedTokenBucket.builder().name("pool").rate(1000, Duration.ofSeconds(1))
			.limit(3).cappedRelease(true).clock(this.clock::get).build();
		List<Permit> held = new ArrayList<>();
		for (int i = 0; i < 3; i++) {
			held.add(bucket.acquire(1, Duration.ZERO));
		}
		List<AtomicReference<Permit>> waiting = new ArrayList<>();
		for (int i = 0; i < 4; i++) {
			AtomicReference<Permit> granted = new AtomicReference<>();
			ReactivePermits.permit(() -> bucket.reserve(1, Duration.ofSeconds(1)), (ex) -> ex)
				.subscribe(granted::set);
			waiting.add(granted);
		}
		advance(10 * MS); // waiting for releases, polled now and then
		assertThat(waiting).allMatch((granted) -> granted.get() == null);
		int scheduled = this.parallel.scheduled.get();
		// three calls complete at once, each releasing its token, each waking every waiting call
		held.forEach(Permit::close);
		// one poll round each for the four waiting calls, not one per release
		assertThat(this.parallel.scheduled.get() - scheduled).isEqualTo(4);
		advance(0);
		// the first three in line have their tokens, the fourth still waits
		assertThat(waiting.subList(0, 3)).allMatch((granted) -> granted.get() != null);
		assertThat(waiting.get(3).get()).isNull();
		waiting.get(0).get().close();
		advance(0);
		assertThat(waiting.get(3).get()).isNotNull();
	}

	@Test
	void aSchedulerThatRefusesWorkEndsTheCallAndGivesItsTokensBack() {
		SharedTokenBucket bucket = SharedTokenBucket.builder().name("slow").rate(1, Duration.ofSeconds(1))
			.limit(1).clock(this.clock::get).build();
		assertThat(bucket.tryAcquire(1)).isTrue();
		this.parallel.refuse = true;
		AtomicReference<Throwable> failed = new AtomicReference<>();
		ReactivePermits.permit(() -> bucket.reserve(1, Duration.ofSeconds(2)), (ex) -> ex)
			.subscribe((permit) -> {
			}, failed::set);
		assertThat(failed.get()).isInstanceOf(RejectedExecutionException.class);
		assertThat(bucket.snapshot().waiting()).isZero();
		// the claim went back: the next token is the next caller's, a second from now
		advance(TimeUnit.SECONDS.toNanos(1));
		assertThat(bucket.tryAcquire(1)).isTrue();
	}

	@Test
	void aResetWakesAWaitingCallToClaimAgainFromTheFullBucket() {
		SharedTokenBucket bucket = SharedTokenBucket.builder().name("reset").rate(1, Duration.ofSeconds(1))
			.limit(2).clock(this.clock::get).build();
		assertThat(bucket.tryAcquire(2)).isTrue();
		AtomicReference<Permit> granted = new AtomicReference<>();
		ReactivePermits.permit(() -> bucket.reserve(2, Duration.ofSeconds(10)), (ex) -> ex).subscribe(granted::set);
		advance(10 * MS);
		assertThat(granted.get()).isNull(); // two seconds to go
		int scheduled = this.parallel.scheduled.get();
		bucket.reset(); // contract revision 3: the waiting call is woken and claims again from the full bucket
		assertThat(this.parallel.scheduled.get() - scheduled).isEqualTo(1);
		advance(0);
		assertThat(granted.get()).isNotNull();
		assertThat(bucket.snapshot().available()).isZero(); // its claim came from the full bucket, once
	}

	/**
	 * Reactor's parallel scheduler, run by the test: tasks wait in a queue until the test moves the clock
	 * to their due time (none runs while it is given, as none does at once on the real one under load).
	 */
	static final class ManualScheduler implements Scheduler {

		private final AtomicLong clock;

		private final java.util.PriorityQueue<long[]> due = new java.util.PriorityQueue<>(
				java.util.Comparator.<long[]>comparingLong((task) -> task[0]).thenComparingLong((task) -> task[1]));

		private final java.util.Map<Long, Runnable> tasks = new java.util.HashMap<>();

		final AtomicInteger scheduled = new AtomicInteger();

		volatile boolean refuse;

		ManualScheduler(AtomicLong clock) {
			this.clock = clock;
		}

		@Override
		public synchronized Disposable schedule(Runnable task) {
			return schedule(task, 0, TimeUnit.NANOSECONDS);
		}

		@Override
		public synchronized Disposable schedule(Runnable task, long delay, TimeUnit unit) {
			if (this.refuse) {
				throw new RejectedExecutionException("disposed");
			}
			long id = this.scheduled.incrementAndGet();
			this.due.add(new long[] { this.clock.get() + unit.toNanos(delay), id });
			this.tasks.put(id, task);
			return () -> {
				synchronized (this) {
					this.tasks.remove(id);
				}
			};
		}

		/** Runs the tasks due by now, in due order, those they schedule for now included. */
		void runDue() {
			for (;;) {
				Runnable task;
				synchronized (this) {
					long[] next = this.due.peek();
					if (next == null || next[0] - this.clock.get() > 0) {
						return;
					}
					this.due.poll();
					task = this.tasks.remove(next[1]);
				}
				if (task != null) {
					task.run();
				}
			}
		}

		@Override
		public Worker createWorker() {
			throw new UnsupportedOperationException("not used by the polls of a claim");
		}

		@Override
		public void dispose() {
		}

		@Override
		public void init() {
		}

		@Override
		public long now(TimeUnit unit) {
			return unit.convert(this.clock.get(), TimeUnit.NANOSECONDS);
		}
	}
}
