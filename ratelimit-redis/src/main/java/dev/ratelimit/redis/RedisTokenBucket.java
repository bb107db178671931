package dev.ratelimit.redis;

import java.time.Duration;
import java.util.List;
import java.util.Queue;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.function.Supplier;

import dev.ratelimit.core.AbstractReservation;
import dev.ratelimit.core.BackendHealth;
import dev.ratelimit.core.BackendUnavailableException;
import dev.ratelimit.core.InvalidArgumentException;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.Rate;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.core.SharedTokenBucket;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.redis.BucketScript.Mode;
import dev.ratelimit.redis.BucketScript.Reply;
import dev.ratelimit.redis.BucketScript.Settings;
import dev.ratelimit.redis.FailureDetector.Call;
import org.jspecify.annotations.Nullable;


/**
 * A rover bucket shared by every instance of an application, on Redis.
 *
 * <p>Every acquisition is one round trip: one Lua script ({@link BucketScript}) that replenishes the
 * bucket with Redis's own clock ({@code TIME}, so the instances' clocks do not matter), takes the
 * tokens, and answers how long the caller must wait for them. The caller then waits locally: its
 * claim already holds its place, so nothing is retried and nothing is compared-and-set. The state is
 * one hash, {@code <key-prefix>{<bucket>}} (the braces are a Redis Cluster hash tag), that expires
 * when the bucket would be full again anyway.
 *
 * <h2>No thread per call</h2>
 * Calls go out on one asynchronous Lettuce connection ({@link ScriptConnection}) shared by the
 * application's buckets. A blocking caller waits on its own thread for the reply, at most
 * {@code timeout}; a {@link #reserve} returns at once, before Redis answers, and the reservation's
 * {@link Reservation#poll()} reports the answer when it has come (a reactive caller is woken by it and
 * never blocks its event loop).
 *
 * <h2>When Redis does not answer</h2>
 * A call that fails or has no reply within {@code timeout} applies the failure policy:
 * {@link OnFailure#ALLOW} lets it through, {@link OnFailure#DENY} refuses it, {@link OnFailure#LOCAL}
 * (the default) limits it with an in-memory {@link SharedTokenBucket} of the same rate and limit. The
 * {@link FailureDetector} decides when the bucket stops asking Redis (several failures in a row, never
 * load) and when it asks again. A reply that comes after its call timed out, or after its caller gave
 * up, is not lost: tokens it granted are given back.
 *
 * <p>How the {@code local} policy mirrors Redis, capped release across instances, resetting and the buckets of
 * keys: the package's design notes ({@code package-info.java}).
 *
 * <h2>Retuning</h2>
 * {@link #updateRate} and {@link #updateLimit} store the new settings in Redis with the bucket
 * ({@code <key-prefix>{<bucket>}:retuned}, which never expires), for the configuration they were made
 * from: every instance's next call uses them, until an instance starts with a different configuration
 * (its first call deletes them). The bucket's mode (enforce or shadow) switched through the endpoint is
 * kept in the same record and comes back with every reply the same way ({@link TemplateTune}).
 *
 */
public final class RedisTokenBucket implements RateLimiter, BackendHealth {

	/**
	 * The longest a capped waiter goes without asking Redis again: releases anywhere wake it at once
	 * (the script publishes them), so this only bounds a missed message.
	 */
	static final long MAX_RELEASE_ASK_MILLIS = 100;

	/** What a call does when Redis does not answer. */
	public enum OnFailure {

		/** Let the call through. */
		ALLOW,
		/** Refuse the call with {@link RateLimitExceededException}. */
		DENY,
		/** Limit the call with an in-memory bucket of the same rate and limit (the default). */
		LOCAL

	}

	private final String name;

	private final String key;

	private final ScriptConnection connection;

	/** What a call does when Redis does not answer it: chosen once, here. */
	private final FailurePolicy policy;

	private final StatsRecorder stats;

	private final LongSupplier clock;

	private final AtomicInteger waiting = new AtomicInteger();

	private final FailureDetector detector;

	private final long timeoutNanos;

	/** Claims waiting for capped tokens to be released, woken by a release anywhere. */
	private final Set<RedisClaim> releaseWaiters = ConcurrentHashMap.newKeySet();

	/** What a message on the bucket's channel runs: its capped waiters ask again. */
	private final Runnable wake = this::releasedSomewhere;

