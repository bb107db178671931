package dev.ratelimit.spring.web;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.security.Principal;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.WebHeaders;
import dev.ratelimit.spring.aop.RequestLimits;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import org.jspecify.annotations.Nullable;

import org.springframework.http.server.PathContainer;
import org.springframework.web.filter.OncePerRequestFilter;

/**
 * {@code ratelimit.web.rules} for Spring MVC: a servlet filter that takes the matching rules' tokens
 * before the request goes on, parking the request's thread up to the buckets' max-wait (a virtual
 * thread parks cheaply), answers 429 when refused, and releases capped buckets when the response
 * completes, asynchronous responses included (through an {@code AsyncListener}), so that a capped
 * bucket per client bounds that client's concurrent requests. Actuator paths are never limited.
 * Registered after Spring Security's filter chain, so that {@code principal} keys resolve.
 */
public class RateLimitFilter extends OncePerRequestFilter {

	private final WebRules rules;

	private final WebHeaders headers;

	private final boolean exposeKey;

	private final ActuatorPaths actuatorPaths;

	/**
	 * Creates the filter.
	 *
	 * @param rules the compiled rules
	 * @param headers {@code ratelimit.web.headers}
	 * @param exposeKey {@code ratelimit.web.expose-key}
	 * @param actuatorPath the actuator's base path, never limited (e.g. {@code /actuator})
	 */
	public RateLimitFilter(WebRules rules, WebHeaders headers, boolean exposeKey, String actuatorPath) {
		this(rules, headers, exposeKey, ActuatorPaths.of(actuatorPath));
	}

	/**
	 * Creates the filter.
	 *
	 * @param rules the compiled rules
	 * @param headers {@code ratelimit.web.headers}
	 * @param exposeKey {@code ratelimit.web.expose-key}
	 * @param actuatorPaths the actuator's paths, never limited
	 */
	public RateLimitFilter(WebRules rules, WebHeaders headers, boolean exposeKey, ActuatorPaths actuatorPaths) {
		this.rules = rules;
		this.headers = headers;
		this.exposeKey = exposeKey;
		this.actuatorPaths = actuatorPaths;
	}

	@Override
	protected void doFilterInternal(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
			throws ServletException, IOException {
		String path = request.getRequestURI().substring(request.getContextPath().length());
		if (isActuator(path)) {
			chain.doFilter(request, response);
			return;
		}
		long mask = this.rules.match(request.getMethod(), PathContainer.parsePath(path));
		if (mask == 0) {
			chain.doFilter(request, response);
			return;
		}
		WebRules.Matched matched = this.rules.matched(mask);
		RequestLimits limits = matched.limits();
		Object[] keys = matched.keys(new ServletView(request));
		Permit permit;
		try {
			permit = limits.acquire(keys);
		}
		catch (RateLimitExceededException ex) {
			refuse(request, response, ex, limits, keys);
			return;
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			response.sendError(HttpServletResponse.SC_SERVICE_UNAVAILABLE);
			return;
		}
		boolean releasedLater = false;
		try {
			if (this.headers == WebHeaders.IETF) {
				RateLimitHeaders.Level level = RateLimitHeaders.closest(limits, keys);
				request.setAttribute(RateLimitHeaders.LEVEL_ATTRIBUTE, level);
				response.setHeader(RateLimitHeaders.POLICY, level.policy());
				response.setHeader(RateLimitHeaders.LIMIT, level.limit());
			}
			chain.doFilter(request, response);
			if (request.isAsyncStarted()) {
				request.getAsyncContext().addListener(new Releasing(permit));
				releasedLater = true;
			}
		}
		finally {
			if (!releasedLater) {
				permit.close();
			}
		}
	}

	private boolean isActuator(String path) {
		return this.actuatorPaths.covers(path);
	}

	private void refuse(HttpServletRequest request, HttpServletResponse response, RateLimitExceededException ex,
			RequestLimits limits, @Nullable Object[] keys) throws IOException {
		response.setStatus(429);
		boolean ietf = this.headers == WebHeaders.IETF;
		TooManyRequests.headers(response::setHeader, ex, this.headers, ietf ? RateLimitHeaders.refusing(limits, keys, ex) : null);
		response.setContentType(TooManyRequests.PROBLEM_JSON);
		byte[] body = TooManyRequests.json(ex, request.getRequestURI(), this.exposeKey, ietf)
			.getBytes(StandardCharsets.UTF_8);
		response.setContentLength(body.length);
		response.getOutputStream().write(body);
	}

	/** Releases the permit when an asynchronous response completes, fails or times out. */
	private static final class Releasing implements AsyncListener {

		private final Permit permit;

		Releasing(Permit permit) {
			this.permit = permit;
		}

		@Override
		public void onComplete(AsyncEvent event) {
			this.permit.close();
		}

		@Override
		public void onTimeout(AsyncEvent event) {
			this.permit.close();
		}

		@Override
		public void onError(AsyncEvent event) {
			this.permit.close();
		}

		@Override
		public void onStartAsync(AsyncEvent event) {
			event.getAsyncContext().addListener(this); // a new async cycle: keep listening
		}
	}

	/** A servlet request, as keys see it. */
	private static final class ServletView implements WebRules.RequestView {

		private final HttpServletRequest request;

		ServletView(HttpServletRequest request) {
			this.request = request;
		}

		@Override
		public @Nullable InetAddress remoteAddress() {
			String address = this.request.getRemoteAddr();
			if (address == null || !(address.indexOf(':') >= 0 || address.matches("[0-9.]+"))) {
				return null; // not an address literal: never look a name up
			}
			try {
				return InetAddress.getByName(address); // a literal address: no lookup
			}
			catch (IOException ex) {
				return null;
			}
		}

		@Override
		public @Nullable String principal() {
			Principal principal = this.request.getUserPrincipal();
			return (principal != null) ? principal.getName() : null;
		}

		@Override
		public @Nullable String header(String name) {
			return this.request.getHeader(name);
		}

		@Override
		public Object request() {
			return this.request;
		}
	}
}
