package dev.ratelimit.spring.actuate;

import java.util.LinkedHashMap;
import java.util.Map;

import dev.ratelimit.core.BackendUnavailableException;
import org.jspecify.annotations.Nullable;

import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.actuate.endpoint.annotation.DeleteOperation;
import org.springframework.boot.actuate.endpoint.annotation.Selector;
import org.springframework.boot.actuate.endpoint.annotation.WriteOperation;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;
import org.springframework.boot.actuate.endpoint.web.annotation.EndpointWebExtension;

/**
 * The {@code ratelimits} endpoint over HTTP: a retune that the configuration would reject answers
 * 400 with the reason in the body, which Boot's default error settings would otherwise leave out
 * ({@code server.error.include-message=never}); a retune of a bucket that does not exist answers 404; one
 * that its backend cannot make now (a Redis bucket while Redis does not answer) answers 503 with the
 * reason, and nothing changes. A reset ({@code DELETE}, contract revision 3) answers 204, 404 for a bucket
 * that does not exist, and 503 with the reason when the backend does not answer.
 */
@EndpointWebExtension(endpoint = RateLimitsEndpoint.class)
public class RateLimitsWebEndpointExtension {

	private final RateLimitsEndpoint endpoint;

	/**
	 * Creates the extension.
	 *
	 * @param endpoint the endpoint it extends
	 */
	public RateLimitsWebEndpointExtension(RateLimitsEndpoint endpoint) {
		this.endpoint = endpoint;
	}

	/**
	 * Changes a bucket's rate and/or limit in place and/or switches its mode, as
	 * {@link RateLimitsEndpoint#update} does.
	 *
	 * @param name the bucket name
	 * @param rate the new rate per the configured period, or {@code null} to keep it: taken as sent and
	 *        read by the endpoint, so that a value that is not a number gets 400 with the reason (a typed
	 *        parameter the framework cannot convert is a bare 400)
	 * @param limit the new limit, or {@code null} to keep it: read the same way (a fraction gets 400 with
	 *        the reason)
	 * @param mode {@code enforce} or {@code shadow}, or {@code null} to keep it
	 * @return the new view; 404 for an unknown bucket; 400 with the reason for a value the configuration
	 *         would reject; 503 with the reason when the bucket's backend does not answer
	 */
	@WriteOperation
	public WebEndpointResponse<Object> update(@Selector String name, @Nullable Object rate,
			@Nullable Object limit, @Nullable String mode) {
		if (this.endpoint.bucket(name) == null) {
			return failure(WebEndpointResponse.STATUS_NOT_FOUND, "Not Found", "No bucket named '" + name + "'");
		}
		try {
			return new WebEndpointResponse<>(this.endpoint.update(name, rate, limit, mode));
		}
		catch (InvalidEndpointRequestException ex) {
			return failure(WebEndpointResponse.STATUS_BAD_REQUEST, "Bad Request", ex.getReason());
		}
		catch (BackendUnavailableException ex) {
			return failure(WebEndpointResponse.STATUS_SERVICE_UNAVAILABLE, "Service Unavailable", ex.getMessage());
		}
	}

	/**
	 * Resets a bucket, as {@link RateLimitsEndpoint#reset} does.
	 *
	 * @param name the bucket name
	 * @return 204; 404 for an unknown bucket; 503 with the reason when the bucket's backend does not answer
	 */
	@DeleteOperation
	public WebEndpointResponse<Object> reset(@Selector String name) {
		if (!this.endpoint.exists(name)) {
			return failure(WebEndpointResponse.STATUS_NOT_FOUND, "Not Found", "No bucket named '" + name + "'");
		}
		try {
			this.endpoint.reset(name);
			return new WebEndpointResponse<>(WebEndpointResponse.STATUS_NO_CONTENT);
		}
		catch (BackendUnavailableException ex) {
			return failure(WebEndpointResponse.STATUS_SERVICE_UNAVAILABLE, "Service Unavailable", ex.getMessage());
		}
	}

	static WebEndpointResponse<Object> failure(int status, String error, String message) {
		Map<String, Object> body = new LinkedHashMap<>();
		body.put("status", status);
		body.put("error", error);
		body.put("message", message);
		return new WebEndpointResponse<>(body, status);
	}
}
