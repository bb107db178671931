package dev.ratelimit.redis;

import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import java.util.function.LongSupplier;
import java.util.function.ObjLongConsumer;
import java.util.function.Supplier;

import dev.ratelimit.core.BackendHealth;
import dev.ratelimit.redis.BucketScript.Reply;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

/**
 * Decides when a bucket stops asking Redis and when it asks again, and settles every call to Redis
 * exactly once as {@code ok}, {@code timeout} or {@code error}.
 *
 * <h2>Rules</h2>
 * <ol>
 * <li>Only failures trip, never load (contract revision 3). A call counts towards a switch when it
 * fails: an error (not connected, the connection lost, an error reply such as out of memory, a read-only
 * replica or a script error, a reply that is not the script's), or no reply within the timeout while Redis
 * answers nothing at all, that is when the connection is lost (Lettuce failed to reconnect it), or when
 * no call on its connection (any bucket's, in time or late) was answered since it was sent nor for the
 * minimum silence before (two seconds on a real connection, {@link Answers}: a busy machine may keep
 * Lettuce's thread from reading replies for several timeouts), no caller on the connection found itself
 * starved of the processor within that time (woken a whole timeout past its deadline: then so, likely,
 * was the thread that reads the replies), and the connection is not being opened for the first time. A call that times out while replies keep arriving, however late, waited behind other calls (in
 * Lettuce's queue, on a busy machine, behind a busy Redis): that is load. It is settled as a timeout (its
 * caller applies the policy for that call alone, and the meters say {@code timeout}) and does not count.
 * Any reply, in time or late, starts the count again. The failures are counted in two runs: the
 * detector's own, and the bucket's ({@link Said}: its detectors together, its overflow bucket's and its keys'
 * included, so that a bucket used with many keys, each called a few times or dropped when idle and made
 * again, switches like any other). A detector switches when either run reaches the count; any answer to
 * any of them starts the bucket's run again (on a Redis Cluster a key on a node that does not answer still
 * switches on its own run). The bucket switches to its policy after
 * {@value #FAILURES_TO_TRIP} counted failures in a row, where "in a row" means each was sent after the
 * previous one was seen to fail. The calls caught together in one stall count once however many they
 * are, so tripping on silence takes at least {@code FAILURES_TO_TRIP} timeouts in which nothing at all
 * is answered: a stall shorter than that (a failover, a slow fork, a pause that Redis itself ends up to
 * 100 ms late) never trips, and neither does any number of callers, since a Redis that answers some of
 * them answers. Each failed call applies the policy at once, tripped or not.</li>
 * <li>While tripped, no call is sent ({@link #send} returns {@code null} and the caller applies the
 * policy at once) until the back-off has passed: it doubles from 100 ms to 5 s. Then exactly one call
 * (the probe) is sent; its reply puts the bucket back on Redis, its failure starts the next back-off (a
 * probe past its timeout that its caller gave up on is failed by the next {@link #send}). While the
 * connection is being reconnected by Lettuce no probe is sent (it would wait in Lettuce's buffer and
 * time out, and the back-off would grow for nothing), and the first call after the connection is open
 * again probes at once, whatever the back-off: the bucket is back on Redis as soon as it answers.</li>
 * <li>A switch to the policy is logged once at WARN, naming the bucket, the policy and the cause, and
 * the way back once at INFO, for all the detectors of one bucket together ({@link Said}). A key's
 * detector that its bucket forgot while the key was quiet, and that is asked again after the bucket
 * was said back, probes at once and says the switch again only if its probe fails: what it knew is
 * stale, and a key whose node is back must not say a switch and a way back that never happened.</li>
 * <li>A call is settled exactly once: by its reply, by its failure, or by the caller that found it
 * past its timeout (for a probe, also by the next {@link #send} that finds it so). A reply that comes after its call was settled as a timeout is a late reply; the
 * caller handles it (a late grant is given back).</li>
 * </ol>
 */
final class FailureDetector {

	/** Failed or timed-out calls in a row after which the bucket runs on its policy. */
	static final int FAILURES_TO_TRIP = 4;

	private static final Log logger = LogFactory.getLog(RedisTokenBucket.class);

	private static final long MIN_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

	private static final long MAX_BACKOFF_NANOS = TimeUnit.SECONDS.toNanos(5);

	private final String bucket;

	private final String policy;

	private final long timeoutNanos;

	private final LongSupplier clock;

	private final List<BackendHealth.CallListener> listeners = new CopyOnWriteArrayList<>();

