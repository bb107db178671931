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

	OutboundCall(ClientLimits limits, @Nullable Object[] keys, Gate[] gates) {
		this.limits = limits;
		this.keys = keys;
		this.gates = gates;
		this.marks = new long[gates.length];
	}

	void granted(Permit permit) {
		this.permit = permit;
	}

	/** What the server answered: counted when 429 or 503, obeyed when listening. */
	void answered(int status, HttpHeaders headers) {
		this.limits.answered(this, status, headers);
	}

	/** Releases the buckets' tokens (capped release), once. */
	void release() {
		if (this.released.compareAndSet(false, true)) {
			Permit taken = this.permit;
			if (taken != null) {
				taken.close();
			}
		}
	}
}
