package dev.ratelimit.spring;

import java.util.Collection;
import java.util.List;

import org.jspecify.annotations.Nullable;

/**
 * A configuration the starter cannot run with: a bucket property out of range, a property of the
 * other bucket type, an annotation naming a bucket that does not exist, a backend that is missing.
 * It fails start-up; {@link RateLimitFailureAnalyzer} turns it into a readable description and action.
 */
public class RateLimitConfigurationException extends IllegalStateException {

	private static final long serialVersionUID = 1L;

	private final String description;

	private final String action;

	private final List<RateLimitConfigurationException> errors;

	/**
	 * Creates the exception.
	 *
	 * @param description what is wrong, naming the bucket and the property
	 * @param action what to do about it, naming the accepted values
	 */
	public RateLimitConfigurationException(String description, String action) {
		this(description, action, List.of());
	}

	private RateLimitConfigurationException(String description, String action,
			List<RateLimitConfigurationException> errors) {
		super(description + " " + action);
		this.description = description;
		this.action = action;
		this.errors = errors.isEmpty() ? List.of(this) : List.copyOf(errors);
	}

	/**
	 * Every error of the configuration at once (issue #30: five mistakes took five restarts): the one
	 * error itself when there is one, else an exception whose description numbers every error's
	 * description, and whose action numbers every error's action, in the same order.
	 *
	 * @param errors the errors found, in configuration order; not empty
	 * @return the exception to throw
	 */
	public static RateLimitConfigurationException of(List<RateLimitConfigurationException> errors) {
		if (errors.isEmpty()) {
			throw new IllegalArgumentException("no error");
		}
		List<RateLimitConfigurationException> each = errors.stream().flatMap((error) -> error.getErrors().stream())
			.distinct()
			.toList();
		if (each.size() == 1) {
			return each.get(0);
		}
		StringBuilder description = new StringBuilder("The ratelimit configuration has " + each.size() + " errors:");
		StringBuilder action = new StringBuilder("Fix each of them:");
		for (int i = 0; i < each.size(); i++) {
			description.append(System.lineSeparator()).append(i + 1).append(". ").append(each.get(i).getDescription());
			action.append(System.lineSeparator()).append(i + 1).append(". ").append(each.get(i).getAction());
		}
		return new RateLimitConfigurationException(description.toString(), action.toString(), each);
	}

	/**
	 * The errors this exception reports: itself alone, or each of those {@link #of(List)} gathered.
	 *
	 * @return the errors, in configuration order
	 */
	public List<RateLimitConfigurationException> getErrors() {
		return this.errors;
	}

	/**
	 * A bucket property whose value is not accepted.
	 *
	 * @param bucket the bucket name
	 * @param property the property, relative to the bucket (e.g. {@code rate})
	 * @param value the value found
	 * @param accepted what is accepted
	 * @return the exception
	 */
	public static RateLimitConfigurationException invalidProperty(String bucket, String property, @Nullable Object value,
			String accepted) {
		return invalidProperty(bucket, property, value, "", accepted);
	}

	/**
	 * A bucket property whose value is not accepted, with where it was set.
	 *
	 * @param bucket the bucket name
	 * @param property the property, relative to the bucket (e.g. {@code rate})
	 * @param value the value found
	 * @param origin where it was set, e.g. {@code " (class path resource [application.yml] - 12:7)"}, or
	 *        empty
	 * @param accepted what is accepted
	 * @return the exception
	 */
	public static RateLimitConfigurationException invalidProperty(String bucket, String property, @Nullable Object value,
			String origin, String accepted) {
		return new RateLimitConfigurationException(
				"Bucket '" + bucket + "': " + propertyName(bucket, property) + " is " + quoted(value) + origin
						+ ", which is not accepted.",
				"Set " + propertyName(bucket, property) + " to " + accepted + ".");
	}

