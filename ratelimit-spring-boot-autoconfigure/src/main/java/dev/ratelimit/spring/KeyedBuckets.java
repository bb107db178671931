package dev.ratelimit.spring;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.LongSupplier;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import org.jspecify.annotations.Nullable;

/**
 * The buckets of one template's keys, for the starter's interceptor and endpoint (applications use
 * {@code @RateLimited(key = ...)}).
 *
 * <p>The buckets of one template's keys (contract revision 3, "Per-key buckets" and "per-key buckets
 * under attack"): each distinct key gets its own bucket, made full from the template on first use, in
 * a store bounded in bytes ({@code keys.memory}). A key longer than {@value #KEY_CHARS} characters is
 * held by its SHA-256 digest (128 bits of it), so a key of a megabyte costs what a short one does.
 */
public final class KeyedBuckets {

	/*
	 * Design note.
	 *
	 * State: a map from a key as stored (the key itself when short, its Digest when longer than
	 * KEY_CHARS characters) to an Entry (the key's bucket and its pin state); the bytes the entries cost
	 * (Entry.bytes each: ENTRY_BYTES plus the key's own characters); and, made on the first forgetting,
	 * the Debts table: AtomicLongArray cells of "full again at" instants (clock nanos minus the origin,
	 * 0 = nothing owed), indexed by PROBES hashes of the stored key (seeded per store, so that nobody can
	 * aim at another key's cells), merged by max.
	 *
	 * Invariants:
	 *
	 * K1, dropping a full bucket changes nothing: a key's bucket is dropped losslessly only when it is
	 * idle (full, nothing in flight, nobody waiting), so the bucket made again for that key is identical
	 * to it. KeyedBucketsTests.aDroppedBucketComesBackFullAndIdenticalToTheOneDropped.
	 *
	 * K2, no call uses a dropped bucket: a call pins its key's entry for as long as it grabs; an entry is
	 * retired by one compare-and-set from "no pin, epoch e" to "retired", after the check (idle, or
	 * forgettable: K5), so a pin (which moves the epoch) between the check and the retirement makes it
	 * fail. A call that finds its entry retired looks again and gets a new one. Tokens in flight and
	 * waiters outlive the pin, but they make the bucket neither idle nor forgettable. A call with
	 * refundIf or settle keeps its pin until it completes (KeyDroppedWhileRunningTests). jcstress
	 * PinRacingDrop.
	 *
	 * K3, bounded in bytes: an entry's bytes are reserved before its bucket is made and given back when
	 * it is dropped, so the entries cost at most keys.memory (at most MAX_MEMORY), whatever keys callers
	 * send; the one exception is K6. A key costs ENTRY_BYTES plus 2 bytes per character of a key of up to
	 * KEY_CHARS characters, or DIGEST_BYTES for a longer one (measured: KeyedBucketsTests
	 * oneMegabyteKeysCostWhatShortOnesDoAndTheHeapStaysWithinTheBound). An explicit keys.max bounds the
	 * number of keys too, as in revision 2 (below).
	 *
	 * K4, retunes reach every key as of the retune's instant: the template's generation moves with each
	 * retune; the retune applies the new settings to every live key at once (its bucket counts the time
	 * before at the old settings, the time after at the new ones, however late it is next used), a key
	 * made later starts full at the new limit (BucketDefinition: a key's bucket starts full), and the
	 * Debts are rescaled so that each forgotten key still owes the tokens it owed. A key made while the
	 * retune runs is caught up on first use. KeyedBucketsTests.retuningTheTemplateChangesEveryKeyAndTheOnesToCome,
	 * aRetuneCountsForEveryKeyFromItsInstantHoweverLateTheKeyIsNextUsed. On Redis the retune is kept with
	 * the template for every instance: stored once per bucket ({@code <key-prefix>{<bucket>}:retuned}),
	 * and each key's bucket on each instance passes the settings in force, read at most 800 ms before the
	 * call (see the ratelimit-redis README).
	 *
	 * K5, forgetting a bucket that owes tokens keeps what it owes: when the memory is full and the sweep
	 * finds no idle bucket among the entries it looks at, it forgets the forgettable one (no pin, nobody
	 * waiting, nothing in flight, nothing claimed ahead) that is full soonest: first it records the
	 * instant the bucket is full again (now + untilFull, rounded up to a nanosecond) in the Debts by max
	 * in each of its PROBES cells, then retires it (K2). A bucket made for a key reads the least of its
	 * cells and, when that instant is ahead, is charged the tokens it would still miss
	 * (ceil(rate * (fullAt - now)), at most limit): it has at most the tokens the forgotten one would
	 * have had then, and gains them no faster, so limit + rate * w holds for every key across any number
	 * of drops. Only the buckets of this JVM need it (backend local); a Redis key's hash lives in Redis,
	 * so forgetting its local object loses nothing. KeyedBucketsModelTests.sprayersNeverPushAKeyOverItsBound.
	 *
	 * K6, no lock-out through the bound: no bucket is shared by keys (there is no overflow bucket unless
	 * keys.max is set). Room for a new key is made from idle buckets first, then from forgotten ones
	 * (K5), which cost their key nothing but the rounding above; a key within its rate loses tokens only
	 * when each of its PROBES cells holds a later instant of another key (a collision: conservative, never
	 * generous). With n forgotten keys owing at once and m cells, that chance is about
	 * (1 - e^(-PROBES n / m))^PROBES: it grows smoothly with n, no cliff (KeyedBucketsModelTests counts the
	 * refusals of well-behaved keys among sprayers). At the default memory a store holds 7/8 DEFAULT_MEMORY
	 * / (ENTRY_BYTES + 2 * KEY_CHARS), over 80,000 keys of KEY_CHARS characters, exactly (KeyedBucketsTests
	 * aKeyCostsAtMostItsStatedBytesAndTheDefaultMemoryHoldsItsKeysExactly); the debts' 1M cells then hold
	 * what the keys beyond owe. NOT YET KEPT: the contract's "100,000 sprayed keys cost a caller within
	 * its rate fewer than one refusal in a million" needs the store to hold well over 100,000 keys
	 * exactly, which at 64 MB needs a lighter key's bucket than the rover bucket (642 bytes measured);
	 * until then, beyond some 80,000 keys owing at once, the collision chance above applies.
	 * When every entry the sweep can find is busy (pinned, waited on,
	 * or holding tokens in flight), the new key gets its own bucket beyond the bound: busy buckets are
	 * bounded by the calls in progress, not by the keys callers send.
	 *
	 * Revision 2's keys.max, when set: at most that many keys have a bucket; when that many are kept and
	 * none is idle, a new key shares the overflow bucket (counted by ratelimit.keys.overflow) until one
	 * is. That shared bucket is what revision 3 warns about, so it exists only with keys.max.
	 *
	 * No background thread: the sweep runs on the way, when a new key needs room and once every
	 * SWEEP_EVERY new keys otherwise, looking at SWEEP_STEP entries at a time from where it stopped.
	 */

