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

	/** Each bucket's plans, by plan name in configuration order; only buckets with plans. */
	private final Map<String, Map<String, BucketDefinition>> plans;

	private final boolean allShadow;

	/** Each bucket's plans in shadow mode ({@code plans.<plan>.mode: shadow}); only buckets with some. */
	private final Map<String, Set<String>> shadowPlans = new LinkedHashMap<>();

	BucketDefinitions(Map<String, BucketDefinition> definitions) {
		this(definitions, Map.of(), false);
	}

	BucketDefinitions(Map<String, BucketDefinition> definitions, Map<String, BucketMode> modes, boolean allShadow) {
		this(definitions, modes, allShadow, Map.of());
	}

	BucketDefinitions(Map<String, BucketDefinition> definitions, Map<String, BucketMode> modes, boolean allShadow,
			Map<String, Map<String, BucketDefinition>> plans) {
		this.definitions = Collections.unmodifiableMap(new LinkedHashMap<>(definitions));
		this.modes = Map.copyOf(modes);
		this.allShadow = allShadow;
		Map<String, Map<String, BucketDefinition>> copy = new LinkedHashMap<>();
		plans.forEach((name, byPlan) -> copy.put(name, Collections.unmodifiableMap(new LinkedHashMap<>(byPlan))));
		this.plans = Collections.unmodifiableMap(copy);
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
		Map<String, Map<String, BucketDefinition>> plans = new LinkedHashMap<>();
		properties.getBuckets().forEach((name, bucket) -> {
			if (skipped.contains(name)) {
				return;
			}
			BucketDefinition definition;
			try {
				definition = BucketDefinition.of(name, bucket);
				if (bucket.getMode() == null) {
					throw RateLimitConfigurationException.invalidProperty(name, "mode", null, "enforce or shadow");
				}
			}
			catch (RateLimitConfigurationException ex) {
				errors.add(ex);
				return;
			}
			int before = errors.size();
			Map<String, BucketDefinition> byPlan = plans(name, bucket, definition, errors);
			if (errors.size() > before) {
				return;
			}
			definitions.put(name, definition);
			modes.put(name, bucket.getMode());
			if (!byPlan.isEmpty()) {
				plans.put(name, byPlan);
			}
		});
		BucketDefinitions checked = new BucketDefinitions(definitions, modes, properties.getMode() == BucketMode.SHADOW,
				plans);
		plans.forEach((name, byPlan) -> {
			Set<String> shadow = new java.util.LinkedHashSet<>();
			properties.getBuckets().get(name).getPlans().forEach((plan, settings) -> {
				if (settings != null && settings.getMode() == BucketMode.SHADOW && byPlan.containsKey(plan)) {
					shadow.add(plan);
				}
			});
			if (!shadow.isEmpty()) {
				checked.shadowPlans.put(name, Collections.unmodifiableSet(shadow));
			}
		});
		return checked;
	}

	/**
	 * Checks and resolves a bucket's plans (contract revision 3, "Plans"), every plan's error gathered.
	 * Plans of a bucket on Redis are accepted: a key's quota is given its plan's limit with every call, and a
	 * key's token bucket calls with its plan's settings in force, from the plan's record in Redis. A key on
	 * Redis keeps one hash and one object whatever its plan, so that an upgrade keeps its tokens: a plan of a
	 * Redis token bucket may not set another {@code redis.key-prefix} or {@code capped-release} than the
	 * bucket's (the hash's place, and whether its tokens are in flight, are the key's).
	 */
	private static Map<String, BucketDefinition> plans(String name, RateLimitProperties.Bucket bucket,
			BucketDefinition template, List<RateLimitConfigurationException> errors) {
		Map<String, BucketDefinition> byPlan = new LinkedHashMap<>();
		if (bucket.getPlans().isEmpty()) {
			return byPlan;
		}
		if (template instanceof BucketDefinition.Hybrid hybrid && hybrid.limit() == null) {
			errors.add(new RateLimitConfigurationException("Bucket '" + name + "' is of type hybrid and has plans, but"
					+ " no limit: a key that leaves a plan goes back to the bucket's limit, which must be set.",
					"Set ratelimit.buckets." + name + ".limit (the active pool in operations, e.g. 2)."));
			return byPlan;
		}
		bucket.getPlans().forEach((plan, settings) -> {
			if (plan.isBlank()) {
				errors.add(new RateLimitConfigurationException("Bucket '" + name + "' has a plan without a name.",
						"Name each plan under ratelimit.buckets." + name + ".plans, e.g. plans.pro.rate."));
				return;
			}
			try {
				BucketDefinition made = BucketDefinition.plan(name, bucket, plan, (settings != null) ? settings
						: new RateLimitProperties.Plan());
				if (template instanceof BucketDefinition.Shared shared && shared.backend() != Backend.LOCAL) {
					sameOnRedis(name, plan, shared, (BucketDefinition.Shared) made, errors);
				}
				byPlan.put(plan, made);
			}
			catch (RateLimitConfigurationException ex) {
				errors.add(ex);
			}
		});
		return byPlan;
	}

	/** A plan of a Redis token bucket keeps the bucket's key prefix and capped release (see {@link #plans}). */
	private static void sameOnRedis(String name, String plan, BucketDefinition.Shared template,
			BucketDefinition.Shared made, List<RateLimitConfigurationException> errors) {
		if (!made.redis().getKeyPrefix().equals(template.redis().getKeyPrefix())) {
			errors.add(new RateLimitConfigurationException("Bucket '" + name + "': ratelimit.buckets." + name + ".plans."
					+ plan + ".redis.key-prefix is '" + made.redis().getKeyPrefix() + "', but a key of a Redis token bucket"
					+ " keeps one hash whatever its plan (so that an upgrade keeps its tokens): its prefix is the bucket's, '"
					+ template.redis().getKeyPrefix() + "'.",
					"Remove ratelimit.buckets." + name + ".plans." + plan + ".redis.key-prefix, or set ratelimit.buckets."
							+ name + ".redis.key-prefix for every plan."));
		}
		if (made.cappedRelease() != template.cappedRelease()) {
			errors.add(new RateLimitConfigurationException("Bucket '" + name + "': ratelimit.buckets." + name + ".plans."
					+ plan + ".capped-release is " + made.cappedRelease() + ", but the bucket's is "
					+ template.cappedRelease() + ": a key of a Redis token bucket keeps its leases and its queue in"
					+ " Redis whatever its plan, so capped release is the bucket's for every plan.",
					"Remove ratelimit.buckets." + name + ".plans." + plan + ".capped-release, or set ratelimit.buckets."
							+ name + ".capped-release for every plan."));
		}
	}

	/**
	 * A bucket's plans (contract revision 3, "Plans"), each resolved with the bucket's settings where it
	 * sets none.
	 *
	 * @param name the bucket name
	 * @return the plans by name, in configuration order; empty for a bucket without plans
	 */
	public Map<String, BucketDefinition> plans(String name) {
		return this.plans.getOrDefault(name, Map.of());
	}

	/**
	 * A bucket's plans whose keys' calls are in shadow mode ({@code plans.<plan>.mode: shadow}).
	 *
	 * @param name the bucket name
	 * @return the plans' names; empty for none
	 */
	public Set<String> shadowPlans(String name) {
		return this.shadowPlans.getOrDefault(name, Set.of());
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
