package dev.ratelimit.spring.actuate;

import java.math.BigDecimal;
import java.util.LinkedHashMap;
import java.util.Map;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.BucketMode;
import dev.ratelimit.spring.RateLimitConfigurationException;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RegisteredBucket;
import org.jspecify.annotations.Nullable;

import org.springframework.boot.actuate.endpoint.Access;
import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.actuate.endpoint.annotation.DeleteOperation;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;

/**
 * The {@code ratelimits} actuator endpoint: every bucket's live state, and retuning at run time.
 *
 * <ul>
 * <li>{@code GET /actuator/ratelimits}: {@code {"buckets": {"db-writes": {...}, ...}}}</li>
 * <li>{@code GET /actuator/ratelimits/{name}}: one bucket; 404 when there is none of that name</li>
 * <li>{@code POST /actuator/ratelimits/{name}} with {@code {"rate": 200}} and/or {@code {"limit": 50}}:
 * changes the bucket in place (the period stays; time that passed is counted at the old rate first;
 * waiters keep their place) and returns the new view; a value the configuration would reject gets
 * 400 with the same message (the error's reason; Boot's error body shows it as {@code message} when
 * {@code server.error.include-message=always}); {@code {"mode": "shadow"}} or {@code {"mode": "enforce"}}
 * switches the bucket's mode (contract revision 2), alone or with a rate and a limit.</li>
 * <li>{@code DELETE /actuator/ratelimits/{name}} (contract revision 3): resets the bucket (full again, its
 * keys' buckets dropped, what callers owed forgotten, waiting callers woken to claim again; on Redis for
 * every instance; counts kept): 204; 404 when there is no bucket of that name.</li>
 * </ul>
 *
 * <p>Like every actuator endpoint it is available over JMX, and over HTTP only when the application
 * exposes it: {@code management.endpoints.web.exposure.include=health,ratelimits}. Its access is
 * read-only by default (contract revision 3): the write operations can turn limiting off, so it is
 * reachable only with {@code management.endpoint.ratelimits.access: unrestricted}, and then it should
 * sit behind the actuator's usual security (for example a Spring Security rule that requires an
 * operator role for {@code POST} and {@code DELETE /actuator/**}).
 */
@Endpoint(id = "ratelimits", defaultAccess = Access.READ_ONLY)
public class RateLimitsEndpoint {

	private final RateLimiterRegistry registry;

	/**
	 * Creates the endpoint.
	 *
	 * @param registry the buckets
	 */
	public RateLimitsEndpoint(RateLimiterRegistry registry) {
		this.registry = registry;
	}

	/**
	 * Every bucket, in configuration order.
	 *
	 * @return the buckets' views
	 */
	@ReadOperation
	public BucketsDescriptor buckets() {
		Map<String, BucketView> buckets = new LinkedHashMap<>();
		for (String name : this.registry.names()) {
			this.registry.find(name).ifPresent((bucket) -> buckets.put(name, BucketView.of(bucket)));
		}
		return new BucketsDescriptor(buckets);
	}

	/**
	 * One bucket.
	 *
	 * @param name the bucket name
	 * @return its view, or {@code null} (404) when there is none
	 */
	@ReadOperation
	public @Nullable BucketView bucket(@Selector String name) {
		return this.registry.find(name).map(BucketView::of).orElse(null);
	}

	/**
	 * One key's bucket (contract revision 2): every field of a bucket's view, its figures the key's
	 * (its granted and rejected are the bucket's, which counts every key's calls).
	 *
	 * <p>The key takes every remaining segment of the path, joined with {@code /}: a key may hold slashes
	 * (a web rule with {@code key: ip} keys an IPv6 client by its {@code /64}, {@code 2001:db8:1:2::/64}),
	 * and a single-segment selector would answer 404 for a key that has a bucket. From Java, the key is
	 * given whole ({@code key("per-client", "2001:db8:1:2::/64")}) or in segments.
	 *
	 * @param name the bucket name
	 * @param key the key, as a string, or its segments between slashes
	 * @return its view, or {@code null} (404) when the key has no bucket of its own now
	 */
	@ReadOperation
	public @Nullable BucketView key(@Selector String name,
			@Selector(match = Selector.Match.ALL_REMAINING) String... key) {
		RegisteredBucket bucket = this.registry.find(name).orElse(null);
		if (bucket == null || bucket.keys() == 0) {
			return null;
		}
		String whole = String.join("/", key);
		RateLimiter limiter = bucket.keyed().find(whole);
		return (limiter != null) ? BucketView.of(bucket, limiter, 0, whole) : null;
	}

