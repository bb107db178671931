package dev.ratelimit.spring;

import org.jspecify.annotations.Nullable;

/**
 * A call's key together with the plan its caller is on (contract revision 3, "Plans"), as a front end
 * hands it to the engine for a bucket with plans: the engine passes it on as the call's key, and
 * {@link KeyedBuckets} finds the key's bucket by the key alone and gives it the plan's settings. Its
 * string is the key's, so a refusal names the key, never the plan.
 *
 * <p>Made only for calls on a bucket with plans: a call on a bucket without plans passes its key
 * itself, and costs nothing more.
 */
public final class PlannedKey {

	private final Object key;

	private final @Nullable String plan;

	private PlannedKey(Object key, @Nullable String plan) {
		this.key = key;
		this.plan = plan;
	}

	/**
	 * A key and its plan.
	 *
	 * @param key the key, not {@code null}
	 * @param plan the plan's name; {@code null}, {@code ""} or a name that is not a plan of the bucket
	 *        gives the template's settings
	 * @return the planned key
	 */
	public static PlannedKey of(Object key, @Nullable String plan) {
		return new PlannedKey(key, plan);
	}

	/**
	 * The key itself.
	 *
	 * @return the key
	 */
	public Object key() {
		return this.key;
	}

	/**
	 * The plan's name as the caller gave it.
	 *
	 * @return the name, or {@code null}
	 */
	public @Nullable String plan() {
		return this.plan;
	}

	/**
	 * The key of a call's key, planned or not.
	 *
	 * @param key a call's key, a {@link PlannedKey} or the key itself
	 * @return the key itself
	 */
	public static Object keyOf(Object key) {
		return (key instanceof PlannedKey planned) ? planned.key : key;
	}

	/** The key's string: a refusal and the endpoint name the key, not the plan. */
	@Override
	public String toString() {
		return String.valueOf(this.key);
	}
}