	/**
	 * Told of every reply of the script, in time or late, with when its call was sent (the bucket takes
	 * on a retune from it).
	 */
	private final ObjLongConsumer<Reply> replies;

	private final AtomicBoolean probing = new AtomicBoolean();

	/** The probe sent last (settled or not): {@link #send} settles it by its timeout if nobody else does. */
	private volatile @Nullable Call lastProbe;

	private final AtomicInteger failures = new AtomicInteger();

	private volatile long downUntil;

	private volatile boolean down;

	/** When the last failure that counted towards the run was seen. */
	private volatile long lastCountedFailureNanos;

	/** Probes failed since the bucket went down: the back-off doubles with each. */
	private volatile int failedProbes;

	private volatile @Nullable String lastError;

	/** When the last call failed or timed out. */
	private volatile long lastFailedNanos;

	/**
	 * Whether this key's detector, down, was forgotten by {@link #said} and the bucket said back since: its
	 * next probe decides, without a word before it ({@link #send}).
	 */
	private volatile boolean stale;

	/**
	 * What the bucket said, shared by the detectors of one bucket's buckets on this instance (its own, its
	 * overflow bucket's and each key's): a switch to the policy and back is said once for all of them.
	 */
	private final Said said;

	/**
	 * Whether this detector's bucket may be dropped without a word (a key's bucket, dropped when idle):
	 * while down, it counts in {@link #said} only as long as its bucket is asked ({@link Said#FORGET_NANOS}).
	 */
	private final boolean droppable;

	/** Whether the connection is being reconnected now (rule 2). */
	private final BooleanSupplier reconnecting;

	/** When Redis last answered on this detector's connection (rule 1: a timeout counts only in silence). */
	private final Answers answers;

	/** Whether a call found the connection being reconnected since the last probe (rule 2). */
	private volatile boolean sawReconnecting;

	FailureDetector(String bucket, String policy, long timeoutNanos, LongSupplier clock,
			ObjLongConsumer<Reply> replies) {
		this(bucket, policy, timeoutNanos, clock, replies, new Said());
	}

	FailureDetector(String bucket, String policy, long timeoutNanos, LongSupplier clock,
			ObjLongConsumer<Reply> replies, Said said) {
		this(bucket, policy, timeoutNanos, clock, replies, said, false);
	}

	FailureDetector(String bucket, String policy, long timeoutNanos, LongSupplier clock,
			ObjLongConsumer<Reply> replies, Said said, boolean droppable) {
		this(bucket, policy, timeoutNanos, clock, replies, said, droppable, () -> false);
	}

	/**
	 * @param reconnecting whether the connection is being reconnected now (its calls would wait in
	 *        Lettuce's buffer): no probe is sent meanwhile, and the first call after it probes at once
	 */
	FailureDetector(String bucket, String policy, long timeoutNanos, LongSupplier clock,
			ObjLongConsumer<Reply> replies, Said said, boolean droppable, BooleanSupplier reconnecting) {
		this(bucket, policy, timeoutNanos, clock, replies, said, droppable, reconnecting, new Answers());
	}

	/**
	 * @param answers when Redis last answered on the detector's connection (shared by the detectors of one
	 *        connection to one server): a timeout counts towards a switch only when nothing was answered
	 *        since its call was sent
	 */
	FailureDetector(String bucket, String policy, long timeoutNanos, LongSupplier clock,
			ObjLongConsumer<Reply> replies, Said said, boolean droppable, BooleanSupplier reconnecting,
			Answers answers) {
		this.answers = answers;
		this.reconnecting = reconnecting;
		this.said = said;
		this.droppable = droppable;
		this.replies = replies;
		this.bucket = bucket;
		this.policy = policy;
		this.timeoutNanos = timeoutNanos;
		this.clock = clock;
	}

	boolean isUp() {
		return !this.down;
	}

	/**
	 * An outage another bucket on the same connection found (nothing answered on it since), that this one's
	 * calls, if any, have not said yet.
	 *
	 * @return the cause, or {@code null}
	 */
	@Nullable String connectionOutage() {
		return this.answers.outage();
	}

	@Nullable String lastError() {
		return this.lastError;
	}

	/**
	 * Whether the last call settled failed, less than a timeout ago: a view asked for right after it (the
	 * headers of a refusal) answers from what is known rather than wait for Redis a second time.
	 */
	boolean failedLately() {
		return this.lastError != null && this.clock.getAsLong() - this.lastFailedNanos < this.timeoutNanos;
	}