	/** Entries the sweep looks at per step. */
	static final int SWEEP_STEP = 16;

	/** New keys between sweeps when there is room. */
	static final int SWEEP_EVERY = 64;

	/** Steps a new key's sweep takes at most before it forgets a bucket or goes beyond the bound. */
	static final int SWEEP_STEPS = 4;

	/** The longest key kept as it is, in characters; a longer one is held by its digest. */
	public static final int KEY_CHARS = 64;

	/**
	 * What one key's entry costs besides its characters: the map's node and table slot, the entry, the
	 * rover bucket and the key's string header (measured on a 64-bit JVM with compressed references: 642
	 * bytes for a key of 64 one-byte characters; rounded up).
	 */
	public static final int ENTRY_BYTES = 580;

	/** What a digested key costs (the digest object). */
	static final int DIGEST_BYTES = 32;

	/**
	 * The default {@code keys.memory}: 64 MB, of which seven eighths hold keys exactly: over 80,000 keys
	 * of {@value #KEY_CHARS} two-byte characters, over 95,000 of 8 characters.
	 */
	public static final long DEFAULT_MEMORY = 64L << 20;

	/** The largest {@code keys.memory} accepted. */
	public static final long MAX_MEMORY = 64L << 20;

	/** The fewest cells of the debts table (512 KB), so that a small store's collisions stay rare. */
	static final long MIN_CELLS = 1 << 16;

