package dev.ratelimit.spring.aop;

import dev.ratelimit.core.RateLimiterSnapshot;

/**
 * Told of the buckets' levels after a {@code @RateLimited} controller method took its tokens: how the
 * web layer sends the IETF {@code RateLimit} fields for annotated controller methods
 * ({@code ratelimit.web.headers: ietf}). Without one, nothing is read: the hot path pays nothing.
 */
@FunctionalInterface
public interface GrantObserver {

	/**
	 * The call took its tokens.
	 *
	 * @param buckets the buckets' names
	 * @param levels each bucket's state after the call took its tokens (its key's bucket for a key)
	 */
	void granted(String[] buckets, RateLimiterSnapshot[] levels);
}
