package dev.ratelimit.spring.engine;

import java.time.Duration;
import java.util.function.Supplier;

import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.BucketStats;
import dev.ratelimit.spring.KeyedBuckets;
import dev.ratelimit.spring.WaitObserver;
import org.jspecify.annotations.Nullable;

/**
 * The limiting engine: the buckets one kind of call takes from (a method's annotations, a set of
 * matching web rules, a set of matching outbound rules), in claim order, and how a call takes from
 * them, given each call's costs and keys. It never sees an annotation, an expression or a request:
 * the front ends resolve those and call it.
 *
 * <p>One bucket without a {@link Settlement} takes the single-bucket path, which costs what a call to
 * the limiter costs. Several buckets, or settled calls, take the general path: a call claims from every
 * bucket in the order given (front ends give it by bucket name; claims never block, so no order of
 * callers can deadlock), waits once for the longest wait, and gives every claim back when any is
 * refused, naming the refusing bucket whose wait was longest ({@link SeveralBucketsExceeded} when
 * several refuse). Buckets in shadow mode decide without holding the call back.
 *
 * <p>Three ways of waiting: {@link #acquire} parks the calling thread; {@link #reserve} returns a
 * claim to poll, which {@link AsyncWaits} (a {@code CompletableFuture}) and {@link ReactivePermits} (a
 * {@code Mono}) wait for without a thread.
 */
public final class Limits {

	/** In claim order. */
	final Limit[] limits;

	/** The one limit of a single-bucket plan without settlement; else {@code null}. */
	private final @Nullable Limit single;

	/** Whether any limit is settled on completion. */
	private final boolean completes;

	/**
	 * The general path with local buckets only: a blocking call first tries to take from each without
	 * waiting, which is what almost every call finds.
	 */
	private final boolean optimistic;

	/** Whether any limit takes from per-key buckets (whose claims note the bucket they took from). */
	private final boolean keyed;

	/** Whether every bucket lives in this JVM (taking from it costs no round trip). */
	private final boolean local;

	/** Told of the calls that wait or are refused; {@link WaitObserver#NONE} (the usual case) costs nothing. */
	private final WaitObserver observer;

	/** Whether calls that wait are observed. */
	private final boolean observed;

	/** The buckets' names, as observations name them ({@code ,} between several). */
	private final String names;

	private Limits(Limit[] limits) {
		this.limits = limits.clone();
		boolean completes = false;
		boolean local = true;
		boolean keyed = false;
		for (Limit limit : limits) {
			completes |= limit.completes;
			local &= limit.local;
			keyed |= limit.keyed();
		}
		this.completes = completes;
		this.single = (limits.length == 1 && !completes) ? limits[0] : null;
		this.optimistic = this.single == null && local;
		this.keyed = keyed;
		this.local = local;
		this.observer = limits[0].stats.observer();
		this.observed = this.observer != WaitObserver.NONE;
		StringBuilder names = new StringBuilder();
		for (Limit limit : limits) {
			names.append((names.length() > 0) ? "," : "").append(limit.bucket);
		}
		this.names = names.toString();
	}

	/**
	 * The limits of one kind of call.
	 *
	 * @param limits the buckets, in the order every call claims them (by bucket name, so that no two
	 *        kinds of call claim the same buckets in opposite orders)
	 * @return the limits
	 */
	public static Limits of(Limit... limits) {
		if (limits.length == 0) {
			throw new IllegalArgumentException("A call takes from at least one bucket");
		}
		return new Limits(limits);
	}

	/**
	 * How many buckets.
	 *
	 * @return the count
	 */
	public int size() {
		return this.limits.length;
	}

	/**
	 * One of the limits.
	 *
	 * @param i its place in claim order
	 * @return the limit
	 */
	public Limit limit(int i) {
		return this.limits[i];
	}

	/**
	 * Whether calls take the single-bucket path ({@link #acquire(long, Object)}, {@link #reserve(long, Object)}),
	 * which needs no arrays.
	 *
	 * @return whether there is one bucket and no settlement
	 */
	public boolean single() {
		return this.single != null;
	}

