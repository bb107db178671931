package dev.ratelimit.annotation;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Inherited;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Several {@link RateLimited @RateLimited} on one method or class (contract revision 2): the
 * container Java uses when {@code @RateLimited} is repeated; write the repeated annotations, not this
 * one.
 *
 * <pre>{@code
 * @RateLimited(value = "partner-api", key = "#partnerId")
 * @RateLimited("partner-api-total")
 * public Quote partnerQuote(String partnerId) { ... }
 * }</pre>
 *
 * <p>The call takes from every bucket or from none: it claims from each (never blocking), waits once,
 * for the longest of the waits; when any bucket's wait is longer than that bucket's max-wait, every
 * bucket gets its tokens back and the call is refused, naming the refusing bucket whose wait was
 * longest (which alone counts the call as rejected). Capped buckets are released together when the
 * call completes. At most one of the annotations sets {@code fallback}.
 */
@Target({ ElementType.METHOD, ElementType.TYPE })
@Retention(RetentionPolicy.RUNTIME)
@Inherited
@Documented
public @interface RateLimits {

	/**
	 * The repeated annotations.
	 *
	 * @return the annotations, in the order written
	 */
	RateLimited[] value();
}
