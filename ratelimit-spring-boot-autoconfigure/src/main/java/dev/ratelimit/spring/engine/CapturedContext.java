package dev.ratelimit.spring.engine;

import java.util.function.UnaryOperator;

import io.micrometer.context.ContextSnapshot;
import io.micrometer.context.ContextSnapshotFactory;

/**
 * The caller's context, carried to the thread that runs its delayed call: every
 * {@code ThreadLocalAccessor} registered with Micrometer's {@code ContextRegistry} (observation,
 * Spring Security, the MDC when its accessor is registered). Loaded only when
 * io.micrometer:context-propagation is on the class path.
 */
final class CapturedContext {

	private static final ContextSnapshotFactory SNAPSHOTS = ContextSnapshotFactory.builder().build();

	private CapturedContext() {
	}

	/**
	 * Captures the calling thread's context.
	 *
	 * @return what wraps a task so that it runs in that context, restoring the thread's own after
	 */
	static UnaryOperator<Runnable> capture() {
		ContextSnapshot snapshot = SNAPSHOTS.captureAll();
		return snapshot::wrap;
	}
}
