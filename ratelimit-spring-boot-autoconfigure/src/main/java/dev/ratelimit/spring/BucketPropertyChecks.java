package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.stream.Collectors;
import java.util.regex.Pattern;

import org.jspecify.annotations.Nullable;

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
 * (which binding truncates) are rejected. Runs on the raw property sources, before binding, so the
 * messages are ours and name where the value came from.
 */
final class BucketPropertyChecks {

	/** Every property a bucket knows, relative to {@code ratelimit.buckets.<name>}. */
	static final List<String> KNOWN = List.of("type", "rate", "period", "limit", "initial", "capped-release",
			"max-wait", "burst-ratio", "max-backlog", "backend", "redis.key-prefix", "redis.timeout",
			"redis.on-failure", "redis.lease", "keys.max", "mode");

	private static final Set<String> DURATIONS = Set.of("period", "max-wait", "max-backlog", "redis.timeout",
			"redis.lease");

	private static final Set<String> WHOLE_NUMBERS = Set.of("limit", "initial", "keys.max");

	/** Properties bound to enums, with their values as written and how to say them. */
	private static final Map<String, Map.Entry<Set<String>, String>> CHOICES = Map.of(
			"type", Map.entry(values(BucketType.values()), "shared or hybrid"),
			"backend", Map.entry(values(Backend.values()), "local or redis"),
			"redis.on-failure", Map.entry(values(OnFailure.values()), "allow, deny or local"),
			"mode", Map.entry(values(BucketMode.values()), "enforce or shadow"));

	private static final Pattern BARE_NUMBER = Pattern.compile("\\s*[-+]?[0-9]+(\\.[0-9]+)?\\s*");

	private static final ConfigurationPropertyName BUCKETS = ConfigurationPropertyName.of("ratelimit.buckets");

	private static final ConfigurationPropertyName RATELIMIT = ConfigurationPropertyName.of("ratelimit");

	/**
	 * Every property outside the buckets, relative to {@code ratelimit}, list indices left out
	 * ({@code ratelimit.web.rules[0].paths[1]} is {@code web.rules.paths}).
	 */
	static final List<String> KNOWN_OUTSIDE_BUCKETS = List.of("enabled", "mode", "interceptor-order",
			"health.backend-down-status", "executor.max-threads", "executor.virtual-threads",
			"executor.propagate-context", "web.headers", "web.expose-key", "web.rules.paths", "web.rules.methods",
			"web.rules.bucket", "web.rules.key", "web.rules.cost");

	/** Properties outside the buckets bound to enums, with their values as written and how to say them. */
	private static final Map<String, Map.Entry<Set<String>, String>> CHOICES_OUTSIDE_BUCKETS = Map.of(
			"mode", Map.entry(values(BucketMode.values()), "enforce or shadow"),
			"web.headers", Map.entry(values(WebHeaders.values()), "ietf, retry-after or none"));

	private BucketPropertyChecks() {
	}

	/**
	 * Checks every property under {@code ratelimit.buckets}.
	 *
	 * @param environment the environment
	 * @throws RateLimitConfigurationException for the first property that fails a check
	 */
	static void check(Environment environment) {
		for (ConfigurationPropertySource source : ConfigurationPropertySources.get(environment)) {
			if (source instanceof IterableConfigurationPropertySource iterable) {
				iterable.stream().filter(BUCKETS::isAncestorOf).forEach((name) -> check(source, name));
				iterable.stream()
					.filter((name) -> RATELIMIT.isAncestorOf(name) && !BUCKETS.isAncestorOf(name) && !BUCKETS.equals(name))
					.forEach((name) -> checkOutsideBuckets(source, name));
			}
		}
	}

	/**
	 * A property under {@code ratelimit} but outside the buckets: binding ignores a name it does not know
	 * ({@code ratelimit.web.rules[0].kye: ip} made the rule one budget for every client), and says an enum
	 * value it cannot convert in its own terms.
	 */
	private static void checkOutsideBuckets(ConfigurationPropertySource source, ConfigurationPropertyName name) {
		String uniform = relative(name, RATELIMIT.getNumberOfElements(), Form.UNIFORM);
		String match = known(uniform, KNOWN_OUTSIDE_BUCKETS);
		String property = (match != null) ? match : relative(name, RATELIMIT.getNumberOfElements(), Form.DASHED);
		ConfigurationProperty found = source.getConfigurationProperty(name);
		String origin = origin(found);
		if (match != null || KNOWN_OUTSIDE_BUCKETS.stream()
			.anyMatch((candidate) -> uniform(candidate).startsWith(uniform + "."))) {
			Map.Entry<Set<String>, String> choices = CHOICES_OUTSIDE_BUCKETS.get(property);
			Object value = (found != null) ? found.getValue() : null;
			if (choices != null && value != null && !choices.getKey().contains(enumValue(value.toString()))) {
				throw new RateLimitConfigurationException(
						name + " is '" + value + "'" + origin + ", which is not accepted.",
						"Set " + name + " to " + choices.getValue() + ".");
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
						+ KNOWN_OUTSIDE_BUCKETS.stream().map((known) -> "ratelimit." + known.replace("web.rules.", "web.rules[*]."))
							.collect(Collectors.joining(", "))
						+ ".");
	}

	private static void check(ConfigurationPropertySource source, ConfigurationPropertyName name) {
		int first = BUCKETS.getNumberOfElements();
		if (name.getNumberOfElements() <= first + 1) {
			return; // ratelimit.buckets.<name> itself
		}
		String bucket = name.getElement(first, Form.ORIGINAL);
		ConfigurationProperty found = source.getConfigurationProperty(name);
		String origin = origin(found);
		String property = known(relative(name, first + 1, Form.UNIFORM), KNOWN);
		if (property == null) {
			String written = relative(name, first + 1, Form.DASHED);
			throw RateLimitConfigurationException.unknownProperty(bucket, written, origin, closest(written), KNOWN);
		}
		Object value = (found != null) ? found.getValue() : null;
		if (value == null) {
			return;
		}
		String text = value.toString();
		Map.Entry<Set<String>, String> choices = CHOICES.get(property);
		if (choices != null && !choices.getKey().contains(enumValue(text))) {
			throw RateLimitConfigurationException.invalidProperty(bucket, property, text, choices.getValue());
		}
		if (DURATIONS.contains(property) && BARE_NUMBER.matcher(text).matches()
				&& new BigDecimal(text.trim()).signum() != 0) {
			throw RateLimitConfigurationException.invalidProperty(bucket, property, text, origin,
					"a duration with a unit, e.g. " + text.trim() + "ms or " + text.trim() + "s (a bare number has no"
							+ " unit" + ("max-wait".equals(property) ? "; 0 alone is accepted and means zero)" : ")"));
		}
		if (WHOLE_NUMBERS.contains(property) && BARE_NUMBER.matcher(text).matches()
				&& new BigDecimal(text.trim()).stripTrailingZeros().scale() > 0) {
			throw RateLimitConfigurationException.invalidProperty(bucket, property, text, origin,
					"a whole number (a fractional " + property + " is not rounded)");
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
