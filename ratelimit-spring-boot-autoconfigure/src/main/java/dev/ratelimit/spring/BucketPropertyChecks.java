package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.time.Duration;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.regex.Pattern;

import dev.ratelimit.core.QuotaCalendar;
import org.jspecify.annotations.Nullable;
import org.springframework.util.unit.DataSize;

import org.springframework.boot.context.properties.bind.BindException;
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.bind.PlaceholdersResolver;
import org.springframework.boot.context.properties.bind.PropertySourcesPlaceholdersResolver;
import org.springframework.boot.context.properties.source.ConfigurationProperty;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName;
import org.springframework.boot.context.properties.source.ConfigurationPropertyName.Form;
import org.springframework.boot.context.properties.source.ConfigurationPropertySource;
import org.springframework.boot.context.properties.source.ConfigurationPropertySources;
import org.springframework.boot.context.properties.source.IterableConfigurationPropertySource;
import org.springframework.boot.origin.Origin;
import org.springframework.core.env.Environment;

/**
 * What Boot's binding lets through and a user would not expect (contract revision 2): a property name
 * that no bucket knows ({@code capped-relase}, {@code max-wiat}), silently ignored by binding, fails
 * start-up naming the bucket, the name and the closest known one; a duration without a unit
 * ({@code max-wait: 5}, which binding reads as 5 ms) and a fractional {@code limit} or {@code initial}
 * (which binding truncates) are rejected; a value binding cannot convert at all ({@code rate: fast},
 * {@code period: 1.5s}, {@code max-wait: 500 ms}), which binding reports as "failed to convert" without
 * saying what is accepted, fails naming the property and the values it takes. Runs on the raw property
 * sources, before binding, so the messages are ours and name where the value came from.
 */
final class BucketPropertyChecks {

	/** Every property a bucket knows, relative to {@code ratelimit.buckets.<name>}. */
	static final List<String> KNOWN = List.of("type", "rate", "period", "limit", "initial", "capped-release",
			"max-wait", "burst-ratio", "max-backlog", "calendar", "zone", "backend", "redis.key-prefix", "redis.timeout",
			"redis.on-failure", "redis.lease", "redis.batch", "redis.batch-hold", "keys.max", "keys.memory", "mode");

	/**
	 * Every property a plan takes, relative to {@code ratelimit.buckets.<name>.plans.<plan>} (contract
	 * revision 3, "Plans"): every bucket property but those of {@link #NOT_IN_PLAN}.
	 */
	static final List<String> PLAN_KNOWN = List.of("rate", "period", "limit", "capped-release", "max-wait",
			"burst-ratio", "max-backlog", "calendar", "zone", "mode", "redis.key-prefix", "redis.timeout",
			"redis.on-failure", "redis.lease");

	/** Why a bucket property is not one of a plan's. */
	private static final Map<String, String> NOT_IN_PLAN = Map.ofEntries(
			Map.entry("type", "every key of a bucket has the bucket's type"),
			Map.entry("backend", "every key of a bucket lives where the bucket does"),
			Map.entry("keys.max", "the keys of every plan share the bucket's key store"),
			Map.entry("keys.memory", "the keys of every plan share the bucket's key store"),
			Map.entry("initial", "a key's bucket starts full"),
			Map.entry("redis.batch", "a key's batch is made with its bucket and stays with it when its plan changes,"
					+ " so batching is the bucket's for every plan"),
			Map.entry("redis.batch-hold", "a key's batch is made with its bucket and stays with it when its plan"
					+ " changes, so batching is the bucket's for every plan"),
			Map.entry("plans", "a plan has no plans of its own"));

	private static final Set<String> DURATIONS = Set.of("period", "max-wait", "max-backlog", "redis.timeout",
			"redis.lease", "redis.batch-hold");

	private static final Set<String> WHOLE_NUMBERS = Set.of("limit", "initial", "keys.max");

