package dev.ratelimit.spring.web;

import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.Principal;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.WebHeaders;
import dev.ratelimit.spring.engine.ReactivePermits;
import dev.ratelimit.spring.engine.RefusalSignal;

import org.jspecify.annotations.Nullable;
import reactor.core.publisher.Mono;

import org.springframework.core.Ordered;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.http.HttpStatus;
import org.springframework.http.server.PathContainer;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;

/**
 * {@code ratelimit.web.rules} for WebFlux: a {@code WebFilter} that claims the matching rules' tokens
 * and waits for them without blocking a thread (polled on Reactor's parallel scheduler, up to the
 * buckets' max-wait), answers 429 when refused, and releases capped buckets when the response
 * completes, fails or is cancelled. Actuator paths are never limited. Ordered after Spring Security's
 * {@code WebFilterChainProxy}, so that {@code principal} keys resolve.
 */
class RateLimitWebFilter implements WebFilter, Ordered {

	private final WebRules rules;

	private final WebHeaders headers;

	private final boolean exposeKey;

	private final ActuatorPaths actuatorPaths;

	private final int order;

	/**
	 * Creates the filter.
	 *
	 * @param rules the compiled rules
	 * @param headers {@code ratelimit.web.headers}
	 * @param exposeKey {@code ratelimit.web.expose-key}
	 * @param actuatorPath the actuator's base path, never limited
	 * @param order the filter's order
	 */
	public RateLimitWebFilter(WebRules rules, WebHeaders headers, boolean exposeKey, String actuatorPath, int order) {
		this(rules, headers, exposeKey, ActuatorPaths.of(actuatorPath), order);
	}

	/**
	 * Creates the filter.
	 *
	 * @param rules the compiled rules
	 * @param headers {@code ratelimit.web.headers}
	 * @param exposeKey {@code ratelimit.web.expose-key}
	 * @param actuatorPaths the actuator's paths, never limited
	 * @param order the filter's order
	 */
	public RateLimitWebFilter(WebRules rules, WebHeaders headers, boolean exposeKey, ActuatorPaths actuatorPaths,
			int order) {
		this.rules = rules;
		this.headers = headers;
		this.exposeKey = exposeKey;
		this.actuatorPaths = actuatorPaths;
		this.order = order;
	}

	@Override
	public int getOrder() {
		return this.order;
	}

	@Override
	public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
		ServerHttpRequest request = exchange.getRequest();
		String path = request.getPath().pathWithinApplication().value();
		if (this.actuatorPaths.covers(path)) {
			return chain.filter(exchange);
		}
		long mask = this.rules.match(request.getMethod().name(), PathContainer.parsePath(path));
		if (mask == 0) {
			return chain.filter(exchange);
		}
		WebRules.Matched matched = this.rules.matched(mask);
		Mono<@Nullable String> principal = matched.needsPrincipal()
				? exchange.getPrincipal().map(Principal::getName).defaultIfEmpty("") : Mono.just("");
		return principal.flatMap((name) -> {
			Object[] keys = matched.keys(new ReactiveView(request, name.isEmpty() ? null : name));
			return limited(exchange, chain, matched.limits(), keys);
		});
	}

	private Mono<Void> limited(ServerWebExchange exchange, WebFilterChain chain, RequestLimits limits,
			@Nullable Object[] keys) {
		Mono<Void> limited = Mono.usingWhen(permit(limits, keys), (permit) -> {
			if (this.headers == WebHeaders.IETF) {
				RateLimitHeaders.Level level = RateLimitHeaders.closest(limits, keys);
				exchange.getAttributes().put(RateLimitHeaders.LEVEL_ATTRIBUTE, level);
				exchange.getResponse().getHeaders().set(RateLimitHeaders.POLICY, level.policy());
				exchange.getResponse().getHeaders().set(RateLimitHeaders.LIMIT, level.limit());
			}
			return chain.filter(exchange);
		}, RateLimitWebFilter::release, (permit, failure) -> release(permit), RateLimitWebFilter::release);
		return limited.onErrorResume(RefusalSignal.class, (refused) -> refuse(exchange, refused.refusal(), limits, keys));
	}

	private static Mono<Void> release(Permit permit) {
		return Mono.fromRunnable(permit::close);
	}

	private Mono<Void> refuse(ServerWebExchange exchange, RateLimitExceededException ex, RequestLimits limits,
			@Nullable Object[] keys) {
		ServerHttpResponse response = exchange.getResponse();
		response.setStatusCode(HttpStatus.TOO_MANY_REQUESTS);
		boolean ietf = this.headers == WebHeaders.IETF;
		TooManyRequests.headers(response.getHeaders()::set, ex, this.headers,
				ietf ? RateLimitHeaders.refusing(limits, keys, ex) : null);
		response.getHeaders().set("Content-Type", TooManyRequests.PROBLEM_JSON);
		byte[] body = TooManyRequests.json(ex, exchange.getRequest().getPath().value(), this.exposeKey, ietf)
			.getBytes(StandardCharsets.UTF_8);
		DataBuffer buffer = response.bufferFactory().wrap(body);
		return response.writeWith(Mono.just(buffer));
	}

	private static Mono<Permit> permit(RequestLimits limits, @Nullable Object[] keys) {
		return ReactivePermits.permit(() -> limits.reserve(keys), RefusalSignal::of);
	}

	/** A reactive request, as keys see it. */
	private static final class ReactiveView implements WebRules.RequestView {

		private final ServerHttpRequest request;

		private final @Nullable String principal;

		ReactiveView(ServerHttpRequest request, @Nullable String principal) {
			this.request = request;
			this.principal = principal;
		}

		@Override
		public @Nullable InetAddress remoteAddress() {
			InetSocketAddress address = this.request.getRemoteAddress();
			return (address != null) ? address.getAddress() : null;
		}

		@Override
		public @Nullable String principal() {
			return this.principal;
		}

		@Override
		public @Nullable String header(String name) {
			return this.request.getHeaders().getFirst(name);
		}

		@Override
		public Object request() {
			return this.request;
		}
	}
}