	/** A key's capped bucket: whether it is subscribed to its channel now ({@link #subscribeForReleases}). */
	private final AtomicBoolean subscribed = new AtomicBoolean();

	/**
	 * The bucket's keys: the state, the retune (the template's, for the overflow bucket), the leases and
	 * the queue; for a key's bucket, no retune.
	 */
	private final String[] keys;

	/**
	 * Whether this is the bucket of one key: its calls pass the template's settings in force as
	 * arguments ({@link TemplateTune#forKey}), since its hash cannot be read with the template's retune
	 * in one call.
	 */
	private final boolean keyBucket;

	/**
	 * The settings as configured here and the settings in force, shared with the template's other
	 * buckets on this instance (its own, its overflow bucket and its keys'); for a key on a plan, the plan's
	 * record ({@link #followPlan}: a key whose plan changes takes the new plan's).
	 */
	private volatile TemplateTune tune;

	/** Makes each claim's id, {@code <instance>:<sequence>}, unique across instances. */
	private final String idPrefix = UUID.randomUUID() + ":";

	private final AtomicLong ids = new AtomicLong();

	/**
	 * Capped tokens taken by {@link #tryAcquire(long)}, for {@link #release(long)}: Redis's leases, and the
	 * grants of the failure policy (which hold this instance's count of tokens in flight, and a late grant
	 * of Redis kept for the call).
	 */
	private final Queue<TryLease> tryLeases = new ConcurrentLinkedQueue<>();

	/** Capped tokens a {@link #tryAcquire(long)} took, and what gives them back. */
	private record TryLease(long n, Runnable release) {
	}

	/** Capped leases taken here and not released yet: with callers waiting, what keeps this bucket busy. */
	private final AtomicInteger held = new AtomicInteger();

	/** Claims made here that are neither granted nor given up: a reset has them claim again. */
	private final Set<RedisClaim> claims = ConcurrentHashMap.newKeySet();

	/** The last reset this instance acted on, microseconds of Redis's clock (guarded by {@code this}). */
	private long resetSeen;

	/** Contract revision 3: this instance's batch of the bucket, or {@code null} without ({@code batch: none}). */
	private final @Nullable RedisBatch batch;

	RedisTokenBucket(RedisTokenBucketBuilder builder, String name, ScriptConnection connection) {
		if (builder.timeout == null || builder.timeout.isZero() || builder.timeout.isNegative()) {
			throw new InvalidArgumentException("timeout", builder.timeout, Duration.ofNanos(1), null,
					"timeout of Redis bucket '" + name
					+ "' must be a positive duration, was " + builder.timeout);
		}
		Rate rate = builder.rate();
		long limit = builder.limit(rate);
		Settings own = Settings.of(rate, limit, builder.capped(), builder.lease, name);
		String templateKey = builder.keyPrefix + "{" + name + "}";
		this.clock = builder.clock();
		this.tune = (builder.tune != null) ? builder.tune
				: new TemplateTune(name, own, templateKey, connection, builder.timeout.toNanos(), this.clock);
		this.policy = switch (builder.onFailure) {
			case ALLOW -> FailurePolicy.allow();
			case DENY -> FailurePolicy.deny();
			case LOCAL -> FailurePolicy.local(own, name, this.clock);
		};
		this.name = name;
		this.keyBucket = builder.perKey != null && !builder.perKey.isEmpty();
		this.keys = BucketScript.keysOf(builder.keyPrefix, name, builder.perKey);
		this.key = this.keys[0];
		this.connection = connection;
		this.stats = builder.bucketStats();
		this.timeoutNanos = builder.timeout.toNanos();
		this.detector = new FailureDetector(name, this.policy.name(), builder.timeout.toNanos(), this.clock,
				this.keyBucket ? (reply, sent) -> {
				} : this.tune::adopt, this.tune.said(), this.keyBucket, connection::reconnecting, connection.answers());
		if (this.key.equals(templateKey)) {
			// the template's own bucket: the reads of its settings for its keys are its calls too, in the meters
			this.tune.meterThrough(this.detector);
		}
		else {
			// the overflow bucket's and the keys' calls are the bucket's calls: timed in its meters
			this.detector.addListener(this.tune::timed);
		}
		if (own.capped() && !this.keyBucket) {
			// the bucket and its overflow bucket live as long as the application: subscribed for good
			connection.subscribe(BucketScript.channel(this.key), this.wake);
		}
		if (!this.keyBucket) {
			// a reset made through any instance (contract revision 3): what this instance holds from before goes
			this.tune.onReset(this::resetHere);
		}
		this.batch = RedisBatch.of(this, builder, limit, own.capped());
	}