	long remainingBackoffNanos() {
		return Math.max(this.downUntil - this.clock.getAsLong(), 1);
	}

	void addListener(BackendHealth.CallListener listener) {
		this.listeners.add(listener);
	}

	/**
	 * Sends a call, unless the bucket is in its back-off.
	 *
	 * @param command what sends it
	 * @param lateReply what gives back a grant or a place in the queue that nobody takes (a reply
	 *        after the timeout, or for a discarded call), or {@code null} when the call takes nothing
	 * @return the call, or {@code null} when the caller must apply the failure policy without asking
	 */
	@Nullable Call send(Supplier<CompletableFuture<List<Object>>> command, @Nullable Consumer<Reply> lateReply) {
		boolean probe = false;
		if (this.down) {
			long now = this.clock.getAsLong();
			// still in use while on the policy: a key's bucket that the bucket had forgotten says so again (only
			// a key's detector is ever forgotten: the others' calls skip the shared map, contended otherwise)
			String error = this.lastError;
			if (this.droppable && !this.said.asked(this, (error != null) ? error : "no answer", now)) {
				// forgotten while its user was quiet, and the bucket has been said back since: what this key knew
				// is stale (its node may be back too). It probes Redis at once, and says the switch again only
				// if the probe fails
				this.stale = true;
				this.downUntil = now;
			}
			Call out = this.lastProbe;
			if (out != null) {
				// a probe whose caller went away (discarded) is settled by nobody else: past its timeout it
				// fails here, and the next back-off starts (rule 2), so the bucket never stays on its policy
				// for as long as a call that is never answered stays open
				out.isSettled(now);
			}
			if (this.reconnecting.getAsBoolean()) {
				// a probe would wait in Lettuce's buffer and time out: none until the connection is open (rule 2)
				if (!this.sawReconnecting) {
					this.sawReconnecting = true;
				}
				return null;
			}
			if (this.sawReconnecting) {
				// the connection has just been reopened: probe now, not at the end of a back-off grown meanwhile
				this.sawReconnecting = false;
				this.downUntil = now;
			}
			if (now - this.downUntil < 0 || !this.probing.compareAndSet(false, true)) {
				return null;
			}
			probe = true;
		}
		CompletableFuture<List<Object>> future;
		try {
			future = command.get();
		}
		catch (RuntimeException ex) {
			future = CompletableFuture.failedFuture(ex);
		}
		// stamped once it is handed over: a cold start's connecting is not counted against the timeout
		// (the first calls of an instance would time out and apply the policy, which load must never do)
		Call call = new Call(future, this.clock.getAsLong(), probe, lateReply);
		if (probe) {
			this.lastProbe = call;
		}
		return call;
	}

	private void succeeded(Call call, long nanos) {
		this.failures.set(0);
		this.said.run.set(0);
		this.stale = false;
		if (call.probe) {
			this.probing.set(false);
		}
		if (this.down) {
			this.down = false;
		}
		// this detector's Redis answers; the bucket is back once none of its detectors runs on the policy (on a
		// Redis Cluster, the keys on another node may still not answer): said once, by the last one back
		if (this.said.error() != null) {
			sayUp(this.said.up(this, this.clock.getAsLong()));
		}
		this.lastError = null;
		record(BackendHealth.Outcome.OK, nanos);
	}

