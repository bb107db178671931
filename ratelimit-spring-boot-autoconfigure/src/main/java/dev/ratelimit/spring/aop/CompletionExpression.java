package dev.ratelimit.spring.aop;

import java.util.concurrent.atomic.AtomicBoolean;

import org.aopalliance.intercept.MethodInvocation;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.context.expression.MethodBasedEvaluationContext;
import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.expression.Expression;
import org.springframework.expression.ExpressionParser;
import org.springframework.expression.TypedValue;
import org.springframework.expression.spel.standard.SpelExpressionParser;

/**
 * {@code refundIf} or {@code settle} (contract revision 2): a SpEL expression over the method's
 * parameters, {@code #result} and {@code #exception}, parsed once per method and evaluated when a call
 * completes.
 *
 * <p>The call has completed by then, so an expression that fails (throws, or gives something that is
 * not a boolean, or not a whole number {@code >= 0}) cannot change its outcome: the call's cost stands,
 * and the failure is logged at WARN, once per annotation, then at DEBUG.
 */
final class CompletionExpression {

	private static final Log logger = LogFactory.getLog(CompletionExpression.class);

	private static final ExpressionParser PARSER = new SpelExpressionParser();

	private static final ParameterNameDiscoverer NAMES = new DefaultParameterNameDiscoverer();

	private final String attribute;

	private final String source;

	private final String where;

	private final Expression expression;

	private final AtomicBoolean warned = new AtomicBoolean();

	private CompletionExpression(String attribute, String source, String where, Expression expression) {
		this.attribute = attribute;
		this.source = source;
		this.where = where;
		this.expression = expression;
	}

	/**
	 * Parses an expression.
	 *
	 * @param attribute {@code refundIf} or {@code settle}, for messages
	 * @param source the annotation's value
	 * @param where the annotation, for messages
	 * @return the expression
	 * @throws IllegalArgumentException when it does not parse
	 */
	static CompletionExpression parse(String attribute, String source, String where) {
		try {
			return new CompletionExpression(attribute, source, where, PARSER.parseExpression(source.trim()));
		}
		catch (RuntimeException ex) {
			throw new IllegalArgumentException(attribute + " '" + source + "' of " + where
					+ " is not a valid SpEL expression: " + ex.getMessage(), ex);
		}
	}

	/**
	 * {@code refundIf}: whether to give the call's tokens back.
	 *
	 * @return the value; {@code false} when it failed (logged)
	 */
	boolean test(MethodInvocation invocation, @Nullable Object result, @Nullable Throwable exception) {
		Object value = value(invocation, result, exception);
		if (value instanceof Boolean b) {
			return b;
		}
		if (value != FAILED) {
			failed("gave " + value + "; expected true or false", null);
		}
		return false;
	}

	/**
	 * {@code settle}: the call's real cost.
	 *
	 * @return the cost, or {@code -1} when it failed (logged)
	 */
	long cost(MethodInvocation invocation, @Nullable Object result, @Nullable Throwable exception) {
		Object value = value(invocation, result, exception);
		if (value instanceof Number number) {
			long tokens = number.longValue();
			if (tokens >= 0 && number.doubleValue() == tokens && tokens <= CostExpression.MAX_TOKENS) {
				return tokens;
			}
		}
		if (value != FAILED) {
			failed("gave " + value + "; expected a whole number from 0 to 2^50 (" + CostExpression.MAX_TOKENS + ")", null);
		}
		return -1;
	}

	private static final Object FAILED = new Object();

	private @Nullable Object value(MethodInvocation invocation, @Nullable Object result,
			@Nullable Throwable exception) {
		MethodBasedEvaluationContext context = new MethodBasedEvaluationContext(TypedValue.NULL,
				invocation.getMethod(), invocation.getArguments(), NAMES);
		context.setVariable("result", result);
		context.setVariable("exception", exception);
		try {
			return this.expression.getValue(context);
		}
		catch (RuntimeException ex) {
			failed("failed: " + ex.getMessage(), ex);
			return FAILED;
		}
	}

	/**
	 * {@code settle}: the bucket could not take the real cost (more than 2^50 tokens would be in line):
	 * reported as a failure of the expression, the call's cost standing.
	 */
	void unpaid(long real, RuntimeException failure) {
		failed("gave " + real + ", which the bucket cannot charge (" + failure.getMessage() + ")", failure);
	}

	private void failed(String what, @Nullable Throwable cause) {
		String message = this.attribute + " '" + this.source + "' of " + this.where + " " + what
				+ ": the call's cost stands";
		if (this.warned.compareAndSet(false, true)) {
			logger.warn(message + " (logged once; later failures of this expression are logged at DEBUG)", cause);
		}
		else if (logger.isDebugEnabled()) {
			logger.debug(message, cause);
		}
	}
}
