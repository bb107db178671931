package dev.ratelimit.spring.actuate;

import io.micrometer.observation.Observation;
import org.jspecify.annotations.Nullable;

/**
 * The context of a {@code ratelimit.acquire} observation: one call that waited for its tokens or was
 * refused.
 */
public class RateLimitObservationContext extends Observation.Context {

	private final String bucket;

	private volatile @Nullable String outcome;

	private volatile @Nullable String refusing;

	/**
	 * Creates the context of one call's wait.
	 *
	 * @param bucket the bucket the call waits on (several: their names joined by {@code ,})
	 */
	public RateLimitObservationContext(String bucket) {
		this.bucket = bucket;
	}

	/**
	 * The bucket the call waited on: several buckets' names joined by {@code ,}.
	 *
	 * @return the bucket
	 */
	public String getBucket() {
		return this.bucket;
	}

	/**
	 * How the wait ended: {@code granted}, {@code rejected} or {@code shadow-rejected}; {@code null}
	 * while it goes on.
	 *
	 * @return the outcome
	 */
	public @Nullable String getOutcome() {
		return this.outcome;
	}

	/**
	 * For a refusal, the bucket named as refusing (the one whose wait was longest); else {@code null}.
	 *
	 * @return the refusing bucket
	 */
	public @Nullable String getRefusing() {
		return this.refusing;
	}

	void ended(String outcome, @Nullable String refusing) {
		this.outcome = outcome;
		this.refusing = refusing;
	}
}