	/**
	 * @param silence whether the failure may count towards a switch: an error always may, a timeout only
	 *        when nothing was answered since its call was sent (rule 1)
	 */
	private void failed(Call call, BackendHealth.Outcome outcome, String error, long nanos, boolean silence) {
		long now = this.clock.getAsLong();
		this.lastError = error;
		this.lastFailedNanos = now;
		// in a row: a failure counts only when its call was sent after the last counted one was seen, so
		// calls caught together in one stall count once, whatever their number
		boolean counts = silence
				&& (this.failures.get() == 0 || call.sentNanos - this.lastCountedFailureNanos >= 0);
		int f = counts ? this.failures.incrementAndGet() : this.failures.get();
		if (counts) {
			this.lastCountedFailureNanos = now;
		}
		// the bucket's run, all its detectors together (its keys' included: rule 1), by the same rule
		boolean bucketCounts = silence
				&& (this.said.run.get() == 0 || call.sentNanos - this.said.lastCountedNanos >= 0);
		int run = bucketCounts ? this.said.run.incrementAndGet() : this.said.run.get();
		if (bucketCounts) {
			this.said.lastCountedNanos = now;
		}
		if (call.probe) {
			this.probing.set(false);
			if (this.down) {
				int probes = ++this.failedProbes;
				this.downUntil = now + backoffNanos(probes);
			}
			if (this.stale) {
				// a forgotten key asked again: its probe confirms it runs on the policy
				this.stale = false;
				if (this.said.down(this, error, now)) {
					sayDown(f, error);
				}
			}
		}
		// not "else": a probe is a call like any other. An older call answered while the probe was out puts the
		// bucket back on Redis (rule 2: the first answer does), and the probe's failure then counts in the run like
		// any failure (rule 1): when it is the FAILURES_TO_TRIP-th in a row, the bucket switches now, not one
		// failure later
		if (!this.down && ((counts && f >= FAILURES_TO_TRIP) || (bucketCounts && run >= FAILURES_TO_TRIP))) {
			this.failedProbes = 0;
			this.sawReconnecting = false;
			this.downUntil = now + backoffNanos(0);
			this.down = true;
			this.answers.switched(error);
			if (this.said.down(this, error, now)) {
				sayDown(Math.max(f, run), error);
			}
		}
		record(outcome, nanos);
	}

	private void sayDown(int failures, String error) {
		logger.warn("Rate limit bucket '" + this.bucket + "' runs on its on-failure policy ("
				+ this.policy.toLowerCase(Locale.ROOT) + ") after " + failures + " failed calls to Redis in a row: "
				+ error);
	}

	private void sayUp(@Nullable String error) {
		if (error != null) {
			logger.info("Rate limit bucket '" + this.bucket + "' is back on Redis after: " + error);
		}
	}

	/**
	 * What the bucket's detectors on this instance say together, for the gauge and the health contributor:
	 * the error said at WARN while any of them runs on the policy (a key's bucket only while it is asked),
	 * {@code null} once none does and an answer has said so (a key forgotten while nothing answers leaves
	 * the bucket down until one of its detectors hears Redis).
	 *
	 * @return the error, or {@code null}
	 */
	@Nullable String sharedError() {
		if (this.said.error() == null) {
			return null;
		}
		this.said.forgetQuiet(this.clock.getAsLong()); // (only an answer says the bucket is back)
		return this.said.error();
	}

	/**
	 * Times a call to Redis made for the bucket outside this detector, a read of its template's settings
	 * ({@link TemplateTune}), in {@code ratelimit.backend.calls} like the bucket's own calls (the same
	 * listeners). It does not count towards the switch to the failure policy: those reads have a back-off of
	 * their own, and the bucket's calls find out for themselves whether Redis answers.
	 *
	 * @param outcome how the call ended
	 * @param nanos how long it took (the timeout, for a call that timed out)
	 */
	void recordCall(BackendHealth.Outcome outcome, long nanos) {
		record(outcome, nanos);
	}

	private void record(BackendHealth.Outcome outcome, long nanos) {
		for (BackendHealth.CallListener listener : this.listeners) {
			listener.called(outcome, nanos);
		}
	}

	/**
	 * The back-off after {@code failures} failed tries since the first: 100 ms, doubling up to 5 s.
	 */
	static long backoffNanos(int failures) {
		return Math.min(MAX_BACKOFF_NANOS, MIN_BACKOFF_NANOS << Math.min(failures, 6));
	}

	/** A failure as the log says it: the cause's type and message, out of the future's wrappers. */
	static String describe(Throwable ex) {
		Throwable cause = ex;
		while ((cause instanceof CompletionException || cause instanceof ExecutionException)
				&& cause.getCause() != null) {
			cause = cause.getCause();
		}
		return cause.getClass().getSimpleName() + ": " + cause.getMessage();
	}

	/** One call to Redis, settled exactly once (rule 4). */
	final class Call {

		private static final int PENDING = 0;

		private static final int OK = 1;

		private static final int FAILED = 2;

		private final CompletableFuture<List<Object>> future;

		private final long sentNanos;

		private final boolean probe;

		private final @Nullable Consumer<Reply> lateReply;

		private final AtomicInteger state = new AtomicInteger(PENDING);

		private final AtomicBoolean completed = new AtomicBoolean();

		/** Whether a granted reply has been taken by its caller or given back: exactly one of them. */
		private final AtomicBoolean decided = new AtomicBoolean();

		private volatile boolean discarded;

		/** Whether a late grant waits for its caller's decision ({@link #holdWhenLate}) instead of going back. */
		private volatile boolean held;

