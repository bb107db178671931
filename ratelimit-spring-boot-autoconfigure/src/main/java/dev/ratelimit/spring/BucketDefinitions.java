package dev.ratelimit.spring;

import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * The checked definitions of every configured bucket, in configuration order.
 */
public final class BucketDefinitions {

	private final Map<String, BucketDefinition> definitions;

	BucketDefinitions(Map<String, BucketDefinition> definitions) {
		this.definitions = Collections.unmodifiableMap(new LinkedHashMap<>(definitions));
	}

	/**
	 * Checks every bucket of the properties.
	 *
	 * @param properties the bound properties
	 * @return the definitions
	 * @throws RateLimitConfigurationException for the first invalid bucket
	 */
	public static BucketDefinitions of(RateLimitProperties properties) {
		Map<String, BucketDefinition> definitions = new LinkedHashMap<>();
		properties.getBuckets().forEach((name, bucket) -> definitions.put(name, BucketDefinition.of(name, bucket)));
		return new BucketDefinitions(definitions);
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
}