	/** Properties bound to enums, with their values as written and how to say them. */
	private static final Map<String, Map.Entry<Set<String>, String>> CHOICES = Map.of(
			"type", Map.entry(values(BucketType.values()), BucketDefinition.TYPES_ACCEPTED),
			"calendar", Map.entry(values(QuotaCalendar.Unit.values()), BucketDefinition.CALENDAR_ACCEPTED),
			"backend", Map.entry(values(Backend.values()), "local or redis"),
			"redis.on-failure", Map.entry(values(OnFailure.values()), "allow, deny or local"),
			"mode", Map.entry(values(BucketMode.values()), "enforce or shadow"));

	/**
	 * How a duration may be written, as Boot's conversion reads it: a whole number and a unit, or ISO-8601.
	 */
	private static final String DURATION_FORMS = "such as 500ms, 2s, 1m or PT0.5S (a whole number with a unit:"
			+ " ns, us, ms, s, m, h or d; or ISO-8601)";

	private static final String BOOLEAN = "true or false";

	/**
	 * A property whose value binding converts, with the type it is bound to (the binder's own conversion
	 * decides, so what binding takes is taken) and what it accepts, as the messages say it.
	 */
	private record Typed(Class<?> type, String accepted) {
	}

	/**
	 * Bucket properties bound to a type that a value can fail to convert to; the enums are in
	 * {@link #CHOICES}, and {@code redis.key-prefix}, a string, takes any value.
	 */
	private static final Map<String, Typed> TYPED = Map.ofEntries(
			Map.entry("rate", new Typed(BigDecimal.class, BucketDefinition.RATE_ACCEPTED)),
			Map.entry("period", new Typed(Duration.class, "a positive duration " + DURATION_FORMS)),
			Map.entry("limit", new Typed(Long.class, "a whole number >= 1 (not a fraction)")),
			Map.entry("initial", new Typed(Long.class, "a whole number from 0 to the limit")),
			Map.entry("capped-release", new Typed(Boolean.class, BOOLEAN)),
			Map.entry("max-wait", new Typed(Duration.class, "a duration >= 0 " + DURATION_FORMS + "; 0 never waits")),
			Map.entry("burst-ratio", new Typed(Double.class, "a number >= 1.0, fractions allowed (1.0 never catches up)")),
			Map.entry("max-backlog", new Typed(Duration.class, "a duration >= 0 " + DURATION_FORMS
					+ " (leave it out for no bound)")),
			Map.entry("zone", new Typed(ZoneId.class, "a time zone ID, e.g. UTC, Europe/Berlin or +05:30")),
			Map.entry("redis.timeout", new Typed(Duration.class, "a positive duration " + DURATION_FORMS)),
			Map.entry("redis.lease", new Typed(Duration.class, "a duration of at least 1ms " + DURATION_FORMS)),
			Map.entry("redis.batch-hold", new Typed(Duration.class, "a duration of at least 1ms " + DURATION_FORMS)),
			Map.entry("keys.max", new Typed(Integer.class, "a whole number >= 1 (at most " + Integer.MAX_VALUE + ")")),
			Map.entry("keys.memory", new Typed(DataSize.class, "a size from 1MB to 64MB, e.g. 16MB")));

	private static final Pattern BARE_NUMBER = Pattern.compile("\\s*[-+]?[0-9]+(\\.[0-9]+)?\\s*");

	/**
	 * A bare whole number: binding reads it as a duration in milliseconds, so it is asked for a unit; a bare
	 * fraction ({@code 1.5}) does not bind at all and gets the message of the accepted forms.
	 */
	private static final Pattern WHOLE_NUMBER = Pattern.compile("\\s*[-+]?[0-9]+\\s*");

	private static final ConfigurationPropertyName BUCKETS = ConfigurationPropertyName.of("ratelimit.buckets");

	private static final ConfigurationPropertyName RATELIMIT = ConfigurationPropertyName.of("ratelimit");

	/**
	 * Every property outside the buckets, relative to {@code ratelimit}, list indices left out
	 * ({@code ratelimit.web.rules[0].paths[1]} is {@code web.rules.paths}).
	 */
	static final List<String> KNOWN_OUTSIDE_BUCKETS = List.of("enabled", "mode", "interceptor-order",
			"health.backend-down-status", "executor.max-threads", "executor.virtual-threads",
			"executor.propagate-context", "web.headers", "web.expose-key", "web.rules.paths", "web.rules.methods",
			"web.rules.bucket", "web.rules.key", "web.rules.plan", "web.rules.cost", "clients.listen", "clients.max-pause",
			"clients.rules.hosts", "clients.rules.paths", "clients.rules.methods", "clients.rules.bucket",
			"clients.rules.key", "clients.rules.cost");