	/**
	 * Sends a batch call (mode {@code batch}; {@link RedisBatch}): asks for {@code want} tokens, gives {@code back}
	 * back, {@code id} = {@code <holder>#<kept>}, the lease of the batch in microseconds.
	 *
	 * @param sent told the call's future when it is sent
	 * @return the call, or {@code null} when the bucket runs on its failure policy
	 */
	@Nullable Call sendBatch(long want, long back, String id, long leaseMicros,
			Consumer<CompletableFuture<List<Object>>> sent) {
		String[] arguments = arguments(awaitSettings(), Mode.BATCH, want, back, id);
		arguments[8] = Long.toString(leaseMicros);
		return this.detector.send(() -> {
			CompletableFuture<List<Object>> future = run(arguments);
			sent.accept(future);
			return future;
		}, null);
	}

	/**
	 * Gives the tokens of this instance's batch back to Redis (contract revision 3), waiting at most the
	 * timeout: done when the application closes. Nothing without a batch.
	 */
	public void close() {
		if (this.batch != null) {
			this.batch.close();
		}
	}

	/** This instance's batch, or {@code null} ({@code batch: none}). */
	@Nullable RedisBatch batch() {
		return this.batch;
	}

	/**
	 * A key's capped bucket subscribes to its channel when a claim first waits for releases, and
	 * unsubscribes when it is idle ({@link #isIdle()}, asked before the bucket is dropped): the instance
	 * holds a subscription (and, through it, a bucket) for the keys that have callers waiting, not for
	 * every key it has ever seen.
	 */
	void subscribeForReleases() {
		if (this.keyBucket && this.subscribed.compareAndSet(false, true)) {
			this.connection.subscribe(BucketScript.channel(this.key), this.wake);
		}
	}

	/**
	 * Starts a builder.
	 *
	 * @return a new builder
	 */
	public static RedisTokenBucketBuilder builder() {
		return new RedisTokenBucketBuilder();
	}

	@Override
	public String name() {
		return this.name;
	}

	/**
	 * The key of the bucket's hash.
	 *
	 * @return the key, {@code <key-prefix>{<bucket>}}
	 */
	public String key() {
		return this.key;
	}

	/** The settings of the bucket's template (or its key's plan), shared with its other buckets on this instance. */
	TemplateTune tune() {
		return this.tune;
	}

	/**
	 * Moves the bucket of one key to the settings of another plan (or of the template), contract revision 3,
	 * "Plans": from its next call on, its calls pass the record {@code next}'s settings in force. At once, one
	 * {@code sync} call (sent without waiting for it, ahead of any call made after this one on the connection)
	 * writes the key's hash with them, the time since its last write counted at the settings it was written
	 * with and its tokens kept up to the new limit: the plan changes at that instant, as a retune of the key
	 * would. A batch's tokens go back first (taken under the old settings).
	 *
	 * @param next the plan's record (the template's for no plan)
	 */
	synchronized void followPlan(TemplateTune next) {
		if (!this.keyBucket || next == this.tune) {
			followTemplate(); // the same record (retuned, or the overflow bucket's template): read again
			return;
		}
		if (this.batch != null) {
			this.batch.retuned(); // taken under the old settings: back at once
		}
		String[] arguments = Settings.keyArguments(next.current().retunedAt(TemplateTune.PLAN_CHANGED_NOW), Mode.SYNC, 0, 0, "",
				next.resetAtMicros());
		run(arguments); // (a reply lost changes nothing: the next call counts at the settings it passes)
		this.tune = next;
		releasedSomewhere(); // a higher limit may let capped waiters in
	}

	// what its claims (RedisClaim) use

	LongSupplier clock() {
		return this.clock;
	}

	StatsRecorder stats() {
		return this.stats;
	}

	AtomicInteger waiting() {
		return this.waiting;
	}

	FailureDetector detector() {
		return this.detector;
	}

	FailurePolicy policy() {
		return this.policy;
	}

	AtomicInteger held() {
		return this.held;
	}

