package dev.ratelimit.core;

import org.jspecify.annotations.Nullable;

/**
 * An argument that a limiter or its builder does not accept, with which argument it is, the value given
 * and the range accepted, as data: a caller that words the refusal in its own terms (a configuration
 * property, an HTTP answer) reads these instead of the message. The message names the argument first
 * ({@code "limit must be >= 1, was 0"}), as every refusal of the core does.
 *
 * <pre>{@code
 * try {
 *     SharedTokenBucket.builder().rate(10, Duration.ofSeconds(1)).limit(0).build();
 * }
 * catch (InvalidArgumentException ex) {
 *     ex.argument(); // "limit"
 *     ex.least();    // 1L
 * }
 * }</pre>
 */
public final class InvalidArgumentException extends IllegalArgumentException {

	private static final long serialVersionUID = 1L;

	private final String argument;

	private final transient @Nullable Object value;

	private final transient @Nullable Object least;

	private final transient @Nullable Object most;

	/**
	 * An argument refused.
	 *
	 * @param argument the argument's name as the API spells it, e.g. {@code "limit"}, {@code "n"},
	 *        {@code "burstRatio"}
	 * @param value the value refused (given, or a default), or {@code null} when there is none
	 * @param least the least value accepted (inclusive, of the value's type), or {@code null} for no lower bound
	 * @param most the largest value accepted (inclusive), or {@code null} for no upper bound (or one that is
	 *        not a single value: the message says it)
	 * @param message the message, naming the argument first
	 */
	public InvalidArgumentException(String argument, @Nullable Object value, @Nullable Object least,
			@Nullable Object most, String message) {
		super(message);
		this.argument = argument;
		this.value = value;
		this.least = least;
		this.most = most;
	}

	/**
	 * The argument refused, as the API spells it: {@code limit}, {@code initial}, {@code threshold},
	 * {@code n}, {@code rate}, {@code period}, {@code maxWait}, {@code burstRatio}, {@code maxBacklog},
	 * {@code clock}, {@code stats}, or a backend's own ({@code timeout}, {@code lease}).
	 *
	 * @return the argument's name
	 */
	public String argument() {
		return this.argument;
	}

	/**
	 * The value refused: the one given, or the default in force when none was given.
	 *
	 * @return the value, or {@code null} when there is none (a {@code null} argument)
	 */
	public @Nullable Object value() {
		return this.value;
	}

	/**
	 * The least value accepted, inclusive, of the value's type ({@code Long}, {@code Double},
	 * {@code Duration}).
	 *
	 * @return the lower bound, or {@code null} for none
	 */
	public @Nullable Object least() {
		return this.least;
	}

	/**
	 * The largest value accepted, inclusive, of the value's type.
	 *
	 * @return the upper bound, or {@code null} for none
	 */
	public @Nullable Object most() {
		return this.most;
	}
}
