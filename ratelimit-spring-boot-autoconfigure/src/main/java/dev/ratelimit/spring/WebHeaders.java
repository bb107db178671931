package dev.ratelimit.spring;

import java.util.Locale;

/**
 * {@code ratelimit.web.headers} (contract revision 2): which rate-limit headers HTTP responses carry.
 */
public enum WebHeaders {

	/** {@code Retry-After} on a 429, nothing else: the default. */
	RETRY_AFTER,

	/**
	 * The IETF draft's fields (draft-ietf-httpapi-ratelimit-headers): {@code RateLimit-Policy} and
	 * {@code RateLimit} on every response of a limited request or {@code @RateLimited} controller
	 * method, {@code Retry-After} too on a 429, whose problem detail lists the refusing buckets in
	 * {@code violated-policies}.
	 */
	IETF,

	/** No rate-limit header at all, {@code Retry-After} included (limits stay undisclosed). */
	NONE;

	/**
	 * The value as written in the configuration.
	 *
	 * @return {@code retry-after}, {@code ietf} or {@code none}
	 */
	public String value() {
		return name().toLowerCase(Locale.ROOT).replace('_', '-');
	}
}
