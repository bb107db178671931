package dev.ratelimit.spring;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import java.util.function.Function;

import dev.ratelimit.core.RateLimiter;
import org.jspecify.annotations.Nullable;

/**
 * The buckets of one template's keys, for the starter's interceptor and endpoint (applications use
 * {@code @RateLimited(key = ...)}).
 *
 * <p>The buckets of one template's keys (contract revision 2, "Per-key buckets"): each distinct key
 * gets its own bucket, made full from the template on first use, in a map that never holds more
 * than {@code keys.max} of them.
 *
 * <h2>Invariants</h2>
 * <ol>
 * <li>K1, dropping changes nothing: a key's bucket is dropped only when it is
 * {@linkplain RateLimiter#isIdle() idle} (full, nothing in flight, nobody waiting), so the bucket
 * made again for that key is identical to it. Checked by {@code KeyedBucketsTests}.</li>
 * <li>K2, no call uses a dropped bucket: a call pins its key's entry for as long as it grabs; an
 * entry is retired by one compare-and-set from "no pin, epoch e" to "retired", after the idle check,
 * so a pin (which moves the epoch) between the check and the retirement makes it fail. A call that
 * finds its entry retired looks again and gets a new one. Tokens in flight and waiters outlive the
 * pin, but they make the bucket not idle (K1). A call with {@code refundIf} or {@code settle} keeps its
 * pin until it completes: its bucket may be full again while it runs, and dropping it then would send
 * the call's give-back or charge to the bucket the key has now, the overflow bucket when there is no
 * room ({@code KeyDroppedWhileRunningTests}).</li>
 * <li>K3, bounded: {@code size} is reserved before a bucket is made and given back when one is
 * dropped, so at most {@code max} keys have a bucket at once. A new key that finds no room drops
 * an idle bucket if the sweep finds one among the next few, and otherwise shares the overflow
 * bucket (counted).</li>
 * <li>K4, retunes reach every key: the template's generation moves with each retune; a key's bucket
 * made at an older generation takes the template's settings on its next use, and the retune itself
 * applies them to every live key at once. That covers the keys of this instance. A backend whose
 * buckets live outside the JVM keeps the retune with the template for every instance: on Redis it is
 * stored once per bucket ({@code <key-prefix>{<bucket>}:retuned}, until a restart with another
 * configuration), the overflow bucket reads it in each call, and each key's bucket on each instance
 * passes the settings in force, read at most 800 ms before the call; the keys' hashes keep no retune
 * and expire when full (see the {@code ratelimit-redis} README). So a key's bucket that this map
 * drops, or that another instance made, comes back with the retune, and the catch-up here only tells
 * such a bucket to follow its template.</li>
 * <li>K5, plans (contract revision 3, "Plans"): a bucket with plans gives each key the settings of the
 * plan its call names ({@link PlannedKey}); {@code null}, {@code ""} or a name that is not a plan gets
 * the template's. An entry remembers the plan it follows and the generation of that plan's settings; a
 * call that names another plan, or finds its plan retuned since, brings the bucket to the plan's settings
 * under the pin, before it takes its tokens: the rate first (the time that passed counts at the old rate),
 * then the limit (tokens above it are dropped), as a retune does. A retune of one plan moves that plan's
 * generation and applies its settings at once to every live key on it, and to no other. One map lookup
 * per call finds the plan's settings; a bucket without plans never looks. A key made for a plan starts
 * full at that plan's limit, as a key made after a retune does; the overflow bucket follows the
 * template. Checked by {@code KeyedBucketsModelTests} and {@code PlansTests}.</li>
 * <li>K6, a reset drops the keys (contract revision 3): every key's bucket and the overflow bucket are
 * reset ({@link RateLimiter#reset()}: full, nothing owed, waiters woken to claim again), then each that is
 * idle is retired and removed as the sweep does (K1, K2), giving its room back (K3). A key's bucket pinned
 * by a call, or with callers waiting or tokens in flight, is kept (full as far as its callers let it be)
 * and dropped by a later sweep once idle; a call never uses a dropped bucket. Checked by
 * {@code KeyedBucketsTests.aResetDropsEveryIdleKeyAndFillsTheOthers}.</li>
 * </ol>
 * No background thread: the sweep runs on the way, when a new key needs room and once every
 * {@value #SWEEP_EVERY} new keys otherwise, looking at {@value #SWEEP_STEP} entries at a time from
 * where it stopped.
 */