	/**
	 * The state of the bucket a call with key {@code key} takes from (its key's, or the bucket itself).
	 * Makes no bucket for the key.
	 *
	 * @param i the bucket's place in claim order
	 * @param key the call's key for it, or {@code null}
	 * @return the snapshot
	 */
	public RateLimiterSnapshot snapshot(int i, @Nullable Object key) {
		return this.limits[i].snapshot(key);
	}

	/**
	 * Takes a single-bucket call's tokens, waiting at most the max-wait (parking the thread).
	 *
	 * @param tokens the cost
	 * @param key the key, or {@code null}
	 * @return the permit, to close when the call completes
	 * @throws RateLimitExceededException when refused; nothing is kept
	 * @throws InterruptedException when interrupted while waiting; nothing is kept
	 */
	public Permit acquire(long tokens, @Nullable Object key) throws InterruptedException {
		Limit one = this.single;
		return (one != null) ? acquireOne(one, tokens, key) : acquireAll(new long[] { tokens }, new Object[] { key });
	}

	/**
	 * Takes a call's tokens from every bucket, or from none, waiting at most each bucket's max-wait.
	 *
	 * @param tokens each bucket's cost, in claim order
	 * @param keys each bucket's key, {@code null} for a bucket without keys
	 * @return the permit, to close when the call completes (after {@link #complete})
	 * @throws RateLimitExceededException when refused; nothing is kept
	 * @throws InterruptedException when interrupted while waiting; nothing is kept
	 */
	public Permit acquire(long[] tokens, @Nullable Object[] keys) throws InterruptedException {
		Limit one = this.single;
		return (one != null) ? acquireOne(one, tokens[0], keys[0]) : acquireAll(tokens, keys);
	}

	/**
	 * Claims a single-bucket call's tokens without waiting.
	 *
	 * @param tokens the cost
	 * @param key the key, or {@code null}
	 * @return the claim, to poll until ready, then turn into a permit, or cancel
	 * @throws RateLimitExceededException when refused at once; nothing is kept
	 */
	public Reservation reserve(long tokens, @Nullable Object key) {
		Limit one = this.single;
		if (!this.observed) {
			return (one != null) ? reserveOne(one, tokens, key) : claim(new long[] { tokens }, new Object[] { key });
		}
		return reserve(new long[] { tokens }, new Object[] { key });
	}

	/**
	 * Claims a call's tokens from every bucket, or from none, without waiting.
	 *
	 * @param tokens each bucket's cost, in claim order
	 * @param keys each bucket's key, {@code null} for a bucket without keys
	 * @return the claim, to poll until ready, then turn into a permit, or cancel
	 * @throws RateLimitExceededException when refused at once; nothing is kept
	 */
	public Reservation reserve(long[] tokens, @Nullable Object[] keys) {
		Limit one = this.single;
		if (!this.observed) {
			return (one != null) ? reserveOne(one, tokens[0], keys[0]) : claim(tokens, keys);
		}
		return observe(() -> (one != null) ? reserveOne(one, tokens[0], keys[0]) : claim(tokens, keys));
	}

	/**
	 * Takes a call's tokens when every bucket has them now, without waiting; otherwise takes nothing and
	 * counts nothing, and the caller claims with {@link #reserve} and waits as it can (a servlet request
	 * without its thread). Buckets on another backend (a round trip) and shadow buckets always say
	 * {@code null}: their claim decides.
	 *
	 * @param tokens each bucket's cost, in claim order
	 * @param keys each bucket's key, {@code null} for a bucket without keys
	 * @return the permit, or {@code null} when the call must claim
	 */
	public @Nullable Permit takeNow(long[] tokens, @Nullable Object[] keys) {
		if (!this.local) {
			return null;
		}
		try {
			return takeAtOnce(tokens, keys);
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt(); // taking what is there never waits: the flag was set before
			return null;
		}
	}

	/**
	 * Settles a call that completed, before its permit is closed: each settled bucket keeps what the
	 * settlement says the call really cost, given back at once when less, taken without waiting when more
	 * (callers already waiting keep their place). Once per call; a no-op for a permit of limits without
	 * settlement, and for a bucket that kept nothing (a shadow bucket that would have refused).
	 *
	 * @param permit the call's permit
	 * @param settlement what the call really cost on each bucket
	 */
	public void complete(Permit permit, Settlement settlement) {
		if (permit instanceof Call call) {
			call.complete(settlement);
		}
	}

