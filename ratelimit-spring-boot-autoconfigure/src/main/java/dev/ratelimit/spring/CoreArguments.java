package dev.ratelimit.spring;

import java.util.Map;
import java.util.function.Function;

import dev.ratelimit.core.InvalidArgumentException;
import org.jspecify.annotations.Nullable;

/**
 * One place per rule: the limiters' builders check their arguments (the core for local buckets, the
 * backend's builder for the others), and this class only says their refusals in the configuration's
 * words: the bucket, the property as it is written in {@code application.yml}, the value given and
 * what is accepted.
 *
 * <p>A builder's refusal is an {@link InvalidArgumentException} naming its argument ({@code limit},
 * {@code burstRatio}, {@code timeout}, ...) and the range it accepts: the table maps the argument to the
 * property, and the phrase of what a property accepts is written here only ({@link #accepted}), for the
 * builders' refusals and for the configuration's own checks. A refusal of another argument (what remains
 * is the arithmetic of the rate) is shown as the builder wrote it, under {@code rate}.
 */
final class CoreArguments {

	private record Argument(String property, Function<BucketDefinition, @Nullable Object> value) {
	}

	/** The builders' arguments, by their names, as the configuration's properties. */
	private static final Map<String, Argument> ARGUMENTS = Map.of(
			"limit", new Argument("limit", CoreArguments::limit),
			"initial", new Argument("initial", (d) -> (d instanceof BucketDefinition.Shared s) ? s.initial() : null),
			"burstRatio", new Argument("burst-ratio", CoreArguments::burstRatio),
			"maxBacklog", new Argument("max-backlog", (d) -> (d instanceof BucketDefinition.Hybrid h) ? h.maxBacklog() : null),
			"timeout", new Argument("redis.timeout", (d) -> redis(d).getTimeout()),
			"lease", new Argument("redis.lease", (d) -> redis(d).getLease()),
			"period", new Argument("period", BucketDefinition::period));

	/** What each bucket property accepts, in the configuration's words: the one place these are written. */
	private static final Map<String, String> ACCEPTED = Map.of(
			"rate", "a number > 0 (fractions allowed, e.g. 0.5)",
			"period", "a positive duration, e.g. 1s or 500ms",
			"max-wait", "a duration >= 0, e.g. 0, 100ms or 2s",
			"limit", "a whole number >= 1",
			"initial", "a whole number from 0 to the limit",
			"burst-ratio", "a number >= 1.0 (1.0 never catches up)",
			"max-backlog", "a duration >= 0, e.g. 10s (leave it out for no bound)",
			"redis.timeout", "a positive duration, e.g. 100ms",
			"redis.lease", "a duration of at least 1ms, e.g. 1m",
			"keys.max", "a whole number >= 1");

	private CoreArguments() {
	}

	/**
	 * What a bucket property accepts, in the configuration's words.
	 *
	 * @param property the property, relative to the bucket (e.g. {@code limit})
	 * @return the phrase, e.g. {@code "a whole number >= 1"}
	 */
	static String accepted(String property) {
		String accepted = ACCEPTED.get(property);
		if (accepted == null) {
			throw new IllegalStateException("no phrase for bucket property " + property);
		}
		return accepted;
	}

	/**
	 * A builder's refusal of a bucket's settings, in the configuration's words.
	 *
	 * @param definition the bucket
	 * @param refusal what the builder threw
	 * @return the start-up failure (or the endpoint's 400) naming the bucket and the property
	 */
	static RateLimitConfigurationException translate(BucketDefinition definition, IllegalArgumentException refusal) {
		Argument argument = (refusal instanceof InvalidArgumentException invalid) ? ARGUMENTS.get(invalid.argument())
				: null;
		if (argument == null) {
			return RateLimitConfigurationException.invalidProperty(definition.name(), "rate", definition.rate(),
					"a value the bucket can hold (" + refusal.getMessage() + ")");
		}
		InvalidArgumentException invalid = (InvalidArgumentException) refusal;
		Object value = argument.value().apply(definition);
		String accepted = accepted(argument.property());
		if (argument.property().equals("initial") && invalid.most() != null) {
			accepted += " (" + invalid.most() + ")"; // the limit
		}
		else if (invalid.most() != null) {
			accepted += " (" + invalid.getMessage() + ")"; // a bound of the builder's: 2^50, or what the pools hold
		}
		return RateLimitConfigurationException.invalidProperty(definition.name(), argument.property(),
				(value != null) ? value : invalid.value(), accepted);
	}

	private static @Nullable Object limit(BucketDefinition definition) {
		if (definition instanceof BucketDefinition.Quota quota) {
			return quota.limit();
		}
		return (definition instanceof BucketDefinition.Shared shared) ? (Object) shared.limit()
				: ((BucketDefinition.Hybrid) definition).limit();
	}

	private static @Nullable Object burstRatio(BucketDefinition definition) {
		return (definition instanceof BucketDefinition.Hybrid hybrid) ? hybrid.burstRatio() : null;
	}

	private static RateLimitProperties.Redis redis(BucketDefinition definition) {
		return (definition instanceof BucketDefinition.Shared shared) ? shared.redis() : new RateLimitProperties.Redis();
	}
}