	Set<RedisClaim> releaseWaiters() {
		return this.releaseWaiters;
	}

	Set<RedisClaim> claims() {
		return this.claims;
	}

	boolean keyBucket() {
		return this.keyBucket;
	}

	/**
	 * Whether the bucket asks Redis (rather than applying its failure policy), for the gauge
	 * {@code ratelimit.backend.up} and the health contributor: for a bucket used with keys, also whether
	 * none of its keys' buckets (nor its overflow bucket) on this instance runs on the policy. Each of them
	 * finds out for itself; the first to switch says so, and the last of them to hear Redis again says it is
	 * back (on a Redis Cluster with the bucket's keys on several nodes, the keys on a node that does not
	 * answer keep the bucket down while the keys on the other nodes answer; a key's bucket dropped while on
	 * the policy counts until {@link FailureDetector.Said#FORGET_NANOS} after its last call, and the bucket is
	 * back at the next answer after that).
	 *
	 * <p>A bucket whose connection has never opened (Redis was not there, or refused the application, at
	 * start-up) is down before any call finds it out, and so is a bucket whose connection another bucket
	 * found down (nothing answered on it since): a bucket nobody called since an outage began does not say
	 * {@code up} (its health read probes it).
	 *
	 * @return {@code true} unless several calls in a row have failed, or the connection is not open
	 */
	@Override
	public boolean isUp() {
		return this.detector.isUp() && this.detector.sharedError() == null && this.connection.notConnected() == null
				&& this.detector.connectionOutage() == null;
	}

	/** The bucket's connection (for tests: whether Lettuce reconnects it, where Sentinel moved it). */
	ScriptConnection connection() {
		return this.connection;
	}

	/**
	 * The health of the backend for the endpoint: {@code up}, or {@code down} with the last error. A read
	 * while the bucket is down sends the probe when one is due (and waits for it, at most the timeout), so
	 * that an instance whose health keeps calls away still finds Redis back.
	 *
	 * @return the health
	 */
	@Override
	public String health() {
		return startHealthRead().get();
	}

	@Override
	public Supplier<String> startHealthRead() {
		// a bucket said down may get no calls at all (a load balancer takes the instance out of rotation on
		// its health): the read itself asks Redis when a probe is due, so that it finds Redis back
		Call probe = isUp() ? null : send(this.tune.current(), probeMode(), 0, 0, "");
		return () -> {
			if (probe != null) {
				probe.awaitUninterruptibly();
			}
			return state();
		};
	}

	/** The health as it stands, without asking Redis (for {@link #toString()}: printing a bucket asks nothing). */
	private String state() {
		if (!this.detector.isUp()) {
			return "down: " + this.detector.lastError();
		}
		String error = this.detector.sharedError(); // read once: another detector may say Redis is back meanwhile
		if (error == null) {
			error = this.connection.notConnected();
		}
		if (error == null) {
			error = this.detector.connectionOutage(); // found by another bucket on the connection
		}
		return (error != null) ? "down: " + error : "up";
	}

	/**
	 * Tells {@code listener} the mode switched for every instance (kept with the retune) when a reply changes
	 * it, and at once the mode last read: {@code true} shadow, {@code false} enforce, {@code null} as configured.
	 *
	 * @param listener told the mode; quick (it runs on Lettuce's thread)
	 */
	public void onModeChange(Consumer<@Nullable Boolean> listener) {
		this.tune.onModeChange(listener);
	}

	/**
	 * Switches the bucket's mode for every instance (stored with its retune; waits at most the timeout).
	 *
	 * @param shadow {@code true} for shadow mode, {@code false} for enforce
	 * @throws dev.ratelimit.core.BackendUnavailableException when Redis does not answer: nothing changed
	 */
	public void switchMode(boolean shadow) {
		this.tune.switchMode(shadow);
	}

	/**
	 * A read's mode: {@code peek} (writes nothing); while the bucket (or one of its keys' buckets) is on the
	 * policy {@code sync}, a write that changes nothing, as the read may be the probe: a Redis that answers
	 * reads and refuses writes must not put it back.
	 */
	private Mode probeMode() {
		return (this.detector.isUp() && this.detector.sharedError() == null) ? Mode.PEEK : Mode.SYNC;
	}

	@Override
	public void onCall(CallListener listener) {
		this.detector.addListener(listener);
	}