		/** Whether its caller kept a late grant ({@link #keepWhenLate}): it stays in Redis. */
		private volatile boolean kept;

		/** Whether a late reply's place in the queue has been left: once. */
		private final AtomicBoolean left = new AtomicBoolean();

		/** What gives back a kept late grant's lease once the call that ran has ended ({@link #endKept}). */
		private volatile @Nullable Runnable keptRelease;

		private final AtomicBoolean keptReleased = new AtomicBoolean();

		private volatile @Nullable Reply reply;

		private Call(CompletableFuture<List<Object>> future, long sentNanos, boolean probe,
				@Nullable Consumer<Reply> lateReply) {
			this.future = future;
			this.sentNanos = sentNanos;
			this.probe = probe;
			this.lateReply = lateReply;
			future.whenComplete(this::complete);
		}

		/** Runs once per call, when its future completes (on Lettuce's thread, or on a waiting caller's). */
		private void complete(@Nullable List<Object> values, @Nullable Throwable ex) {
			if (!this.completed.compareAndSet(false, true)) {
				return;
			}
			long nanos = FailureDetector.this.clock.getAsLong() - this.sentNanos;
			Reply parsed = null;
			Throwable error = ex;
			if (error == null) {
				try {
					parsed = Reply.of(values);
				}
				catch (RuntimeException bad) {
					error = bad;
				}
			}
			if (error != null) {
				if (this.state.compareAndSet(PENDING, FAILED)) {
					failed(this, BackendHealth.Outcome.ERROR, describe(error), nanos, true);
				}
				return;
			}
			this.reply = parsed;
			FailureDetector.this.answers.heard(FailureDetector.this.clock.getAsLong());
			FailureDetector.this.replies.accept(parsed, this.sentNanos);
			boolean inTime = this.state.compareAndSet(PENDING, OK);
			if (inTime) {
				succeeded(this, nanos);
			}
			else {
				// a late reply: Redis answers, however late (load), and the run of failures starts again (rule 1)
				FailureDetector.this.failures.set(0);
				FailureDetector.this.said.run.set(0);
			}
			if ((!inTime && (!this.held || parsed.queued())) || this.discarded) {
				// settled as a timeout before this reply came, or its caller gave up: nobody takes it (a held
				// grant waits for keepWhenLate or discard; a place in the queue is never of use to a call that
				// timed out, held or not)
				giveBackUnused(parsed);
			}
			else if (!inTime) {
				releaseKept(parsed);
			}
		}

		private void giveBackUnused(Reply parsed) {
			if (this.lateReply == null) {
				return;
			}
			// a grant goes back unless its caller took or kept it; a place in the queue is left once
			if ((parsed.granted() && this.decided.compareAndSet(false, true))
					|| (parsed.queued() && this.left.compareAndSet(false, true))) {
				this.lateReply.accept(parsed);
			}
		}

		/** A kept late grant of a call that has ended: its lease goes back, once. */
		private void releaseKept(Reply parsed) {
			Runnable release = this.keptRelease;
			if (release != null && this.kept && parsed.granted() && this.keptReleased.compareAndSet(false, true)) {
				release.run();
			}
		}

		/**
		 * Takes the grant of a reply that came in time: the caller uses its tokens.
		 *
		 * @return {@code false} when the call was discarded meanwhile (its grant is given back)
		 */
		boolean take() {
			return this.decided.compareAndSet(false, true);
		}

		/**
		 * The call timed out and its caller went ahead anyway (its failure policy let it through): a grant
		 * that comes late stays in Redis, which then counts the call that ran, instead of being given back.
		 * Without it, a call decided locally while Redis was slow would be counted by the local bucket only,
		 * and Redis would grant its tokens again to the next callers of this instance.
		 *
		 * @return {@code false} when the late reply came first and was given back already
		 */
		boolean keepWhenLate() {
			boolean keep = this.decided.compareAndSet(false, true);
			if (keep) {
				this.kept = true;
			}
			return keep;
		}

		/**
		 * The call that {@link #keepWhenLate} kept the late grant of has ended (a capped call's permit
		 * closed): {@code release} gives back the grant's lease, now if the grant has come, else when it comes,
		 * exactly once. Nothing when no grant was kept.
		 *
		 * @param release what releases the lease in Redis
		 */
		void endKept(Runnable release) {
			this.keptRelease = release;
			Reply late = this.reply; // complete() writes it before it reads keptRelease: one of the two sees the other
			if (late != null) {
				releaseKept(late);
			}
		}

