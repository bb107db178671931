package dev.ratelimit.spring.http;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.function.Function;
import java.util.function.ToIntFunction;
import java.util.stream.Collectors;

import dev.ratelimit.spring.BucketDefinitions;
import dev.ratelimit.spring.ClosestName;
import dev.ratelimit.spring.RateLimitConfigurationException;
import org.jspecify.annotations.Nullable;

import org.springframework.web.util.pattern.PathPattern;
import org.springframework.web.util.pattern.PathPatternParser;

/**
 * The parts of a web rule ({@code ratelimit.web.rules[i]}) and of an outbound rule
 * ({@code ratelimit.clients.rules[i]}) that read the same, checked at start-up: each error names the
 * rule's property and says what is accepted. {@code prefix} is the rule's property prefix with its dot,
 * e.g. {@code ratelimit.web.rules[0].}.
 */
public final class RuleSyntax {

	/** The methods of RFC 9110 and PATCH: a method one or two letters from one of them is a typo. */
	private static final List<String> STANDARD_METHODS = List.of("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT",
			"OPTIONS", "TRACE", "PATCH");

	private RuleSyntax() {
	}

	/**
	 * The rule's path patterns.
	 *
	 * @param prefix the rule's property prefix
	 * @param configured the configured patterns
	 * @param example a pattern to show in the error, e.g. {@code /api/**}
	 * @return the parsed patterns, or {@code null} when none is configured
	 * @throws RateLimitConfigurationException naming {@code paths[i]} when one does not parse
	 */
	public static PathPattern @Nullable [] paths(String prefix, @Nullable List<String> configured, String example) {
		if (configured == null || configured.isEmpty()) {
			return null;
		}
		PathPattern[] paths = new PathPattern[configured.size()];
		for (int i = 0; i < paths.length; i++) {
			String path = configured.get(i);
			try {
				paths[i] = PathPatternParser.defaultInstance.parse(path);
			}
			catch (RuntimeException ex) {
				throw invalid(prefix + "paths[" + i + "]", "'" + path + "' is not a path pattern: " + ex.getMessage(),
						"Write a Spring PathPattern, e.g. " + example + " or /users/{id}.");
			}
		}
		return paths;
	}

	/**
	 * The rule's methods in upper case. A method that is not letters, or one or two letters from a standard
	 * method ({@code GTE}: it would match no request, so every {@code GET} would pass unlimited), is refused;
	 * a method of one's own ({@code PROPFIND}) is accepted.
	 *
	 * @param prefix the rule's property prefix
	 * @param configured the configured methods
	 * @return a mutable set of the methods, or {@code null} when none is configured (every method)
	 * @throws RateLimitConfigurationException naming {@code methods}
	 */
	public static @Nullable Set<String> methods(String prefix, @Nullable List<String> configured) {
		if (configured == null || configured.isEmpty()) {
			return null;
		}
		Set<String> methods = configured.stream()
			.map((m) -> m.trim().toUpperCase(Locale.ROOT))
			.collect(Collectors.toCollection(HashSet::new));
		for (String method : methods) {
			if (!method.matches("[A-Z]+")) {
				throw invalid(prefix + "methods", "has '" + method + "', which is not an HTTP method",
						"List HTTP methods, e.g. [GET, POST], or leave methods out for every method.");
			}
			String standard = ClosestName.of(method, STANDARD_METHODS);
			if (!standard.equals(method) && ClosestName.distance(method, standard) <= 2) {
				throw invalid(prefix + "methods", "has '" + method + "', which is not an HTTP method; did you mean "
						+ standard + "?", "List HTTP methods, e.g. [GET, POST], or leave methods out for every method"
								+ " (a method of your own, e.g. PROPFIND, is accepted when it is not a near miss of "
								+ String.join(", ", STANDARD_METHODS) + ").");
			}
		}
		return methods;
	}

	/**
	 * The rule's bucket, which must be a configured one.
	 *
	 * @param prefix the rule's property prefix
	 * @param bucket the configured name
	 * @param definitions the configured buckets
	 * @param takers what takes from it, for the error ("requests", "calls")
	 * @return the name
	 * @throws RateLimitConfigurationException naming {@code bucket}, listing the configured buckets
	 */
	public static String bucket(String prefix, @Nullable String bucket, BucketDefinitions definitions,
			String takers) {
		if (bucket == null || bucket.isBlank()) {
			throw invalid(prefix + "bucket", "is missing", "Name the bucket the rule's " + takers + " take from.");
		}
		if (!definitions.names().contains(bucket)) {
			throw invalid(prefix + "bucket", "'" + bucket + "' is not a configured bucket",
					"Use one of the configured buckets: " + String.join(", ", definitions.names()) + ".");
		}
		return bucket;
	}

	/**
	 * The rule's cost.
	 *
	 * @param prefix the rule's property prefix
	 * @param cost the configured cost
	 * @return the cost, {@code >= 0}
	 * @throws RateLimitConfigurationException naming {@code cost} when it is negative
	 */
	public static long cost(String prefix, long cost) {
		if (cost < 0) {
			throw invalid(prefix + "cost", "is " + cost, "Set a whole number >= 0 (default 1).");
		}
		return cost;
	}

	/**
	 * The rules of a match, in the order their buckets are taken: by bucket name, then by their index in
	 * the configuration (a fixed order, so that calls matching the same rules never take the same buckets
	 * in opposite orders).
	 *
	 * @param <R> a compiled rule
	 * @param rules every rule, by index
	 * @param mask the matching rules, bit {@code i} for rule {@code i}
	 * @param bucket a rule's bucket
	 * @param index a rule's index in the configuration
	 * @return the matching rules, ordered
	 */
	public static <R> List<R> chosen(R[] rules, long mask, Function<R, String> bucket, ToIntFunction<R> index) {
		List<R> chosen = new ArrayList<>();
		for (int i = 0; i < rules.length; i++) {
			if ((mask & (1L << i)) != 0) {
				chosen.add(rules[i]);
			}
		}
		chosen.sort(Comparator.comparing(bucket).thenComparingInt(index));
		return chosen;
	}

	/**
	 * An error of a rule's property.
	 *
	 * @param property the whole property name
	 * @param what what is wrong with it (a sentence without its final period; one ending in {@code ?} gets none)
	 * @param action what to do
	 * @return the exception to throw
	 */
	public static RateLimitConfigurationException invalid(String property, String what, String action) {
		return new RateLimitConfigurationException(property + " " + what + (what.endsWith("?") ? "" : "."), action);
	}
}