	/** Hashes of a key into the debts table. */
	static final int PROBES = 4;

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

	/** The bytes the entries may take: keys.memory less the debts' eighth. */
	private final long memory;

	private final long tableCells;

	private final boolean remember;

	private final LongSupplier clock;

	private final Function<@Nullable Object, RateLimiter> factory;

	private final Consumer<RateLimiter> retune;

	private final ConcurrentHashMap<Object, Entry> entries = new ConcurrentHashMap<>();

	private final AtomicInteger size = new AtomicInteger();

	private final AtomicLong bytes = new AtomicLong();

	private final @Nullable Entry overflow;

	private final LongAdder overflowCalls = new LongAdder();

	private final AtomicInteger newKeys = new AtomicInteger();

	private final ReentrantLock sweeping = new ReentrantLock();

	private final long seed = new SecureRandom().nextLong();

	private volatile @Nullable Debts debts;

	private @Nullable Iterator<Entry> cursor;

	private volatile int generation;

	/**
	 * A store bounded by {@code max} keys only (revision 2), at the default memory, whose forgotten
	 * buckets are not remembered; for tests of the count bound.
	 *
	 * @param max the most keys with a bucket of their own, {@code >= 1}
	 * @param factory makes a key's bucket (and, for a {@code null} key, the overflow bucket) from the
	 *        template as it is now
	 * @param retune brings a bucket made at an older generation to the template's settings
	 */
	KeyedBuckets(int max, Function<@Nullable Object, RateLimiter> factory, Consumer<RateLimiter> retune) {
		this(max, DEFAULT_MEMORY, true, System::nanoTime, factory, retune);
	}

	/**
	 * @param max the most keys with a bucket of their own, {@code >= 1}, or {@code 0} for no bound but
	 *        the memory (then there is no overflow bucket)
	 * @param memory the most bytes the keys' entries take, {@code 1..}{@value #MAX_MEMORY}
	 * @param remember whether a forgotten bucket's debt is remembered here (K5: buckets of this JVM)
	 * @param clock the template's clock, in nanoseconds
	 * @param factory makes a key's bucket (and, for a {@code null} key, the overflow bucket) from the
	 *        template as it is now; it receives the key as stored (a long key's {@link Digest})
	 * @param retune brings a bucket made at an older generation to the template's settings
	 */
	KeyedBuckets(int max, long memory, boolean remember, LongSupplier clock,
			Function<@Nullable Object, RateLimiter> factory, Consumer<RateLimiter> retune) {
		this.max = (max > 0) ? max : Integer.MAX_VALUE;
		this.memory = memory - memory / 8; // an eighth for the debts (K5)
		this.tableCells = Math.max(memory / 8 / Long.BYTES, MIN_CELLS);
		this.remember = remember;
		this.clock = clock;
		this.factory = factory;
		this.retune = retune;
		this.overflow = (max > 0) ? new Entry(null, factory.apply(null), 0, 0) : null;
	}

	/**
	 * The key as this store holds it: a key of up to {@value #KEY_CHARS} characters as it is (numbers,
	 * booleans, characters, enums and UUIDs as they are; other objects by their text), a longer one by
	 * its {@link Digest}.
	 *
	 * @param key the key's value, not {@code null}
	 * @return the key as stored
	 */
	public static Object stored(Object key) {
		if (key instanceof String s) {
			return (s.length() <= KEY_CHARS) ? s : Digest.of(s);
		}
		if (key instanceof Long || key instanceof Integer || key instanceof Short || key instanceof Byte
				|| key instanceof Boolean || key instanceof Character || key instanceof Enum<?> || key instanceof UUID
				|| key instanceof Digest) {
			return key;
		}
		return stored(String.valueOf(key));
	}

