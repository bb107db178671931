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
 * ({@code application/problem+json}) whose {@code bucket} property names the bucket. Works for Spring
 * MVC and WebFlux controllers. It has the lowest precedence, so a handler of the application's own
 * (in a controller, or an advice declared by the application) wins.
 */
@ControllerAdvice
@Order(Ordered.LOWEST_PRECEDENCE)
public class RateLimitExceptionHandler {

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
