package dev.ratelimit.spring;

import java.time.InstantSource;
import java.util.List;
import java.util.function.LongSupplier;

import dev.ratelimit.core.CalendarQuota;
import dev.ratelimit.core.HybridRateLimiter;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.SharedTokenBucket;
import dev.ratelimit.core.StatsRecorder;
import org.jspecify.annotations.Nullable;

/**
 * Makes the limiter of a bucket definition: a {@link SharedTokenBucket}, a {@link HybridRateLimiter}
 * or a {@link CalendarQuota} (on the wall clock, an {@link InstantSource}) in this JVM, or whatever the
 * named {@link BucketBackend} makes.
 */
final class BucketFactory {

	private BucketFactory() {
	}

	/**
	 * Builds the bucket's limiter; its builder checks the settings, and a refusal fails start-up in the
	 * configuration's words ({@link CoreArguments}).
	 */
	static RateLimiter create(BucketDefinition definition, StatsRecorder stats, LongSupplier clock,
			InstantSource wallClock, List<BucketBackend> backends) {
		return create(definition, stats, clock, wallClock, backends, false, null);
	}

	/**
	 * Builds the limiter of one key of a bucket used with a key (or of its overflow bucket, for a
	 * {@code null} key): a local bucket like the template, or the backend's per-key bucket.
	 */
	static RateLimiter createForKey(BucketDefinition definition, StatsRecorder stats, LongSupplier clock,
			InstantSource wallClock, List<BucketBackend> backends, @Nullable String key) {
		return create(definition, stats, clock, wallClock, backends, true, key);
	}

	/**
	 * One key's bucket on a plan (contract revision 3, "Plans"): on a backend, made by it knowing the plan;
	 * locally, as any key's bucket with the plan's settings.
	 */
	static RateLimiter createForKey(BucketDefinition definition, StatsRecorder stats, LongSupplier clock,
			InstantSource wallClock, List<BucketBackend> backends, String key, @Nullable String plan) {
		if (definition.backend() == Backend.LOCAL) {
			return createForKey(definition, stats, clock, wallClock, backends, key);
		}
		try {
			return backendFor(definition, backends).create(definition, stats, key, plan);
		}
		catch (IllegalArgumentException ex) {
			throw CoreArguments.translate(definition, ex);
		}
	}

	private static RateLimiter create(BucketDefinition definition, StatsRecorder stats, LongSupplier clock,
			InstantSource wallClock, List<BucketBackend> backends, boolean keyed, @Nullable String key) {
		try {
			if (keyed && definition.backend() != Backend.LOCAL) {
				return backendFor(definition, backends).create(definition, stats, key);
			}
			return build(definition, stats, clock, wallClock, backends);
		}
		catch (IllegalArgumentException ex) {
			throw CoreArguments.translate(definition, ex);
		}
	}

	private static RateLimiter build(BucketDefinition definition, StatsRecorder stats, LongSupplier clock,
			InstantSource wallClock, List<BucketBackend> backends) {
		if (definition.backend() != Backend.LOCAL) {
			return backendFor(definition, backends).create(definition, stats);
		}
		if (definition instanceof BucketDefinition.Quota quota) {
			return CalendarQuota.builder()
				.name(quota.name())
				.limit(quota.limit())
				.calendar(quota.calendar())
				.zone(quota.zone())
				.clock(wallClock)
				.stats(stats)
				.build();
		}
		if (definition instanceof BucketDefinition.Hybrid hybrid) {
			HybridRateLimiter.Builder builder = HybridRateLimiter.builder()
				.name(hybrid.name())
				.rate(hybrid.exactRate())
				.maxBacklog(hybrid.maxBacklog())
				.clock(clock)
				.stats(stats);
			if (hybrid.limit() != null) {
				builder.limit(hybrid.limit());
			}
			if (hybrid.burstRatio() != null) {
				builder.burstRatio(hybrid.burstRatio());
			}
			return builder.build();
		}
		BucketDefinition.Shared shared = (BucketDefinition.Shared) definition;
		return SharedTokenBucket.builder()
			.name(shared.name())
			.rate(shared.exactRate())
			.limit(shared.limit())
			.initial(shared.initial())
			.cappedRelease(shared.cappedRelease())
			.clock(clock)
			.stats(stats)
			.build();
	}

	static BucketBackend backendFor(BucketDefinition definition, List<BucketBackend> backends) {
		return backends.stream()
			.filter((candidate) -> candidate.backend() == definition.backend())
			.findFirst()
			.orElseThrow(() -> missingBackend(definition));
	}

	/**
	 * No bean serves the backend: its module is not on the class path (a module that is there but
	 * cannot serve says why itself, with an {@link UnavailableBucketBackend}).
	 */
	private static RateLimitConfigurationException missingBackend(BucketDefinition definition) {
		String module = "dev.ratelimit:ratelimit-" + definition.backend().value();
		return new RateLimitConfigurationException(
				"Bucket '" + definition.name() + "' has backend " + definition.backend().value() + ", but no module provides"
						+ " that backend: the " + module + " module is not on the class path.",
				"Add " + module + " to the application (its README says what else it needs), or set"
						+ " ratelimit.buckets." + definition.name() + ".backend to local.");
	}
}
