package dev.ratelimit.spring.web;

import java.time.Duration;

import dev.ratelimit.core.RateLimitExceededException;

import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpHeaders;
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
 * {@code ratelimit.web.expose-key: true}, whose {@code key} property gives the per-key value). Works for Spring
 * MVC and WebFlux controllers. It has the lowest precedence, so a handler of the application's own
 * (in a controller, or an advice declared by the application) wins.
 */
@ControllerAdvice
@Order(Ordered.LOWEST_PRECEDENCE)
public class RateLimitExceptionHandler {

	private final boolean exposeKey;

	/**
	 * A handler that leaves per-key values out of the response (they may be personal data).
	 */
	public RateLimitExceptionHandler() {
		this(false);
	}

	/**
	 * Creates the handler.
	 *
	 * @param exposeKey whether the problem detail carries the refused call's key
	 *        ({@code ratelimit.web.expose-key})
	 */
	public RateLimitExceptionHandler(boolean exposeKey) {
		this.exposeKey = exposeKey;
	}

	/**
	 * Turns the refusal into a 429 response.
	 *
	 * @param ex the refusal
	 * @return the response
	 */
	@ExceptionHandler(RateLimitExceededException.class)
	public ResponseEntity<ProblemDetail> handleRateLimitExceeded(RateLimitExceededException ex) {
		long seconds = retryAfterSeconds(ex.getRetryAfter());
		String what = (ex.getBucket() != null) ? "bucket '" + ex.getBucket() + "'" : "a rate limiter";
		ProblemDetail problem = ProblemDetail.forStatusAndDetail(HttpStatus.TOO_MANY_REQUESTS,
				"Rate limit of " + what + " exceeded; retry after " + seconds + " s.");
		problem.setTitle("Too Many Requests");
		problem.setProperty("bucket", ex.getBucket());
		if (this.exposeKey && ex.getKey() != null) {
			problem.setProperty("key", ex.getKey());
		}
		return ResponseEntity.status(HttpStatus.TOO_MANY_REQUESTS)
			.header(HttpHeaders.RETRY_AFTER, Long.toString(seconds))
			.contentType(MediaType.APPLICATION_PROBLEM_JSON)
			.body(problem);
	}

	/**
	 * The {@code Retry-After} value: whole seconds, rounded up, at least 1.
	 *
	 * @param retryAfter the wait that would have been needed
	 * @return the seconds
	 */
	public static long retryAfterSeconds(Duration retryAfter) {
		long seconds = retryAfter.getSeconds() + ((retryAfter.getNano() > 0) ? 1 : 0);
		return Math.max(seconds, 1);
	}
}
