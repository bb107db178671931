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
	 * Plans of a quota on Redis are accepted (each key's quota is given its plan's limit with every call);
	 * plans of a token bucket on Redis are refused: a Redis key's bucket takes its settings from the
	 * bucket's one record, shared by every instance, which has no place for a plan's yet.
	 */
	private static Map<String, BucketDefinition> plans(String name, RateLimitProperties.Bucket bucket,
			BucketDefinition template, List<RateLimitConfigurationException> errors) {
		Map<String, BucketDefinition> byPlan = new LinkedHashMap<>();
		if (bucket.getPlans().isEmpty()) {
			return byPlan;
		}
		if (template.backend() != Backend.LOCAL && !(template instanceof BucketDefinition.Quota)) {
			errors.add(new RateLimitConfigurationException("Bucket '" + name + "' has plans ("
					+ String.join(", ", bucket.getPlans().keySet()) + ") and backend " + template.backend().value()
					+ ": plans are not available yet on Redis for a token bucket (a quota on Redis takes plans).",
					"Remove ratelimit.buckets." + name + ".plans, or set ratelimit.buckets." + name
							+ ".backend to local (a bucket in this JVM)."));
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
				byPlan.put(plan, BucketDefinition.plan(name, bucket, plan, (settings != null) ? settings
						: new RateLimitProperties.Plan()));
			}
			catch (RateLimitConfigurationException ex) {
				errors.add(ex);
			}
		});
		return byPlan;
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