		/**
		 * The call timed out and its caller waits for the failure policy to decide (the {@code local} bucket
		 * makes it wait): a grant that comes late meanwhile is held, neither kept nor given back, until the
		 * caller decides, with {@link #keepWhenLate} when the policy let it through, or {@link #discard} when
		 * it did not.
		 */
		void holdWhenLate() {
			this.held = true;
		}

		/**
		 * The caller will not use this call's answer, whenever it comes (its claim was cancelled): a grant
		 * is given back, exactly once, now or when the reply comes.
		 */
		void discard() {
			this.discarded = true;
			if (this.future.isDone() && !this.future.isCompletedExceptionally()) {
				try {
					giveBackUnused(Reply.of(this.future.getNow(null)));
				}
				catch (RuntimeException bad) {
					// not a reply of the script: nothing was taken
				}
			}
		}

		/**
		 * Whether the call is settled as of {@code nowNanos}: by its answer, or by its timeout, which this
		 * settles.
		 */
		boolean isSettled(long nowNanos) {
			if (this.state.get() != PENDING) {
				return true;
			}
			if (nowNanos - this.sentNanos >= FailureDetector.this.timeoutNanos) {
				timeOut();
				return true;
			}
			return false;
		}

		private void timeOut() {
			if (this.state.compareAndSet(PENDING, FAILED)) {
				// the real cause: a connection lost (refused since) rather than silence, when Lettuce says so
				String lost = FailureDetector.this.answers.lost();
				String error = (lost != null) ? "connection lost: " + lost
						: "no answer within " + Duration.ofNanos(FailureDetector.this.timeoutNanos);
				failed(this, BackendHealth.Outcome.TIMEOUT, error, FailureDetector.this.timeoutNanos,
						FailureDetector.this.answers.silentSince(this.sentNanos, FailureDetector.this.clock.getAsLong()));
			}
		}

		/**
		 * The reply once settled: {@code null} when the call failed or timed out (the caller applies the
		 * policy).
		 */
		@Nullable Reply reply() {
			return (this.state.get() == OK) ? this.reply : null;
		}

		/**
		 * Waits for the call, at most until its timeout, and settles it.
		 *
		 * @return the reply, or {@code null} when it failed or timed out
		 * @throws InterruptedException when interrupted while waiting (the call stays pending)
		 */
		@Nullable Reply await() throws InterruptedException {
			long left = FailureDetector.this.timeoutNanos
					- (FailureDetector.this.clock.getAsLong() - this.sentNanos);
			try {
				if (left > 0) {
					this.future.get(left, TimeUnit.NANOSECONDS);
				}
			}
			catch (ExecutionException | TimeoutException | CancellationException ex) {
				// settled below
			}
			if (this.future.isDone()) {
				// the completion handler may not have run yet on the event loop: complete from here
				this.future.handle((values, ex) -> {
					complete(values, ex);
					return null;
				});
				while (this.state.get() == PENDING) {
					Thread.onSpinWait(); // the event loop is completing it: a few instructions away
				}
			}
			else {
				// a caller that wakes a whole timeout past its deadline was starved of the processor: so, likely,
				// was the client's thread that reads the replies (load, rule 1)
				FailureDetector.this.answers.foundLate(this.sentNanos + FailureDetector.this.timeoutNanos,
						FailureDetector.this.timeoutNanos, FailureDetector.this.clock.getAsLong());
				timeOut();
			}
			return reply();
		}

		/** Runs {@code action} when the call completes (on Lettuce's thread, or here when it has). */
		void whenDone(Runnable action) {
			this.future.whenComplete((values, ex) -> action.run());
		}

		/**
		 * Waits for the call like {@link #await()}, without giving up on an interrupt (the wait is bounded
		 * by the timeout); the interrupt flag is set again after.
		 */
		@Nullable Reply awaitUninterruptibly() {
			boolean interrupted = false;
			try {
				for (;;) {
					try {
						return await();
					}
					catch (InterruptedException ex) {
						interrupted = true;
					}
				}
			}
			finally {
				if (interrupted) {
					Thread.currentThread().interrupt();
				}
			}
		}
	}

	/**
	 * When Redis last answered a call on one connection to one server, whichever bucket's (rule 1): a call
	 * that times out while replies keep arriving, however late, waited behind others (load), not for a
	 * Redis that answers nothing. Shared by the detectors of the buckets on one connection; on a Redis
	 * Cluster, where one node may answer while another does not, each detector has its own.
	 */
	static final class Answers {