	/** Properties outside the buckets bound to enums, with their values as written and how to say them. */
	private static final Map<String, Map.Entry<Set<String>, String>> CHOICES_OUTSIDE_BUCKETS = Map.of(
			"mode", Map.entry(values(BucketMode.values()), "enforce or shadow"),
			"web.headers", Map.entry(values(WebHeaders.values()), "ietf, retry-after or none"));

	/** Properties outside the buckets bound to a type that a value can fail to convert to. */
	private static final Map<String, Typed> TYPED_OUTSIDE_BUCKETS = Map.of(
			"enabled", new Typed(Boolean.class, BOOLEAN),
			"interceptor-order", new Typed(Integer.class, "a whole number from " + Integer.MIN_VALUE + " to "
					+ Integer.MAX_VALUE + " (lower runs outside other advice)"),
			"executor.max-threads", new Typed(Integer.class, "a whole number >= 0 (0: as many as needed)"),
			"executor.virtual-threads", new Typed(Boolean.class, BOOLEAN),
			"executor.propagate-context", new Typed(Boolean.class, BOOLEAN),
			"web.expose-key", new Typed(Boolean.class, BOOLEAN),
			"web.rules.cost", new Typed(Long.class, "a whole number >= 0 (default 1)"),
			"clients.listen", new Typed(Boolean.class, BOOLEAN),
			"clients.max-pause", new Typed(java.time.Duration.class, "a duration, e.g. 1h (the default) or 30m"),
			"clients.rules.cost", new Typed(Long.class, "a whole number >= 0 (default 1)"));

	private BucketPropertyChecks() {
	}

	/**
	 * The types the conversion check binds each bucket property to, which must be the properties' own
	 * ({@code ConfigurationMetadataTests} keeps them equal to the generated metadata).
	 */
	static Map<String, Class<?>> checkedTypes() {
		Map<String, Class<?>> types = new TreeMap<>();
		TYPED.forEach((name, typed) -> types.put(name, typed.type()));
		PLAN_KNOWN.stream()
			.filter(TYPED::containsKey)
			.forEach((name) -> types.put("plans.*." + name, TYPED.get(name).type()));
		return types;
	}

	/** As {@link #checkedTypes()}, for the properties outside the buckets. */
	static Map<String, Class<?>> checkedTypesOutsideBuckets() {
		Map<String, Class<?>> types = new TreeMap<>();
		TYPED_OUTSIDE_BUCKETS.forEach((name, typed) -> types.put(name, typed.type()));
		return types;
	}

	/**
	 * Checks every property under {@code ratelimit}.
	 *
	 * @param environment the environment
	 * @throws RateLimitConfigurationException for every property that fails a check, all at once
	 */
	static void check(Environment environment) {
		List<Found> found = errors(environment);
		if (!found.isEmpty()) {
			throw RateLimitConfigurationException.of(found.stream().map(Found::error).toList());
		}
	}

	/**
	 * An error of one property.
	 *
	 * @param bucket the bucket the property is of, or {@code null} outside the buckets
	 * @param error the error
	 */
	record Found(@Nullable String bucket, RateLimitConfigurationException error) {
	}

	/**
	 * Every property under {@code ratelimit} that fails a check (issue #30: every error at once).
	 *
	 * @param environment the environment
	 * @return the errors, in the order of the property sources, empty when none
	 */
	static List<Found> errors(Environment environment) {
		List<Found> found = new ArrayList<>();
		List<ConfigurationPropertySource> sources = new ArrayList<>();
		ConfigurationPropertySources.get(environment).forEach(sources::add);
		int first = BUCKETS.getNumberOfElements();
		for (int i = 0; i < sources.size(); i++) {
			ConfigurationPropertySource source = sources.get(i);
			if (source instanceof IterableConfigurationPropertySource iterable) {
				Conversion conversion = new Conversion(environment, source, sources.subList(0, i));
				iterable.stream().filter(BUCKETS::isAncestorOf).forEach((name) -> {
					try {
						check(source, name, conversion);
					}
					catch (RateLimitConfigurationException ex) {
						found.add(new Found(name.getElement(first, Form.ORIGINAL), ex));
					}
				});
				iterable.stream()
					.filter((name) -> RATELIMIT.isAncestorOf(name) && !BUCKETS.isAncestorOf(name) && !BUCKETS.equals(name))
					.forEach((name) -> {
						try {
							checkOutsideBuckets(source, name, conversion);
						}
						catch (RateLimitConfigurationException ex) {
							found.add(new Found(null, ex));
						}
					});
			}
		}
		return found;
	}

