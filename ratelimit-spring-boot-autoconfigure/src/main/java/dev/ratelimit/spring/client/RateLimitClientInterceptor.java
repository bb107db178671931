package dev.ratelimit.spring.client;

import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;

import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpRequest;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.client.ClientHttpRequestExecution;
import org.springframework.http.client.ClientHttpRequestInterceptor;
import org.springframework.http.client.ClientHttpResponse;

/**
 * The outbound rules on {@code RestClient} and {@code RestTemplate} (and the HTTP interface clients made
 * on them): a call that rules match waits for its tokens before it is sent, parking the calling thread,
 * and is refused with {@link dev.ratelimit.core.RateLimitExceededException} (thrown as it is) without
 * sending anything when its wait would be longer than the bucket's max-wait. Capped buckets are released
 * when the response body has been read to its end or closed, the response closed, or the exchange fails.
 * The server's answer is read before the response is handed on.
 *
 * <pre>{@code
 * RestClient client = builder.requestInterceptor(new RateLimitClientInterceptor(rules)).build();
 * }</pre>
 * The starter adds it to the auto-configured builders; a client built from them has it.
 */
public final class RateLimitClientInterceptor implements ClientHttpRequestInterceptor {

	private final ClientRules rules;

	/**
	 * Creates the interceptor.
	 *
	 * @param rules the outbound rules
	 */
	public RateLimitClientInterceptor(ClientRules rules) {
		this.rules = rules;
	}

	@Override
	public ClientHttpResponse intercept(HttpRequest request, byte[] body, ClientHttpRequestExecution execution)
			throws IOException {
		long mask = this.rules.match(request.getMethod().name(), request.getURI());
		if (mask == 0) {
			return execution.execute(request, body);
		}
		ClientLimits limits = this.rules.matched(mask);
		OutboundCall call = limits.call(request);
		limits.acquire(call);
		ClientHttpResponse response;
		try {
			response = execution.execute(request, body);
			call.answered(response.getStatusCode().value(), response.getHeaders());
		}
		catch (IOException | RuntimeException | Error ex) {
			call.release();
			throw ex;
		}
		return new ReleasingResponse(response, call);
	}

	/** A response that releases the call's tokens once its body is read or closed, or it is closed. */
	private static final class ReleasingResponse implements ClientHttpResponse {

		private final ClientHttpResponse response;

		private final OutboundCall call;

		private InputStream body;

		ReleasingResponse(ClientHttpResponse response, OutboundCall call) {
			this.response = response;
			this.call = call;
		}

		@Override
		public HttpStatusCode getStatusCode() throws IOException {
			return this.response.getStatusCode();
		}

		@Override
		public String getStatusText() throws IOException {
			return this.response.getStatusText();
		}

		@Override
		public HttpHeaders getHeaders() {
			return this.response.getHeaders();
		}

		@Override
		public InputStream getBody() throws IOException {
			if (this.body == null) {
				InputStream stream;
				try {
					stream = this.response.getBody();
				}
				catch (IOException | RuntimeException ex) {
					this.call.release();
					throw ex;
				}
				this.body = new ReleasingStream(stream, this.call);
			}
			return this.body;
		}

		@Override
		public void close() {
			try {
				this.response.close();
			}
			finally {
				this.call.release();
			}
		}
	}

	/** A body that releases the call's tokens at its end, on a read error, or when closed. */
	private static final class ReleasingStream extends FilterInputStream {

		private final OutboundCall call;

		ReleasingStream(InputStream in, OutboundCall call) {
			super(in);
			this.call = call;
		}

		@Override
		public int read() throws IOException {
			int b;
			try {
				b = super.read();
			}
			catch (IOException ex) {
				this.call.release();
				throw ex;
			}
			if (b < 0) {
				this.call.release();
			}
			return b;
		}

		@Override
		public int read(byte[] buffer, int offset, int length) throws IOException {
			int n;
			try {
				n = this.in.read(buffer, offset, length);
			}
			catch (IOException ex) {
				this.call.release();
				throw ex;
			}
			if (n < 0) {
				this.call.release();
			}
			return n;
		}

		@Override
		public void close() throws IOException {
			try {
				super.close();
			}
			finally {
				this.call.release();
			}
		}
	}
}
