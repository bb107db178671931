package dev.ratelimit.spring;

import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;

import dev.ratelimit.core.StatsRecorder;
import org.jspecify.annotations.Nullable;

/**
 * A configured bucket's statistics and mode: every limiter of the bucket (its own, each key's, the
 * overflow bucket) counts its calls here, so the meters, tagged by bucket only, add every key up.
 *
 * <p>It also holds the bucket's mode (contract revision 2): in shadow mode the interceptor lets every
 * call run and counts the ones the bucket would have refused as {@code shadow-rejected}
 * ({@link #refused()}); a refusal of a direct call to the limiter bean still counts as
 * {@code rejected}. The mode is read on every call of the interceptor (one volatile read) and changed
 * live by the endpoint.
 *
 * <p>A bucket whose state lives in a backend shared by the instances (Redis) shares its mode there too
 * ({@link #shareModeThrough}): a switch is stored through the backend, and every instance takes on the
 * mode its backend's replies carry ({@link #adoptShared}), as it does a retune's rate and limit.
 */
public final class BucketStats implements StatsRecorder {

	/**
	 * Set while the interceptor claims from several buckets for one call (or decides for a bucket in
	 * shadow mode): a refusal the limiters record then is not counted, the interceptor counting the
	 * call's one refusal itself ({@link #refused}). Read only on refusals, never on a grant.
	 */
	private static final ThreadLocal<boolean[]> DEFERRING = ThreadLocal.withInitial(() -> new boolean[1]);

	private final StatsRecorder counts;

	private final LongAdder shadowRejected = new LongAdder();

	private final LongAdder ungranted = new LongAdder();

	private final LongAdder unrefused = new LongAdder();

	/** The most {@link #shadowRejected()} has answered: what it never answers less than. */
	private volatile long shownShadowRejected;

	/** The most {@link #granted()} has answered: what it never answers less than. */
	private volatile long shownGranted;

	private final boolean allShadow;

	private volatile BucketMode mode;

	/** The bucket's own mode as configured: the mode in force when the backend holds none. */
	private final BucketMode configuredMode;

	/** Told of the calls that wait or are refused ({@link WaitObserver#NONE} without observations). */
	private volatile WaitObserver observer = WaitObserver.NONE;

	/** Where a switch of the mode is stored for every instance, or {@code null}: this instance only. */
	private volatile @Nullable Consumer<BucketMode> sharedModeStore;

	/**
	 * Creates the statistics of one bucket.
	 *
	 * @param counts where granted and rejected calls are counted (the {@link BucketStatsFactory}'s)
	 * @param mode the bucket's own mode
	 * @param allShadow whether {@code ratelimit.mode: shadow} puts every bucket in shadow mode
	 */
	public BucketStats(StatsRecorder counts, BucketMode mode, boolean allShadow) {
		this.counts = counts;
		this.mode = mode;
		this.configuredMode = mode;
		this.allShadow = allShadow;
	}

	/**
	 * The observer of this bucket's calls that wait or are refused.
	 *
	 * @return the observer, {@link WaitObserver#NONE} when nothing observes
	 */
	public WaitObserver observer() {
		return this.observer;
	}

	/**
	 * Sets the observer of this bucket's calls that wait or are refused (the starter's, when an
	 * observation registry is there).
	 *
	 * @param observer the observer
	 */
	public void observeWith(WaitObserver observer) {
		this.observer = observer;
	}

	/**
	 * Counts a grant, timed as a wait in {@code ratelimit.wait} when it waited, except in shadow mode
	 * (contract: a shadow bucket never holds a call back, and its wait timer is not recorded).
	 */
	@Override
	public void recordGranted(long waitedNanos) {
		this.counts.recordGranted(isShadow() ? 0 : waitedNanos);
	}

	/**
	 * Counts a call the interceptor let through without its limiter counting it (a call in shadow
	 * mode that would have waited).
	 *
	 * @param waitedNanos how long the call waited for its tokens
	 */
	public void countGranted(long waitedNanos) {
		this.counts.recordGranted(waitedNanos);
	}

	/**
	 * Takes back the count of a grant that was given back at once: the first try of a call on several
	 * buckets took from this one, then another had not enough, and the call claims and waits as usual
	 * (it is counted again when it is granted, or not at all when it is refused).
	 */
	public void ungrant() {
		this.ungranted.increment();
	}

	/**
	 * Takes back a {@code shadow-rejected} count: a bucket in shadow mode decided for a call that an
	 * enforcing bucket beside it then refused (its tokens were in flight), so the call was not let through.
	 */
	public void unrefuse() {
		this.unrefused.increment();
	}

	@Override
	public void recordRejected() {
		if (!DEFERRING.get()[0]) {
			this.counts.recordRejected();
		}
	}

