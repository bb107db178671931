package dev.ratelimit.spring.client;

/**
 * What the servers said about one bucket (or one key's bucket) of outbound calls, kept where the calls
 * that take from it look before they are sent: a pause (a {@code 429} or {@code 503} with
 * {@code Retry-After}) and the lowerings in force (a remaining count until a reset). {@link ServerGate}
 * keeps it in this JVM; a backend whose buckets are shared by several instances keeps it beside the
 * bucket, so that every instance's next call after an answer sees it ({@link SharedGates}).
 *
 * <p>A gate only ever holds calls back: it never lets through a call its bucket would not. Times are
 * readings of the buckets' clock ({@code now}, in nanoseconds); a gate kept elsewhere may run on its own
 * clock and use only the differences ({@code until - now}, {@code reset - now}).
 *
 * <pre>{@code
 * long mark = gate.tryPass(cost, now);      // -1: held back, gate.delay(cost, now) says how long
 * ... the call is sent, the server answers "2 remain for 10 s" ...
 * gate.lower(2, mark, now + 10_000_000_000L, now);
 * }</pre>
 *
 * <p>Memory consistency effects: what one thread does to a gate happens-before what another thread
 * then reads from it; a gate kept elsewhere is as consistent as its store.
 */
public interface Gate {

	/**
	 * How long a call of {@code cost} tokens waits before the gate lets it pass (the pause left, or the
	 * time until enough of the lowerings have reset).
	 *
	 * @param cost the call's tokens
	 * @param now the clock's reading
	 * @return the wait in nanoseconds, {@code 0} when the call may pass now
	 */
	long delay(long cost, long now);

	/**
	 * Lets a call pass when nothing holds it back: counts its tokens as sent.
	 *
	 * @param cost the call's tokens
	 * @param now the clock's reading
	 * @return the call's mark, {@code >= 0} (what its answer refers to, {@link #lower}), or {@code -1}
	 *         when it must wait ({@link #delay})
	 */
	long tryPass(long cost, long now);

	/**
	 * Takes back a pass of a call that did not go out after all (another bucket held it back).
	 *
	 * @param mark the call's mark, as {@link #tryPass} returned it
	 * @param cost the call's tokens
	 */
	void unpass(long mark, long cost);

	/**
	 * The call whose mark was {@code mark} is no longer out: the server's answer was heard (after
	 * {@link #lower} and {@link #pause} applied it), or the exchange failed. Until then the call counts
	 * among those out, which an answer to a later call subtracts (the server may not have counted them).
	 *
	 * @param mark the call's mark
	 * @param cost the call's tokens
	 * @param now the clock's reading
	 */
	void done(long mark, long cost, long now);

	/**
	 * Pauses the gate until {@code until} (a longer pause already in force stays).
	 *
	 * @param until when the pause ends
	 * @param now the clock's reading
	 */
	void pause(long until, long now);

	/**
	 * The server said {@code remaining} tokens remain until {@code reset}, answering the call whose mark
	 * was {@code mark}: the calls that passed after it are subtracted, and so are those that passed before
	 * it and are still out ({@link #done} not called yet), which the server may not have counted. Never
	 * raises a level in force.
	 *
	 * @param remaining the server's remaining count
	 * @param mark the answered call's mark
	 * @param reset when the server's count resets
	 * @param now the clock's reading
	 */
	void lower(long remaining, long mark, long reset, long now);

	/**
	 * The level the servers' answers leave now, for the views' {@code available}.
	 *
	 * @param now the clock's reading
	 * @return {@code 0} while paused, the lowered level while lowered, {@code Long.MAX_VALUE} when nothing
	 *         holds calls back
	 */
	long level(long now);
}
