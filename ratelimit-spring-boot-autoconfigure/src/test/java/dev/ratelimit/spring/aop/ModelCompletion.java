package dev.ratelimit.spring.aop;

/**
 * The exception a call's own future (or {@code Mono}) fails with when a model test fails it, or its method's
 * body throws: the test tells it from every other failure the caller may see.
 *
 * <p>Thrown and read by {@link AsyncSingleBucketModelTests} and {@link SeveralBucketsPollModelTests}.
 */
final class ModelCompletion extends RuntimeException {

	private static final long serialVersionUID = 1L;

	ModelCompletion() {
		super("completed exceptionally by the test", null, false, false);
	}
}
