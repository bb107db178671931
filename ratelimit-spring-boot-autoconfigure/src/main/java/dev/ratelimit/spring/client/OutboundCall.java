package dev.ratelimit.spring.client;

import java.util.concurrent.atomic.AtomicBoolean;

import dev.ratelimit.core.Permit;
import org.jspecify.annotations.Nullable;

import org.springframework.http.HttpHeaders;

/**
 * One outbound call that rules matched: its buckets' permit (released once, when the response is done
 * or the exchange fails), the gates it passed and its marks on them, for the server's answer.
 */
final class OutboundCall {

	private final ClientLimits limits;

	final @Nullable Object[] keys;

	final Gate[] gates;

	/** Each gate's count of sent tokens after this call passed it (the answer's reference point). */
	final long[] marks;

	private volatile @Nullable Permit permit;

	private final AtomicBoolean released = new AtomicBoolean();

	private final AtomicBoolean done = new AtomicBoolean();

	OutboundCall(ClientLimits limits, @Nullable Object[] keys, Gate[] gates) {
		this.limits = limits;
		this.keys = keys;
		this.gates = gates;
		this.marks = new long[gates.length];
	}

	void granted(Permit permit) {
		this.permit = permit;
	}

	/**
	 * What the server answered: counted when 429 or 503, obeyed when listening; then the call is no longer
	 * out for its gates.
	 */
	void answered(int status, HttpHeaders headers) {
		try {
			this.limits.answered(this, status, headers);
		}
		finally {
			done();
		}
	}

	/** The call is no longer out for its gates, once (its answer heard, or the exchange over). */
	private void done() {
		if (this.done.compareAndSet(false, true)) {
			this.limits.done(this);
		}
	}

	/** Releases the buckets' tokens (capped release), once; the call is no longer out for its gates. */
	void release() {
		done();
		if (this.released.compareAndSet(false, true)) {
			Permit taken = this.permit;
			if (taken != null) {
				taken.close();
			}
		}
	}
}
