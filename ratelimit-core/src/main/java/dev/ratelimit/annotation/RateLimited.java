package dev.ratelimit.annotation;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Repeatable;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Throttles a method through a named bucket: each call takes {@link #cost()} tokens from the bucket
 * {@link #value()}, waiting for them at most the max-wait, and fails with
 * {@code dev.ratelimit.core.RateLimitExceededException} when they cannot be had in time.
 *
 * <pre>{@code
 * @RateLimited("db-writes")
 * public void save(Order order) { ... }
 *
 * @RateLimited(value = "db-writes", cost = "#rows.size()", maxWait = "100ms")
 * public void saveAll(List<Row> rows) { ... }
 * }</pre>
 *
 * <p>On a class, it applies to every public method the class declares or inherits (not those of
 * {@code Object}); an annotation on a method wins over the one on its class. Repeated (contract
 * revision 2, container {@link RateLimits}), a call takes from every bucket or from none. The annotation carries
 * no behaviour by itself: the Spring Boot starter ({@code ratelimit-spring-boot-starter}) applies it.
 */
@Target({ ElementType.METHOD, ElementType.TYPE })
@Retention(RetentionPolicy.RUNTIME)
@Inherited
@Documented
@Repeatable(RateLimits.class)
public @interface RateLimited {

	/**
	 * The name of the bucket, as configured under {@code ratelimit.buckets}.
	 *
	 * @return the bucket name
	 */
	String value();

	/**
	 * The tokens a call takes: a whole number ({@code "5"}, costing no expression evaluation) or a
	 * SpEL expression over the method's parameters ({@code "#rows.size()"}) that yields a
	 * non-negative whole number.
	 *
	 * @return the cost, {@code "1"} by default
	 */
	String cost() default "1";

	/**
	 * The longest a call waits for its tokens, overriding the bucket's {@code max-wait}: a duration
	 * such as {@code "100ms"}, {@code "2s"} or {@code "PT0.5S"}; {@code "0"} never waits. Empty (the
	 * default) uses the bucket's.
	 *
	 * @return the max-wait, or empty for the bucket's
	 */
	String maxWait() default "";

	/**
	 * One bucket per key (contract revision 2): a SpEL expression over the method's parameters
	 * ({@code "#userId"}, {@code "#user.id"}); each distinct value gets its own bucket made from the
	 * named one, full on first use, and at most the bucket's {@code keys.max} keys have one at once.
	 * A key that evaluates to {@code null} fails the call with {@link IllegalArgumentException}; the
	 * method does not run. Empty (the default): the named bucket itself.
	 *
	 * @return the key expression, or empty for none
	 */
	String key() default "";

	/**
	 * The key's plan (contract revision 3, "Plans"), for a bucket with {@code plans}: a SpEL expression
	 * over the method's parameters ({@code "#account.plan()"}), evaluated with the key before the call
	 * takes its tokens, giving the plan's name. The key's bucket takes that plan's settings at once (an
	 * upgrade keeps the key's tokens, not above the new limit); {@code null}, {@code ""} or a name that
	 * is not a plan of the bucket gives the bucket's own settings. An expression that fails fails the
	 * call with {@link IllegalArgumentException}; the method does not run. Needs {@link #key()}. Empty
	 * (the default): the application's {@code RateLimitPlanResolver} bean decides, if it defines one.
	 *
	 * @return the plan expression, or empty for none
	 */
	String plan() default "";

	/**
	 * The method called instead when, and only when, the call is refused (contract revision 2): the
	 * name of a method of the same bean with the same parameters, optionally followed by one
	 * {@code RateLimitExceededException}, returning what the method returns (for
	 * {@code CompletionStage}, {@code Mono} and {@code Flux}, the same kind, whose value replaces the
	 * refusal). Resolved at start-up: one that does not exist or does not fit fails start-up. Never
	 * called for the method's own exceptions. Empty (the default): a refusal is thrown.
	 *
	 * @return the fallback method's name, or empty for none
	 */
	String fallback() default "";

	/**
	 * Whether to give the call's tokens back when it completes (contract revision 2): a SpEL expression
	 * over the method's parameters, {@code #result} (the return value, or the value the stage or
	 * {@code Mono} completed with; {@code null} for a {@code Flux}, void and a failure) and
	 * {@code #exception} (the throwable the call ended with, or {@code null}), evaluated when the call
	 * completes. When true, the tokens are available again at once, as if the call had not run
	 * ({@code "#result.ok()"} counts only failed logins, {@code "#exception != null"} only successes).
	 * A capped bucket still releases on completion as always. Empty (the default): never.
	 *
	 * @return the refund condition, or empty for none
	 */
	String refundIf() default "";

	/**
	 * The call's real cost, known when it completes (contract revision 2): a SpEL expression evaluated
	 * as {@link #refundIf()} is, giving a whole number {@code >= 0}. The difference from
	 * {@link #cost()} is given back when smaller, or taken without waiting when larger: callers already
	 * waiting keep their place, and the callers that come after wait for the excess, in order
	 * ({@code "#result.usedTokens()"} for an LLM call priced by its real usage). Evaluated only when
	 * {@code refundIf} is not true. Empty (the default): the cost stands.
	 *
	 * @return the real-cost expression, or empty for none
	 */
	String settle() default "";
}
