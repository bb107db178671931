package dev.ratelimit.spring;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.StatsRecorder;

/**
 * A backend whose module is on the class path but cannot serve buckets in this application, and says
 * why: a backend module registers it instead of its real backend when what it needs is missing, so
 * that a bucket naming the backend fails start-up with the module's own explanation (the
 * auto-configuration knows no backend by name).
 *
 * @param backend the backend it stands for
 * @param missing what is missing, e.g. "no RedisConnectionFactory bean exists"
 * @param action what to do about it
 */
public record UnavailableBucketBackend(Backend backend, String missing, String action) implements BucketBackend {

	@Override
	public RateLimiter create(BucketDefinition definition, StatsRecorder stats) {
		throw new RateLimitConfigurationException(
				"Bucket '" + definition.name() + "' has backend " + this.backend.value() + ", but " + this.missing + ".",
				this.action + " Or set ratelimit.buckets." + definition.name() + ".backend to local.");
	}
}
