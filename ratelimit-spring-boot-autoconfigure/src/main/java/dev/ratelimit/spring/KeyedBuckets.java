package dev.ratelimit.spring;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Iterator;
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
 * <li>K5, a reset drops the keys (contract revision 3): every key's bucket and the overflow bucket are
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

	private final Function<@Nullable Object, RateLimiter> factory;

	private final Consumer<RateLimiter> retune;

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
		this.max = max;
		this.factory = factory;
		this.retune = retune;
		this.overflow = new Entry(null, factory.apply(null), 0);
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
		for (;;) {
			Entry entry = this.entries.get(key);
			if (entry == null) {
				entry = create(key);
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

	private @Nullable Entry create(Object key) {
		if (!reserve()) {
			if (!sweep(true) || !reserve()) {
				return null;
			}
		}
		else if (this.newKeys.incrementAndGet() % SWEEP_EVERY == 0) {
			sweep(false);
		}
		// the generation is read before the template (K4): a retune in between is caught up on first use
		int generation = this.generation;
		Entry fresh = new Entry(key, this.factory.apply(key), generation);
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
			entry.catchUp();
		}
	}

	/**
	 * Resets every key's bucket and the overflow bucket, and drops the keys' buckets that are idle after it (K5).
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
		Entry entry = this.entries.get(key);
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
		Entry entry = this.entries.get(key);
		return (entry != null && entry.state != RETIRED) ? entry.limiter : this.overflow.limiter;
	}

	/**
	 * The bucket of one key, if it has one now.
	 *
	 * @param key the key's value as a string
	 * @return its bucket, or {@code null}
	 */
	public @Nullable RateLimiter find(String key) {
		for (Entry entry : this.entries.values()) {
			if (String.valueOf(entry.key).equals(key) && entry.state != RETIRED) {
				return entry.limiter;
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

		volatile int generation;

		Entry(@Nullable Object key, RateLimiter limiter, int generation) {
			this.key = key;
			this.limiter = limiter;
			this.generation = generation;
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
			int current = KeyedBuckets.this.generation;
			if (this.generation != current) {
				KeyedBuckets.this.retune.accept(this.limiter);
				this.generation = current;
			}
		}
	}
}
