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

	abstract long evaluate(MethodInvocation invocation);

	/**
	 * A fixed cost.
	 *
	 * @param tokens the tokens, {@code >= 0}
	 * @return the cost
	 */
	static CostExpression constant(long tokens) {
		return new Constant(tokens);
	}

	/**
	 * Parses a cost.
	 *
	 * @param cost the annotation's cost
	 * @param where the annotation, for messages
	 * @return the cost expression
	 * @throws IllegalArgumentException when it is a negative number or does not parse
	 */
	static CostExpression parse(String cost, String where) {
		String trimmed = cost.trim();
		if (trimmed.matches("[0-9]+")) {
			try {
				return new Constant(Long.parseLong(trimmed));
			}
			catch (NumberFormatException ex) {
				throw new IllegalArgumentException("cost '" + cost + "' of " + where + " is too large", ex);
			}
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
			Object value = this.expression.getValue(context);
			if (value instanceof Number number) {
				double d = number.doubleValue();
				long tokens = number.longValue();
				if (tokens >= 0 && d == tokens) {
					return tokens;
				}
			}
			throw new IllegalArgumentException("cost '" + this.source + "' of " + this.where + " evaluated to " + value
					+ "; expected a whole number >= 0");
		}
	}
}
