package dev.ratelimit.spring.actuate;

import dev.ratelimit.spring.WaitObserver;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationRegistry;
import org.jspecify.annotations.Nullable;

/**
 * Makes a {@code ratelimit.acquire} observation of every call that waits for its tokens or is refused
 * (contract revision 3), so that traces show where time went to limits; a call granted at once makes
 * none.
 */
final class ObservationWaitObserver implements WaitObserver {

	private static final DefaultRateLimitObservationConvention DEFAULT = new DefaultRateLimitObservationConvention();

	private final ObservationRegistry registry;

	private final @Nullable RateLimitObservationConvention convention;

	/**
	 * Creates the observer.
	 *
	 * @param registry where observations go
	 * @param convention the application's convention, or {@code null} for the default
	 */
	public ObservationWaitObserver(ObservationRegistry registry, @Nullable RateLimitObservationConvention convention) {
		this.registry = registry;
		this.convention = convention;
	}

	@Override
	public Waiting started(String bucket) {
		RateLimitObservationContext context = new RateLimitObservationContext(bucket);
		Observation observation = Observation
			.createNotStarted(this.convention, DEFAULT, () -> context, this.registry)
			.start();
		return (outcome, refusing, failure) -> {
			context.ended(outcome, refusing);
			if (failure != null && !WaitObserver.SHADOW_REJECTED.equals(outcome)) {
				observation.error(failure);
			}
			observation.stop();
		};
	}
}
