package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;

import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.expression.Expression;
import org.springframework.expression.ExpressionParser;
import org.springframework.expression.TypedValue;
import org.springframework.expression.spel.standard.SpelExpressionParser;

/**
 * The key of a call to a per-key bucket: a SpEL expression over the method's parameters, parsed once
 * per method. A bare parameter ({@code #userId}, {@code #p0}) is read from the arguments directly:
 * no evaluation context and no allocation per call; the value itself is the key (not its string, so
 * a {@code long} id costs no string either).
 */
final class KeyExpression {

	private static final ExpressionParser PARSER = new SpelExpressionParser();

	private static final ParameterNameDiscoverer NAMES = new DefaultParameterNameDiscoverer();

	private final String source;

	private final String where;

	/** The parameter read for a bare {@code #name}, or -1 for an expression. */
	private final int index;

	private final @Nullable Expression expression;

	private KeyExpression(String source, String where, int index, @Nullable Expression expression) {
		this.source = source;
		this.where = where;
		this.index = index;
		this.expression = expression;
	}

	/**
	 * The key of one call.
	 *
	 * @param invocation the call
	 * @param bucket the bucket, for the message
	 * @return the key, never {@code null}
	 * @throws IllegalArgumentException when the key is {@code null} or its expression fails, naming the bucket
	 *         and the expression
	 */
	Object evaluate(MethodInvocation invocation, String bucket) {
		Object key;
		try {
			key = value(invocation);
		}
		catch (RuntimeException ex) {
			throw new IllegalArgumentException("The key '" + this.source + "' of bucket '" + bucket + "' failed for this"
					+ " call of " + this.where + ": " + ex.getMessage() + "; the method did not run", ex);
		}
		if (key == null) {
			throw new IllegalArgumentException("The key '" + this.source + "' of bucket '" + bucket + "' is null for this"
					+ " call of " + this.where + ": a call needs a key to be limited per key");
		}
		return key;
	}

	private @Nullable Object value(MethodInvocation invocation) {
		if (this.expression == null) {
			return invocation.getArguments()[this.index];
		}
		return this.expression.getValue(new MethodBasedEvaluationContext(TypedValue.NULL, invocation.getMethod(),
				invocation.getArguments(), NAMES));
	}

	/**
	 * Parses a key.
	 *
	 * @param key the annotation's key
	 * @param method the method, whose parameter names a bare {@code #name} refers to
	 * @param where the annotation, for messages
	 * @return the key expression
	 * @throws IllegalArgumentException when it does not parse
	 */
	static KeyExpression parse(String key, Method method, String where) {
		String trimmed = key.trim();
		if (trimmed.matches("#[A-Za-z_$][A-Za-z0-9_$]*")) {
			int index = parameterIndex(trimmed.substring(1), method);
			if (index >= 0) {
				return new KeyExpression(key, where, index, null);
			}
		}
		try {
			return new KeyExpression(key, where, -1, PARSER.parseExpression(trimmed));
		}
		catch (RuntimeException ex) {
			throw new IllegalArgumentException("key '" + key + "' of " + where + " is not a valid SpEL expression: "
					+ ex.getMessage(), ex);
		}
	}

	/**
	 * Checks that a key parses, without its method's parameter names.
	 */
	static void check(String key, String where) {
		try {
			PARSER.parseExpression(key.trim());
		}
		catch (RuntimeException ex) {
			throw new IllegalArgumentException("key '" + key + "' of " + where + " is not a valid SpEL expression: "
					+ ex.getMessage(), ex);
		}
	}

	/**
	 * The index of the parameter a {@code #name} refers to: by its name (compiled with {@code -parameters}),
	 * or {@code #a0}/{@code #p0}; {@code -1} when none.
	 */
	static int parameterIndex(String name, Method method) {
		String[] names = NAMES.getParameterNames(method);
		if (names != null) {
			for (int i = 0; i < names.length; i++) {
				if (names[i].equals(name)) {
					return i;
				}
			}
		}
		if (name.matches("[ap][0-9]+")) {
			int index = Integer.parseInt(name.substring(1));
			return (index < method.getParameterCount()) ? index : -1;
		}
		return -1;
	}

}