	/**
	 * A value of one property source as binding sees it, asked of Boot's binder itself (the same
	 * placeholders and conversion as the starter's binding), so that every form binding takes is taken:
	 * {@code 500ms}, {@code PT0.5S}, {@code " 10 "}, {@code ${TYPE:hybrid}}, a placeholder that resolves to
	 * a number.
	 *
	 * @param placeholders the environment's placeholders, resolved as binding resolves them
	 * @param binder a binder of that source alone
	 * @param earlier the sources before it, whose values win over its own
	 */
	private record Conversion(PlaceholdersResolver placeholders, Binder binder,
			List<ConfigurationPropertySource> earlier) {

		Conversion(Environment environment, ConfigurationPropertySource source,
				List<ConfigurationPropertySource> earlier) {
			this(new PropertySourcesPlaceholdersResolver(environment), source, earlier);
		}

		private Conversion(PlaceholdersResolver placeholders, ConfigurationPropertySource source,
				List<ConfigurationPropertySource> earlier) {
			this(placeholders, new Binder(List.of(source), placeholders), earlier);
		}

		/** The value with its placeholders resolved, as binding converts it. */
		String resolved(Object value) {
			return String.valueOf(this.placeholders.resolvePlaceholders(value));
		}

		/**
		 * Whether an earlier source sets the property too: binding never reads an overridden value, so
		 * neither do the value checks.
		 */
		boolean overridden(ConfigurationPropertyName name) {
			for (ConfigurationPropertySource before : this.earlier) {
				if (before.getConfigurationProperty(name) != null || (before instanceof IterableConfigurationPropertySource
						iterable && iterable.stream().anyMatch(name::equals))) {
					return true;
				}
			}
			return false;
		}

		/** Whether the value of {@code name} fails to convert to {@code type}. */
		boolean fails(ConfigurationPropertyName name, Class<?> type) {
			try {
				this.binder.bind(name, Bindable.of(type));
				return false;
			}
			catch (BindException ex) {
				return true;
			}
		}
	}

	/**
	 * A property under {@code ratelimit} but outside the buckets: binding ignores a name it does not know
	 * ({@code ratelimit.web.rules[0].kye: ip} made the rule one budget for every client), and says an enum
	 * value it cannot convert in its own terms.
	 */
	private static void checkOutsideBuckets(ConfigurationPropertySource source, ConfigurationPropertyName name,
			Conversion conversion) {
		String uniform = relative(name, RATELIMIT.getNumberOfElements(), Form.UNIFORM);
		String match = known(uniform, KNOWN_OUTSIDE_BUCKETS);
		String property = (match != null) ? match : relative(name, RATELIMIT.getNumberOfElements(), Form.DASHED);
		ConfigurationProperty found = source.getConfigurationProperty(name);
		String origin = origin(found);
		if (match != null || KNOWN_OUTSIDE_BUCKETS.stream()
			.anyMatch((candidate) -> uniform(candidate).startsWith(uniform + "."))) {
			Map.Entry<Set<String>, String> choices = CHOICES_OUTSIDE_BUCKETS.get(property);
			Object raw = (found != null) ? found.getValue() : null;
			if (raw == null || conversion.overridden(name)) {
				return;
			}
			String value = conversion.resolved(raw);
			if (choices != null && !choices.getKey().contains(enumValue(value))) {
				throw new RateLimitConfigurationException(
						name + " is '" + value + "'" + origin + ", which is not accepted.",
						"Set " + name + " to " + choices.getValue() + ".");
			}
			Typed typed = TYPED_OUTSIDE_BUCKETS.get(property);
			if (typed != null && conversion.fails(name, typed.type())) {
				throw new RateLimitConfigurationException(
						name + " is '" + value + "'" + origin + ", which is not accepted.",
						"Set " + name + " to " + typed.accepted() + ".");
			}
			return;
		}
		String closest = ClosestName.of(property, KNOWN_OUTSIDE_BUCKETS);
		int dot = closest.lastIndexOf('.');
		// the same place with the closest name (a rule's index kept), or the closest property itself
		boolean sameParent = (dot < 0) ? property.indexOf('.') < 0
				: property.startsWith(closest.substring(0, dot + 1)) && property.indexOf('.', dot + 1) < 0;
		String suggestion = (sameParent && name.getParent() != null && !name.getParent().isEmpty())
				? name.getParent() + "." + closest.substring(dot + 1) : "ratelimit." + closest;
		throw new RateLimitConfigurationException(
				name + origin + " is not a ratelimit property; did you mean " + suggestion + "?",
				"Rename it to " + suggestion + ", or remove it. Outside ratelimit.buckets, the properties are "
						+ KNOWN_OUTSIDE_BUCKETS.stream().map((known) -> "ratelimit." + known.replace("web.rules.", "web.rules[*].")
							.replace("clients.rules.", "clients.rules[*]."))
							.collect(Collectors.joining(", "))
						+ ".");
	}