	/**
	 * Pins the bucket of {@code key} for a call's grab: made on first use (or, with {@code keys.max}, the
	 * overflow bucket when there is no room; then the call is counted in {@code ratelimit.keys.overflow}).
	 * {@link Entry#unpin()} when the grab is done.
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
		Object k = stored(key);
		for (;;) {
			Entry entry = this.entries.get(k);
			if (entry == null) {
				entry = create(k);
				if (entry == null) {
					Entry shared = this.overflow;
					if (shared == null) {
						continue; // cannot happen: without keys.max a new key always gets room (K6)
					}
					if (count) {
						this.overflowCalls.increment();
					}
					shared.pin(); // never retired: always succeeds
					return shared;
				}
			}
			if (entry.pin()) {
				if (entry.generation != this.generation) {
					entry.catchUp();
				}
				return entry;
			}
			// retired between the lookup and the pin (K2): whoever removes it gives its room back; look again
			removeRetired(entry);
		}
	}

	private void removeRetired(Entry entry) {
		if (this.entries.remove(entry.key, entry)) {
			this.size.decrementAndGet();
			this.bytes.addAndGet(-entry.bytes);
		}
	}

	private @Nullable Entry create(Object key) {
		long cost = bytesOf(key);
		if (!reserve(cost)) {
			if (!makeRoom(cost)) {
				return null;
			}
		}
		else if (this.newKeys.incrementAndGet() % SWEEP_EVERY == 0) {
			sweep(false, false);
		}
		// the generation is read before the template (K4): a retune in between is caught up on first use
		int generation = this.generation;
		RateLimiter bucket = this.factory.apply(key);
		Entry fresh = new Entry(key, bucket, generation, cost);
		Debts owed = this.debts;
		if (owed != null) {
			owed.chargeOwed(key, bucket); // K5: before anyone can take from it
		}
		Entry existing = this.entries.putIfAbsent(key, fresh);
		if (existing != null) {
			this.size.decrementAndGet();
			this.bytes.addAndGet(-cost);
			return existing;
		}
		return fresh;
	}

	/** The bytes an entry for {@code key} (as stored) costs (K3). */
	static long bytesOf(Object key) {
		if (key instanceof String s) {
			return ENTRY_BYTES + 2L * s.length();
		}
		return ENTRY_BYTES + DIGEST_BYTES;
	}

	private boolean reserve(long cost) {
		for (;;) {
			int n = this.size.get();
			if (n >= this.max) {
				return false;
			}
			long b = this.bytes.get();
			if (b + cost > this.memory) {
				return false;
			}
			if (this.size.compareAndSet(n, n + 1)) {
				if (this.bytes.compareAndSet(b, b + cost)) {
					return true;
				}
				this.size.decrementAndGet();
			}
		}
	}

	/**
	 * Makes room for a new key (K3, K6): idle buckets first, then, when the memory is what is full, the
	 * forgettable bucket that is full soonest (K5); when neither is found, with {@code keys.max} there is no
	 * room (the overflow bucket), and without it the key gets its room beyond the bound.
	 */
	private boolean makeRoom(long cost) {
		this.sweeping.lock();
		try {
			for (int step = 0; step < SWEEP_STEPS; step++) {
				if (sweep(true, true) && reserve(cost)) {
					return true;
				}
				if (reserve(cost)) {
					return true; // room given back meanwhile
				}
				if (this.size.get() >= this.max) {
					continue; // revision 2's bound: only idle buckets make room
				}
				if (forgetOne() && reserve(cost)) {
					return true;
				}
			}
			if (this.overflow != null) {
				return false;
			}
			// every bucket found is busy: beyond the bound, for as long as calls are in progress (K6)
			this.size.incrementAndGet();
			this.bytes.addAndGet(cost);
			return true;
		}
		finally {
			this.sweeping.unlock();
		}
	}

	/**
	 * Looks at the next few entries and drops the idle ones (K1, K2).
	 *
	 * @param untilOne stop at the first one dropped (a new key waits for room)
	 * @param locked whether the caller holds the sweeping lock
	 * @return whether one was dropped
	 */
	private boolean sweep(boolean untilOne, boolean locked) {
		if (!locked && !this.sweeping.tryLock()) {
			return false;
		}
		try {
			boolean dropped = false;
			for (int i = 0; i < SWEEP_STEP; i++) {
				Entry entry = next();
				if (entry == null) {
					return dropped;
				}
				if (entry.retireIfIdle()) {
					removeRetired(entry);
					dropped = true;
					if (untilOne) {
						return true;
					}
				}
			}
			return dropped;
		}
		finally {
			if (!locked) {
				this.sweeping.unlock();
			}
		}
	}