public final class KeyedBuckets {

	/** Entries the sweep looks at per step. */
	static final int SWEEP_STEP = 16;

	/** New keys between sweeps when there is room. */
	static final int SWEEP_EVERY = 64;

	private static final long USERS = (1L << 20) - 1;

	private static final long EPOCH = 1L << 20;

	private static final long RETIRED = -1;

	private static final VarHandle STATE;

	static {
		try {
			STATE = MethodHandles.lookup().findVarHandle(Entry.class, "state", long.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	private final int max;

	private final Maker maker;

	/** The plans by name (K5), or {@code null} for a bucket without plans (its calls never look one up). */
	private final @Nullable Map<String, Plan> plans;

	private final ConcurrentHashMap<Object, Entry> entries = new ConcurrentHashMap<>();

	private final AtomicInteger size = new AtomicInteger();

	private final Entry overflow;

	private final LongAdder overflowCalls = new LongAdder();

	private final AtomicInteger newKeys = new AtomicInteger();

	private final ReentrantLock sweeping = new ReentrantLock();

	private @Nullable Iterator<Entry> cursor;

	private volatile int generation;

	/**
	 * @param max the most keys with a bucket of their own, {@code >= 1}
	 * @param factory makes a key's bucket (and, for a {@code null} key, the overflow bucket) from the
	 *        template as it is now
	 * @param retune brings a bucket made at an older generation to the template's settings
	 */
	KeyedBuckets(int max, Function<@Nullable Object, RateLimiter> factory, Consumer<RateLimiter> retune) {
		this(max, new Maker() {

			@Override
			public RateLimiter make(@Nullable String plan, @Nullable Object key) {
				return factory.apply(key);
			}

			@Override
			public void follow(@Nullable String plan, RateLimiter bucket) {
				retune.accept(bucket);
			}
		}, Map.of());
	}

	/**
	 * Per-key buckets whose keys may follow plans (K5).
	 *
	 * @param max the most keys with a bucket of their own, {@code >= 1}
	 * @param maker makes a key's bucket with a plan's settings, and brings a bucket to them
	 * @param plans each plan's max-wait ({@code null} when the plan leaves it to the template), by plan
	 *        name; empty for a bucket without plans
	 */
	KeyedBuckets(int max, Maker maker, Map<String, @Nullable Duration> plans) {
		this.max = max;
		this.maker = maker;
		if (plans.isEmpty()) {
			this.plans = null;
		}
		else {
			Map<String, Plan> byName = new HashMap<>();
			plans.forEach((name, maxWait) -> byName.put(name, new Plan(name, maxWait)));
			this.plans = byName;
		}
		this.overflow = new Entry(null, maker.make(null, null), 0, null);
	}

	/**
	 * Makes the buckets of keys, and brings them to the settings of a plan (K4, K5).
	 */
	interface Maker {

		/**
		 * Makes a key's bucket, full, with the settings in force of a plan.
		 *
		 * @param plan the plan, or {@code null} for the template
		 * @param key the key, or {@code null} for the overflow bucket
		 * @return the bucket
		 */
		RateLimiter make(@Nullable String plan, @Nullable Object key);

		/**
		 * Brings a bucket to the settings in force of a plan, as a retune does: the rate (the time that
		 * passed counted at the old one), then the limit.
		 *
		 * @param plan the plan, or {@code null} for the template
		 * @param bucket the bucket
		 */
		void follow(@Nullable String plan, RateLimiter bucket);
	}

	/** One plan of the bucket: its name, the generation of its settings (K5), its max-wait. */
	static final class Plan {

		final String name;

		final @Nullable Duration maxWait;

		volatile int generation;

		Plan(String name, @Nullable Duration maxWait) {
			this.name = name;
			this.maxWait = maxWait;
		}
	}

	/**
	 * Whether the keys of this bucket follow plans.
	 *
	 * @return {@code true} for a bucket with plans
	 */
	public boolean hasPlans() {
		return this.plans != null;
	}

	/**
	 * Pins the bucket of {@code key} for a call's grab: made on first use, or the overflow bucket when
	 * there is no room (then the call is counted in {@code ratelimit.keys.overflow}). {@link Entry#unpin()}
	 * when the grab is done.
	 *
	 * @param key the key's value, not {@code null}
	 * @return the pinned entry
	 */
	public Entry pin(Object key) {
		return pin(key, true);
	}

	/**
	 * Pins the bucket of {@code key}, as {@link #pin(Object)} does.
	 *
	 * @param key the key's value, not {@code null}
	 * @param count whether a pin of the overflow bucket counts a call (a caller that pins several times
	 *        for one call counts it once, itself, with {@link #countOverflow()})
	 * @return the pinned entry
	 */
	public Entry pin(Object key, boolean count) {
		if (this.plans != null) {
			return pinPlanned(key, count);
		}
		for (;;) {
			Entry entry = this.entries.get(key);
			if (entry == null) {
				entry = create(key, null);
				if (entry == null) {
					if (count) {
						this.overflowCalls.increment();
					}
					this.overflow.pin(); // never retired: always succeeds
					return this.overflow;
				}
			}
			if (entry.pin()) {
				if (entry.generation != this.generation) {
					entry.catchUp();
				}
				return entry;
			}
			// retired between the lookup and the pin (K2): whoever removes it gives its room back; look again
			if (this.entries.remove(key, entry)) {
				this.size.decrementAndGet();
			}
		}
	}

	/**
	 * {@link #pin(Object, boolean)} for a bucket with plans (K5): the plan's settings are looked up once,
	 * and the key's bucket brought to them under the pin, before the call takes its tokens.
	 */
	private Entry pinPlanned(Object given, boolean count) {
		Object key = PlannedKey.keyOf(given);
		Plan plan = planOf(given);
		for (;;) {
			Entry entry = this.entries.get(key);
			if (entry == null) {
				entry = create(key, plan);
				if (entry == null) {
					if (count) {
						this.overflowCalls.increment();
					}
					this.overflow.pin(); // never retired: always succeeds; follows the template
					return this.overflow;
				}
			}
			if (entry.pin()) {
				if (entry.plan != plan || entry.generation != generationOf(plan)) {
					entry.follow(plan);
				}
				return entry;
			}
			if (this.entries.remove(key, entry)) {
				this.size.decrementAndGet();
			}
		}
	}

	/** The plan a call names, or {@code null} (the template) for none, {@code ""} or one not configured. */
	private @Nullable Plan planOf(Object given) {
		if (given instanceof PlannedKey planned && planned.plan() != null) {
			return this.plans.get(planned.plan()); // the one lookup of a call (K5)
		}
		return null;
	}

	private int generationOf(@Nullable Plan plan) {
		return (plan != null) ? plan.generation : this.generation;
	}

	private @Nullable Entry create(Object key, @Nullable Plan plan) {
		if (!reserve()) {
			if (!sweep(true) || !reserve()) {
				return null;
			}
		}
		else if (this.newKeys.incrementAndGet() % SWEEP_EVERY == 0) {
			sweep(false);
		}
		// the generation is read before the settings (K4): a retune in between is caught up on first use
		int generation = generationOf(plan);
		Entry fresh = new Entry(key, this.maker.make((plan != null) ? plan.name : null, key), generation, plan);
		Entry existing = this.entries.putIfAbsent(key, fresh);
		if (existing != null) {
			this.size.decrementAndGet();
			return existing;
		}
		return fresh;
	}

	private boolean reserve() {
		for (;;) {
			int n = this.size.get();
			if (n >= this.max) {
				return false;
			}
			if (this.size.compareAndSet(n, n + 1)) {
				return true;
			}
		}
	}

	/**
	 * Looks at the next few entries and drops the idle ones (K1, K2).
	 *
	 * @param untilOne stop at the first one dropped (a new key waits for room)
	 * @return whether one was dropped
	 */
	private boolean sweep(boolean untilOne) {
		if (untilOne) {
			this.sweeping.lock();
		}
		else if (!this.sweeping.tryLock()) {
			return false;
		}
		try {
			boolean dropped = false;
			for (int i = 0; i < SWEEP_STEP; i++) {
				if (this.cursor == null || !this.cursor.hasNext()) {
					this.cursor = this.entries.values().iterator();
					if (!this.cursor.hasNext()) {
						return dropped;
					}
				}
				Entry entry = this.cursor.next();
				if (entry.retireIfIdle() && this.entries.remove(entry.key, entry)) {
					this.size.decrementAndGet();
					dropped = true;
					if (untilOne) {
						return true;
					}
				}
			}
			return dropped;
		}
		finally {
			this.sweeping.unlock();
		}
	}

	/**
	 * Applies the template's new settings to every key's bucket and the overflow bucket (K4).
	 */
	void retuned() {
		this.generation++;
		this.overflow.catchUp();
		for (Entry entry : this.entries.values()) {
			if (entry.plan == null) {
				entry.catchUp();
			}
		}
	}

	/**
	 * Applies one plan's new settings to every key's bucket on that plan, and to no other (K5).
	 *
	 * @param plan the plan retuned
	 */
	void retuned(String plan) {
		Plan retuned = (this.plans != null) ? this.plans.get(plan) : null;
		if (retuned == null) {
			return;
		}
		retuned.generation++;
		for (Entry entry : this.entries.values()) {
			if (entry.plan == retuned) {
				entry.catchUp();
			}
		}
	}

	/**
	 * Resets every key's bucket and the overflow bucket, and drops the keys' buckets that are idle after it (K6).
	 */
	public void reset() {
		this.overflow.limiter.reset();
		for (Entry entry : this.entries.values()) {
			entry.limiter.reset();
			if (entry.retireIfIdle() && this.entries.remove(entry.key, entry)) {
				this.size.decrementAndGet();
			}
		}
	}

	/** @return keys with a bucket of their own now */
	public int size() {
		return this.entries.size();
	}

	/** @return calls that went to the overflow bucket */
	public long overflowCalls() {
		return this.overflowCalls.sum();
	}

	/**
	 * Counts a call that went to the overflow bucket ({@code ratelimit.keys.overflow}).
	 */
	public void countOverflow() {
		this.overflowCalls.increment();
	}

	/**
	 * Whether a limiter is the overflow bucket, shared by keys without room (never dropped).
	 *
	 * @param limiter a limiter from an entry
	 * @return {@code true} for the overflow bucket
	 */
	public boolean isOverflow(RateLimiter limiter) {
		return limiter == this.overflow.limiter;
	}

	/**
	 * Pins the entry of {@code key} only if its bucket is still {@code limiter} (the bucket a call took
	 * from has not been dropped since); never makes a bucket.
	 *
	 * @param key the key's value
	 * @param limiter the bucket the call took from
	 * @return the pinned entry, or {@code null} when the key's bucket is another now (or none)
	 */
	public @Nullable Entry pinIfCurrent(Object key, RateLimiter limiter) {
		if (isOverflow(limiter)) {
			this.overflow.pin();
			return this.overflow;
		}
		Entry entry = this.entries.get((this.plans != null) ? PlannedKey.keyOf(key) : key);
		if (entry == null || entry.limiter != limiter || !entry.pin()) {
			return null;
		}
		return entry;
	}

	/**
	 * The bucket a call with {@code key} takes from now, for reading its level: the key's own bucket
	 * when it has one, otherwise the overflow bucket. Read-only: it makes no bucket, pins nothing and
	 * catches no retune up (a bucket just dropped was full, as the one made again would be: K1).
	 *
	 * @param key the key's value, not {@code null}
	 * @return the key's bucket or the overflow bucket
	 */
	public RateLimiter bucketOf(Object key) {
		Entry entry = this.entries.get((this.plans != null) ? PlannedKey.keyOf(key) : key);
		return (entry != null && entry.state != RETIRED) ? entry.limiter : this.overflow.limiter;
	}

	/**
	 * The bucket of one key, if it has one now.
	 *
	 * @param key the key's value as a string
	 * @return its bucket, or {@code null}
	 */
	public @Nullable RateLimiter find(String key) {
		Entry entry = findEntry(key);
		return (entry != null) ? entry.limiter : null;
	}

	/**
	 * The entry of one key, if it has a bucket now: its bucket and its plan.
	 *
	 * @param key the key's value as a string
	 * @return its entry, or {@code null}
	 */
	public @Nullable Entry findEntry(String key) {
		for (Entry entry : this.entries.values()) {
			if (String.valueOf(entry.key).equals(key) && entry.state != RETIRED) {
				return entry;
			}
		}
		return null;
	}

	/** A key's bucket and its pin state: users in the low 20 bits, an epoch above them. */
	public final class Entry {

		final @Nullable Object key;

		final RateLimiter limiter;

		/** Users and epoch, or {@link #RETIRED}; a field of the entry itself (no second object to reach on a pin). */
		volatile long state;

		/** The generation of the settings it follows: the template's, or its plan's (K4, K5). */
		volatile int generation;

		/** The plan it follows, {@code null} for the template (K5). */
		volatile @Nullable Plan plan;

		Entry(@Nullable Object key, RateLimiter limiter, int generation, @Nullable Plan plan) {
			this.key = key;
			this.limiter = limiter;
			this.generation = generation;
			this.plan = plan;
		}

		/**
		 * The plan whose settings this key's bucket has (contract revision 3, "Plans").
		 *
		 * @return the plan's name, or {@code null} for the template's settings (and the overflow bucket)
		 */
		public @Nullable String plan() {
			Plan current = this.plan;
			return (current != null) ? current.name : null;
		}

		/**
		 * The longest a call on this key's bucket waits, when the call's own front end does not say: its
		 * plan's {@code max-wait} when the plan sets one, else {@code fallback} (the bucket's).
		 *
		 * @param fallback the bucket's max-wait
		 * @return the max-wait
		 */
		public Duration maxWait(Duration fallback) {
			Plan current = this.plan;
			return (current != null && current.maxWait != null) ? current.maxWait : fallback;
		}

		/** The bucket this key's calls use: theirs, or the overflow bucket shared by keys without room. */
		public RateLimiter limiter() {
			return this.limiter;
		}

		boolean pin() {
			for (;;) {
				long s = this.state;
				if (s == RETIRED) {
					return false;
				}
				long next = ((s + EPOCH) & ~USERS & Long.MAX_VALUE) | ((s & USERS) + 1);
				if (STATE.compareAndSet(this, s, next)) {
					return true;
				}
			}
		}

		/** Ends the pin taken by {@link KeyedBuckets#pin}: the grab is done. */
		public void unpin() {
			STATE.getAndAdd(this, -1L);
		}

		boolean retireIfIdle() {
			long s = this.state;
			if (s == RETIRED || (s & USERS) != 0 || !this.limiter.isIdle()) {
				return false;
			}
			return STATE.compareAndSet(this, s, RETIRED);
		}

		synchronized void catchUp() {
			Plan following = this.plan;
			int current = generationOf(following);
			if (this.generation != current) {
				KeyedBuckets.this.maker.follow((following != null) ? following.name : null, this.limiter);
				this.generation = current;
			}
		}

		/**
		 * Brings the bucket to the settings in force of {@code next} (K5): a plan change, or a retune of
		 * its plan not yet caught up. The generation is read before the settings, so a retune in between
		 * is caught up by the next call.
		 */
		synchronized void follow(@Nullable Plan next) {
			int current = generationOf(next);
			if (this.plan != next || this.generation != current) {
				KeyedBuckets.this.maker.follow((next != null) ? next.name : null, this.limiter);
				this.plan = next;
				this.generation = current;
			}
		}
	}
}
