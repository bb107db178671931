package dev.ratelimit.spring;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
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
 * under attack"): each distinct key gets its own bucket, made full from the template (or its plan) on
 * first use, in a store bounded in bytes ({@code keys.memory}). A key longer than {@value #KEY_CHARS}
 * characters is held by its SHA-256 digest (128 bits of it), so a key of a megabyte costs what a short
 * one does. A key whose bucket owes tokens but has nothing in flight and nobody waiting may be forgotten
 * to make room; what it owes is kept in 16 bytes (its debt), so that it comes back owing it.
 */
public final class KeyedBuckets {

	/*
	 * Design note.
	 *
	 * State: a map from a key as stored (the key itself when short, its Digest when longer than KEY_CHARS
	 * characters) to an Entry (the key's bucket, its pin state, its plan); the bytes the entries cost
	 * (Entry.bytes each: ENTRY_BYTES plus the key's own characters); and, made on the first forgetting,
	 * the Debts: what forgotten buckets owe, as the instant each is full again ("full at", clock nanos).
	 * The Debts are a set-associative table of exact records (DEBT_WAYS slots of 16 bytes per set: a
	 * 55-bit seeded fingerprint of the key with the index of the plan it followed in the low 8 bits, and
	 * its full-at instant), backed by a table of "full at" cells merged by max in PROBES seeded cells per
	 * key, for the records that do not fit (the spill). Seeded per store (SecureRandom), so that nobody can
	 * aim at another key's set or cells.
	 *
	 * Memory: keys.memory (at most MAX_MEMORY) is split: 13/16 for the entries (ENTRIES_SHARE), 1/8 for the
	 * exact records (DEBT_BYTES each), 1/16 for the spill cells (8 bytes each). At the default 64 MB that
	 * is 52 MB of entries (over 65,000 live keys of KEY_CHARS characters, over 74,000 of 16), 524,288
	 * exact debts and 524,288 spill cells.
	 *
	 * Invariants:
	 *
	 * K1, dropping a full bucket changes nothing: a key's bucket is dropped losslessly only when it is
	 * idle (full, nothing in flight, nobody waiting), so the bucket made again for that key is identical
	 * to it. KeyedBucketsTests.aDroppedBucketComesBackFullAndIdenticalToTheOneDropped.
	 *
	 * K2, no call uses a dropped bucket: a call pins its key's entry for as long as it grabs; an entry is
	 * retired by one compare-and-set from "no pin, epoch e" to "retired", after the check (idle, or
	 * forgettable: K7), so a pin (which moves the epoch) between the check and the retirement makes it
	 * fail. A call that finds its entry retired looks again and gets a new one. Tokens in flight and
	 * waiters outlive the pin, but they make the bucket neither idle nor forgettable. A call with
	 * refundIf or settle keeps its pin until it completes: dropping its bucket then would send the call's
	 * give-back or charge to the bucket the key has now (KeyDroppedWhileRunningTests). jcstress
	 * PinRacingDrop.
	 *
	 * K3, bounded in bytes: an entry's bytes are reserved before its bucket is made and given back when
	 * it is dropped, so the entries cost at most 13/16 of keys.memory, whatever keys callers send (the one
	 * exception is at the end of K8); the Debts cost the other 3/16 (at least DEBT_MIN_SLOTS and
	 * SPILL_MIN_CELLS, 192 KB, which keys.memory's least value, 1 MB, covers), made once. A key costs
	 * ENTRY_BYTES plus 2 bytes per character of a key of up to KEY_CHARS characters, or DIGEST_BYTES for a
	 * longer one (measured: KeyedBucketsHeapTests.aKeyCostsAtMostItsStatedBytes, and
	 * keysOfEverySizeUpToAMegabyteKeepTheHeapWithinKeysMemory for the whole store). An explicit keys.max
	 * bounds the number of keys too, as in revision 2 (below).
	 *
	 * K4, retunes reach every key as of the retune's instant: the template's generation moves with each
	 * retune; the retune applies the new settings to every live key at once (its bucket counts the time
	 * before at the old settings, the time after at the new ones, however late it is next used), a key
	 * made later starts full at the new limit (BucketDefinition: a key's bucket starts full), and the
	 * debts of keys on the template are rescaled so that each forgotten key still owes the tokens it owed
	 * (K7). A key made while the retune runs is caught up on first use.
	 * KeyedBucketsTests.retuningTheTemplateChangesEveryKeyAndTheOnesToCome. On Redis the retune is kept
	 * with the template for every instance: stored once per bucket ({@code <key-prefix>{<bucket>}:retuned}),
	 * and each key's bucket on each instance passes the settings in force, read at most 800 ms before the
	 * call (see the ratelimit-redis README).
	 *
	 * K5, plans (contract revision 3, "Plans"): a bucket with plans gives each key the settings of the
	 * plan its call names (PlannedKey); null, "" or a name that is not a plan gets the template's. An
	 * entry remembers the plan it follows and the generation of that plan's settings; a call that names
	 * another plan, or finds its plan retuned since, brings the bucket to the plan's settings under the
	 * pin, before it takes its tokens: the rate first (the time that passed counts at the old rate), then
	 * the limit (tokens above it are dropped), as a retune does. A retune of one plan moves that plan's
	 * generation and applies its settings at once to every live key on it, and to no other, and rescales
	 * the debts recorded under it. One map lookup per call finds the plan's settings; a bucket without
	 * plans never looks. A key made for a plan starts full at that plan's limit; a forgotten key comes
	 * back on the plan it followed, owing what it owed (K7), and then follows the plan its call names.
	 * KeyedBucketsModelTests.keysFollowTheirCallsPlansAndEachPlansRetunes, PlansTests.
	 *
	 * K6, a reset drops the keys (contract revision 3): every key's bucket and the overflow bucket are
	 * reset (full, nothing owed, waiters woken to claim again), every debt is forgotten (K7: nothing is
	 * owed), then each bucket that is idle is retired and removed as the sweep does (K1, K2), giving its
	 * room back (K3). A key's bucket pinned by a call, or with callers waiting or tokens in flight, is kept
	 * (full as far as its callers let it be) and dropped by a later sweep once idle.
	 * KeyedBucketsTests.aResetDropsEveryIdleKeyAndFillsTheOthers.
	 *
	 * K7, forgetting a bucket that owes tokens keeps what it owes: when the memory is full and the sweep
	 * finds no idle bucket among the entries it looks at, it forgets the forgettable one (no pin, nobody
	 * waiting, nothing in flight, nothing claimed ahead; pacers and quotas too, K9) that is full soonest: first it records the instant the bucket is full again (now +
	 * untilFull) in the Debts, then retires it (K2). Recording writes the key's exact record in its set:
	 * over its own older record (the later forgetting is the truth), or in a free slot (empty, or whose
	 * instant is past); in a full set, the record that is full latest, the new one or one in the set,
	 * goes to the spill, max in each of its PROBES cells (the key owing most loses exactness first: a
	 * sprayer's, not a key within its rate). A bucket made for a key looks for its exact record first
	 * (fingerprint equal, plan index aside): found, the bucket is made on the plan the record names and
	 * charged the tokens the forgotten one would still miss, ceil(rate * (fullAt - now)), at most its
	 * limit, and the record is removed once the bucket is the key's. Not found, the least of its spill
	 * cells is read the same way (a later instant there is another key's, a collision: conservative, never
	 * generous; with plans, a spilled key is charged its whole limit while that instant is ahead, since the
	 * rate it was recorded at is not kept). Either way the bucket has at most the tokens the forgotten one
	 * would have had then, and gains them no faster, so limit + rate * w holds for every key across any
	 * number of drops. On Redis a key's hash lives in Redis, whatever happens to its object here; what
	 * forgetting the object can lose is its local policy's in-memory bucket (the mirror of what Redis
	 * granted here, which limits the key here when Redis does not answer): its "full at" is recorded the
	 * same way (Maker.untilFull: BucketBackend.untilFullHere, never a call to Redis), and the object made
	 * again owes it to that in-memory bucket only (Maker.owe: BucketBackend.owe), never to Redis; an object
	 * whose in-memory bucket is not full is not idle (RedisLocalMirrorTests
	 * .aKeysBucketWhoseMirrorOwesTokensIsNotIdleAndOwesThemWhenMadeAgain).
	 * KeyedBucketsModelTests.sprayersNeverPushAKeyOverItsBoundNorLockOutKeysWithinTheirRate,
	 * KeyedBucketsTests.aForgottenKeyComesBackOwingWhatItOwedAndNoKeySharesABucket,
	 * aForgottenKeyStillOwesWhatItOwedAfterARetuneAtTheNewRate, aForgottenKeyOwesNothingAfterAReset.
	 *
	 * K8, no lock-out through the bound: no bucket is shared by keys (there is no overflow bucket unless
	 * keys.max is set). Room for a new key is made from idle buckets first, then from forgotten ones (K7),
	 * which cost their key nothing but the rounding of a fraction of a token when it comes back. What is
	 * approximate, and its probability: (a) an exact record matches another key's only when their 55-bit
	 * fingerprints (independent of the set's index; 32 bits for a quota's count, K9) are equal: about
	 * DEBT_WAYS * 2^-55 (4.4e-16) per look-up (2^-28, 3.7e-9, for a quota's); (b) a key whose record was
	 * spilled is charged by the least of its PROBES cells; with n
	 * spilled keys owing at once and m cells that is another key's later instant with a chance of about
	 * (1 - e^(-PROBES n / m))^PROBES. Records spill only from a full set: at the default memory the exact
	 * table has 524,288 slots in 32,768 sets of DEBT_WAYS = 16. With 100,000 sprayed keys owing at once
	 * (those not in a live bucket are in the table), a set holds about Poisson(3.05) records and overflows
	 * with a chance of 2.3e-8 (17 or more), so that about 1 set in 1,300 spills now and then; and what
	 * spills is the record full latest (a sprayer's, owing most), into a spill that holds almost nothing,
	 * so (b) is about 0 too. A key within its rate is refused because of the sprayers with a chance well
	 * under one in a million; KeyedBucketsUnderSprayTests counts it exactly over 1.5 million calls (0),
	 * KeyedSprayBenchmark over 10 million. Beyond, the sets fill gradually (at 1,000,000 sprayed keys
	 * owing, two per slot), the records of the keys owing most spill first, and the chance (b) grows with
	 * n, smoothly, no
	 * cliff. When every entry the sweep can find is busy (pinned, waited on, or holding tokens in
	 * flight), the new key gets its own bucket beyond the bound: busy buckets are bounded by the calls in
	 * progress, not by the keys callers send.
	 *
	 * K9, pacers and quotas are forgotten as buckets are (K7), so that their store keeps keys.memory too. A
	 * pacer's debt is the time its active pool takes to fill at its rate (worked out from its fractional
	 * level, rounded up to a nanosecond); the pacer made again has its active pool short of what that time
	 * would still make, and its burst and backlog (credit the forgotten one may have had) empty: it never
	 * grants more than the forgotten one would have, and a key calling within its rate comes back when its
	 * pool is full, owing nothing. A quota's debt is its count until its period's end: the exact record
	 * keeps 32 bits of fingerprint, the count (at most COUNT_MOST; a quota owing more is not forgotten)
	 * and the period's end on the store's clock plus QUOTA_SLACK (1 s, so that the record outlives the
	 * period whichever of the store's clock and the quota's wall clock is ahead); the quota made again is
	 * charged the count when its own period ends within the record's instant (the same period), nothing in
	 * the next one: exact. A quota's record read from the spill (a full set) is its period's end without
	 * its count, so it costs the whole limit until then (Maker.owe): conservative, and with the chance (b)
	 * of K8 a key that collides with it is refused until that period ends. A retune rescales the debts in
	 * time, not a quota's count. A quota's entry costs QUOTA_ENTRY_BYTES. A key's bucket on a backend keeps
	 * its debt in time (its count lives there). KeyedBucketsModelTests
	 * .sprayersNeverPushAKeyOverItsBoundNorLockOutKeysWithinTheirRate (each sequence draws buckets,
	 * pacers or quotas; every key's grants checked against a limiter of its own never dropped, which the
	 * code before K9 failed: pacers and quotas owing were kept beyond the memory), KeyedBucketsHeapTests
	 * .pacersAndQuotasCostAtMostTheirStatedBytesAndKeepTheHeapWithinKeysMemory.
	 *
	 * Revision 2's keys.max, when set: at most that many keys have a bucket; when that many are kept and
	 * none is idle, a new key shares the overflow bucket (counted by ratelimit.keys.overflow) until one
	 * is (on Redis, where the key's state is in Redis, "idle" is Redis's: an object whose local policy's
	 * in-memory bucket owes tokens is forgotten with that debt, K7; Maker.keepsStateElsewhere). That shared bucket is what revision 3 warns about, so it exists only with keys.max.
	 *
	 * No background thread: the sweep runs on the way, when a new key needs room and once every
	 * SWEEP_EVERY new keys otherwise, looking at SWEEP_STEP entries at a time from where it stopped.
	 *
	 * The hit path (a key with a bucket): one map get (a short String or a boxed number as it is: no
	 * copy), one CAS on the entry's state to pin, one volatile read of the generation (and, with plans,
	 * one map get of the plan), the bucket's own acquire, one getAndAdd to unpin: no allocation, no lock,
	 * no lambda. A key of another type is held by its text (String.valueOf on each call), a key longer
	 * than KEY_CHARS by its digest (computed on each call): both allocate.
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
	 * rover bucket and the key's string header (measured on a 64-bit JVM with compressed references: 688
	 * bytes for a key of 64 one-byte characters, and about as much per key of a store filled with keys of
	 * every length, digests included; rounded up: KeyedBucketsHeapTests measures both).
	 */
	public static final int ENTRY_BYTES = 700;

	/**
	 * What one key's entry costs besides its characters when its bucket is a calendar quota (K9): measured
	 * as {@link #ENTRY_BYTES}, 771 bytes for a key of 14 characters in a store of quotas sprayed past its
	 * memory; rounded up (KeyedBucketsHeapTests
	 * .pacersAndQuotasCostAtMostTheirStatedBytesAndKeepTheHeapWithinKeysMemory). A pacer's fits in
	 * {@link #ENTRY_BYTES} (607 bytes for a key of 64 characters).
	 */
	public static final int QUOTA_ENTRY_BYTES = 800;

	/** What a digested key costs (the digest object). */
	static final int DIGEST_BYTES = 32;

	/** What one exact debt costs: a fingerprint and an instant (K7). */
	static final int DEBT_BYTES = 16;

	/** Slots per set of the exact debts (K8: 16 slots, 256 bytes). */
	static final int DEBT_WAYS = 16;

	/** The fewest slots of the exact debts (64 KB). */
	static final int DEBT_MIN_SLOTS = 1 << 12;

	/** The fewest cells of the spill (128 KB), so that a small store's collisions stay rare. */
	static final int SPILL_MIN_CELLS = 1 << 14;

	/** Hashes of a key into the spill. */
	static final int PROBES = 4;

	/** The largest count a quota's exact debt holds (23 bits); a quota owing more is not forgotten (K9). */
	public static final long COUNT_MOST = (1L << 23) - 1;

	/**
	 * How long a quota's debt outlives its period's end (K9): the store's clock (nanoseconds) and the
	 * quota's (the wall clock) may disagree by less than this.
	 */
	public static final Duration QUOTA_SLACK = Duration.ofSeconds(1);

	/**
	 * The default {@code keys.memory}: 64 MB, of which 13/16 hold live keys: over 65,000 keys of
	 * {@value #KEY_CHARS} characters at once, over 74,000 of 16; and 3/16 what forgotten keys owe: 524,288
	 * of them exactly (K7, K8).
	 */
	public static final long DEFAULT_MEMORY = 64L << 20;

	/** The largest {@code keys.memory} accepted. */
	public static final long MAX_MEMORY = 64L << 20;

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

	/** The bytes the entries may take: 13/16 of keys.memory (K3). */
	private final long memory;

	private final long debtSlots;

	private final long spillCells;

	private final boolean remember;

	private final LongSupplier clock;

	private final Maker maker;

	/** What an entry costs besides its key's characters (K3): {@link Maker#entryBytes()}. */
	private final long entryBytes;

	/** The plans by name (K5), or {@code null} for a bucket without plans (its calls never look one up). */
	private final @Nullable Map<String, Plan> plans;

	/** The plans by index, from 1 (0 is the template), as the debts name them (K7). */
	private final Plan[] planIndex;

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
	 * A store bounded by {@code max} keys (revision 2), at the default memory, on the system clock.
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
	 * A store without plans.
	 *
	 * @param max the most keys with a bucket of their own, {@code >= 1}, or {@code 0} for no bound but
	 *        the memory (then there is no overflow bucket)
	 * @param memory the most bytes the store takes, {@code 1..}{@value #MAX_MEMORY}
	 * @param remember whether a forgotten bucket's debt is remembered (K7; only tests turn it off)
	 * @param clock the template's clock, in nanoseconds
	 * @param factory makes a key's bucket (and, for a {@code null} key, the overflow bucket) from the
	 *        template as it is now; it receives the key as stored (a long key's {@link Digest})
	 * @param retune brings a bucket made at an older generation to the template's settings
	 */
	KeyedBuckets(int max, long memory, boolean remember, LongSupplier clock,
			Function<@Nullable Object, RateLimiter> factory, Consumer<RateLimiter> retune) {
		this(max, memory, remember, clock, new Maker() {

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
	 * Per-key buckets whose keys may follow plans (K5), bounded by {@code max} keys (revision 2), at the
	 * default memory, on the system clock.
	 *
	 * @param max the most keys with a bucket of their own, {@code >= 1}
	 * @param maker makes a key's bucket with a plan's settings, and brings a bucket to them
	 * @param plans each plan's max-wait ({@code null} when the plan leaves it to the template), by plan
	 *        name; empty for a bucket without plans
	 */
	KeyedBuckets(int max, Maker maker, Map<String, @Nullable Duration> plans) {
		this(max, DEFAULT_MEMORY, true, System::nanoTime, maker, plans);
	}

	/**
	 * Per-key buckets whose keys may follow plans (K5).
	 *
	 * @param max the most keys with a bucket of their own, {@code >= 1}, or {@code 0} for no bound but
	 *        the memory (then there is no overflow bucket)
	 * @param memory the most bytes the store takes, {@code 1..}{@value #MAX_MEMORY}
	 * @param remember whether a forgotten bucket's debt is remembered (K7; only tests turn it off)
	 * @param clock the template's clock, in nanoseconds
	 * @param maker makes a key's bucket with a plan's settings, and brings a bucket to them; it receives
	 *        the key as stored (a long key's {@link Digest})
	 * @param plans each plan's max-wait ({@code null} when the plan leaves it to the template), by plan
	 *        name; empty for a bucket without plans (at most 255 plans)
	 */
	KeyedBuckets(int max, long memory, boolean remember, LongSupplier clock, Maker maker,
			Map<String, @Nullable Duration> plans) {
		if (plans.size() > 255) {
			throw new IllegalArgumentException("At most 255 plans per bucket, was " + plans.size());
		}
		this.max = (max > 0) ? max : Integer.MAX_VALUE;
		this.memory = memory / 16 * 13; // K3: 3/16 for the debts
		this.debtSlots = Math.max(memory / 8 / DEBT_BYTES, DEBT_MIN_SLOTS);
		this.spillCells = Math.max(memory / 16 / Long.BYTES, SPILL_MIN_CELLS);
		this.remember = remember;
		this.clock = clock;
		this.maker = maker;
		this.entryBytes = maker.entryBytes();
		this.planIndex = new Plan[plans.size() + 1];
		if (plans.isEmpty()) {
			this.plans = null;
		}
		else {
			Map<String, Plan> byName = new HashMap<>();
			plans.forEach((name, maxWait) -> {
				Plan plan = new Plan(name, maxWait, byName.size() + 1);
				byName.put(name, plan);
				this.planIndex[plan.index] = plan;
			});
			this.plans = byName;
		}
		this.overflow = (max > 0) ? new Entry(null, maker.make(null, null), 0, null, 0) : null;
	}

	/**
	 * Makes the buckets of keys, and brings them to the settings of a plan (K4, K5).
	 */
	interface Maker {

		/**
		 * Makes a key's bucket, full, with the settings in force of a plan.
		 *
		 * @param plan the plan, or {@code null} for the template
		 * @param key the key as stored, or {@code null} for the overflow bucket
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

		/**
		 * What forgetting a key's bucket would lose (K7): the nanoseconds until it is full again, 0 when it
		 * is full, or {@code -1} when it cannot be forgotten now (callers waiting, tokens in flight or claimed
		 * ahead, or a quota that owes more than {@link #COUNT_MOST}). For a pacer, the time its active pool
		 * takes to fill at its rate, without the catch-up its backlog would give (its burst and backlog are
		 * forgotten: K9); for a quota, the time until its period's end, and {@link #QUOTA_SLACK} more, so that
		 * its debt (its count, {@link #countOf}) outlives the period whatever the two clocks say (K9). The
		 * default reads the bucket's snapshot: a bucket of this JVM.
		 *
		 * @param bucket a key's bucket
		 * @return nanoseconds, 0, or {@code -1}
		 */
		default long untilFull(RateLimiter bucket) {
			RateLimiterSnapshot snapshot = bucket.snapshot();
			if (snapshot.waiting() != 0 || snapshot.inFlight() != 0 || snapshot.deficiency() != 0) {
				return -1;
			}
			if (snapshot.resetsAt() != null) {
				long count = KeyedBuckets.countOf(snapshot);
				if (count > COUNT_MOST) {
					return -1;
				}
				return (count == 0) ? 0 : snapshot.untilReset().toNanos() + QUOTA_SLACK.toNanos();
			}
			// a pacer's: worked out from its fractional level, rounded up to a nanosecond (K9)
			return snapshot.untilFull().toNanos();
		}

		/**
		 * What a quota's bucket owes until its period's end (K9): its count, or {@code -1} for a limiter
		 * whose debt is its time until full (a rover bucket, a pacer). The default reads the bucket's snapshot.
		 *
		 * @param bucket a key's bucket that {@link #untilFull} says can be forgotten
		 * @return the count, or {@code -1}
		 */
		default long countOf(RateLimiter bucket) {
			RateLimiterSnapshot snapshot = bucket.snapshot();
			return (snapshot.resetsAt() != null) ? KeyedBuckets.countOf(snapshot) : -1;
		}

		/**
		 * Makes a quota's bucket just made for a forgotten key owe the count its forgotten one had (K9),
		 * when it is in the same period: its period ends within {@code ahead} (the recorded end and
		 * {@link #QUOTA_SLACK}); in the next period it owes nothing. A bucket that is not a quota (a plan of
		 * another type) owes its whole limit while {@code ahead} lasts. The default reads the bucket's
		 * snapshot and charges it.
		 *
		 * @param plan the plan the bucket was made on, or {@code null} for the template
		 * @param bucket the bucket
		 * @param ahead the nanoseconds until the forgotten one's period ended, and the slack, {@code > 0}
		 * @param count the count it owed, {@code > 0}
		 */
		default void oweCount(@Nullable String plan, RateLimiter bucket, long ahead, long count) {
			RateLimiterSnapshot s = bucket.snapshot();
			if (s.resetsAt() == null) {
				owe(plan, bucket, ahead, true);
			}
			else if (s.untilReset().toNanos() <= ahead) {
				bucket.charge(count);
			}
		}

		/**
		 * Makes a bucket just made for a forgotten key owe what its forgotten one still missed (K7):
		 * {@code ahead} nanoseconds before it is full, at its rate, rounded up, at most its limit (all of
		 * its limit with {@code whole}). The default reads the bucket's settings from its snapshot and
		 * charges it.
		 *
		 * @param plan the plan the bucket was made on, or {@code null} for the template
		 * @param bucket the bucket
		 * @param ahead the nanoseconds until the forgotten bucket is full, {@code > 0}
		 * @param whole whether it owes its whole limit (a spilled debt of a bucket with plans)
		 */
		default void owe(@Nullable String plan, RateLimiter bucket, long ahead, boolean whole) {
			RateLimiterSnapshot s = bucket.snapshot();
			// a quota's debt read from the spill is a period's end, not its count: its whole limit (K9)
			long missing = missing(s.rate(), s.period(), (long) Math.ceil(s.limit()), ahead,
					whole || s.resetsAt() != null);
			if (missing > 0) {
				bucket.charge(missing);
			}
		}

		/**
		 * What one key's entry costs besides its key's characters (K3): {@link #ENTRY_BYTES} for a rover
		 * bucket or a pacer, {@link #QUOTA_ENTRY_BYTES} for a calendar quota.
		 *
		 * @return bytes
		 */
		default long entryBytes() {
			return ENTRY_BYTES;
		}

		/**
		 * Whether a key's state lives outside this JVM (Redis), so that forgetting its object loses only what
		 * {@link #untilFull} says: then, with {@code keys.max}, a key's object that its backend counts as idle
		 * but whose state here owes tokens (the local policy's in-memory bucket) is forgotten with its debt
		 * kept, as it was dropped before that state counted.
		 *
		 * @return {@code true} for a backend's buckets
		 */
		default boolean keepsStateElsewhere() {
			return false;
		}
	}

	/** A quota's count from its view (K9): its limit less what is available, and what it owes beyond. */
	static long countOf(RateLimiterSnapshot quota) {
		return (long) Math.ceil(quota.limit() - quota.available() + quota.deficiency());
	}

	/**
	 * The tokens a bucket of {@code rate} per {@code period} misses {@code ahead} nanoseconds before it is
	 * full: ceil(rate * ahead / period), at most {@code limit} ({@code limit} itself with {@code whole}).
	 *
	 * @param rate tokens per period
	 * @param period the period
	 * @param limit the bucket's limit
	 * @param ahead nanoseconds until full, {@code > 0}
	 * @param whole whether the whole limit is owed
	 * @return the tokens, {@code 0..limit}
	 */
	static long missing(long rate, Duration period, long limit, long ahead, boolean whole) {
		if (whole) {
			return limit;
		}
		BigInteger[] qr = BigInteger.valueOf(rate)
			.multiply(BigInteger.valueOf(ahead))
			.divideAndRemainder(BigInteger.valueOf(period.toNanos()));
		long missing = qr[0].min(BigInteger.valueOf(Long.MAX_VALUE)).longValue() + ((qr[1].signum() > 0) ? 1 : 0);
		return Math.min(missing, limit);
	}

	/** One plan of the bucket: its name, its index (K7), the generation of its settings (K5), its max-wait. */
	static final class Plan {

		final String name;

		final @Nullable Duration maxWait;

		final int index;

		volatile int generation;

		Plan(String name, @Nullable Duration maxWait, int index) {
			this.name = name;
			this.maxWait = maxWait;
			this.index = index;
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
	 * @param key the key's value, not {@code null} (a {@link PlannedKey} for a bucket with plans)
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
		Object k = stored(key);
		for (;;) {
			Entry entry = this.entries.get(k);
			if (entry == null) {
				entry = create(k, null);
				if (entry == null) {
					return pinOverflow(count);
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

	/**
	 * {@link #pin(Object, boolean)} for a bucket with plans (K5): the plan's settings are looked up once,
	 * and the key's bucket brought to them under the pin, before the call takes its tokens.
	 */
	private Entry pinPlanned(Object given, boolean count) {
		Object k = stored(PlannedKey.keyOf(given));
		Plan plan = planOf(given);
		for (;;) {
			Entry entry = this.entries.get(k);
			if (entry == null) {
				entry = create(k, plan);
				if (entry == null) {
					return pinOverflow(count); // follows the template
				}
			}
			if (entry.pin()) {
				if (entry.plan != plan || entry.generation != generationOf(plan)) {
					entry.follow(plan);
				}
				return entry;
			}
			removeRetired(entry);
		}
	}

	private Entry pinOverflow(boolean count) {
		Entry shared = this.overflow;
		if (shared == null) {
			throw new IllegalStateException("no room and no overflow bucket"); // cannot happen: K8
		}
		if (count) {
			this.overflowCalls.increment();
		}
		shared.pin(); // never retired: always succeeds
		return shared;
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

	private void removeRetired(Entry entry) {
		if (this.entries.remove(entry.key, entry)) {
			this.size.decrementAndGet();
			this.bytes.addAndGet(-entry.bytes);
		}
	}

	private @Nullable Entry create(Object key, @Nullable Plan plan) {
		long cost = bytesOf(key);
		if (!reserve(cost)) {
			if (!makeRoom(cost)) {
				return null;
			}
		}
		else if (this.newKeys.incrementAndGet() % SWEEP_EVERY == 0) {
			sweep(false, false);
		}
		Debts owed = this.debts;
		Debt debt = (owed != null) ? owed.find(key) : null;
		Plan made = plan;
		if (debt != null && debt.plan >= 0) {
			made = (debt.plan == 0) ? null : this.planIndex[debt.plan]; // K7: on the plan it followed
		}
		// the generation is read before the settings (K4): a retune in between is caught up on first use
		int generation = generationOf(made);
		RateLimiter bucket = this.maker.make((made != null) ? made.name : null, key);
		if (debt != null) {
			charge(made, bucket, debt); // K7: before anyone can take from it
		}
		Entry fresh = new Entry(key, bucket, generation, made, cost);
		Entry existing = this.entries.putIfAbsent(key, fresh);
		if (existing != null) {
			this.size.decrementAndGet();
			this.bytes.addAndGet(-cost);
			return existing;
		}
		if (debt != null && debt.plan >= 0) {
			owed.settled(key, debt); // the key's bucket has it now
		}
		return fresh;
	}

	/** Charges a bucket just made the tokens its forgotten one would still miss (K7), or a quota's count (K9). */
	private void charge(@Nullable Plan plan, RateLimiter bucket, Debt debt) {
		long ahead = debt.fullAt() - this.clock.getAsLong();
		if (ahead > 0 && debt.count() > 0) {
			this.maker.oweCount((plan != null) ? plan.name : null, bucket, ahead, debt.count());
		}
		else if (ahead > 0) {
			// spilled on a bucket with plans: the rate it owed at is not kept, so its whole limit (K7)
			this.maker.owe((plan != null) ? plan.name : null, bucket, ahead, debt.plan() < 0 && this.plans != null);
		}
	}

	/** The bytes an entry for {@code key} (as stored) costs (K3). */
	long bytesOf(Object key) {
		if (key instanceof String s) {
			return this.entryBytes + 2L * s.length();
		}
		return this.entryBytes + DIGEST_BYTES;
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
	 * Makes room for a new key (K3, K8): idle buckets first, then, when the memory is what is full, the
	 * forgettable bucket that is full soonest (K7); when neither is found, with {@code keys.max} there is no
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
				if (this.size.get() >= this.max && !this.maker.keepsStateElsewhere()) {
					continue; // revision 2's bound: only idle buckets make room (K8)
				}
				if (forgetOne() && reserve(cost)) {
					return true;
				}
			}
			if (this.overflow != null) {
				return false;
			}
			// every bucket found is busy: beyond the bound, for as long as calls are in progress (K8)
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
	 * owes (K7). Under the sweeping lock.
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
			Plan plan = best.plan;
			long count = this.maker.countOf(best.limiter); // a quota's (K9), or -1: a debt in time
			debtTable().record(best.key, (plan != null) ? plan.index : 0, this.clock.getAsLong() + untilFull, count); // K7: before
		}
		if (!STATE.compareAndSet(best, s, RETIRED)) {
			return false;
		}
		removeRetired(best);
		return true;
	}

	private Debts debtTable() {
		Debts table = this.debts;
		if (table == null) {
			synchronized (this) {
				table = this.debts;
				if (table == null) {
					table = new Debts(this.debtSlots, this.spillCells, this.seed, this.clock);
					this.debts = table;
				}
			}
		}
		return table;
	}

	/**
	 * Applies the template's new settings to every key's bucket on the template and the overflow bucket
	 * (K4), and rescales what forgotten keys on the template owe to the new rate (K7).
	 *
	 * @param oldNanosPerToken the nanoseconds one token took before the retune
	 * @param newNanosPerToken the nanoseconds one token takes now
	 */
	void retuned(double oldNanosPerToken, double newNanosPerToken) {
		retuned();
		Debts table = this.debts;
		if (table != null && oldNanosPerToken != newNanosPerToken) {
			table.rescale(0, newNanosPerToken / oldNanosPerToken);
		}
	}

	/**
	 * Applies the template's new settings to every key's bucket on the template and the overflow bucket (K4).
	 */
	void retuned() {
		this.generation++;
		if (this.overflow != null) {
			this.overflow.catchUp();
		}
		for (Entry entry : this.entries.values()) {
			if (entry.plan == null) {
				entry.catchUp();
			}
		}
	}

	/**
	 * Applies one plan's new settings to every key's bucket on that plan, and to no other (K5), and
	 * rescales what forgotten keys on it owe (K7).
	 *
	 * @param plan the plan retuned
	 * @param oldNanosPerToken the nanoseconds one token took before the retune
	 * @param newNanosPerToken the nanoseconds one token takes now
	 */
	void retuned(String plan, double oldNanosPerToken, double newNanosPerToken) {
		Plan retuned = (this.plans != null) ? this.plans.get(plan) : null;
		if (retuned == null) {
			return;
		}
		retuned(plan);
		Debts table = this.debts;
		if (table != null && oldNanosPerToken != newNanosPerToken) {
			table.rescale(retuned.index, newNanosPerToken / oldNanosPerToken);
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
	 * Resets every key's bucket and the overflow bucket, forgets every debt, and drops the keys' buckets
	 * that are idle after it (K6).
	 */
	public void reset() {
		Debts table = this.debts;
		if (table != null) {
			table.clear();
		}
		if (this.overflow != null) {
			this.overflow.limiter.reset();
		}
		for (Entry entry : this.entries.values()) {
			entry.limiter.reset();
			if (entry.retireIfIdle()) {
				removeRetired(entry);
			}
		}
	}

	/** @return keys with a bucket of their own now */
	public int size() {
		return this.entries.size();
	}

	/**
	 * How full the store is: the share of its entries' bytes (13/16 of {@code keys.memory}) in use, 0 to 1
	 * (the endpoint's {@code keysLoad}).
	 *
	 * @return the load, {@code 0..1}
	 */
	public double load() {
		return Math.min(1.0, Math.max(0, this.bytes.get()) / (double) this.memory);
	}

	/**
	 * Forgotten keys that owe tokens now, exactly recorded (K7), for the view and tests.
	 *
	 * @return the debts whose instant is ahead
	 */
	public int owing() {
		Debts table = this.debts;
		return (table != null) ? table.owing() : 0;
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
		Entry entry = this.entries.get(stored((this.plans != null) ? PlannedKey.keyOf(key) : key));
		if (entry == null || entry.limiter != limiter || !entry.pin()) {
			return null;
		}
		return entry;
	}

	/**
	 * The bucket a call with {@code key} takes from now, for reading its level: the key's own bucket when
	 * it has one, otherwise (with {@code keys.max}) the overflow bucket, or a bucket as the key's would be
	 * made now. Read-only: it keeps no bucket, pins nothing and catches no retune up (a bucket just
	 * dropped was full, as the one made again would be: K1; one forgotten is made with what it owes: K7).
	 *
	 * @param key the key's value, not {@code null}
	 * @return the key's bucket, the overflow bucket, or a new one not kept
	 */
	public RateLimiter bucketOf(Object key) {
		Object k = stored((this.plans != null) ? PlannedKey.keyOf(key) : key);
		Entry entry = this.entries.get(k);
		if (entry != null && entry.state != RETIRED) {
			return entry.limiter;
		}
		Entry shared = this.overflow;
		if (shared != null) {
			return shared.limiter;
		}
		Debts owed = this.debts;
		Debt debt = (owed != null) ? owed.find(k) : null;
		Plan made = null;
		if (debt != null && debt.plan > 0) {
			made = this.planIndex[debt.plan];
		}
		RateLimiter bucket = this.maker.make((made != null) ? made.name : null, k);
		if (debt != null) {
			charge(made, bucket, debt);
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
		Entry entry = findEntry(key);
		return (entry != null) ? entry.limiter : null;
	}

	/**
	 * The entry of one key, if it has a bucket now: its bucket and its plan.
	 *
	 * @param key the key's value as a string (a long key as it was: it is found by its digest)
	 * @return its entry, or {@code null}
	 */
	public @Nullable Entry findEntry(String key) {
		Object k = stored(key);
		Entry direct = this.entries.get(k);
		if (direct != null && direct.state != RETIRED) {
			return direct;
		}
		if (k instanceof Digest) {
			return null;
		}
		for (Entry entry : this.entries.values()) {
			if (String.valueOf(entry.key).equals(key) && entry.state != RETIRED) {
				return entry;
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
	 * What a forgotten key owes (K7): the instant its bucket is full again (a quota's: its period's end and
	 * the slack), the index of the plan it followed (0: the template), or {@code -1} when it was read from
	 * the spill (the plan is not kept), and a quota's count (K9), or {@code -1} for a debt in time.
	 */
	record Debt(long fullAt, int plan, long count) {
	}

	/**
	 * What forgotten buckets owe (K7, K8): exact records in sets of {@link #DEBT_WAYS} slots, and the spill,
	 * cells of "full at" instants by max in {@link #PROBES} cells per key, for the records a full set
	 * pushes out. One lock: records are written when a bucket is forgotten and read when a key's bucket is
	 * made, never on a call that finds its key's bucket.
	 */
	static final class Debts {

		/**
		 * Per slot, {@code [2i]} the fingerprint (plan index in the low 8 bits, {@link #COUNTED} in bit 8;
		 * 0 = empty), {@code [2i+1]} the instant. A debt in time keeps 55 bits of fingerprint (bits 9 to 63);
		 * a quota's count (K9) keeps 32 (bits 32 to 63) and the count in bits 9 to 31.
		 */
		private final long[] slots;

		private final int setMask;

		private final long[] spill;

		private final int spillMask;

		private final long seed;

		private final LongSupplier clock;

		Debts(long slots, long cells, long seed, LongSupplier clock) {
			int n = Integer.highestOneBit((int) Math.min(slots, 1 << 28));
			this.slots = new long[2 * n];
			this.setMask = n / DEBT_WAYS - 1;
			int c = Integer.highestOneBit((int) Math.min(cells, 1 << 28));
			this.spill = new long[c];
			this.spillMask = c - 1;
			this.seed = seed;
			this.clock = clock;
		}

		/** Bit 8 of a slot's fingerprint word: the record is a quota's count (K9). */
		static final long COUNTED = 0x100;

		/** The fingerprint bits of a debt in time. */
		private static final long FINGERPRINT = ~0x1FFL;

		/** The fingerprint bits of a quota's count, and the spill's index. */
		private static final long HIGH = 0xFFFFFFFF00000000L;

		/**
		 * Records what a forgotten key owes: until {@code fullAt}, in time ({@code count < 0}) or a quota's
		 * count ({@code count} in {@code 1..COUNT_MOST}).
		 */
		synchronized void record(Object key, int plan, long fullAt, long count) {
			long h = hash(key);
			long fp = ((count < 0) ? fingerprint(h) : (fingerprint(h) & HIGH) | (count << 9) | COUNTED) | plan;
			int base = set(h) * DEBT_WAYS;
			long now = this.clock.getAsLong();
			int free = -1;
			int latest = -1;
			for (int i = base; i < base + DEBT_WAYS; i++) {
				long f = this.slots[2 * i];
				if (f != 0 && matches(f, fingerprint(h))) {
					this.slots[2 * i] = fp; // the later forgetting is the truth (K7)
					this.slots[2 * i + 1] = fullAt;
					return;
				}
				if (f == 0 || this.slots[2 * i + 1] - now <= 0) {
					if (free < 0) {
						free = i;
					}
				}
				else if (latest < 0 || this.slots[2 * i + 1] - this.slots[2 * latest + 1] > 0) {
					latest = i;
				}
			}
			if (free >= 0) {
				this.slots[2 * free] = fp;
				this.slots[2 * free + 1] = fullAt;
				return;
			}
			// a full set: the record full latest spills (K8), the new one or the set's
			if (fullAt - this.slots[2 * latest + 1] >= 0) {
				spill(fp, fullAt);
				return;
			}
			spill(this.slots[2 * latest], this.slots[2 * latest + 1]);
			this.slots[2 * latest] = fp;
			this.slots[2 * latest + 1] = fullAt;
		}

		/** Whether a slot's fingerprint word {@code f} is the record of the key whose fingerprint is {@code fp}. */
		private static boolean matches(long f, long fp) {
			return ((f & COUNTED) != 0) ? (f & HIGH) == (fp & HIGH) : (f & FINGERPRINT) == fp;
		}

		/** Max in the spill cells of the key whose fingerprint is {@code fp} (its plan and count aside). */
		private void spill(long fp, long instant) {
			long fullAt = (instant != 0) ? instant : 1; // 0 is an empty cell: a nanosecond later, conservative
			long at = mix(fp & HIGH);
			long step = mix(at) | 1;
			for (int i = 0; i < PROBES; i++) {
				int cell = (int) ((at + i * step) & this.spillMask);
				if (this.spill[cell] == 0 || fullAt - this.spill[cell] > 0) {
					this.spill[cell] = fullAt;
				}
			}
		}

		/** What {@code key} owes, or {@code null} for nothing owed now. */
		synchronized @Nullable Debt find(Object key) {
			long h = hash(key);
			long fp = fingerprint(h);
			long now = this.clock.getAsLong();
			int base = set(h) * DEBT_WAYS;
			for (int i = base; i < base + DEBT_WAYS; i++) {
				long f = this.slots[2 * i];
				if (f != 0 && matches(f, fp)) {
					long fullAt = this.slots[2 * i + 1];
					long count = ((f & COUNTED) != 0) ? (f & ~HIGH) >>> 9 : -1;
					return (fullAt - now > 0) ? new Debt(fullAt, (int) (f & 0xFF), count) : null;
				}
			}
			// the spill's cells are indexed by the fingerprint's high bits, as a spilled record carries them
			long at = mix(fp & HIGH);
			long step = mix(at) | 1;
			long least = 0;
			for (int i = 0; i < PROBES; i++) {
				long v = this.spill[(int) ((at + i * step) & this.spillMask)];
				if (v == 0) {
					return null;
				}
				if (i == 0 || v - least < 0) {
					least = v;
				}
			}
			return (least - now > 0) ? new Debt(least, -1, -1) : null;
		}

		/** Removes the exact record of {@code key} that a bucket now holds. */
		synchronized void settled(Object key, Debt debt) {
			long h = hash(key);
			long fp = fingerprint(h);
			int base = set(h) * DEBT_WAYS;
			for (int i = base; i < base + DEBT_WAYS; i++) {
				long f = this.slots[2 * i];
				if (f != 0 && matches(f, fp) && this.slots[2 * i + 1] == debt.fullAt()) {
					this.slots[2 * i] = 0;
					this.slots[2 * i + 1] = 0;
					return;
				}
			}
		}

		/**
		 * Keeps what each forgotten key on plan {@code plan} (0: the template) owes in tokens when a token's
		 * time changes by {@code factor}; the spill, whose plans are not kept, only ever later (conservative).
		 * A quota's count is kept as it is, until its period's end (K9).
		 */
		synchronized void rescale(int plan, double factor) {
			long now = this.clock.getAsLong();
			for (int i = 0; i < this.slots.length; i += 2) {
				if (this.slots[i] != 0 && (this.slots[i] & COUNTED) == 0 && (this.slots[i] & 0xFF) == plan
						&& this.slots[i + 1] - now > 0) {
					this.slots[i + 1] = later(now, this.slots[i + 1], factor);
				}
			}
			if (factor > 1) {
				for (int i = 0; i < this.spill.length; i++) {
					if (this.spill[i] != 0 && this.spill[i] - now > 0) {
						this.spill[i] = later(now, this.spill[i], factor);
					}
				}
			}
		}

		private static long later(long now, long fullAt, double factor) {
			double ahead = Math.ceil((fullAt - now) * factor); // rounded up: never generous
			return now + (long) Math.min(ahead, Long.MAX_VALUE / 4);
		}

		/** Forgets every debt (K6: after a reset nothing is owed). */
		synchronized void clear() {
			Arrays.fill(this.slots, 0);
			Arrays.fill(this.spill, 0);
		}

		/** Exact records whose instant is ahead. */
		synchronized int owing() {
			long now = this.clock.getAsLong();
			int n = 0;
			for (int i = 0; i < this.slots.length; i += 2) {
				if (this.slots[i] != 0 && this.slots[i + 1] - now > 0) {
					n++;
				}
			}
			return n;
		}

		private int set(long h) {
			return (int) (h & this.setMask);
		}

		/**
		 * 55 bits of the key's hash (bits 9 to 63), independent of its set, never 0 in its high 32 bits (the
		 * low 9 bits take the plan and {@link #COUNTED}).
		 */
		private static long fingerprint(long h) {
			long fp = mix(h ^ 0x632BE59BD9B4E019L) & FINGERPRINT;
			return ((fp & HIGH) != 0) ? fp : fp | (1L << 32);
		}

		private long hash(Object key) {
			if (key instanceof Digest d) {
				return mix(mix(d.high() ^ this.seed) ^ d.low());
			}
			String text = (key instanceof String s) ? s : String.valueOf(key);
			long h = this.seed;
			for (int i = 0; i < text.length(); i++) {
				h = (h ^ text.charAt(i)) * 0x9E3779B97F4A7C15L;
			}
			return mix(h ^ text.length() ^ ((key instanceof String) ? 0 : key.getClass().getName().hashCode()));
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

		/** The generation of the settings it follows: the template's, or its plan's (K4, K5). */
		volatile int generation;

		/** The plan it follows, {@code null} for the template (K5). */
		volatile @Nullable Plan plan;

		Entry(@Nullable Object key, RateLimiter limiter, int generation, @Nullable Plan plan, long bytes) {
			this.key = key;
			this.limiter = limiter;
			this.generation = generation;
			this.plan = plan;
			this.bytes = bytes;
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
		 * The nanoseconds until this bucket is full again, when it can be forgotten (K7: no pin, nobody
		 * waiting, nothing in flight or claimed ahead, a rover bucket), otherwise {@code -1}.
		 */
		long untilFullIfForgettable() {
			long s = this.state;
			if (s == RETIRED || (s & USERS) != 0) {
				return -1;
			}
			return KeyedBuckets.this.maker.untilFull(this.limiter);
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
