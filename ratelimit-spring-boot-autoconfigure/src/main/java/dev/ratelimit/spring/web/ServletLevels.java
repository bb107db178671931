package dev.ratelimit.spring.web;

import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.engine.GrantObserver;
import jakarta.servlet.http.HttpServletResponse;
import org.jspecify.annotations.Nullable;

import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;

/**
 * {@code ratelimit.web.headers: ietf} for {@code @RateLimited} Spring MVC controller methods (blocking or
 * returning a {@code CompletionStage}): sets the
 * {@code RateLimit-Policy} and {@code RateLimit} fields of the current response for the bucket closest
 * to refusing, unless a web rule of the same request already set fields for a bucket closer still.
 */
final class ServletLevels implements GrantObserver {

	@Override
	public @Nullable Object capture(@Nullable Object reactorContext) {
		RequestAttributes attributes = RequestContextHolder.getRequestAttributes();
		return (attributes instanceof ServletRequestAttributes servlet && servlet.getResponse() != null) ? servlet
				: null;
	}

	@Override
	public void granted(Object target, String[] buckets, RateLimiterSnapshot[] levels) {
		ServletRequestAttributes servlet = (ServletRequestAttributes) target;
		HttpServletResponse response = servlet.getResponse();
		if (response == null || response.isCommitted()) {
			return;
		}
		RateLimitHeaders.Level level = RateLimitHeaders.toSend(buckets, levels,
				servlet.getRequest().getAttribute(RateLimitHeaders.LEVEL_ATTRIBUTE),
				response.getHeader(RateLimitHeaders.LIMIT));
		if (level == null) {
			return;
		}
		response.setHeader(RateLimitHeaders.POLICY, level.policy());
		response.setHeader(RateLimitHeaders.LIMIT, level.limit());
	}
}
