package dev.ratelimit.spring.web;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.security.Principal;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;
import java.util.function.UnaryOperator;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.WebHeaders;

import dev.ratelimit.spring.engine.AsyncWaits;
import dev.ratelimit.spring.engine.RateLimitExecutors;
import jakarta.servlet.AsyncContext;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import org.jspecify.annotations.Nullable;

import org.springframework.http.server.PathContainer;
import org.springframework.web.filter.OncePerRequestFilter;

/**
 * {@code ratelimit.web.rules} for Spring MVC: a servlet filter that takes the matching rules' tokens
 * before the request goes on, answers 429 when refused, and releases capped buckets when the response
 * completes, asynchronous responses included (through an {@code AsyncListener}), so that a capped
 * bucket per client bounds that client's concurrent requests. Actuator paths are never limited.
 * Registered after Spring Security's filter chain, so that {@code principal} keys resolve.
 *
 * <p>A request whose tokens are there goes on at once on its thread. One that must wait holds no
 * container thread while it waits (contract revision 3): the request is put in asynchronous mode, its
 * claim is polled by the engine ({@link AsyncWaits}, on the starter's timer), and once the tokens are
 * there the request is dispatched again ({@code AsyncContext.dispatch()}), this filter letting that
 * dispatch go on with the permit. So waits on one rule cannot starve the other endpoints of threads. A
 * refusal found while waiting is answered on the asynchronous response; a client that goes away while
 * waiting (an async error or time-out) gives its claim back.
 */
class RateLimitFilter extends OncePerRequestFilter {

	private final WebRules rules;

	private final WebHeaders headers;

	private final boolean exposeKey;

	private final ActuatorPaths actuatorPaths;

	/** The starter's timer and runner, which poll the claims of waiting requests. */
	private final Supplier<RateLimitExecutors> executors;

	/** Where a request that waited carries its permit to its dispatch. */
	static final String WAITED_ATTRIBUTE = RateLimitFilter.class.getName() + ".WAITED";

	/**
	 * Creates the filter.
	 *
	 * @param rules the compiled rules
	 * @param headers {@code ratelimit.web.headers}
	 * @param exposeKey {@code ratelimit.web.expose-key}
	 * @param actuatorPath the actuator's base path, never limited (e.g. {@code /actuator})
	 * @param executors the starter's timer and runner, which poll the claims of waiting requests
	 */
	public RateLimitFilter(WebRules rules, WebHeaders headers, boolean exposeKey, String actuatorPath,
			Supplier<RateLimitExecutors> executors) {
		this(rules, headers, exposeKey, ActuatorPaths.of(actuatorPath), executors);
	}

	/**
	 * Creates the filter.
	 *
	 * @param rules the compiled rules
	 * @param headers {@code ratelimit.web.headers}
	 * @param exposeKey {@code ratelimit.web.expose-key}
	 * @param actuatorPaths the actuator's paths, never limited
	 * @param executors the starter's timer and runner, which poll the claims of waiting requests
	 */
	public RateLimitFilter(WebRules rules, WebHeaders headers, boolean exposeKey, ActuatorPaths actuatorPaths,
			Supplier<RateLimitExecutors> executors) {
		this.rules = rules;
		this.headers = headers;
		this.exposeKey = exposeKey;
		this.actuatorPaths = actuatorPaths;
		this.executors = executors;
	}

	/**
	 * The dispatch of a request that waited for its tokens comes back here with its permit: an asynchronous
	 * dispatch is filtered (and let through unlimited unless it carries a permit).
	 */
	@Override
	protected boolean shouldNotFilterAsyncDispatch() {
		return false;
	}