	/**
	 * Changes a bucket's rate and/or limit in place, and/or switches its mode. The mode is checked
	 * before anything changes, so a request that is refused changes nothing.
	 *
	 * @param name the bucket name
	 * @param rate the new rate per the configured period (a number, or a string that is one), or
	 *        {@code null} to keep it
	 * @param limit the new limit (a whole number, or a string that is one), or {@code null} to keep it
	 * @param mode {@code enforce} or {@code shadow}, or {@code null} to keep it
	 * @return the new view
	 */
	@WriteOperation
	public BucketView update(@Selector String name, @Nullable Object rate, @Nullable Object limit,
			@Nullable String mode) {
		RegisteredBucket bucket = this.registry.find(name)
			.orElseThrow(() -> invalid("No bucket named '" + name + "'; the buckets are "
					+ String.join(", ", this.registry.names())));
		if (rate == null && limit == null && mode == null) {
			throw invalid("Give a rate, a limit and/or a mode, e.g. {\"rate\": 200} or {\"mode\": \"shadow\"}");
		}
		BucketMode next = null;
		if (mode != null) {
			next = BucketMode.of(mode);
			if (next == null) {
				throw invalid("mode '" + mode + "' of bucket '" + name + "' is not a mode; expected enforce or shadow");
			}
			try {
				bucket.stats().checkMode(next);
			}
			catch (IllegalArgumentException ex) {
				throw invalid(ex.getMessage());
			}
		}
		// taken as they come and read here, so that a value that is not one says why (a typed parameter
		// that cannot be converted is a bare 400 from the framework, without a message)
		BigDecimal newRate = rateOf(name, rate);
		Long newLimit = limitOf(name, limit);
		if (newRate != null || newLimit != null) {
			try {
				bucket.update(newRate, newLimit);
			}
			catch (IllegalArgumentException ex) {
				throw invalid(ex.getMessage());
			}
		}
		if (next != null) {
			bucket.stats().mode(next);
		}
		return BucketView.of(bucket);
	}

	/**
	 * Resets a bucket (contract revision 3), as {@link dev.ratelimit.spring.RateLimitRegistry#reset(String)}
	 * does.
	 *
	 * <p>It answers the bucket's view after the reset (over JMX); over HTTP the web extension answers 204
	 * without a body, as the contract says. (It returns a value, not {@code void}, so that the web extension's
	 * operation, which answers with a status, replaces it: an operation's media types are part of its key.)
	 *
	 * @param name the bucket name
	 * @return the bucket's view after the reset
	 */
	@DeleteOperation
	public BucketView reset(@Selector String name) {
		RegisteredBucket bucket = this.registry.find(name)
			.orElseThrow(() -> invalid("No bucket named '" + name + "'; the buckets are "
					+ String.join(", ", this.registry.names())));
		this.registry.reset(name);
		return BucketView.of(bucket);
	}

	/**
	 * Whether a bucket of this name exists.
	 *
	 * @param name the bucket name
	 * @return {@code true} when it does
	 */
	boolean exists(String name) {
		return this.registry.find(name).isPresent();
	}

	private static @Nullable BigDecimal rateOf(String name, @Nullable Object rate) {
		if (rate == null) {
			return null;
		}
		BigDecimal value = number(rate);
		if (value == null) {
			throw invalid(RateLimitConfigurationException
				.invalidProperty(name, "rate", rate, "a number > 0 (fractions allowed, e.g. 0.5)")
				.getMessage());
		}
		return value;
	}

	private static @Nullable Long limitOf(String name, @Nullable Object limit) {
		if (limit == null) {
			return null;
		}
		BigDecimal value = number(limit);
		if (value != null) {
			try {
				return value.longValueExact();
			}
			catch (ArithmeticException ex) {
				// fractional, or beyond a long: said below
			}
		}
		throw invalid(RateLimitConfigurationException
			.invalidProperty(name, "limit", (value != null) ? value : limit, "a whole number >= 1")
			.getMessage());
	}

	private static @Nullable BigDecimal number(Object value) {
		if (value instanceof BigDecimal decimal) {
			return decimal;
		}
		if (value instanceof Long || value instanceof Integer || value instanceof Short || value instanceof Byte) {
			return BigDecimal.valueOf(((Number) value).longValue());
		}
		if (value instanceof Double || value instanceof Float) {
			double d = ((Number) value).doubleValue();
			return Double.isFinite(d) ? BigDecimal.valueOf(d) : null;
		}
		try {
			return new BigDecimal(value.toString().trim());
		}
		catch (NumberFormatException ex) {
			return null;
		}
	}

	/**
	 * A 400 whose reason is the message itself: over HTTP Boot answers with the exception's reason,
	 * so the operator reads what the configuration would have said.
	 */
	private static InvalidEndpointRequestException invalid(String message) {
		return new InvalidEndpointRequestException(message, message);
	}

	/**
	 * The endpoint's answer for every bucket.
	 *
	 * @param buckets the views by bucket name, in configuration order
	 */
	public record BucketsDescriptor(Map<String, BucketView> buckets) {
	}
}