	private static void check(ConfigurationPropertySource source, ConfigurationPropertyName name,
			Conversion conversion) {
		int first = BUCKETS.getNumberOfElements();
		if (name.getNumberOfElements() <= first + 1) {
			return; // ratelimit.buckets.<name> itself
		}
		String bucket = name.getElement(first, Form.ORIGINAL);
		ConfigurationProperty found = source.getConfigurationProperty(name);
		String origin = origin(found);
		if ("plans".equals(name.getElement(first + 1, Form.UNIFORM))) {
			checkPlan(bucket, name, found, origin, conversion);
			return;
		}
		String property = known(relative(name, first + 1, Form.UNIFORM), KNOWN);
		if (property == null) {
			String written = relative(name, first + 1, Form.DASHED);
			throw RateLimitConfigurationException.unknownProperty(bucket, written, origin, closest(written), KNOWN);
		}
		checkValue(bucket, property, property, name, found, origin, conversion);
	}

	/**
	 * A property of a plan ({@code ratelimit.buckets.<name>.plans.<plan>.<property>}, contract revision 3):
	 * one a plan takes, with a value as the bucket's own property would be checked; a bucket property a
	 * plan does not take says why.
	 */
	private static void checkPlan(String bucket, ConfigurationPropertyName name, @Nullable ConfigurationProperty found,
			String origin, Conversion conversion) {
		int first = BUCKETS.getNumberOfElements();
		if (name.getNumberOfElements() <= first + 3) {
			String written = relative(name, first + 1, Form.DASHED);
			throw new RateLimitConfigurationException("Bucket '" + bucket + "': ratelimit.buckets." + bucket + "."
					+ written + origin + " is not a plan's property.",
					"Give each plan its settings by name, e.g. ratelimit.buckets." + bucket
							+ ".plans.pro.rate; a plan takes " + String.join(", ", PLAN_KNOWN) + ".");
		}
		String plan = name.getElement(first + 2, Form.ORIGINAL);
		String at = "plans." + plan + ".";
		String uniform = relative(name, first + 3, Form.UNIFORM);
		String property = (uniform.equals("plans") || uniform.startsWith("plans.")) ? "plans" : known(uniform, KNOWN);
		if (property == null) {
			String written = relative(name, first + 3, Form.DASHED);
			throw RateLimitConfigurationException.unknownProperty(bucket, at + written, origin,
					at + ClosestName.of(written, PLAN_KNOWN), PLAN_KNOWN);
		}
		if (!PLAN_KNOWN.contains(property)) {
			throw new RateLimitConfigurationException("Bucket '" + bucket + "': ratelimit.buckets." + bucket + "." + at
					+ property + origin + " is not accepted in a plan: " + NOT_IN_PLAN.get(property) + ".",
					"Remove it from plan '" + plan + "'" + (("initial".equals(property) || "plans".equals(property)) ? "" : ", or set it on the bucket"
							+ " itself (ratelimit.buckets." + bucket + "." + property + ")") + ". A plan takes "
							+ String.join(", ", PLAN_KNOWN) + ".");
		}
		checkValue(bucket, property, at + property, name, found, origin, conversion);
	}

