package dev.ratelimit.spring.aop;

import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;

import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.DisposableBean;

/**
 * The threads of the {@code CompletionStage} path, owned by the starter and shut down with the
 * application context (contract revision 2: never {@code ForkJoinPool.commonPool()}, no static timer
 * left running): one timer thread that only schedules polls of waiting claims, and the executor on
 * which a call that had to wait runs once its tokens are there. The application replaces the latter
 * with an {@link Executor} bean named {@value #RUNNER_BEAN_NAME} (for example a virtual-thread or a
 * context-propagating executor).
 */
public final class RateLimitExecutors implements DisposableBean {

	/** The name of the application's bean that runs delayed calls instead of the starter's threads. */
	public static final String RUNNER_BEAN_NAME = "rateLimitTaskExecutor";

	private final ScheduledExecutorService timer;

	private final Executor runner;

	private final @Nullable ExecutorService owned;

	/**
	 * Creates the executors.
	 *
	 * @param runner the application's executor for delayed calls, or {@code null} for the starter's own
	 *        threads ({@code ratelimit-run-N}, daemon, made as needed and ended after a minute idle)
	 */
	public RateLimitExecutors(@Nullable Executor runner) {
		ScheduledThreadPoolExecutor scheduler = new ScheduledThreadPoolExecutor(1, threads("ratelimit-timer"));
		scheduler.setRemoveOnCancelPolicy(true);
		this.timer = scheduler;
		this.owned = (runner != null) ? null : Executors.newCachedThreadPool(threads("ratelimit-run-"));
		this.runner = (runner != null) ? runner : this.owned;
	}

	private static ThreadFactory threads(String name) {
		AtomicInteger count = new AtomicInteger();
		return (runnable) -> {
			Thread thread = new Thread(runnable,
					name.endsWith("-") ? name + count.incrementAndGet() : name);
			thread.setDaemon(true);
			return thread;
		};
	}

	ScheduledExecutorService timer() {
		return this.timer;
	}

	Executor runner() {
		return this.runner;
	}

	/**
	 * Stops the timer and the starter's own threads (never the application's executor).
	 */
	@Override
	public void destroy() {
		this.timer.shutdownNow();
		if (this.owned != null) {
			this.owned.shutdown();
		}
	}
}
