package dev.ratelimit.spring;

import java.util.Locale;

import org.jspecify.annotations.Nullable;

/**
 * {@code ratelimit.buckets.<name>.mode} and {@code ratelimit.mode} (contract revision 2): whether a
 * bucket holds calls back.
 */
public enum BucketMode {

	/** The bucket decides and holds calls back: waits, refusals. The default. */
	ENFORCE,

	/**
	 * The bucket decides as usual but never holds a call back: a call it would refuse runs (its tokens
	 * given back, counted as {@code shadow-rejected}); a call it would make wait runs at once, keeping
	 * its tokens (counted as {@code granted}). How a team rolls a new limit out: watch, then enforce.
	 */
	SHADOW;

	/**
	 * The value as written in the configuration and shown by the endpoint.
	 *
	 * @return {@code enforce} or {@code shadow}
	 */
	public String value() {
		return name().toLowerCase(Locale.ROOT);
	}

	/**
	 * Reads a mode as the endpoint receives it.
	 *
	 * @param value {@code enforce} or {@code shadow}, any case
	 * @return the mode, or {@code null} when the value is neither
	 */
	public static @Nullable BucketMode of(String value) {
		for (BucketMode mode : values()) {
			if (mode.value().equals(value.trim().toLowerCase(Locale.ROOT))) {
				return mode;
			}
		}
		return null;
	}
}