	/**
	 * The value of a known bucket property, as binding would read it.
	 *
	 * @param property the property, as the checks know it
	 * @param shown the property as the messages name it, relative to the bucket
	 */
	private static void checkValue(String bucket, String property, String shown, ConfigurationPropertyName name,
			@Nullable ConfigurationProperty found, String origin, Conversion conversion) {
		Object value = (found != null) ? found.getValue() : null;
		if (value == null || conversion.overridden(name)) {
			return;
		}
		String text = conversion.resolved(value);
		Map.Entry<Set<String>, String> choices = CHOICES.get(property);
		if (choices != null && !choices.getKey().contains(enumValue(text))) {
			throw RateLimitConfigurationException.invalidProperty(bucket, shown, text, origin, choices.getValue());
		}
		if (DURATIONS.contains(property) && WHOLE_NUMBER.matcher(text).matches()
				&& new BigDecimal(text.trim()).signum() != 0) {
			throw RateLimitConfigurationException.invalidProperty(bucket, shown, text, origin,
					"a duration with a unit, e.g. " + text.trim() + "ms or " + text.trim() + "s (a bare number has no"
							+ " unit" + ("max-wait".equals(property) ? "; 0 alone is accepted and means zero)" : ")"));
		}
		if (WHOLE_NUMBERS.contains(property) && BARE_NUMBER.matcher(text).matches()
				&& new BigDecimal(text.trim()).stripTrailingZeros().scale() > 0) {
			throw RateLimitConfigurationException.invalidProperty(bucket, shown, text, origin,
					"a whole number (a fractional " + property + " is not rounded)");
		}
		Typed typed = TYPED.get(property);
		if (typed != null && conversion.fails(name, typed.type())) {
			throw RateLimitConfigurationException.invalidProperty(bucket, shown, text, origin, typed.accepted());
		}
	}

	private static Set<String> values(Enum<?>[] constants) {
		return Arrays.stream(constants).map((constant) -> enumValue(constant.name())).collect(Collectors.toUnmodifiableSet());
	}

	/** An enum value as binding reads it: case and anything but letters and digits do not count. */
	private static String enumValue(String text) {
		return text.toLowerCase(Locale.ROOT).replaceAll("[^a-z0-9]", "");
	}

	/**
	 * The elements of {@code name} from {@code first} on, list indices left out, in {@code form}: with
	 * {@link Form#UNIFORM}, as binding compares names ({@code maxThreads}, {@code max_threads} and an
	 * environment variable's {@code MAXTHREADS} are all {@code max-threads}).
	 */
	private static String relative(ConfigurationPropertyName name, int first, Form form) {
		StringBuilder relative = new StringBuilder();
		for (int i = first; i < name.getNumberOfElements(); i++) {
			if (!name.isNumericIndex(i)) {
				relative.append((relative.length() > 0) ? "." : "").append(name.getElement(i, form));
			}
		}
		return relative.toString();
	}

	/** Where a property was set, as the messages say it: {@code " (<origin>)"}, or empty. */
	private static String origin(@Nullable ConfigurationProperty found) {
		Origin where = (found != null) ? found.getOrigin() : null;
		return (where != null) ? " (" + where + ")" : "";
	}

	/** A dashed property name in binding's uniform form: lower case, letters and digits, dots between. */
	private static String uniform(String dashed) {
		return dashed.replace("-", "");
	}

	/** The known property a name in uniform form is, or {@code null}. */
	private static @Nullable String known(String uniform, List<String> known) {
		for (String candidate : known) {
			if (uniform(candidate).equals(uniform)) {
				return candidate;
			}
		}
		return null;
	}

	/** The known property closest to {@code property} by edit distance. */
	static String closest(String property) {
		return ClosestName.of(property, KNOWN);
	}
}
