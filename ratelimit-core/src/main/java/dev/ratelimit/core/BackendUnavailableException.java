package dev.ratelimit.core;

/**
 * A change to a bucket that its backend must make and cannot now, because the backend does not answer
 * (a retune or a mode switch of a Redis bucket while Redis is down): nothing has changed, and the
 * change may be sent again once the backend answers. The {@code ratelimits} endpoint answers it with
 * 503 and this message.
 */
public class BackendUnavailableException extends IllegalStateException {

	private static final long serialVersionUID = 1L;

	/**
	 * Creates the exception.
	 *
	 * @param message what could not be done, naming the bucket, and why
	 * @param cause the backend's failure, or {@code null}
	 */
	public BackendUnavailableException(String message, Throwable cause) {
		super(message, cause);
	}
}
