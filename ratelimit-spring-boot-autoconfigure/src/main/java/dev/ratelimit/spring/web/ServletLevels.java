package dev.ratelimit.spring.web;

import java.util.regex.Matcher;
import java.util.regex.Pattern;

import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.aop.GrantObserver;
import jakarta.servlet.http.HttpServletResponse;

import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;

/**
 * {@code ratelimit.web.headers: ietf} for {@code @RateLimited} Spring MVC controller methods: sets the
 * {@code RateLimit-Policy} and {@code RateLimit} fields of the current response for the bucket closest
 * to refusing, unless a web rule of the same request already set fields for a bucket closer still.
 */
public final class ServletLevels implements GrantObserver {

	private static final Pattern REMAINING = Pattern.compile(";r=([0-9]+);t=([0-9]+)");

	@Override
	public void granted(String[] buckets, RateLimiterSnapshot[] levels) {
		RequestAttributes attributes = RequestContextHolder.getRequestAttributes();
		if (!(attributes instanceof ServletRequestAttributes servlet)) {
			return;
		}
		HttpServletResponse response = servlet.getResponse();
		if (response == null || response.isCommitted()) {
			return;
		}
		RateLimitHeaders.Level closest = null;
		for (int i = 0; i < buckets.length; i++) {
			closest = RateLimitHeaders.closer(closest, RateLimitHeaders.level(buckets[i], levels[i]));
		}
		String present = response.getHeader(RateLimitHeaders.LIMIT);
		if (present != null) {
			Matcher matcher = REMAINING.matcher(present);
			if (matcher.find()) {
				RateLimitHeaders.Level rule = new RateLimitHeaders.Level("", 0, 0, Long.parseLong(matcher.group(1)),
						Long.parseLong(matcher.group(2)));
				if (!closest.closerThan(rule)) {
					return;
				}
			}
		}
		response.setHeader(RateLimitHeaders.POLICY, closest.policy());
		response.setHeader(RateLimitHeaders.LIMIT, closest.limit());
	}
}
