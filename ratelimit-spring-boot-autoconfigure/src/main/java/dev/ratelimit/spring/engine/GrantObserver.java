package dev.ratelimit.spring.engine;

import dev.ratelimit.core.RateLimiterSnapshot;
import org.jspecify.annotations.Nullable;

/**
 * Told of the buckets' levels after a {@code @RateLimited} controller method took its tokens: how the
 * web layer sends the IETF {@code RateLimit} fields for annotated controller methods
 * ({@code ratelimit.web.headers: ietf}). Without one, nothing is read: the hot path pays nothing.
 */
public interface GrantObserver {

	/**
	 * Where the levels of a call go (its response), found where the call starts: on the caller's
	 * thread for a blocking or {@code CompletionStage} method, in the subscriber's Reactor context for a
	 * {@code Mono} or {@code Flux}.
	 *
	 * @param reactorContext the subscriber's {@code ContextView} for a reactive method, else {@code null}
	 * @return the target, or {@code null} when the call is not answering a request
	 */
	@Nullable Object capture(@Nullable Object reactorContext);

	/**
	 * The call took its tokens.
	 *
	 * @param target what {@link #capture} found
	 * @param buckets the buckets' names
	 * @param levels each bucket's state after the call took its tokens (its key's bucket for a key)
	 */
	void granted(Object target, String[] buckets, RateLimiterSnapshot[] levels);
}
