package dev.ratelimit.annotation;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
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
 * {@code Object}); an annotation on a method wins over the one on its class. The annotation carries
 * no behaviour by itself: the Spring Boot starter ({@code ratelimit-spring-boot-starter}) applies it.
 */
@Target({ ElementType.METHOD, ElementType.TYPE })
@Retention(RetentionPolicy.RUNTIME)
@Inherited
@Documented
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
}
