package dev.ratelimit.spring;

import java.util.Locale;

/**
 * {@code ratelimit.buckets.<name>.backend}: where a bucket's state lives.
 */
public enum Backend {

	/** In this JVM. */
	LOCAL,

	/** In Redis, shared by every instance (module {@code dev.ratelimit:ratelimit-redis}). */
	REDIS;

	/**
	 * The value as written in the configuration and shown by the endpoint and the meters.
	 *
	 * @return {@code local} or {@code redis}
	 */
	public String value() {
		return name().toLowerCase(Locale.ROOT);
	}
}
