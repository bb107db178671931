package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;

import org.aopalliance.intercept.MethodInvocation;

import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.expression.Expression;
import org.springframework.expression.ExpressionParser;
import org.springframework.expression.TypedValue;
import org.springframework.expression.spel.standard.SpelExpressionParser;

/**
 * The tokens a call costs: a constant (a literal costs no expression evaluation at all) or a SpEL
 * expression over the method's parameters ({@code #rows.size()}, {@code #p0}), parsed once.
 */
abstract class CostExpression {

	private static final ExpressionParser PARSER = new SpelExpressionParser();

	private static final ParameterNameDiscoverer NAMES = new DefaultParameterNameDiscoverer();

	/** The largest claim a bucket takes (contract revision 3). */
	static final long MAX_TOKENS = 1L << 50;

	abstract long evaluate(MethodInvocation invocation);

	/**
	 * Parses a cost.
	 *
	 * @param cost the annotation's cost
	 * @param where the annotation and its bucket, for messages
	 * @return the cost expression
	 * @throws IllegalArgumentException when it is a negative number, too large, or does not parse
	 */
	static CostExpression parse(String cost, String where) {
		String trimmed = cost.trim();
		if (trimmed.matches("[0-9]+")) {
			long tokens;
			try {
				tokens = Long.parseLong(trimmed);
			}
			catch (NumberFormatException ex) {
				tokens = Long.MAX_VALUE;
			}
			if (tokens > MAX_TOKENS) {
				throw new IllegalArgumentException("cost '" + cost + "' of " + where
						+ " is too large; expected a whole number from 0 to 2^50 (" + MAX_TOKENS + ")");
			}
			return new Constant(tokens);
		}
		if (trimmed.matches("-[0-9]+")) {
			throw new IllegalArgumentException(
					"cost '" + cost + "' of " + where + " is negative; expected a whole number >= 0 or a SpEL expression");
		}
		try {
			return new Spel(PARSER.parseExpression(trimmed), cost, where);
		}
		catch (RuntimeException ex) {
			throw new IllegalArgumentException("cost '" + cost + "' of " + where
					+ " is neither a whole number nor a valid SpEL expression: " + ex.getMessage(), ex);
		}
	}

	private static final class Constant extends CostExpression {

		private final long tokens;

		Constant(long tokens) {
			this.tokens = tokens;
		}

		@Override
		long evaluate(MethodInvocation invocation) {
			return this.tokens;
		}
	}

	private static final class Spel extends CostExpression {

		private final Expression expression;

		private final String source;

		private final String where;

		Spel(Expression expression, String source, String where) {
			this.expression = expression;
			this.source = source;
			this.where = where;
		}

		@Override
		long evaluate(MethodInvocation invocation) {
			Method method = invocation.getMethod();
			MethodBasedEvaluationContext context = new MethodBasedEvaluationContext(TypedValue.NULL, method,
					invocation.getArguments(), NAMES);
			Object value;
			try {
				value = this.expression.getValue(context);
			}
			catch (RuntimeException ex) {
				throw new IllegalArgumentException("cost '" + this.source + "' of " + this.where + " failed: "
						+ ex.getMessage() + "; the method did not run", ex);
			}
			if (value instanceof Number number) {
				double d = number.doubleValue();
				long tokens = number.longValue();
				if (tokens >= 0 && d == tokens && tokens <= MAX_TOKENS) {
					return tokens;
				}
			}
			throw new IllegalArgumentException("cost '" + this.source + "' of " + this.where + " evaluated to " + value
					+ "; expected a whole number from 0 to 2^50 (" + MAX_TOKENS + "); the method did not run");
		}
	}
}
