package dev.ratelimit.core;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.ThreadLocalRandom;
import java.util.function.IntSupplier;

import org.jspecify.annotations.Nullable;

/**
 * The stripes of a {@link SharedTokenBucket} in striped mode (the notes S1-S6 of {@link StripedBucket}): each
 * stripe holds a budget of tokens reserved from the bucket and a log of the grants it made from it, {@code (time, n)}
 * in the order they were made, so that a caller takes tokens with one CAS on a word no other thread
 * writes while it has its own stripe.
 *
 * <p>A stripe's word packs, from the top bit down: closed (the bucket is folding or not striped), busy
 * (a caller is writing its log entry), the number of entries logged (12 bits), and the budget left
 * (50 bits, as claims are at most 2^50). A caller sets busy with its CAS, writes its entry and clears
 * busy with the new count and budget in one release write; the folder closes a stripe with a CAS once
 * it is not busy, so every entry the count covers is written before the folder reads it.
 */
final class Stripes {

	/**
	 * Entries a stripe's log holds at first; a stripe whose log is full sends its callers to the lock,
	 * which folds, and doubles the log up to {@link #MAX_LOG}, so that a stripe under heavy use folds
	 * rarely and one used a little costs little memory.
	 */
	static final int FIRST_LOG = 64;

	/** The most entries a stripe's log holds (its count has 12 bits). */
	static final int MAX_LOG = 2048;

	static final long CLOSED = 1L << 63;

	static final long BUSY = 1L << 62;

	private static final int COUNT_SHIFT = 50;

	private static final long ONE_ENTRY = 1L << COUNT_SHIFT;

	/** The largest budget a stripe's word holds. */
	static final long MAX_BUDGET = ONE_ENTRY - 1;

	/** The fewest tokens per stripe worth striping for (S1; tests that stripe eagerly take 1). */
	static final long MIN_BUDGET = 16;

	/** The number of stripes of a bucket: {@link #defaultCount()}. */
	static final int COUNT = defaultCount();

	/** Array slots left free before and after a log's entries, so that two logs never share a pair of cache lines. */
	private static final int LOG_PAD = 32;

	private static final VarHandle WORD;

	/** A thread's stripe, moved on when it finds another caller on it (package-private for StripesTests). */
	static final ThreadLocal<int[]> PROBE = ThreadLocal
		.withInitial(() -> new int[] { ThreadLocalRandom.current().nextInt() | 1 }); // (xorshift keeps it non-zero)

	static {
		try {
			WORD = MethodHandles.lookup().findVarHandle(Word.class, "word", long.class);
		}
		catch (ReflectiveOperationException ex) {
			throw new ExceptionInInitializerError(ex);
		}
	}

	private final Stripe[] stripes;

	private final int mask;

	/** Tests only: the stripe each caller uses, instead of its thread's. */
	private final @Nullable IntSupplier chooser;

	/** The budget each stripe was opened with (guarded by the bucket's lock). */
	private long budget;

	/** The folder's cursors, one per stripe (guarded by the bucket's lock). */
	private final int[] cursors;

	Stripes(int count, @Nullable IntSupplier chooser) {
		if (Integer.bitCount(count) != 1) {
			throw new InvalidArgumentException("stripes", count, 1, null, "stripes must be a power of two, was " + count);
		}
		this.stripes = new Stripe[count];
		for (int i = 0; i < count; i++) {
			this.stripes[i] = new Stripe();
		}
		this.mask = count - 1;
		this.chooser = chooser;
		this.cursors = new int[count];
	}

	int[] cursors() {
		return this.cursors;
	}

	/**
	 * Two stripes per processor, rounded up to a power of two, at most 64: a thread that meets another on
	 * its stripe moves to a random one, which is then most likely free.
	 */
	static int defaultCount() {
		int cpus = Math.max(1, Runtime.getRuntime().availableProcessors());
		return Math.min(64, Integer.highestOneBit(cpus * 2 - 1) << 1);
	}

	/** Moves a thread's probe to a random next value (xorshift: never 0 from a value that is not). */
	private static int rehash(int[] probe) {
		int p = probe[0];
		p ^= p << 13;
		p ^= p >>> 17;
		p ^= p << 5;
		probe[0] = p;
		return p;
	}

	int count() {
		return this.stripes.length;
	}

	/** What {@link #take} returns when it took the tokens. */
	static final int TAKEN = 0;

	/** What {@link #take} returns when the stripe is closed: another caller is folding (S4). */
	static final int FOLDING = 1;

	/** What {@link #take} returns when the stripe's budget is short or its log full: fold (S3). */
	static final int SHORT = 2;