	/** The single-bucket path: the limiter's own acquire, or the shadow decision. */
	private Permit acquireOne(Limit one, long tokens, @Nullable Object key) throws InterruptedException {
		if (one.isShadow(key)) {
			Permit permit = one.shadow(tokens, key, null, null, 0);
			return (permit != null) ? permit : Permit.noop();
		}
		if (!this.observed) {
			return one.acquire(tokens, key);
		}
		if (one.local) {
			// what is there now is taken as without an observer (a refusal here is not counted: the claim decides)
			boolean deferred = BucketStats.defer(true);
			try {
				return one.acquire(tokens, key, Duration.ZERO, null, null, 0, true);
			}
			catch (RateLimitExceededException ex) {
				// not there now: claimed below, and observed if it waits
			}
			finally {
				BucketStats.defer(deferred);
			}
		}
		Reservation reservation = observe(() -> reserveOne(one, tokens, key));
		return awaitObserved(reservation);
	}

	/** The blocking wait of an observed claim (made by {@link #reserve}, which observes a refusal at the claim). */
	private Permit awaitObserved(Reservation reservation) throws InterruptedException {
		return ObservedReservation.await(reservation, this.names);
	}

	/** The general path: the first try when it may succeed, else claim from every bucket and wait. */
	private Permit acquireAll(long[] tokens, @Nullable Object[] keys) throws InterruptedException {
		if (this.optimistic) {
			Permit permit = takeAtOnce(tokens, keys);
			if (permit != null) {
				return permit;
			}
		}
		if (!this.observed) {
			return claim(tokens, keys).await();
		}
		return awaitObserved(observe(() -> claim(tokens, keys)));
	}

	/** Makes a claim, observed when an observer is there: its wait, and a refusal at once. */
	private Reservation observe(Supplier<Reservation> claim) {
		try {
			return new ObservedReservation(claim.get(), this.observer, this.names);
		}
		catch (RateLimitExceededException ex) {
			ObservedReservation.refusedAtOnce(this.observer, this.names, ex);
			throw ex;
		}
	}

	/**
	 * The blocking path's first try: takes from every bucket, in order, only what is there now (each
	 * limiter counts its grant). When a bucket has not enough now (or is in shadow mode), gives back what
	 * was taken (a refund, then the release) and takes back its count, as if nothing had happened, and
	 * the caller claims and waits as usual; that bucket's refusal is not counted.
	 *
	 * @return the permit, or {@code null} when the call must claim and wait
	 */
	private @Nullable Permit takeAtOnce(long[] tokens, @Nullable Object[] keys) throws InterruptedException {
		Limit[] limits = this.limits;
		int count = limits.length;
		Permit[] permits = null;
		RateLimiter[] targets = this.keyed ? new RateLimiter[count] : null;
		KeyedBuckets.Entry[] held = (this.keyed && this.completes) ? new KeyedBuckets.Entry[count] : null;
		int taken = 0;
		boolean deferred = BucketStats.defer(true);
		try {
			for (; taken < count; taken++) {
				Limit limit = limits[taken];
				if (limit.isShadow(keys[taken])) {
					break;
				}
				Permit permit;
				try {
					permit = limit.acquire(tokens[taken], keys[taken], Duration.ZERO, targets, held, taken, false);
				}
				catch (RateLimitExceededException ex) {
					break;
				}
				if (permit != Permit.noop()) {
					if (permits == null) {
						permits = new Permit[count];
					}
					permits[taken] = permit;
				}
			}
		}
		finally {
			if (taken < count) {
				giveBack(taken, tokens, keys, targets, permits);
				unpin(held);
			}
			BucketStats.defer(deferred);
		}
		if (taken < count) {
			return null;
		}
		if (targets != null) {
			for (int i = 0; i < count; i++) {
				limits[i].countIfOverflow(targets[i]); // counted once per call, now that it took from them
			}
		}
		if (this.completes) {
			return Call.granted(limits, tokens, keys, targets, held, (permits != null) ? permits : new Permit[count]);
		}
		return (permits != null) ? new Permits(permits) : Permit.noop();
	}

