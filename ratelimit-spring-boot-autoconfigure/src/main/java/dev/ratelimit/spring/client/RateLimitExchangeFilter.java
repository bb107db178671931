package dev.ratelimit.spring.client;

import java.net.URI;
import java.util.Map;

import dev.ratelimit.spring.engine.ReactivePermits;
import dev.ratelimit.spring.engine.RefusalSignal;
import reactor.core.publisher.Mono;

import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpMethod;
import org.springframework.http.HttpRequest;
import org.springframework.web.reactive.function.client.ClientRequest;
import org.springframework.web.reactive.function.client.ClientResponse;
import org.springframework.web.reactive.function.client.ExchangeFilterFunction;
import org.springframework.web.reactive.function.client.ExchangeFunction;

/**
 * The outbound rules on {@code WebClient} (and the HTTP interface clients made on it): a call that rules
 * match waits for its tokens without a thread (the engine's {@link ReactivePermits}) before it is sent,
 * and fails with {@link dev.ratelimit.core.RateLimitExceededException} as its error signal (unwrapped)
 * without sending anything when its wait would be longer than the bucket's max-wait. Capped buckets are
 * released when the response body has been consumed or released, or the exchange fails or is cancelled.
 *
 * <pre>{@code
 * WebClient client = builder.filter(new RateLimitExchangeFilter(rules)).build();
 * }</pre>
 * The starter adds it to the auto-configured builder; a client built from it has it.
 */
public final class RateLimitExchangeFilter implements ExchangeFilterFunction {

	private final ClientRules rules;

	/**
	 * Creates the filter.
	 *
	 * @param rules the outbound rules
	 */
	public RateLimitExchangeFilter(ClientRules rules) {
		this.rules = rules;
	}

	@Override
	public Mono<ClientResponse> filter(ClientRequest request, ExchangeFunction next) {
		long mask = this.rules.match(request.method().name(), request.url());
		if (mask == 0) {
			return next.exchange(request);
		}
		ClientLimits limits = this.rules.matched(mask);
		return Mono.defer(() -> {
			OutboundCall call = limits.call(new RequestView(request));
			return ReactivePermits.permit(() -> limits.reserve(call, limits.now()), RefusalSignal::of)
				.onErrorMap(RefusalSignal.class, RefusalSignal::refusal)
				.flatMap((permit) -> {
					call.granted(permit);
					return next.exchange(request)
						.map((response) -> {
							call.answered(response.statusCode().value(), response.headers().asHttpHeaders());
							return response.mutate()
								// before the end reaches the reader: the tokens are back once its body is read
								.body((body) -> body.doOnTerminate(call::release).doOnCancel(call::release))
								.build();
						})
						.doOnError((ex) -> call.release())
						.doOnCancel(call::release);
				});
		});
	}

	/** Spring's {@link HttpRequest} view of a {@link ClientRequest}: {@code #request} of a SpEL key. */
	private static final class RequestView implements HttpRequest {

		private final ClientRequest request;

		RequestView(ClientRequest request) {
			this.request = request;
		}

		@Override
		public HttpMethod getMethod() {
			return this.request.method();
		}

		@Override
		public URI getURI() {
			return this.request.url();
		}

		@Override
		public Map<String, Object> getAttributes() {
			return this.request.attributes();
		}

		@Override
		public HttpHeaders getHeaders() {
			return this.request.headers();
		}
	}
}