	@Override
	public boolean tryAcquire(long n) {
		this.tune.current().checkCost(n, this.name);
		if (n == 0) {
			this.stats.recordGranted(0);
			return true;
		}
		RedisBatch batch = this.batch;
		int found = (batch != null) ? batch.tryAcquire(n) : RedisBatch.NO_ANSWER;
		if (found != RedisBatch.NO_ANSWER) {
			record(found == RedisBatch.GRANTED);
			return found == RedisBatch.GRANTED;
		}
		Settings s = awaitSettings();
		s.checkCost(n, this.name);
		String id = s.capped() ? newId(n) : "";
		Call call = send(s, Mode.ACQUIRE, n, 0, id);
		Reply reply = (call != null) ? call.awaitUninterruptibly() : null;
		if (reply == null) {
			boolean granted = this.policy.tryAcquire(n, call, this.tune);
			if (granted && s.capped()) {
				// released like a lease: this instance's count in flight, and the late grant the policy kept
				this.tryLeases.add(new TryLease(n, () -> releasePolicyGrant(n, call, id)));
			}
			record(granted);
			return granted;
		}
		boolean granted = reply.granted() && reply.waitMicros() == 0 && call.take();
		if (granted && s.capped() && !this.policy.admit(n, this.tune)) {
			// this instance holds the limit in flight already (calls its local policy let through, which Redis does
			// not count): the grant goes back
			sendUnconditionally(Mode.REFUND, n, id);
			granted = false;
		}
		if (granted) {
			mirror(Mode.CHARGE, n);
		}
		if (granted && s.capped()) {
			this.held.incrementAndGet();
			this.tryLeases.add(new TryLease(n, () -> releaseLease(id, n)));
		}
		record(granted);
		return granted;
	}

	private void record(boolean granted) {
		if (granted) {
			this.stats.recordGranted(0);
		}
		else {
			this.stats.recordRejected();
		}
	}

	@Override
	public Permit acquire(long n, Duration maxWait) throws InterruptedException {
		AbstractReservation.budgetNanos(maxWait);
		this.tune.current().checkCost(n, this.name);
		if (Thread.currentThread().isInterrupted()) {
			throw new InterruptedException("Interrupted before acquiring " + n + " tokens of '" + this.name + "'");
		}
		RedisBatch batch = this.batch;
		Permit fromBatch = (batch != null && n > 0) ? batch.acquire(n, maxWait, this.stats) : null;
		if (fromBatch != null) {
			return fromBatch;
		}
		// a claim on Redis, or on the local fallback while Redis does not answer: either way it holds its
		// tokens' place, so wait for it (claiming again would take the tokens twice)
		return ((AbstractReservation) reserve(n, maxWait)).await();
	}

	/**
	 * Claims {@code n} tokens without waiting for Redis: the claim's first {@link Reservation#poll()}
	 * calls report the answer (or the failure policy's decision) once it is there, and a caller that
	 * registered {@link Reservation#onWake} is woken when it comes.
	 */
	@Override
	public Reservation reserve(long n, Duration maxWait) {
		long budget = AbstractReservation.budgetNanos(maxWait);
		this.tune.current().checkCost(n, this.name);
		long start = this.clock.getAsLong();
		RedisBatch batch = this.batch;
		if (batch != null && n > 0) {
			if (batch.take(n)) {
				return new BatchGrant(this, batch, n, maxWait, start, 0);
			}
			long refused = batch.refusedFor(start);
			if (refused > budget) {
				return new BatchGrant(this, batch, n, maxWait, start, refused);
			}
		}
		RedisClaim claim = new RedisClaim(this, n, maxWait, budget, start);
		if (n == 0) {
			claim.allow(start);
			return claim;
		}
		this.claims.add(claim);
		claim.ask(start);
		return claim;
	}

	/**
	 * Capped release of tokens taken by {@link #tryAcquire(long)}: the oldest of its leases of
	 * {@code n} tokens. (Tokens taken by {@link #acquire} or {@link #reserve} are released by their
	 * permit.)
	 *
	 * @param n the tokens released
	 * @throws IllegalStateException when no lease of {@code n} tokens taken by {@code tryAcquire} is
	 *         held
	 */
	public void release(long n) {
		if (!this.tune.configured().capped() || n == 0) {
			return;
		}
		for (TryLease lease : this.tryLeases) {
			if (lease.n() == n && this.tryLeases.remove(lease)) {
				lease.release().run();
				return;
			}
		}
		throw new IllegalStateException("Rate limit bucket '" + this.name + "' holds no lease of " + n
				+ " tokens taken by tryAcquire");
	}

