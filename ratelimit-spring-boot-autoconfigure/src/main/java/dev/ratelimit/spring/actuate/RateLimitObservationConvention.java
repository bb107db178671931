package dev.ratelimit.spring.actuate;

import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationConvention;

/**
 * The convention of the {@code ratelimit.acquire} observation; a bean of this type replaces
 * {@link DefaultRateLimitObservationConvention}.
 */
public interface RateLimitObservationConvention extends ObservationConvention<RateLimitObservationContext> {

	@Override
	default boolean supportsContext(Observation.Context context) {
		return context instanceof RateLimitObservationContext;
	}
}