	/**
	 * A required bucket property that is not set.
	 *
	 * @param bucket the bucket name
	 * @param property the property, relative to the bucket (e.g. {@code rate})
	 * @param accepted what is accepted
	 * @return the exception
	 */
	public static RateLimitConfigurationException missingProperty(String bucket, String property, String accepted) {
		return new RateLimitConfigurationException(
				"Bucket '" + bucket + "': " + propertyName(bucket, property) + " is not set, and every bucket needs it.",
				"Set " + propertyName(bucket, property) + " to " + accepted + ".");
	}

	/**
	 * A property of the other bucket type.
	 *
	 * @param bucket the bucket name
	 * @param property the property, relative to the bucket
	 * @param type the bucket's type
	 * @param otherType the type the property belongs to
	 * @return the exception
	 */
	public static RateLimitConfigurationException wrongType(String bucket, String property, String type,
			String otherType) {
		return new RateLimitConfigurationException(
				"Bucket '" + bucket + "': " + propertyName(bucket, property) + " applies to " + otherType
						+ " buckets only, and this bucket is of type " + type + ".",
				"Remove " + propertyName(bucket, property) + ", or set " + propertyName(bucket, "type") + " to "
						+ otherType + ".");
	}

	/**
	 * A property that a calendar quota does not take (it has no rate, no initial level, no release, no
	 * pacing).
	 *
	 * @param bucket the bucket name
	 * @param property the property, relative to the bucket
	 * @param accepted the properties a quota takes
	 * @return the exception
	 */
	public static RateLimitConfigurationException notForQuota(String bucket, String property, String accepted) {
		return new RateLimitConfigurationException(
				"Bucket '" + bucket + "': " + propertyName(bucket, property) + " does not apply to a quota (type quota):"
						+ " a quota holds limit tokens per calendar period, all there at its start, and has no rate.",
				"Remove " + propertyName(bucket, property) + ". A quota takes " + accepted + ".");
	}

	/**
	 * A property name that no bucket knows, e.g. a typo.
	 *
	 * @param bucket the bucket name
	 * @param property the unknown property, relative to the bucket
	 * @param origin where it was set, e.g. {@code " (class path resource [application.yml] - 12:7)"}, or
	 *        empty
	 * @param closest the known property closest to it
	 * @param known every known property
	 * @return the exception
	 */
	public static RateLimitConfigurationException unknownProperty(String bucket, String property, String origin,
			String closest, Collection<String> known) {
		return new RateLimitConfigurationException(
				"Bucket '" + bucket + "': " + propertyName(bucket, property) + origin + " is not a bucket property;"
						+ " did you mean '" + closest + "'?",
				"Rename it to " + propertyName(bucket, closest) + ", or remove it. A bucket knows "
						+ String.join(", ", known) + ".");
	}

	/**
	 * A bucket name that is not configured.
	 *
	 * @param bucket the name asked for
	 * @param where where it was asked for (e.g. a method)
	 * @param configured the configured bucket names
	 * @return the exception
	 */
	public static RateLimitConfigurationException unknownBucket(String bucket, String where,
			Collection<String> configured) {
		String known = configured.isEmpty() ? "no bucket is configured"
				: "the configured buckets are " + String.join(", ", configured);
		return new RateLimitConfigurationException(
				"No rate limit bucket named '" + bucket + "' exists for " + where + "; " + known + ".",
				"Add the bucket under ratelimit.buckets." + bucket + " (at least its rate), or name one of the"
						+ " configured buckets.");
	}

	private static String propertyName(String bucket, String property) {
		return "ratelimit.buckets." + bucket + "." + property;
	}

	private static String quoted(@Nullable Object value) {
		return (value instanceof CharSequence) ? "'" + value + "'" : String.valueOf(value);
	}

	/**
	 * What is wrong.
	 *
	 * @return the description
	 */
	public String getDescription() {
		return this.description;
	}

	/**
	 * What to do about it.
	 *
	 * @return the action
	 */
	public String getAction() {
		return this.action;
	}
}
