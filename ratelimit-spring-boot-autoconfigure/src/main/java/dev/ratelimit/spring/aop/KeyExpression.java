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
abstract class KeyExpression {

	private static final ExpressionParser PARSER = new SpelExpressionParser();

	private static final ParameterNameDiscoverer NAMES = new DefaultParameterNameDiscoverer();

	final String source;

	final String where;

	KeyExpression(String source, String where) {
		this.source = source;
		this.where = where;
	}

	/**
	 * The key of one call.
	 *
	 * @param invocation the call
	 * @param bucket the bucket, for the message
	 * @return the key, never {@code null}
	 * @throws IllegalArgumentException when the key is {@code null}
	 */
	final Object evaluate(MethodInvocation invocation, String bucket) {
		Object key = value(invocation);
		if (key == null) {
			throw new IllegalArgumentException("The key '" + this.source + "' of bucket '" + bucket + "' is null for this"
					+ " call of " + this.where + ": a call needs a key to be limited per key");
		}
		return key;
	}

	abstract @Nullable Object value(MethodInvocation invocation);

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
				return new Argument(index, key, where);
			}
		}
		try {
			return new Spel(PARSER.parseExpression(trimmed), key, where);
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

	private static int parameterIndex(String name, Method method) {
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

	private static final class Argument extends KeyExpression {

		private final int index;

		Argument(int index, String source, String where) {
			super(source, where);
			this.index = index;
		}

		@Override
		@Nullable Object value(MethodInvocation invocation) {
			return invocation.getArguments()[this.index];
		}
	}

	private static final class Spel extends KeyExpression {

		private final Expression expression;

		Spel(Expression expression, String source, String where) {
			super(source, where);
			this.expression = expression;
		}

		@Override
		@Nullable Object value(MethodInvocation invocation) {
			MethodBasedEvaluationContext context = new MethodBasedEvaluationContext(TypedValue.NULL,
					invocation.getMethod(), invocation.getArguments(), NAMES);
			return this.expression.getValue(context);
		}
	}
}
