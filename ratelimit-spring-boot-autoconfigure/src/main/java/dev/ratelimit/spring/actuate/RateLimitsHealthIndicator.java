package dev.ratelimit.spring.actuate;

import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;

import dev.ratelimit.core.BackendHealth;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RegisteredBucket;

import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;
import org.springframework.boot.health.contributor.Status;

/**
 * The {@code ratelimits} health contributor: UP, with each bucket on a remote backend (Redis) in its
 * details by name, {@code "up"} or {@code "down: <cause>"}. While a bucket runs on its failure policy, the status
 * is {@code ratelimit.health.backend-down-status} (UP by default: a bucket on its policy still limits
 * calls, so a Redis outage takes the application out of a load balancer only when asked). A read of a
 * bucket said down asks its backend again when a probe is due; the buckets are asked together, so that a read
 * takes at most one bucket's timeout however many buckets wait for an answer.
 */
public class RateLimitsHealthIndicator implements HealthIndicator {

	private final RateLimiterRegistry registry;

	private final Status backendDownStatus;

	/**
	 * Creates the contributor.
	 *
	 * @param registry the buckets
	 * @param backendDownStatus the status while a bucket's backend does not answer
	 */
	public RateLimitsHealthIndicator(RateLimiterRegistry registry, String backendDownStatus) {
		this.registry = registry;
		this.backendDownStatus = new Status(backendDownStatus);
	}

	@Override
	public Health health() {
		Map<String, BackendHealth> backends = new TreeMap<>();
		for (String name : this.registry.names()) {
			RegisteredBucket bucket = this.registry.find(name).orElse(null);
			if (bucket != null && bucket.limiter() instanceof BackendHealth backend) {
				backends.put(name, backend);
			}
		}
		Map<String, Supplier<String>> reads = new TreeMap<>();
		backends.forEach((name, backend) -> reads.put(name, backend.startHealthRead()));
		Map<String, String> details = new TreeMap<>();
		boolean allUp = true;
		for (Map.Entry<String, Supplier<String>> read : reads.entrySet()) {
			details.put(read.getKey(), read.getValue().get());
			allUp &= backends.get(read.getKey()).isUp();
		}
		return Health.status(allUp ? Status.UP : this.backendDownStatus).withDetails(details).build();
	}
}