		private final BooleanSupplier opening;

		private final Supplier<@Nullable String> lost;

		private final long minSilenceNanos;

		private volatile long lastNanos;

		private volatile boolean any;

		/** When a caller last found itself starved of the processor ({@link #foundLate}). */
		private volatile long starvedNanos;

		private volatile boolean starved;

		/**
		 * The cause a detector of this connection switched for, until Redis answers any call on it: the
		 * buckets nobody called since show it too (their health and gauge).
		 */
		private volatile @Nullable String outage;

		/** Answers of one detector, on a connection that is open. */
		Answers() {
			this(() -> false, () -> null, 0);
		}

		/**
		 * @param opening whether the connection is being opened for the first time: a call that times out
		 *        then waited for the connection, and a connection that cannot be opened fails its calls
		 *        (errors, which count)
		 * @param lost why the connection was lost, while Lettuce reconnects it ({@code null} otherwise): the
		 *        cause a timeout names then (calls wait in Lettuce's buffer meanwhile)
		 * @param minSilenceNanos how long nothing must have been answered for a timeout to count: on a machine
		 *        so busy that the client's own thread does not run for several timeouts, replies wait unread
		 *        and the connection looks silent; a Redis that answers nothing stays so for longer (0: from the
		 *        call's sending on; until the connection has answered once, a timeout then never counts)
		 */
		Answers(BooleanSupplier opening, Supplier<@Nullable String> lost, long minSilenceNanos) {
			this.opening = opening;
			this.lost = lost;
			this.minSilenceNanos = minSilenceNanos;
		}

		/** Redis answered a call (in time or late) at {@code now}. */
		void heard(long now) {
			this.lastNanos = now;
			this.any = true;
			this.outage = null;
		}

		/**
		 * A caller whose call timed out woke at {@code now}, its deadline being {@code deadlineNanos}: a
		 * caller a whole {@code timeoutNanos} late was starved of the processor, and so, on the same machine,
		 * was likely the client's thread that reads the replies. Until the minimum silence has passed since,
		 * no timeout counts (on a real connection only: a fake one, on a test's clock, has no minimum).
		 */
		void foundLate(long deadlineNanos, long timeoutNanos, long now) {
			if (this.minSilenceNanos > 0 && now - deadlineNanos >= timeoutNanos) {
				this.starvedNanos = now;
				this.starved = true;
			}
		}

		/** A detector of this connection switched to its policy for {@code error}. */
		void switched(String error) {
			this.outage = error;
		}

		/**
		 * Why the buckets of this connection are down though their own calls (if any) did not say so: a
		 * detector on it switched, and nothing has answered on it since.
		 *
		 * @return the cause, or {@code null}
		 */
		@Nullable String outage() {
			return this.outage;
		}

		/** @return why the connection was lost, while Lettuce reconnects it; {@code null} otherwise */
		@Nullable String lost() {
			return this.lost.get();
		}

		/**
		 * Whether a call sent at {@code sentNanos} that has timed out at {@code now} met silence: the
		 * connection is lost, or nothing was answered since it was sent (nor for the minimum silence) and the
		 * connection is not being opened.
		 */
		boolean silentSince(long sentNanos, long now) {
			if (this.opening.getAsBoolean()) {
				return false;
			}
			if (this.lost.get() != null) {
				return true; // the connection is lost (Lettuce failed to reconnect it): an outage, not load
			}
			if (!this.any) {
				return this.minSilenceNanos == 0;
			}
			if (this.starved && now - this.starvedNanos < this.minSilenceNanos) {
				return false; // a caller was starved lately: so may the client's thread have been (load)
			}
			// strictly after: an answer read at the same reading of the clock as the send says nothing of it
			return this.lastNanos - sentNanos <= 0 && now - this.lastNanos >= this.minSilenceNanos;
		}
	}

	/**
	 * Whether a bucket has said that it runs on its policy (and not yet that it is back), for all the
	 * detectors of its buckets on this instance: a bucket used with keys has one detector per key, and an
	 * outage is said once at WARN and once at INFO for the bucket, not once per key. The bucket runs on its
	 * policy while any of its detectors does: on a Redis Cluster, the keys on a node that does not answer
	 * do while the keys on the other nodes answer, and an answer from one node does not say the bucket is
	 * back. A key's bucket may be dropped while on the policy (when idle, without a word): its detector
	 * counts only while its bucket is asked, and is forgotten {@link #FORGET_NANOS} after it was last asked
	 * (asked again, still on the policy, it counts again); the bucket is said back at the next answer that
	 * finds none on the policy, never by forgetting alone (nothing may answer at all). The gauge {@code ratelimit.backend.up} and the
	 * health contributor read it too.
	 */
	static final class Said {