	/** The next entry of the sweep (under the sweeping lock), or {@code null} when there is none. */
	private @Nullable Entry next() {
		if (this.cursor == null || !this.cursor.hasNext()) {
			this.cursor = this.entries.values().iterator();
			if (!this.cursor.hasNext()) {
				return null;
			}
		}
		return this.cursor.next();
	}

	/**
	 * Forgets, among the next few entries, the forgettable one that is full soonest, remembering what it
	 * owes (K5). Under the sweeping lock.
	 */
	private boolean forgetOne() {
		Entry best = null;
		long bestUntilFull = Long.MAX_VALUE;
		for (int i = 0; i < SWEEP_STEP; i++) {
			Entry entry = next();
			if (entry == null) {
				break;
			}
			long untilFull = entry.untilFullIfForgettable();
			if (untilFull >= 0 && untilFull < bestUntilFull) {
				best = entry;
				bestUntilFull = untilFull;
			}
		}
		if (best == null) {
			return false;
		}
		long s = best.state;
		if (s == RETIRED || (s & USERS) != 0) {
			return false;
		}
		// read again after the state: a pin after this read moves the epoch, and the retirement fails (K2)
		long untilFull = best.untilFullIfForgettable();
		if (untilFull < 0) {
			return false;
		}
		if (untilFull > 0 && this.remember) {
			debts().record(best.key, this.clock.getAsLong() + untilFull); // before the retirement (K5)
		}
		if (!STATE.compareAndSet(best, s, RETIRED)) {
			return false;
		}
		removeRetired(best);
		return true;
	}

	private Debts debts() {
		Debts table = this.debts;
		if (table == null) {
			synchronized (this) {
				table = this.debts;
				if (table == null) {
					table = new Debts(this.tableCells, this.seed, this.clock);
					this.debts = table;
				}
			}
		}
		return table;
	}

	/**
	 * Applies the template's new settings to every key's bucket and the overflow bucket, and rescales what
	 * forgotten keys owe to the new rate (K4).
	 *
	 * @param oldNanosPerToken the nanoseconds one token took before the retune
	 * @param newNanosPerToken the nanoseconds one token takes now
	 */
	void retuned(double oldNanosPerToken, double newNanosPerToken) {
		retuned();
		Debts table = this.debts;
		if (table != null && oldNanosPerToken != newNanosPerToken) {
			table.rescale(newNanosPerToken / oldNanosPerToken);
		}
	}

	/**
	 * Applies the template's new settings to every key's bucket and the overflow bucket (K4).
	 */
	void retuned() {
		this.generation++;
		if (this.overflow != null) {
			this.overflow.catchUp();
		}
		for (Entry entry : this.entries.values()) {
			entry.catchUp();
		}
	}

	/** @return keys with a bucket of their own now */
	public int size() {
		return this.entries.size();
	}

	/**
	 * How full the store is: the share of {@code keys.memory} its entries take, 0 to 1 (the endpoint's
	 * {@code keysLoad}).
	 *
	 * @return the load, {@code 0..1}
	 */
	public double load() {
		return Math.min(1.0, Math.max(0, this.bytes.get()) / (double) this.memory);
	}

	/** @return calls that went to the overflow bucket (only with {@code keys.max}) */
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
	 * Whether a limiter is the overflow bucket, shared by keys without room (only with {@code keys.max};
	 * never dropped).
	 *
	 * @param limiter a limiter from an entry
	 * @return {@code true} for the overflow bucket
	 */
	public boolean isOverflow(RateLimiter limiter) {
		Entry shared = this.overflow;
		return shared != null && limiter == shared.limiter;
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
		Entry shared = this.overflow;
		if (shared != null && limiter == shared.limiter) {
			shared.pin();
			return shared;
		}
		Entry entry = this.entries.get(stored(key));
		if (entry == null || entry.limiter != limiter || !entry.pin()) {
			return null;
		}
		return entry;
	}

