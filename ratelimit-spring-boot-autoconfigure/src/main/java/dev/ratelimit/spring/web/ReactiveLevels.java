package dev.ratelimit.spring.web;

import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.engine.GrantObserver;
import org.jspecify.annotations.Nullable;
import reactor.util.context.ContextView;

import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.web.filter.reactive.ServerWebExchangeContextFilter;
import org.springframework.web.server.ServerWebExchange;

/**
 * {@code ratelimit.web.headers: ietf} for {@code @RateLimited} WebFlux controller methods: sets the
 * {@code RateLimit-Policy} and {@code RateLimit} fields of the response of the exchange in the
 * subscriber's context (put there by {@link ServerWebExchangeContextFilter}), for the bucket closest to
 * refusing, unless a web rule of the same request already set fields for a bucket closer still.
 */
final class ReactiveLevels implements GrantObserver {

	@Override
	public @Nullable Object capture(@Nullable Object reactorContext) {
		if (!(reactorContext instanceof ContextView context)) {
			return null;
		}
		return ServerWebExchangeContextFilter.getExchange(context).orElse(null);
	}

	@Override
	public void granted(Object target, String[] buckets, RateLimiterSnapshot[] levels) {
		ServerWebExchange exchange = (ServerWebExchange) target;
		ServerHttpResponse response = exchange.getResponse();
		if (response.isCommitted()) {
			return;
		}
		RateLimitHeaders.Level level = RateLimitHeaders.toSend(buckets, levels,
				exchange.getAttribute(RateLimitHeaders.LEVEL_ATTRIBUTE),
				response.getHeaders().getFirst(RateLimitHeaders.LIMIT));
		if (level == null) {
			return;
		}
		response.getHeaders().set(RateLimitHeaders.POLICY, level.policy());
		response.getHeaders().set(RateLimitHeaders.LIMIT, level.limit());
	}
}