	private void giveBack(int taken, long[] tokens, @Nullable Object[] keys, @Nullable RateLimiter @Nullable [] targets,
			@Nullable Permit[] permits) {
		for (int i = 0; i < taken; i++) {
			this.limits[i].refund(tokens[i], keys[i], (targets != null) ? targets[i] : null,
					(permits != null) ? permits[i] : null);
			if (permits != null && permits[i] != null) {
				permits[i].close();
			}
			this.limits[i].stats.ungrant();
		}
	}

	/** Lets go the keys' buckets a call kept for its completion, when it does not go ahead after all. */
	private static void unpin(KeyedBuckets.@Nullable Entry @Nullable [] held) {
		if (held != null) {
			for (KeyedBuckets.Entry entry : held) {
				if (entry != null) {
					entry.unpin();
				}
			}
		}
	}

	/** The permits of several buckets, released together, once. */
	private static final class Permits implements Permit {

		private final @Nullable Permit[] permits;

		Permits(@Nullable Permit[] permits) {
			this.permits = permits;
		}

		@Override
		public void close() {
			for (Permit permit : this.permits) {
				if (permit != null) {
					permit.close(); // each releases at most once
				}
			}
		}
	}

	/** The single-bucket claim: the limiter's own, or (shadow mode) a call decided at once. */
	private Reservation reserveOne(Limit one, long tokens, @Nullable Object key) {
		if (one.isShadow(key)) {
			return claim(new long[] { tokens }, new Object[] { key });
		}
		return one.reserve(tokens, key);
	}

	/**
	 * Claims from every bucket, or from none: every cost and key is evaluated first (a bad one fails
	 * the call before anything is claimed); then each enforcing bucket is claimed in order, and when
	 * any refuses (at its claim; and, once one did, a claim that was accepted but refuses at a first look:
	 * a capped bucket with max-wait 0 whose tokens are in flight), every claim is given back and the
	 * refusing bucket whose wait was longest is named
	 * and alone counts the call as rejected (when several refuse, the refusal lists them all:
	 * {@link SeveralBucketsExceeded}). Buckets in shadow mode decide last, never refusing.
	 */
	private Call claim(long[] tokens, @Nullable Object[] keys) {
		int count = this.limits.length;
		Call call = new Call(this.limits, tokens, keys);
		Refusals refusals = null;
		RateLimitExceededException[] refused = null;
		boolean deferred = BucketStats.defer(true);
		try {
			for (int i = 0; i < count; i++) {
				Limit limit = this.limits[i];
				if (limit.isShadow(keys[i])) {
					continue;
				}
				try {
					call.parts[i] = limit.reserve(tokens[i], keys[i], call.targets, call.held, i);
				}
				catch (RateLimitExceededException ex) {
					if (refused == null) {
						refused = new RateLimitExceededException[count];
					}
					refused[i] = ex;
				}
			}
			if (refused != null) {
				// a claim that was accepted but refuses at its first look (a capped bucket with max-wait 0 whose
				// tokens are in flight) refuses the call as well: it is named and listed as at a poll, in claim order
				for (int i = 0; i < count; i++) {
					Reservation part = call.parts[i];
					if (refused[i] == null && part != null) {
						try {
							part.poll();
						}
						catch (RateLimitExceededException refusal) {
							refused[i] = refusal;
						}
					}
				}
				refusals = Refusals.inClaimOrder(this.limits, refused);
				call.cancel();
			}
			else {
				for (int i = 0; i < count; i++) {
					if (call.parts[i] == null) {
						call.shadowed(i, this.limits[i].shadow(tokens[i], keys[i], call.targets, call.held, i));
					}
				}
			}
		}
		catch (RuntimeException ex) {
			call.cancel();
			throw ex;
		}
		finally {
			BucketStats.defer(deferred);
		}
		if (refusals != null) {
			throw refusals.decide();
		}
		return call;
	}
}