	/**
	 * The bucket a call with {@code key} takes from now, for reading its level: the key's own bucket when
	 * it has one, otherwise (with {@code keys.max}) the overflow bucket, or a bucket as the key's would be
	 * made now. Read-only: it keeps no bucket, pins nothing and catches no retune up (a bucket just
	 * dropped was full, as the one made again would be: K1; one forgotten is made with what it owes: K5).
	 *
	 * @param key the key's value, not {@code null}
	 * @return the key's bucket, the overflow bucket, or a new one not kept
	 */
	public RateLimiter bucketOf(Object key) {
		Object k = stored(key);
		Entry entry = this.entries.get(k);
		if (entry != null && entry.state != RETIRED) {
			return entry.limiter;
		}
		Entry shared = this.overflow;
		if (shared != null) {
			return shared.limiter;
		}
		RateLimiter bucket = this.factory.apply(k);
		Debts owed = this.debts;
		if (owed != null) {
			owed.chargeOwed(k, bucket);
		}
		return bucket;
	}

	/**
	 * The bucket of one key, if it has one now.
	 *
	 * @param key the key's value as a string (a long key as it was: it is found by its digest)
	 * @return its bucket, or {@code null}
	 */
	public @Nullable RateLimiter find(String key) {
		Object k = stored(key);
		Entry direct = this.entries.get(k);
		if (direct != null && direct.state != RETIRED) {
			return direct.limiter;
		}
		if (k instanceof Digest) {
			return null;
		}
		for (Entry entry : this.entries.values()) {
			if (String.valueOf(entry.key).equals(key) && entry.state != RETIRED) {
				return entry.limiter;
			}
		}
		return null;
	}

	/**
	 * A key longer than {@value #KEY_CHARS} characters as this store holds it: 128 bits of the SHA-256 of
	 * its UTF-8 bytes. Its text ({@code sha-256:} and 32 hex digits) names the key where a backend needs a
	 * name (a Redis key's hash).
	 *
	 * @param high the digest's first 64 bits
	 * @param low its next 64 bits
	 */
	public record Digest(long high, long low) {

		/**
		 * The digest of a key's text.
		 *
		 * @param key the key's text
		 * @return its digest
		 */
		public static Digest of(String key) {
			byte[] sha;
			try {
				sha = MessageDigest.getInstance("SHA-256").digest(key.getBytes(StandardCharsets.UTF_8));
			}
			catch (NoSuchAlgorithmException ex) {
				throw new IllegalStateException("SHA-256 is missing from this JVM", ex);
			}
			ByteBuffer b = ByteBuffer.wrap(sha);
			return new Digest(b.getLong(), b.getLong());
		}

		@Override
		public String toString() {
			return "sha-256:" + HexFormat.of().toHexDigits(this.high) + HexFormat.of().toHexDigits(this.low);
		}
	}

	/**
	 * What forgotten buckets owe (K5): instants at which each is full again, by max in {@link #PROBES}
	 * cells per key. A key reads the least of its cells: a later instant there is another key's
	 * (a collision), which makes the key more conservative, never less.
	 */
	static final class Debts {

		private final AtomicLongArray cells;

		private final int mask;

		private final long seed;

		private final LongSupplier clock;

		/** Instants are stored as nanos since this origin, plus one (0 = nothing owed). */
		private final long origin;

		Debts(long cells, long seed, LongSupplier clock) {
			int n = Integer.highestOneBit((int) Math.min(cells, 1 << 30));
			this.cells = new AtomicLongArray(n);
			this.mask = n - 1;
			this.seed = seed;
			this.clock = clock;
			this.origin = clock.getAsLong();
		}

		void record(Object key, long fullAt) {
			long value = Math.max(fullAt - this.origin, 0) + 1;
			long h = hash(key);
			long step = mix(h) | 1;
			for (int i = 0; i < PROBES; i++) {
				int at = (int) ((h + i * step) & this.mask);
				for (;;) {
					long v = this.cells.get(at);
					if (v >= value || this.cells.compareAndSet(at, v, value)) {
						break;
					}
				}
			}
		}

