package dev.ratelimit.spring;

import org.jspecify.annotations.Nullable;

/**
 * Told of the calls that wait for their tokens or are refused, never of a call granted at once (that
 * one costs nothing more): the seam through which the starter makes the {@code ratelimit.acquire}
 * observation (contract revision 3) when Micrometer's {@code ObservationRegistry} is there. Every front
 * end's calls come here through the engine: annotated methods of every return kind, web rules and
 * outbound rules.
 */
public interface WaitObserver {

	/** Observes nothing: the observer of every bucket without an observation registry. */
	WaitObserver NONE = (bucket) -> (outcome, refusing, failure) -> {
	};

	/** The outcome of a call that was let through after waiting (or, in shadow mode, at once). */
	String GRANTED = "granted";

	/** The outcome of a call that was refused (its tokens given back). */
	String REJECTED = "rejected";

	/** The outcome of a call a bucket in shadow mode would have refused (it ran). */
	String SHADOW_REJECTED = "shadow-rejected";

	/**
	 * A call starts waiting for its tokens, or is refused at once.
	 *
	 * @param bucket the bucket it waits on; for a call on several buckets, their names joined by
	 *        {@code ,} in claim order
	 * @return what ends the observation, once
	 */
	Waiting started(String bucket);

	/** One call's wait, ended once. */
	@FunctionalInterface
	interface Waiting {

		/**
		 * The wait ended.
		 *
		 * @param outcome {@link #GRANTED}, {@link #REJECTED} or {@link #SHADOW_REJECTED}
		 * @param refusing for a refusal, the bucket named as refusing; else {@code null}
		 * @param failure what ended a wait that was not granted (a refusal, an interrupt), or {@code null}
		 */
		void ended(String outcome, @Nullable String refusing, @Nullable Throwable failure);
	}
}
