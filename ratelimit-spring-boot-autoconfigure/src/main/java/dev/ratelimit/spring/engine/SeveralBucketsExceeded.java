package dev.ratelimit.spring.engine;

import java.util.List;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import org.jspecify.annotations.Nullable;

/**
 * A call (or web request) refused by more than one of its buckets: like any refusal it names the
 * refusing bucket whose wait was longest (with its key, cost and wait), and it also lists every bucket
 * that refused, for the problem detail's {@code violated-policies}.
 */
public final class SeveralBucketsExceeded extends RateLimitExceededException {

	private static final long serialVersionUID = 1L;

	private final List<String> refusing;

	/** The key's bucket that refused, when the named bucket is a key's ({@link KeyedBucketExceeded}). */
	private final transient @Nullable RateLimiter refusedBy;

	SeveralBucketsExceeded(RateLimitExceededException named, List<String> refusing) {
		super(named.getBucket(), named.getKey(), named.getCost(), named.getRetryAfter(), named.getMessage());
		this.refusing = List.copyOf(refusing);
		this.refusedBy = KeyedBucketExceeded.refusedBy(named);
	}

	@Nullable RateLimiter refusedBy() {
		return this.refusedBy;
	}

	/**
	 * Every bucket that refused the call, in claim order (by name), each once.
	 *
	 * @return the buckets' names
	 */
	public List<String> getRefusingBuckets() {
		return this.refusing;
	}
}
