package dev.ratelimit.spring;

import org.jspecify.annotations.Nullable;

/**
 * The plan of a key (contract revision 3, "Plans"), for calls on a bucket with {@code plans} whose
 * annotation or web rule does not name a plan itself: a bean of this type, when the application
 * defines one, is asked once per such call, with the call's key, before the call takes its tokens.
 *
 * <pre>{@code
 * @Bean
 * RateLimitPlanResolver plans(AccountRepository accounts) {
 *     return (bucket, key) -> accounts.planOf((String) key);   // "pro", "enterprise", or null
 * }
 * }</pre>
 *
 * <p>An annotation's {@code plan} or a web rule's {@code plan} wins over the resolver, and its
 * {@code null} means "no plan": the resolver is not asked then. The resolver's {@code null}, {@code ""}
 * or a name that is not one of the bucket's plans gives the key the template's settings. It runs on the
 * caller's thread for every call on such a bucket: it should answer from memory (a cache), never by
 * a remote call. When it throws, the call fails with an {@link IllegalArgumentException} naming the
 * bucket, and does not run.
 */
@FunctionalInterface
public interface RateLimitPlanResolver {

	/**
	 * The plan of a key.
	 *
	 * @param bucket the bucket's name
	 * @param key the call's key (as the annotation's or the web rule's key gave it)
	 * @return the plan's name, or {@code null} for the template's settings
	 */
	@Nullable String plan(String bucket, Object key);
}
