package dev.ratelimit.spring;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The checked definitions of every configured bucket, in configuration order.
 */
public final class BucketDefinitions {

	private final Map<String, BucketDefinition> definitions;

	private final Map<String, BucketMode> modes;

	private final boolean allShadow;

	BucketDefinitions(Map<String, BucketDefinition> definitions) {
		this(definitions, Map.of(), false);
	}

	BucketDefinitions(Map<String, BucketDefinition> definitions, Map<String, BucketMode> modes, boolean allShadow) {
		this.definitions = Collections.unmodifiableMap(new LinkedHashMap<>(definitions));
		this.modes = Map.copyOf(modes);
		this.allShadow = allShadow;
	}

	/**
	 * Checks every bucket of the properties.
	 *
	 * @param properties the bound properties
	 * @return the definitions
	 * @throws RateLimitConfigurationException for every invalid bucket, all at once
	 */
	public static BucketDefinitions of(RateLimitProperties properties) {
		List<RateLimitConfigurationException> errors = new ArrayList<>();
		BucketDefinitions definitions = of(properties, Set.of(), errors);
		if (!errors.isEmpty()) {
			throw RateLimitConfigurationException.of(errors);
		}
		return definitions;
	}

	/**
	 * Checks every bucket of the properties, gathering the errors of every bucket (issue #30: every
	 * error at once) rather than stopping at the first.
	 *
	 * @param properties the bound properties
	 * @param skipped buckets not to check (their properties already failed a check)
	 * @param errors where the errors go, in configuration order
	 * @return the definitions of the buckets that are valid
	 */
	static BucketDefinitions of(RateLimitProperties properties, Set<String> skipped,
			List<RateLimitConfigurationException> errors) {
		Map<String, BucketDefinition> definitions = new LinkedHashMap<>();
		Map<String, BucketMode> modes = new LinkedHashMap<>();
		properties.getBuckets().forEach((name, bucket) -> {
			if (skipped.contains(name)) {
				return;
			}
			try {
				BucketDefinition definition = BucketDefinition.of(name, bucket);
				if (bucket.getMode() == null) {
					throw RateLimitConfigurationException.invalidProperty(name, "mode", null, "enforce or shadow");
				}
				definitions.put(name, definition);
				modes.put(name, bucket.getMode());
			}
			catch (RateLimitConfigurationException ex) {
				errors.add(ex);
			}
		});
		return new BucketDefinitions(definitions, modes, properties.getMode() == BucketMode.SHADOW);
	}

	/**
	 * The mode a bucket starts in: its own {@code mode}.
	 *
	 * @param name the bucket name
	 * @return the configured mode, {@link BucketMode#ENFORCE} when none is configured
	 */
	public BucketMode mode(String name) {
		return this.modes.getOrDefault(name, BucketMode.ENFORCE);
	}

	/**
	 * Whether {@code ratelimit.mode: shadow} puts every bucket in shadow mode, whatever its own mode.
	 *
	 * @return {@code true} for {@code ratelimit.mode: shadow}
	 */
	public boolean allShadow() {
		return this.allShadow;
	}

	/**
	 * The bucket names, in configuration order.
	 *
	 * @return the names
	 */
	public Set<String> names() {
		return this.definitions.keySet();
	}

	/**
	 * The definition of a bucket.
	 *
	 * @param name the bucket name
	 * @return the definition, or {@code null}
	 */
	public BucketDefinition get(String name) {
		return this.definitions.get(name);
	}

	/**
	 * Every definition, by name, in configuration order.
	 *
	 * @return the definitions
	 */
	public Map<String, BucketDefinition> asMap() {
		return this.definitions;
	}

	/**
	 * Checks that a bucket can be the template of per-key buckets: a key's bucket starts full, so the
	 * template may not set {@code initial}.
	 *
	 * @param definition the bucket
	 * @param user what uses it with a key, for the message
	 * @throws RateLimitConfigurationException naming the bucket, the property and the user
	 */
	public static void checkUsableWithKey(BucketDefinition definition, String user) {
		String name = definition.name();
		if (definition instanceof BucketDefinition.Shared shared && shared.initial() < shared.limit()) {
			throw new RateLimitConfigurationException("Bucket '" + name + "' sets ratelimit.buckets." + name
					+ ".initial and is used with a key by " + user + ": a key's bucket starts full.",
					"Remove ratelimit.buckets." + name + ".initial, or the key.");
		}
	}
}