	/**
	 * Counts a refusal the interceptor decided (with refusals deferred): {@code rejected}, or in
	 * shadow mode {@code shadow-rejected}, the call having run.
	 */
	public void refused() {
		if (isShadow()) {
			this.shadowRejected.increment();
		}
		else {
			this.counts.recordRejected();
		}
	}

	/**
	 * Counts a call decided in shadow mode that would have been refused, the call having run: the
	 * bucket's shadow mode, or the shadow mode of the plan of the call's key (contract revision 3, "Plans").
	 */
	public void refusedInShadow() {
		this.shadowRejected.increment();
	}

	/**
	 * Calls let through so far. Never goes down (a meter reads it as a counter): a grant taken back by
	 * {@link #ungrant()} may show for the instant between the two, and the count stays there until a
	 * new grant passes it.
	 */
	@Override
	public long granted() {
		long granted = this.counts.granted() - this.ungranted.sum();
		long shown = this.shownGranted;
		if (granted <= shown) {
			return shown;
		}
		this.shownGranted = granted; // racy: a reader that loses the race returns its own, higher value
		return granted;
	}

	@Override
	public long rejected() {
		return this.counts.rejected();
	}

	/**
	 * Calls the bucket would have refused in shadow mode, which ran. Never goes down (a meter reads it as
	 * a counter), as {@link #granted()}.
	 *
	 * @return the count since start
	 */
	public long shadowRejected() {
		long rejected = this.shadowRejected.sum() - this.unrefused.sum();
		long shown = this.shownShadowRejected;
		if (rejected <= shown) {
			return shown;
		}
		this.shownShadowRejected = rejected; // racy, as for granted()
		return rejected;
	}

	/**
	 * Whether the bucket is in shadow mode now: its own mode, or {@code ratelimit.mode: shadow}.
	 *
	 * @return {@code true} in shadow mode
	 */
	public boolean isShadow() {
		return this.allShadow || this.mode == BucketMode.SHADOW;
	}

	/**
	 * The mode in force, as the endpoint shows it.
	 *
	 * @return {@link BucketMode#SHADOW} when the bucket or {@code ratelimit.mode} says so
	 */
	public BucketMode mode() {
		return isShadow() ? BucketMode.SHADOW : BucketMode.ENFORCE;
	}

	/**
	 * Switches the bucket's own mode.
	 *
	 * @param mode the new mode
	 * @throws IllegalArgumentException when {@code ratelimit.mode: shadow} keeps every bucket in shadow
	 *         mode and {@code mode} is {@code enforce}: nothing is changed then
	 */
	public void mode(BucketMode mode) {
		checkMode(mode);
		Consumer<BucketMode> store = this.sharedModeStore;
		if (store != null) {
			store.accept(mode); // throws when the backend does not answer: nothing is changed then
		}
		this.mode = mode;
	}

	/**
	 * Shares the bucket's mode with the other instances through its backend: {@link #mode(BucketMode)}
	 * stores a switch with {@code store} (which throws, changing nothing, when the backend does not
	 * answer), and the backend tells every instance the mode in force with {@link #adoptShared}.
	 *
	 * @param store stores a switch for every instance
	 */
	public void shareModeThrough(Consumer<BucketMode> store) {
		this.sharedModeStore = store;
	}

	/**
	 * Takes on the mode the shared backend says is in force: one switched through the endpoint of any
	 * instance, or, when it holds none ({@code null}: none was switched, or it was dropped by a restart
	 * with another configuration), the bucket's own mode as configured here.
	 *
	 * @param shared the mode switched through an endpoint, or {@code null}
	 */
	public void adoptShared(@Nullable BucketMode shared) {
		this.mode = (shared != null) ? shared : this.configuredMode;
	}

	/**
	 * Checks that the bucket can be switched to a mode, changing nothing.
	 *
	 * @param mode the mode asked for
	 * @throws IllegalArgumentException as {@link #mode(BucketMode)} does
	 */
	public void checkMode(BucketMode mode) {
		if (this.allShadow && mode == BucketMode.ENFORCE) {
			throw new IllegalArgumentException("ratelimit.mode is shadow, which keeps every bucket in shadow mode"
					+ " whatever its own mode; set ratelimit.mode to enforce (the default) to enforce buckets");
		}
	}

	/**
	 * For the starter's interceptor: while on, refusals this thread's limiters record are not counted;
	 * the interceptor counts the call's one refusal itself.
	 *
	 * @param defer whether to defer
	 * @return whether recording was deferred before
	 */
	public static boolean defer(boolean defer) {
		boolean[] flag = DEFERRING.get();
		boolean before = flag[0];
		flag[0] = defer;
		return before;
	}
}