	/**
	 * Takes {@code n} tokens from the caller's stripe at {@code now} (S2).
	 *
	 * @return {@link #TAKEN}, {@link #FOLDING} or {@link #SHORT}
	 */
	int take(long n, long now) {
		IntSupplier choose = this.chooser;
		int[] probe = (choose == null) ? PROBE.get() : null;
		int at = (probe != null) ? probe[0] & this.mask : Math.floorMod(choose.getAsInt(), this.stripes.length);
		for (int tries = 0; tries < 4; tries++) {
			Stripe stripe = this.stripes[at];
			long w = (long) WORD.getVolatile(stripe);
			if ((w & CLOSED) != 0) {
				return FOLDING;
			}
			if ((w & BUSY) == 0) {
				int count = (int) ((w >>> COUNT_SHIFT) & 0xFFF);
				if ((w & MAX_BUDGET) < n || count == stripe.capacity) {
					return SHORT;
				}
				if (WORD.compareAndSet(stripe, w, w | BUSY)) {
					// S2: a stripe's times never go back, and never before the stripe was opened
					long t = (now - stripe.last > 0) ? now : stripe.last;
					stripe.last = t;
					int slot = LOG_PAD + 2 * count;
					stripe.log[slot] = t;
					stripe.log[slot + 1] = n;
					int[] before = stripe.taker; // (a thread's probe stands for it, without holding on to it)
					if (before != probe) {
						stripe.taker = probe;
					}
					WORD.setRelease(stripe, w - n + ONE_ENTRY);
					if (before != probe && before != null && probe != null) {
						// another thread took from this stripe last: two threads that share a stripe
						// move its cache line to and fro on every take, whether or not they ever meet
						// on it, so this one moves on
						rehash(probe);
					}
					return TAKEN;
				}
				if ((((long) WORD.getVolatile(stripe)) & CLOSED) != 0) {
					return FOLDING; // the folder closed it meanwhile: not another caller on it
				}
			}
			// another caller is on this stripe: this thread moves to another one from now on (a random
			// step, so that two threads that met do not move together)
			if (probe != null) {
				at = rehash(probe) & this.mask;
			}
			Thread.onSpinWait();
		}
		return SHORT;
	}

	/**
	 * Opens every stripe with {@code perStripe} tokens, none logged, times from {@code since} (under the
	 * bucket's lock, after the bucket reserved them).
	 */
	void open(long perStripe, long since) {
		this.budget = perStripe;
		for (Stripe stripe : this.stripes) {
			if (entries(stripe) == stripe.capacity && stripe.capacity < MAX_LOG) {
				stripe.capacity *= 2; // it filled up: fold less often
				stripe.log = new long[2 * stripe.capacity + 2 * LOG_PAD];
			}
			stripe.last = since;
			WORD.setVolatile(stripe, perStripe); // (publishes last with it)
		}
	}

	/** Closes every stripe (under the bucket's lock), waiting out a caller writing its entry. */
	void closeAll() {
		for (Stripe stripe : this.stripes) {
			for (int spins = 0;; spins++) {
				long w = (long) WORD.getVolatile(stripe);
				if ((w & CLOSED) != 0) {
					break;
				}
				if ((w & BUSY) == 0 && WORD.compareAndSet(stripe, w, w | CLOSED)) {
					break;
				}
				if (spins < 64) {
					Thread.onSpinWait();
				}
				else {
					Thread.yield(); // the caller on it was descheduled between its CAS and its release
				}
			}
		}
	}

	/** Entries logged by stripe {@code i} (closed). */
	int entries(int i) {
		return entries(this.stripes[i]);
	}

	private static int entries(Stripe stripe) {
		return (int) ((((long) WORD.getVolatile(stripe)) >>> COUNT_SHIFT) & 0xFFF);
	}

	/** Tokens granted by stripe {@code i} (closed): its budget less what is left. */
	long granted(int i) {
		return this.budget - (((long) WORD.getVolatile(this.stripes[i])) & MAX_BUDGET);
	}

	/** The time of entry {@code e} of stripe {@code i}. */
	long time(int i, int e) {
		return this.stripes[i].log[LOG_PAD + 2 * e];
	}

	/** The tokens of entry {@code e} of stripe {@code i}. */
	long tokens(int i, int e) {
		return this.stripes[i].log[LOG_PAD + 2 * e + 1];
	}

	/**
	 * Padding ahead of a stripe's fields: 128 bytes, as processors that fetch cache lines in pairs share
	 * them between stripes 64 bytes apart (on 2 threads, one run in four or five ran at half speed).
	 */
	@SuppressWarnings("unused")
	abstract static class Pad {

		long p01;

		long p02;

		long p03;

		long p04;

		long p05;

		long p06;

		long p07;

		long p08;

		long p09;

		long p10;

		long p11;

		long p12;

		long p13;

		long p14;

		long p15;

		long p16;
	}

	/** A stripe's fields: written by the callers on it (and by the folder while it is closed). */
	abstract static class Word extends Pad {

		volatile long word = CLOSED;

		/** The latest time logged, written under busy (or, closed, by the bucket's lock). */
		long last;

		/** The probe of the thread that took from it last (written under busy), to tell two threads share it. */
		int @Nullable [] taker;

		/** Entries the log holds (written, like the log, only while the stripe is closed). */
		int capacity = FIRST_LOG;

		long[] log = new long[2 * FIRST_LOG + 2 * LOG_PAD];
	}

	/** One stripe, padded on both sides. */
	@SuppressWarnings("unused")
	static final class Stripe extends Word {

		long q01;

		long q02;

		long q03;

		long q04;

		long q05;

		long q06;

		long q07;

		long q08;

		long q09;

		long q10;

		long q11;

		long q12;

		long q13;

		long q14;

		long q15;

		long q16;
	}
}