		/**
		 * How long a key's detector on the policy counts without being asked: twice the longest back-off,
		 * so a key whose calls go on, and so probe at least every back-off, is never forgotten.
		 */
		static final long FORGET_NANOS = 2 * MAX_BACKOFF_NANOS;

		/** The detectors on the policy now, with when each was last asked. */
		private final Map<FailureDetector, Long> down = new ConcurrentHashMap<>();

		/** The error said at WARN, until said back at INFO. */
		private volatile @Nullable String error;

		/**
		 * The bucket's run of failures in a row, its detectors' together (rule 1): a bucket used with many
		 * keys, each called a few times (or dropped when idle and made again), switches like any other.
		 */
		private final AtomicInteger run = new AtomicInteger();

		/** When the last failure that counted towards {@link #run} was seen. */
		private volatile long lastCountedNanos;

		/** When {@link #forgetQuiet} next looks for forgotten detectors. */
		private volatile long nextForgetNanos;

		/**
		 * {@code detector} runs on the policy.
		 *
		 * @return whether this switch is the one to say (the bucket had said none)
		 */
		synchronized boolean down(FailureDetector detector, String error, long now) {
			this.down.put(detector, now);
			if (!detector.down) {
				// it heard Redis meanwhile: its up() may have come before this put
				this.down.remove(detector);
				return false;
			}
			if (this.error == null) {
				this.error = error;
				this.nextForgetNanos = now + FORGET_NANOS;
				return true;
			}
			// while nothing answers, only switches add detectors: they forget the keys gone quiet, so that a
			// long outage with keys coming and going holds those asked within FORGET_NANOS, not every one
			forgetQuiet(now);
			return false;
		}

		/**
		 * {@code detector}, on the policy, was asked: it counts for {@link #FORGET_NANOS} more. One that had been
		 * forgotten counts again, unsaid, while the bucket is still said down; once the bucket has been said back
		 * it does not: its outage is stale, and only its next probe says whether it is on the policy.
		 *
		 * @return whether it counts as on the policy; {@code false} when it had been forgotten and the bucket
		 *         has been said back since
		 */
		boolean asked(FailureDetector detector, String error, long now) {
			if (this.down.replace(detector, now) != null) {
				return true;
			}
			synchronized (this) {
				if (this.error == null) {
					return false;
				}
				down(detector, error, now); // (unsaid: the bucket is said down already)
				return true;
			}
		}

		/**
		 * {@code detector} hears Redis again (or never stopped).
		 *
		 * @return the error the switch said, when this return is the one to say (none of the bucket's
		 *         detectors runs on the policy any more); {@code null} otherwise
		 */
		@Nullable String up(FailureDetector detector, long now) {
			if (this.down.remove(detector) == null && now - this.nextForgetNanos < 0 && !this.down.isEmpty()) {
				return null; // another detector's: nothing changed here, and none to forget yet
			}
			return answered(now);
		}

		/**
		 * A detector heard Redis: forgets the keys' detectors not asked for {@link #FORGET_NANOS}, and says the
		 * bucket is back when none is left on the policy. Only an answer says so: forgetting a key that went
		 * quiet while nothing answers (the gauge's read) must not.
		 *
		 * @return the error the switch said, when this return is the one to say; {@code null} otherwise
		 */
		private synchronized @Nullable String answered(long now) {
			forgetQuiet(now);
			String said = this.error;
			if (said != null && this.down.isEmpty()) {
				this.error = null;
				return said;
			}
			return null;
		}

		/** Forgets, at most once a second, the keys' detectors not asked for {@link #FORGET_NANOS}. */
		synchronized void forgetQuiet(long now) {
			if (now - this.nextForgetNanos >= 0) {
				this.down.entrySet().removeIf((e) -> e.getKey().droppable && now - e.getValue() >= FORGET_NANOS);
				this.nextForgetNanos = now + TimeUnit.SECONDS.toNanos(1);
			}
		}

		/** The error the switch said, while it is not said back; {@code null} when up. */
		@Nullable String error() {
			return this.error;
		}
	}
}
