package dev.ratelimit.spring.engine;

/**
 * What a completed call really cost on each of its buckets that settle ({@code refundIf} and
 * {@code settle} of the annotation): asked once per such bucket when the call completes.
 */
@FunctionalInterface
public interface Settlement {

	/**
	 * The tokens the call keeps on one bucket.
	 *
	 * @param i the bucket's place in claim order
	 * @param cost the tokens the call took from it
	 * @return the tokens it really cost: {@code cost} lets the cost stand, {@code 0} gives every token back
	 *         (as if the call had not run), more takes the difference without waiting; between
	 *         {@code 0} and {@code 2^50}
	 */
	long realCost(int i, long cost);

	/**
	 * The bucket could not take the difference the settlement asked for (it would put more than 2^50
	 * tokens in line): nothing was taken, the call's cost stands. A settlement reports it; the call's
	 * outcome does not change.
	 *
	 * @param i the bucket's place in claim order
	 * @param real what {@link #realCost} said
	 * @param failure why the bucket refused
	 */
	default void unpaid(int i, long real, RuntimeException failure) {
	}
}