		/** The instant {@code key}'s bucket is full again at the latest, or {@code Long.MIN_VALUE} for none. */
		long fullAt(Object key) {
			long h = hash(key);
			long step = mix(h) | 1;
			long least = Long.MAX_VALUE;
			for (int i = 0; i < PROBES; i++) {
				least = Math.min(least, this.cells.get((int) ((h + i * step) & this.mask)));
			}
			return (least == 0) ? Long.MIN_VALUE : this.origin + least - 1;
		}

		/** Charges a bucket just made for {@code key} the tokens its forgotten bucket would still miss. */
		void chargeOwed(Object key, RateLimiter bucket) {
			long fullAt = fullAt(key);
			if (fullAt == Long.MIN_VALUE) {
				return;
			}
			long ahead = fullAt - this.clock.getAsLong();
			if (ahead <= 0) {
				return;
			}
			RateLimiterSnapshot s = bucket.snapshot();
			// ceil(tokens * ahead / period), at most limit: what the forgotten bucket misses now, rounded up
			BigInteger[] qr = BigInteger.valueOf(s.rate())
				.multiply(BigInteger.valueOf(ahead))
				.divideAndRemainder(BigInteger.valueOf(s.period().toNanos()));
			long missing = qr[0].min(BigInteger.valueOf(Long.MAX_VALUE)).longValue() + (qr[1].signum() > 0 ? 1 : 0);
			long limit = (long) Math.ceil(s.limit());
			missing = Math.min(missing, limit);
			if (missing > 0) {
				bucket.charge(missing);
			}
		}

		/** Keeps what each forgotten key owes in tokens when a token's time changes by {@code factor}. */
		void rescale(double factor) {
			long now = this.clock.getAsLong() - this.origin + 1;
			for (int i = 0; i < this.cells.length(); i++) {
				for (;;) {
					long v = this.cells.get(i);
					if (v <= now) {
						break;
					}
					double ahead = Math.ceil((v - now) * factor) + 1; // rounded up: never generous
					long next = (ahead >= Long.MAX_VALUE / 2) ? Long.MAX_VALUE / 2 : now + (long) ahead;
					if (this.cells.compareAndSet(i, v, next)) {
						break;
					}
				}
			}
		}

		private long hash(Object key) {
			if (key instanceof Digest d) {
				return mix(d.high() ^ this.seed) ^ d.low();
			}
			String text = String.valueOf(key);
			long h = this.seed;
			for (int i = 0; i < text.length(); i++) {
				h = (h ^ text.charAt(i)) * 0x9E3779B97F4A7C15L;
			}
			return mix(h ^ text.length());
		}

		private static long mix(long z) {
			z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
			z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
			return z ^ (z >>> 31);
		}
	}

	/** A key's bucket and its pin state: users in the low 20 bits, an epoch above them. */
	public final class Entry {

		final @Nullable Object key;

		final RateLimiter limiter;

		final long bytes;

		/** Users and epoch, or {@link #RETIRED}; a field of the entry itself (no second object to reach on a pin). */
		volatile long state;

		volatile int generation;

		Entry(@Nullable Object key, RateLimiter limiter, int generation, long bytes) {
			this.key = key;
			this.limiter = limiter;
			this.generation = generation;
			this.bytes = bytes;
		}

		/** The bucket this key's calls use: theirs, or (with {@code keys.max}) the overflow bucket. */
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

		/**
		 * The nanoseconds until this bucket is full again, when it can be forgotten (K5: no pin, nobody
		 * waiting, nothing in flight or claimed ahead), otherwise {@code -1}.
		 */
		long untilFullIfForgettable() {
			long s = this.state;
			if (s == RETIRED || (s & USERS) != 0) {
				return -1;
			}
			RateLimiterSnapshot snapshot = this.limiter.snapshot();
			if (snapshot.waiting() != 0 || snapshot.inFlight() != 0 || snapshot.deficiency() != 0) {
				return -1;
			}
			return snapshot.untilFull().toNanos();
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