	/** Releases the lease {@code id} of {@code n} tokens that Redis granted here. */
	void releaseLease(String id, long n) {
		this.held.decrementAndGet();
		sendUnconditionally(Mode.RELEASE, 0, id);
		this.policy.released(n);
		releasedSomewhere();
	}

	/**
	 * Releases {@code n} capped tokens that the failure policy let through after {@code call} (if any) went
	 * unanswered: this instance's count in flight, and the grant of Redis kept for it, now or when it comes.
	 */
	void releasePolicyGrant(long n, @Nullable Call call, String id) {
		this.policy.released(n);
		if (call != null) {
			call.endKept(() -> sendUnconditionally(Mode.RELEASE, 0, id));
		}
		releasedSomewhere();
	}

	/**
	 * Gives back tokens a granted call took (the rate only: a capped call's lease is still released by
	 * its permit). Sent to Redis while it answers; while the bucket runs on its {@code local} failure
	 * policy, to the local bucket the calls are taken from then (with {@code allow} or {@code deny} there
	 * is nothing to give back to). Like a release, it is sent without waiting for the answer.
	 */
	@Override
	public void refund(long n) {
		adjust(Mode.REFUND, n);
	}

	/**
	 * Takes {@code n} more tokens at once, into debt if need be (callers already waiting keep their
	 * wait; later ones wait for the debt), on Redis or, while the bucket runs on its {@code local} failure
	 * policy, on the local bucket. Sent without waiting for the answer.
	 */
	@Override
	public void charge(long n) {
		adjust(Mode.CHARGE, n);
	}

	private void adjust(Mode mode, long n) {
		Settings s = this.tune.current();
		if (n < 0 || n > s.maxCost()) {
			throw new IllegalArgumentException("n must be between 0 and " + s.maxCost() + " for Redis bucket '"
					+ this.name + "' (exact arithmetic in Lua doubles), was " + n);
		}
		if (n == 0) {
			return;
		}
		if (this.detector.isUp()) {
			sendUnconditionally(mode, n, "");
		}
		mirror(mode, n);
	}

	/**
	 * Takes ({@code CHARGE}) or gives back ({@code REFUND}) {@code n} tokens on the local bucket of the
	 * {@code local} policy: while Redis answers, it mirrors what Redis granted here (see the class notes);
	 * while the bucket is on its policy, it is the bucket.
	 */
	void mirror(Mode mode, long n) {
		this.policy.mirror(mode, n, this.tune);
	}

	/**
	 * Whether this instance has nothing going on with the bucket: nobody waiting here, no capped tokens
	 * taken here in flight, and (policy {@code local}) the in-memory bucket full. The state itself lives in
	 * Redis (and expires there when full), and the in-memory bucket of a new object starts full, so such a
	 * bucket object can be dropped and made again without any caller seeing the difference.
	 */
	@Override
	public boolean isIdle() {
		boolean idle = untilLocalFull() == 0;
		if (idle && this.subscribed.compareAndSet(true, false)) {
			// about to be dropped (the only caller is the sweep of the keys' buckets): a claim that waits for
			// releases later subscribes again (a release published meanwhile is found by its next ask)
			this.connection.unsubscribe(BucketScript.channel(this.key), this.wake);
		}
		return idle;
	}

	/**
	 * What dropping this object would lose (contract revision 3, "per-key buckets under attack"): the
	 * nanoseconds until the {@code local} policy's in-memory bucket is full again (0 for another policy, or
	 * when it is full), or {@code -1} while something goes on here (a caller waiting, capped tokens in
	 * flight, a batch holding tokens). Asks nothing of Redis: a key's state there is kept whatever happens to this object. The
	 * per-key store forgets an object that owes tokens here only after recording this, and charges the
	 * object made again for the key ({@link #oweLocally}), so that the in-memory bucket keeps the bound
	 * across drops.
	 *
	 * @return nanoseconds, 0, or {@code -1}
	 */
	public long untilLocalFull() {
		FailurePolicy.Flight flight = this.policy.flight();
		if (this.waiting.get() != 0 || this.held.get() != 0 || (flight != null && flight.tokens() != 0)
				|| (this.batch != null && !this.batch.holdsNothing())) {
			return -1;
		}
		return this.policy.untilFull(this.tune);
	}

