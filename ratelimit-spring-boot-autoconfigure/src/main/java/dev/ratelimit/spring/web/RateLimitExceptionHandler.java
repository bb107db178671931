package dev.ratelimit.spring.web;

import java.time.Duration;
import java.util.function.Supplier;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.WebHeaders;
import org.jspecify.annotations.Nullable;

import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ControllerAdvice;
import org.springframework.web.bind.annotation.ExceptionHandler;

/**
 * Answers a {@link RateLimitExceededException} with HTTP 429 Too Many Requests, a {@code Retry-After}
 * header in whole seconds (rounded up, at least 1) and an RFC 9457 problem detail
 * ({@code application/problem+json}) whose {@code bucket} property names the bucket (and, with
 * {@code ratelimit.web.expose-key: true}, whose {@code key} property gives the per-key value). With
 * {@code ratelimit.web.headers: ietf} it also carries the refusing bucket's {@code RateLimit-Policy}
 * and {@code RateLimit} fields and the problem detail's {@code violated-policies}; with
 * {@code none}, no header at all. Works for Spring
 * MVC and WebFlux controllers. It has the lowest precedence, so a handler of the application's own
 * (in a controller, or an advice declared by the application) wins.
 */
@ControllerAdvice
@Order(Ordered.LOWEST_PRECEDENCE)
public class RateLimitExceptionHandler {

	private final boolean exposeKey;

	private final WebHeaders headers;

	private final Supplier<@Nullable RateLimiterRegistry> registry;

	/**
	 * A handler that leaves per-key values out of the response (they may be personal data).
	 */
	public RateLimitExceptionHandler() {
		this(false);
	}

	/**
	 * Creates the handler with {@code Retry-After} only.
	 *
	 * @param exposeKey whether the problem detail carries the refused call's key
	 *        ({@code ratelimit.web.expose-key})
	 */
	public RateLimitExceptionHandler(boolean exposeKey) {
		this(exposeKey, WebHeaders.RETRY_AFTER, () -> null);
	}

	/**
	 * Creates the handler.
	 *
	 * @param exposeKey whether the problem detail carries the refused call's key
	 *        ({@code ratelimit.web.expose-key})
	 * @param headers which rate-limit headers to send ({@code ratelimit.web.headers})
	 * @param registry the buckets, whose levels the {@code ietf} fields give
	 */
	public RateLimitExceptionHandler(boolean exposeKey, WebHeaders headers,
			Supplier<@Nullable RateLimiterRegistry> registry) {
		this.exposeKey = exposeKey;
		this.headers = headers;
		this.registry = registry;
	}

	/**
	 * Turns the refusal into a 429 response.
	 *
	 * @param ex the refusal
	 * @return the response
	 */
	@ExceptionHandler(RateLimitExceededException.class)
	public ResponseEntity<ProblemDetail> handleRateLimitExceeded(RateLimitExceededException ex) {
		ProblemDetail problem = ProblemDetail.forStatusAndDetail(HttpStatus.TOO_MANY_REQUESTS,
				TooManyRequests.detail(ex));
		problem.setTitle("Too Many Requests");
		problem.setProperty("bucket", ex.getBucket());
		boolean ietf = this.headers == WebHeaders.IETF;
		if (ietf && ex.getBucket() != null) {
			problem.setProperty("violated-policies", TooManyRequests.violated(ex));
		}
		if (this.exposeKey && ex.getKey() != null) {
			problem.setProperty("key", ex.getKey());
		}
		ResponseEntity.BodyBuilder response = ResponseEntity.status(HttpStatus.TOO_MANY_REQUESTS);
		TooManyRequests.headers(response::header, ex, this.headers,
				ietf ? TooManyRequests.level(ex, this.registry.get()) : null);
		return response.contentType(MediaType.APPLICATION_PROBLEM_JSON).body(problem);
	}

	/**
	 * The {@code Retry-After} value: whole seconds, rounded up, at least 1.
	 *
	 * @param retryAfter the wait that would have been needed
	 * @return the seconds
	 */
	public static long retryAfterSeconds(Duration retryAfter) {
		return TooManyRequests.retryAfterSeconds(retryAfter);
	}
}
