package dev.ratelimit.spring.actuate;

import io.micrometer.common.KeyValues;

/**
 * The {@code ratelimit.acquire} observation as the contract names it (revision 3): low-cardinality keys
 * {@code bucket} (the refusing bucket of a refusal; else the bucket, or the buckets joined by {@code ,})
 * and {@code outcome} ({@code granted}, {@code rejected} or {@code shadow-rejected}); the wait is its
 * duration.
 */
public class DefaultRateLimitObservationConvention implements RateLimitObservationConvention {

	/** The observation's name. */
	public static final String NAME = "ratelimit.acquire";

	@Override
	public String getName() {
		return NAME;
	}

	@Override
	public String getContextualName(RateLimitObservationContext context) {
		return "ratelimit " + context.getBucket();
	}

	@Override
	public KeyValues getLowCardinalityKeyValues(RateLimitObservationContext context) {
		String refusing = context.getRefusing();
		String outcome = context.getOutcome();
		return KeyValues.of("bucket", (refusing != null) ? refusing : context.getBucket(), "outcome",
				(outcome != null) ? outcome : "unknown");
	}
}