	/**
	 * Takes {@code n} tokens from the {@code local} policy's in-memory bucket only (it may owe them), not
	 * from Redis: what a forgotten object of this key still owed here ({@link #untilLocalFull}). Nothing for
	 * another policy.
	 *
	 * @param n the tokens, {@code >= 1}
	 */
	public void oweLocally(long n) {
		this.policy.mirror(Mode.CHARGE, n, this.tune);
	}

	/** Tokens were released or a waiter left the queue, here or elsewhere: capped waiters ask again. */
	void releasedSomewhere() {
		for (RedisClaim waiter : this.releaseWaiters) {
			waiter.releasedNearby();
		}
	}

	String newId(long n) {
		return this.idPrefix + this.ids.incrementAndGet() + "#" + n;
	}

	@Override
	public RateLimiterSnapshot snapshot() {
		Settings asked = awaitSettings();
		// right after a call Redis did not answer (a refusal's headers): from what is known, not waiting again
		Call call = this.detector.failedLately() ? null : send(asked, probeMode(), 0, 0, "");
		Reply reply = (call != null) ? call.awaitUninterruptibly() : null;
		// a key's bucket shows the settings its call passed; the others, those the reply says are in force
		Settings s = this.keyBucket ? asked : this.tune.current();
		if (reply == null) {
			return this.policy.snapshot(s, this.waiting.get(), this.stats, this.tune);
		}
		RateLimiterSnapshot view = BucketScript.view(s, reply, this.waiting.get(), this.stats);
		RedisBatch batch = this.batch;
		return (batch == null) ? view : batch.withHand(view);
	}

	/**
	 * Retunes the bucket for every instance (contract revision 2): the new settings live in Redis with
	 * the bucket ({@code <key-prefix>{<bucket>}:retuned}, which never expires), every instance's next call
	 * uses them, and they hold until an instance starts with a different configuration. The time that
	 * passed counts at the old rate. The retune of a bucket used with a key is its template's, and
	 * reaches its overflow bucket and every key's bucket on every instance within a second
	 * ({@link TemplateTune}).
	 *
	 * <p>On the bucket of one key, or on the overflow bucket, this stores nothing: their settings are
	 * always the template's in force (the starter retunes the template, then calls this on the key
	 * buckets it holds). It only asks for the template's settings to be read again.
	 *
	 * @throws IllegalStateException when Redis does not answer: a retune that only this instance
	 *         knew would be undone by the next answer
	 */
	@Override
	public synchronized void updateRate(long tokens, Duration period) {
		if (this.key.equals(this.tune.templateKey())) {
			retune(this.tune.current().withRate(Rate.of(tokens, period), this.name));
		}
		else {
			followTemplate();
		}
	}

	/**
	 * Changes the limit for every instance, like {@link #updateRate} (and, like it, only follows the
	 * template on the bucket of a key or the overflow bucket).
	 *
	 * @throws IllegalStateException when Redis does not answer
	 */
	@Override
	public synchronized void updateLimit(long limit) {
		if (this.key.equals(this.tune.templateKey())) {
			retune(this.tune.current().withLimit(limit, this.name));
		}
		else {
			followTemplate();
		}
	}

	/**
	 * Resets the bucket for every instance (contract revision 3; see "Resetting" in the class notes): one script
	 * call makes its hash full and records the reset for every instance, then this instance drops what it holds
	 * from before. On the bucket of one key it resets that key's hash.
	 *
	 * @throws BackendUnavailableException when Redis does not answer within the timeout: the bucket may then not
	 *         be reset
	 */
	@Override
	public void reset() {
		Settings s = awaitSettings();
		String[] arguments = arguments(s, Mode.RESET, 0, 0, "");
		Call call = this.detector.send(() -> run(arguments), null);
		Reply reply = (call != null) ? call.awaitUninterruptibly() : null;
		if (reply == null) {
			throw new BackendUnavailableException("Rate limit bucket '" + this.name
					+ "' cannot be reset while Redis does not answer (" + this.detector.lastError() + ")", null);
		}
		resetHere(reply.resetAtMicros());
	}

