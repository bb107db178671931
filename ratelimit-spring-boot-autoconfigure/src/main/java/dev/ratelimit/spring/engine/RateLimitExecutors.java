package dev.ratelimit.spring.engine;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;

import dev.ratelimit.spring.RateLimitConfigurationException;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.DisposableBean;

/**
 * The threads of the {@code CompletionStage} path, owned by the starter and shut down with the
 * application context (contract revision 2: never {@code ForkJoinPool.commonPool()}, no static timer
 * left running): one timer thread that only schedules polls of waiting claims, and the executor on
 * which a call that had to wait runs once its tokens are there. The application replaces the latter
 * with an {@link Executor} bean named {@value #RUNNER_BEAN_NAME}; {@code ratelimit.executor.*} sizes the
 * starter's own. Either way a delayed call runs with its caller's context (MDC, security,
 * observation) when io.micrometer:context-propagation is on the class path.
 */
public final class RateLimitExecutors implements DisposableBean {

	/** The name of the application's bean that runs delayed calls instead of the starter's threads. */
	public static final String RUNNER_BEAN_NAME = "rateLimitTaskExecutor";

	private final ScheduledExecutorService timer;

	private final Executor runner;

	private final @Nullable ExecutorService owned;

	private final boolean propagateContext;

	/** What ends the calls still waiting for their tokens when the executors close. */
	private final Set<Runnable> onClose = ConcurrentHashMap.newKeySet();

	private volatile boolean closed;

	/**
	 * Creates the executors with the starter's own threads for delayed calls, carrying the caller's
	 * context when io.micrometer:context-propagation is on the class path.
	 *
	 * @param runner the application's executor for delayed calls, or {@code null} for the starter's own
	 *        threads ({@code ratelimit-run-N}, daemon, made as needed and ended after a minute idle)
	 */
	public RateLimitExecutors(@Nullable Executor runner) {
		this(runner, 0, false, true);
	}

	/**
	 * Creates the executors ({@code ratelimit.executor.*}).
	 *
	 * @param runner the application's executor for delayed calls, or {@code null} for the starter's own
	 * @param maxThreads the most of the starter's threads at once, {@code 0} for as many as needed
	 * @param virtualThreads whether the starter's threads are virtual, one per call (Java 21 and later)
	 * @param propagateContext whether a delayed call runs with its caller's context (with
	 *        io.micrometer:context-propagation on the class path; otherwise nothing is carried)
	 * @throws IllegalArgumentException when {@code maxThreads} is negative
	 * @throws RateLimitConfigurationException when virtual threads are asked for on a Java without them
	 */
	public RateLimitExecutors(@Nullable Executor runner, int maxThreads, boolean virtualThreads,
			boolean propagateContext) {
		if (maxThreads < 0) {
			throw new IllegalArgumentException(
					"ratelimit.executor.max-threads must be >= 0 (0: as many as needed), was " + maxThreads);
		}
		ScheduledThreadPoolExecutor scheduler = new ScheduledThreadPoolExecutor(1, threads("ratelimit-timer"));
		scheduler.setRemoveOnCancelPolicy(true);
		this.timer = scheduler;
		this.owned = (runner != null) ? null : ownThreads(maxThreads, virtualThreads);
		this.runner = (runner != null) ? runner : this.owned;
		this.propagateContext = propagateContext && CONTEXT_PROPAGATION_PRESENT;
	}

	/**
	 * Creates the executors with a given timer and runner, neither owned (for an application that brings
	 * its own scheduler, and for tests that drive the
	 * polls of waiting claims themselves, on a fake clock).
	 *
	 * @param timer where polls of waiting claims are scheduled
	 * @param runner where a call that had to wait runs
	 */
	public RateLimitExecutors(ScheduledExecutorService timer, Executor runner) {
		this.timer = timer;
		this.runner = runner;
		this.owned = null;
		this.propagateContext = false;
	}

	private static final boolean CONTEXT_PROPAGATION_PRESENT = org.springframework.util.ClassUtils
		.isPresent("io.micrometer.context.ContextSnapshotFactory", RateLimitExecutors.class.getClassLoader());

	private static ExecutorService ownThreads(int maxThreads, boolean virtualThreads) {
		if (virtualThreads) {
			try {
				// Thread.ofVirtual().name("ratelimit-run-", 1).factory(), through reflection (built for Java 17)
				Class<?> builder = Class.forName("java.lang.Thread$Builder");
				Object named = builder.getMethod("name", String.class, long.class)
					.invoke(Thread.class.getMethod("ofVirtual").invoke(null), "ratelimit-run-", 1L);
				ThreadFactory factory = (ThreadFactory) builder.getMethod("factory").invoke(named);
				return (ExecutorService) Executors.class.getMethod("newThreadPerTaskExecutor", ThreadFactory.class)
					.invoke(null, factory);
			}
			catch (ReflectiveOperationException ex) {
				throw new RateLimitConfigurationException("ratelimit.executor.virtual-threads is true, and virtual threads"
						+ " need Java 21 or later; this is Java " + Runtime.version().feature() + ".",
						"Run on Java 21 or later, or set ratelimit.executor.virtual-threads to false.");
			}
		}
		if (maxThreads == 0) {
			return Executors.newCachedThreadPool(threads("ratelimit-run-"));
		}
		ThreadPoolExecutor pool = new ThreadPoolExecutor(maxThreads, maxThreads, 1, TimeUnit.MINUTES,
				new LinkedBlockingQueue<>(), threads("ratelimit-run-"));
		pool.allowCoreThreadTimeOut(true);
		return pool;
	}

	/**
	 * Captures the calling thread's context for a call that may run later on the runner.
	 *
	 * @return what wraps the delayed call's task; the identity when nothing is carried
	 */
	public UnaryOperator<Runnable> captureContext() {
		return this.propagateContext ? CapturedContext.capture() : UnaryOperator.identity();
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
	 * Registers what ends a waiting call when the executors close: once the timer has stopped, nobody
	 * would poll its claim again, and its future would stay pending forever.
	 *
	 * @param action gives the claim back and fails the call's future (quick; must not throw)
	 * @return what deregisters the action (run it when the call no longer waits)
	 */
	Runnable whenClosed(Runnable action) {
		this.onClose.add(action);
		if (this.closed && this.onClose.remove(action)) {
			action.run();
		}
		return () -> this.onClose.remove(action);
	}

	/**
	 * Stops the timer and the starter's own threads (never the application's executor), and fails the
	 * calls still waiting for their tokens.
	 */
	@Override
	public void destroy() {
		this.closed = true;
		this.timer.shutdownNow();
		for (Runnable action : this.onClose) {
			if (this.onClose.remove(action)) {
				action.run();
			}
		}
		if (this.owned != null) {
			this.owned.shutdown();
		}
	}
}
