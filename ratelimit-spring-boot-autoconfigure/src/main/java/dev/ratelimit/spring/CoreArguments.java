package dev.ratelimit.spring;

import java.util.List;
import java.util.function.Function;

import org.jspecify.annotations.Nullable;

/**
 * One place per rule: the limiters' builders check their arguments (the core for local buckets, the
 * backend's builder for the others), and this class only says their refusals in the configuration's
 * words: the bucket, the property as it is written in {@code application.yml}, the value given and
 * what is accepted.
 *
 * <p>Each builder names the argument first in its message ({@code "limit must be >= 1, was 0"}); the
 * table maps that name to the property. A message that names no argument of the table is shown as
 * the builder wrote it, under {@code rate} (what remains is the arithmetic of the rate).
 */
final class CoreArguments {

	private record Argument(String prefix, String property, Function<BucketDefinition, @Nullable Object> value,
			String accepted) {
	}

	private static final List<Argument> ARGUMENTS = List.of(
			new Argument("limit must be >= 1", "limit", CoreArguments::limit, "a whole number >= 1"),
			new Argument("initial ", "initial", (d) -> (d instanceof BucketDefinition.Shared s) ? s.initial() : null,
					"a whole number from 0 to the limit"),
			new Argument("burstRatio must be >= 1", "burst-ratio", CoreArguments::burstRatio,
					"a number >= 1.0 (1.0 never catches up)"),
			new Argument("maxBacklog ", "max-backlog",
					(d) -> (d instanceof BucketDefinition.Hybrid h) ? h.maxBacklog() : null,
					"a duration >= 0, e.g. 10s (leave it out for no bound)"),
			new Argument("timeout of Redis bucket", "redis.timeout", (d) -> redis(d).getTimeout(),
					"a positive duration, e.g. 100ms"),
			new Argument("lease of Redis bucket", "redis.lease", (d) -> redis(d).getLease(),
					"a duration of at least 1ms, e.g. 1m"));

	private CoreArguments() {
	}

	/**
	 * A builder's refusal of a bucket's settings, in the configuration's words.
	 *
	 * @param definition the bucket
	 * @param refusal what the builder threw
	 * @return the start-up failure (or the endpoint's 400) naming the bucket and the property
	 */
	static RateLimitConfigurationException translate(BucketDefinition definition, IllegalArgumentException refusal) {
		String message = String.valueOf(refusal.getMessage());
		for (Argument argument : ARGUMENTS) {
			if (message.startsWith(argument.prefix())) {
				String accepted = argument.accepted();
				if (argument.property().equals("initial")) {
					accepted += " (" + limit(definition) + ")";
				}
				return RateLimitConfigurationException.invalidProperty(definition.name(), argument.property(),
						argument.value().apply(definition), accepted);
			}
		}
		String property = message.startsWith("burstRatio") ? "burst-ratio"
				: message.startsWith("limit") || message.contains(": limit ") ? "limit" : "rate";
		Object value = switch (property) {
			case "burst-ratio" -> burstRatio(definition);
			case "limit" -> limit(definition);
			default -> definition.rate();
		};
		return RateLimitConfigurationException.invalidProperty(definition.name(), property, value,
				"a value the bucket can hold (" + message + ")");
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