	/**
	 * A reset made at {@code resetAtMicros} (Redis's clock), through this instance or another: the {@code local}
	 * policy's bucket is full again, and the callers waiting here claim again; once per reset.
	 */
	void resetHere(long resetAtMicros) {
		synchronized (this) {
			if (resetAtMicros <= this.resetSeen) {
				return;
			}
			this.resetSeen = resetAtMicros;
		}
		this.policy.reset();
		for (RedisClaim claim : this.claims) {
			claim.resetNearby();
		}
		releasedSomewhere();
	}

	private void followTemplate() {
		this.tune.read();
		releasedSomewhere(); // a higher limit may let capped waiters in
	}

	private void retune(Settings next) {
		if (this.batch != null) {
			this.batch.retuned(); // taken under the old settings: back at once
		}
		String[] arguments = Settings.arguments(this.tune.configured(), Mode.RETUNE, 0, 0, "", next);
		Call call = this.detector.send(() -> run(arguments), null);
		Reply reply = (call != null) ? call.awaitUninterruptibly() : null;
		if (reply == null) {
			throw new BackendUnavailableException("Rate limit bucket '" + this.name
					+ "' cannot be retuned while Redis does not answer (" + this.detector.lastError() + ")", null);
		}
		releasedSomewhere(); // a higher limit may let capped waiters in
	}

	/**
	 * The settings for a call now. A bucket with four keys passes its configuration and the script
	 * applies the retune in force; a key's bucket passes the template's settings as read by
	 * {@link TemplateTune}, and waits for them to be read again (at most the timeout) when they are too
	 * old, unless the bucket runs on its failure policy.
	 */
	private Settings awaitSettings() {
		if (!this.keyBucket) {
			return this.tune.current();
		}
		Settings s = this.tune.forKey(this.clock.getAsLong());
		if (s != null) {
			return s;
		}
		if (this.detector.isUp()) {
			try {
				this.tune.read().get(this.timeoutNanos, TimeUnit.NANOSECONDS);
			}
			catch (InterruptedException ex) {
				Thread.currentThread().interrupt(); // the caller's Redis call sees it
			}
			catch (ExecutionException | TimeoutException ex) {
				// the settings stay as they were: the call itself finds out whether Redis answers
			}
		}
		return this.tune.current();
	}

	// ---- Redis calls ----------------------------------------------------------------------------------

	/**
	 * Sends a call unless the bucket is in its back-off ({@code null}: apply the policy).
	 *
	 * @param s the settings of the call ({@link #awaitSettings()}): a key's bucket passes them
	 */
	@Nullable Call send(Settings s, Mode mode, long n, long maxWaitMicros, String id) {
		String[] arguments = arguments(s, mode, n, maxWaitMicros, id);
		return this.detector.send(() -> run(arguments),
				(mode == Mode.ACQUIRE) ? (unused) -> giveBack(unused, n, id) : null);
	}

	private CompletableFuture<List<Object>> run(String[] arguments) {
		return this.connection.run(this.keys, arguments);
	}

	/**
	 * A refund, a release or a departure from the queue: sent even during a back-off (Lettuce holds it
	 * while it reconnects), so that nothing stays claimed for a failure that is already over.
	 */
	void sendUnconditionally(Mode mode, long n, String id) {
		run(arguments(this.tune.current(), mode, n, 0, id));
	}

	/**
	 * The script's arguments: a key's bucket passes the settings in force (it has no retune record) and
	 * the time of the retune they come from; the others, the configuration (the script compares a
	 * retune's with it).
	 */
	private String[] arguments(Settings inForce, Mode mode, long n, long maxWaitMicros, String id) {
		return this.keyBucket ? Settings.keyArguments(inForce, mode, n, maxWaitMicros, id, this.tune.resetAtMicros())
				: Settings.arguments(this.tune.configured(), mode, n, maxWaitMicros, id, null);
	}

	/** Gives back what an answer nobody takes holds: its tokens, or its place in the queue. */
	private void giveBack(Reply reply, long n, String id) {
		if (reply.granted()) {
			sendUnconditionally(Mode.REFUND, n, id);
		}
		else if (reply.queued()) {
			sendUnconditionally(Mode.LEAVE, 0, id);
		}
	}

	@Override
	public String toString() {
		return "RedisTokenBucket '" + this.name + "' [" + this.key + ", " + state() + "]";
	}
}