	@Override
	protected void doFilterInternal(HttpServletRequest request, HttpServletResponse response, FilterChain chain)
			throws ServletException, IOException {
		if (request.getDispatcherType() == DispatcherType.ASYNC) {
			Object waited = request.getAttribute(WAITED_ATTRIBUTE);
			if (waited instanceof Waited granted) {
				request.removeAttribute(WAITED_ATTRIBUTE);
				proceed(request, response, chain, granted.permit(), granted.limits(), granted.keys());
			}
			else {
				chain.doFilter(request, response); // the application's own async dispatch: limited once already
			}
			return;
		}
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
		Permit permit = limits.takeNow(keys);
		if (permit != null) {
			proceed(request, response, chain, permit, limits, keys);
			return;
		}
		Reservation reservation;
		long delay;
		try {
			reservation = limits.reserve(keys);
			delay = reservation.poll();
		}
		catch (RateLimitExceededException ex) {
			refuse(request, response, ex, limits, keys);
			return;
		}
		if (delay == 0) {
			proceed(request, response, chain, reservation.permit(), limits, keys); // a shadow bucket, a Redis answer
			return;
		}
		waitWithoutThread(request, response, reservation, limits, keys);
	}

	/** The request goes on with its tokens; its permit is closed when the response completes. */
	private void proceed(HttpServletRequest request, HttpServletResponse response, FilterChain chain, Permit permit,
			RequestLimits limits, @Nullable Object[] keys) throws ServletException, IOException {
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

	/**
	 * Puts the request in asynchronous mode while the engine waits for its claim: dispatched again with
	 * the permit once the tokens are there, answered 429 when refused while waiting, 503 when the
	 * application shuts down meanwhile.
	 */
	private void waitWithoutThread(HttpServletRequest request, HttpServletResponse response, Reservation reservation,
			RequestLimits limits, @Nullable Object[] keys) {
		AsyncContext async = request.startAsync(request, response);
		async.setTimeout(0); // the wait is bounded by the buckets' max-wait; the engine ends it
		CompletableFuture<Void> waiting = new CompletableFuture<>();
		async.addListener(new GivingUp(waiting));
		waiting.whenComplete((done, failure) -> {
			if (failure != null && !waiting.isCancelled()) {
				answer(async, HttpServletResponse.SC_SERVICE_UNAVAILABLE, null, limits, keys); // shutting down
			}
		});
		AsyncWaits.await(reservation, this.executors.get(), waiting, UnaryOperator.identity(), (permit) -> {
			request.setAttribute(WAITED_ATTRIBUTE, new Waited(permit, limits, keys));
			if (waiting.complete(null)) {
				async.dispatch();
			}
			else {
				request.removeAttribute(WAITED_ATTRIBUTE);
				permit.close(); // the client went away as the tokens came
			}
		}, (failure) -> {
			if (waiting.complete(null)) {
				answer(async, 0, failure, limits, keys);
			}
		}, () -> "the request " + request.getMethod() + " " + request.getRequestURI());
	}

	/** Answers a request that waited without being let through, and ends it. */
	private void answer(AsyncContext async, int status, @Nullable RuntimeException failure, RequestLimits limits,
			@Nullable Object[] keys) {
		HttpServletRequest request = (HttpServletRequest) async.getRequest();
		HttpServletResponse response = (HttpServletResponse) async.getResponse();
		try {
			if (failure instanceof RateLimitExceededException refusal) {
				refuse(request, response, refusal, limits, keys);
			}
			else {
				response.sendError((failure != null) ? HttpServletResponse.SC_INTERNAL_SERVER_ERROR : status);
			}
		}
		catch (IOException | IllegalStateException ex) {
			// the client went away: nothing to answer
		}
		finally {
			async.complete();
		}
	}

	/** A request that waited for its tokens, dispatched again: its permit, and what its headers need. */
	private record Waited(Permit permit, RequestLimits limits, @Nullable Object[] keys) {
	}

	/** A client that goes away (or an async time-out) while its request waits gives the claim back. */
	private static final class GivingUp implements AsyncListener {

		private final CompletableFuture<Void> waiting;

		GivingUp(CompletableFuture<Void> waiting) {
			this.waiting = waiting;
		}

		@Override
		public void onComplete(AsyncEvent event) {
			this.waiting.cancel(false);
		}

		@Override
		public void onTimeout(AsyncEvent event) {
			this.waiting.cancel(false);
		}

		@Override
		public void onError(AsyncEvent event) {
			this.waiting.cancel(false);
		}

		@Override
		public void onStartAsync(AsyncEvent event) {
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
