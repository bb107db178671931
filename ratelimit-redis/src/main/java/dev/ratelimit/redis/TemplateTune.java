package dev.ratelimit.redis;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import java.util.function.LongSupplier;

import dev.ratelimit.core.BackendHealth;
import dev.ratelimit.core.BackendUnavailableException;
import dev.ratelimit.redis.BucketScript.Mode;
import dev.ratelimit.redis.BucketScript.Reply;
import dev.ratelimit.redis.BucketScript.Settings;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

/**
 * The settings in force for one configured Redis bucket on this instance: its configuration, or a
 * retune made through the endpoint of any instance. One object per bucket, shared by the bucket's own
 * {@link RedisTokenBucket}, its overflow bucket and the buckets of its keys.
 *
 * <h2>Where the retune is stored, and when it expires</h2>
 * Once per bucket, in {@code <key-prefix>{<bucket>}:retuned}, with the configuration it was made for
 * ({@code cfg}); it never expires, and a call made with another configuration deletes it (a restart
 * with a different configuration drops the retune). The buckets of keys have no retune record of
 * their own: their hashes, {@code <key-prefix>{<bucket>:<key>}}, expire when full like any bucket's,
 * so an idle key leaves nothing in Redis, and a key that comes back gets the template's settings in
 * force. The record also holds when the retune was made (Redis's {@code TIME}); the settings read here
 * carry it ({@link Settings#retunedAtMicros()}) and a key's call passes it, so that a key's hash written
 * with the settings before the retune counts the time up to the retune at those.
 *
 * <h2>How the buckets read it</h2>
 * The bucket itself and its overflow bucket ({@code <key-prefix>{<bucket>}:overflow}, the same hash
 * tag) read the record in every call of the script. A key's hash is in another Redis Cluster hash slot,
 * so a call on it cannot read the record: it passes the settings in force as arguments, as this
 * instance last read them. They are read again (the script's {@code tune} mode on the bucket's keys),
 * without making anyone wait, by the first key's call that finds them older than
 * {@value #REFRESH_MILLIS} ms; a key's call that finds them older than {@value #STALE_MILLIS} ms waits
 * for that read (at most the bucket's timeout, and not at all while the bucket runs on its failure
 * policy). Every reply of the bucket's own or overflow calls counts as a read. Each read is timed in
 * {@code ratelimit.backend.calls} with the template's own calls ({@link #meterThrough}). So, while Redis answers,
 * a key's call never uses settings read more than {@value #STALE_MILLIS} ms before it: a retune reaches
 * every key of every instance within one second (contract revision 2), and an idle instance reads
 * nothing. When a read fails or times out, the calls go on with the settings last read, and none waits
 * for a read again until one is answered (reads are retried after a back-off of 100 ms doubling to 5 s,
 * said once at WARN and once at INFO when they are answered again): a template whose Redis node does not
 * answer costs its keys' calls one wait of at most the timeout, once, not one per call.
 *
 * <h2>Plans</h2>
 * A bucket used with a key that has plans (contract revision 3, "Plans") has one more object per plan
 * ({@link #ofPlan}), kept the same way in {@code <key-prefix>{<bucket>}:plan:<plan>:retuned} with the plan's
 * configuration: the keys on a plan pass its settings in force, read as above, and a retune of the plan
 * ({@link #retunePlan}) reaches them on every instance within a second, and no other key. Their reset, their
 * meters and what is said of Redis are the bucket's own object's (which the keys on a plan also read in the
 * background, for its resets); a plan has no mode of its own.
 *
 * <h2>The bucket's mode</h2>
 * The mode (enforce or shadow) switched through an endpoint is kept in the same record (field
 * {@code mode}, written by the script's {@code switch} mode; absent: each instance's configuration) and
 * dropped with it by a restart with another configuration. Every reply that carries the retune carries
 * the mode too: this instance takes it on from the replies it adopts (no extra call), and tells the
 * bucket's statistics, where the interceptor reads the mode ({@link #onModeChange}). So the mode reaches
 * every instance as a retune does: with its next call on the bucket, or within a second for a bucket
 * used with keys. The mode is one per bucket, the template's: the buckets of keys have none of their
 * own. While Redis does not answer the mode last read stays in force (the failure policy decides the
 * calls, the mode still says whether a refusal holds the call back), and a switch is refused.
 */
final class TemplateTune {

	/**
	 * The time a key's call passes as its settings' retune time when its key has just changed plan
	 * ({@link RedisTokenBucket#followPlan}): after Redis's {@code TIME} for a century and within what a Lua
	 * double holds exactly, so the script counts the time up to its {@code now} at the settings the hash was
	 * written with.
	 */
	static final long PLAN_CHANGED_NOW = (1L << 53) - 1;

	private static final Log logger = LogFactory.getLog(RedisTokenBucket.class);

	/** Age of the settings after which a key's call reads them again, without waiting for the read. */
	static final long REFRESH_MILLIS = 400;

	/** Age of the settings after which a key's call waits for them to be read again (under a second). */
	static final long STALE_MILLIS = 800;

	private static final long REFRESH_NANOS = TimeUnit.MILLISECONDS.toNanos(REFRESH_MILLIS);

	private static final long STALE_NANOS = TimeUnit.MILLISECONDS.toNanos(STALE_MILLIS);


	private final String bucket;

	private final Settings configured;

	private final String templateKey;

	/** The bucket's own keys, {@code <key-prefix>{<bucket>}} and its companions. */
	private final String[] keys;

	private final ScriptConnection connection;

	private final long timeoutNanos;

	private final LongSupplier clock;

	private final AtomicReference<@Nullable CompletableFuture<Boolean>> reading = new AtomicReference<>();

	/** Whether the last read failed: then nobody waits for a read, and reads go after a back-off. */
	private volatile boolean failing;

	/** Whether the failing reads were said at WARN (and not yet said back at INFO). */
	private boolean saidFailing;

	/** While failing: when the next read may go. */
	private volatile long nextReadNanos;

	/** Reads failed in a row: how long the next waits ({@link FailureDetector#backoffNanos}). */
	private int failedReads;

	private volatile Settings current;

	/** When the call whose reply gave {@link #current} was sent; meaningful once {@link #known}. */
	private volatile long readNanos;

	private volatile boolean known;

	/** The mode switched through an endpoint, as the last reply adopted said ({@link Reply#sharedMode()}). */
	private volatile long sharedMode = Reply.AS_CONFIGURED;

	/** The template's last reset as read (contract revision 3), microseconds of Redis's clock; 0 for none. */
	private volatile long resetAtMicros;

	/** Told of each reset read ({@link #onReset}). */
	private final java.util.List<java.util.function.LongConsumer> resetListeners = new java.util.concurrent.CopyOnWriteArrayList<>();

	private final java.util.concurrent.atomic.AtomicBoolean subscribedForResets = new java.util.concurrent.atomic.AtomicBoolean();

	/**
	 * Told the mode in force when a reply changes it: {@code true} shadow, {@code false} enforce,
	 * {@code null} as configured.
	 */
	private volatile @Nullable Consumer<@Nullable Boolean> modeListener;

	/** Whether a retune this instance cannot hold has been logged. */
	private boolean warned;

	/**
	 * The failure detector of the template's own bucket, whose listeners time every call to Redis in
	 * {@code ratelimit.backend.calls}: the reads made here are timed there too ({@link #meterThrough}).
	 */
	private volatile @Nullable FailureDetector meter;

	private final FailureDetector.Said said = new FailureDetector.Said();

	/**
	 * For the record of one plan (contract revision 3, "Plans"): the bucket's own, whose reset, meters and
	 * failures its keys share; {@code null} for the bucket's own record.
	 */
	private final @Nullable TemplateTune template;

	TemplateTune(String bucket, Settings configured, String templateKey, ScriptConnection connection,
			long timeoutNanos, LongSupplier clock) {
		this(bucket, configured, templateKey, connection, timeoutNanos, clock, null);
	}

	/**
	 * The record of one plan of a bucket used with a key (contract revision 3, "Plans"): its settings as
	 * configured, its retune in {@code <key-prefix>{<bucket>}:plan:<plan>:retuned} (the bucket's hash tag),
	 * read as the bucket's own is; the bucket's reset, meters and what is said of Redis are the
	 * {@code template}'s.
	 *
	 * @param template the bucket's own record
	 * @param plan the plan's name
	 * @param configured the plan's settings as configured on this instance
	 */
	static TemplateTune ofPlan(TemplateTune template, String plan, Settings configured) {
		return new TemplateTune(template.bucket, configured, planKey(template.templateKey, plan), template.connection,
				template.timeoutNanos, template.clock, template);
	}

	/**
	 * The key of a plan's record, {@code <key-prefix>{<bucket>}:plan:<plan>}: its retune is that with
	 * {@code :retuned} (the script's {@code tune} and {@code retune} modes also write a state hash there, which
	 * expires within a second, full).
	 *
	 * @param templateKey the bucket's own key, {@code <key-prefix>{<bucket>}}
	 * @param plan the plan's name
	 * @return the key
	 */
	static String planKey(String templateKey, String plan) {
		return templateKey + ":plan:" + plan;
	}

	private TemplateTune(String bucket, Settings configured, String templateKey, ScriptConnection connection,
			long timeoutNanos, LongSupplier clock, @Nullable TemplateTune template) {
		this.template = template;
		this.bucket = bucket;
		this.configured = configured;
		this.current = configured;
		this.templateKey = templateKey;
		this.keys = BucketScript.keys(templateKey);
		this.connection = connection;
		this.timeoutNanos = timeoutNanos;
		this.clock = clock;
	}

	/**
	 * Times every read made from now on in the meters of the template's own bucket, with its calls
	 * ({@code ratelimit.backend.calls}, outcome {@code ok}, {@code timeout} or {@code error}): a template
	 * whose reads fail shows it there, not only in the log.
	 *
	 * @param detector the failure detector of the template's own bucket
	 */
	void meterThrough(FailureDetector detector) {
		this.meter = detector;
	}

	/**
	 * Times a call of one of the template's other buckets (its overflow bucket's, a key's) in the meters
	 * of the template's own bucket: the bucket's calls to Redis are timed in one place, whichever of its
	 * buckets made them.
	 *
	 * @param outcome how the call ended
	 * @param nanos how long it took
	 */
	void timed(BackendHealth.Outcome outcome, long nanos) {
		if (this.template != null) {
			this.template.timed(outcome, nanos);
			return;
		}
		FailureDetector detector = this.meter;
		if (detector != null) {
			detector.recordCall(outcome, nanos);
		}
	}

	/**
	 * What the template's buckets on this instance said of Redis, shared by their failure detectors: an
	 * outage is said once for the bucket, however many keys found it out.
	 *
	 * @return the shared state
	 */
	FailureDetector.Said said() {
		return (this.template != null) ? this.template.said() : this.said;
	}

	/** @return the settings as configured on this instance (the script compares a retune's with them) */
	Settings configured() {
		return this.configured;
	}

	/** @return the key of the template's own hash, {@code <key-prefix>{<bucket>}} */
	String templateKey() {
		return this.templateKey;
	}

	/** @return the settings in force as this instance last read them */
	Settings current() {
		return this.current;
	}

	/**
	 * Takes on the retune a reply of the script on the bucket's or its overflow bucket's keys carries,
	 * unless a call sent later has been answered already.
	 *
	 * @param reply the reply
	 * @param sentNanos when its call was sent
	 */
	void adopt(Reply reply, long sentNanos) {
		long reset = reply.resetAtMicros();
		boolean newReset;
		synchronized (this) {
			newReset = reset > this.resetAtMicros;
			if (newReset) {
				this.resetAtMicros = reset;
			}
			adoptSettings(reply, sentNanos);
		}
		if (newReset) {
			for (java.util.function.LongConsumer listener : this.resetListeners) {
				listener.accept(reset);
			}
		}
	}

	/**
	 * The template's last reset as last read (contract revision 3), in microseconds of Redis's clock, 0 for
	 * none: a key's call passes it, so that a key's hash that has not followed it is full again.
	 *
	 * @return the time of the last reset
	 */
	long resetAtMicros() {
		return (this.template != null) ? this.template.resetAtMicros() : this.resetAtMicros;
	}

	/**
	 * Tells {@code listener} of every reset of the template that a reply shows (made through any instance):
	 * the first that this instance reads is told once. The template's reset channel,
	 * {@code <key-prefix>{<bucket>}:reset}, on which the script publishes each reset, makes this instance
	 * read at once.
	 *
	 * @param listener told the reset's time; quick (it may run on Lettuce's thread)
	 */
	void onReset(java.util.function.LongConsumer listener) {
		this.resetListeners.add(listener);
		if (this.subscribedForResets.compareAndSet(false, true)) {
			this.connection.subscribe(this.templateKey + ":reset", this::read);
		}
	}

	private void adoptSettings(Reply reply, long sentNanos) {
		if (this.known && sentNanos - this.readNanos < 0) {
			return;
		}
		try {
			this.current = this.configured.inEffect(reply, this.current, this.bucket);
		}
		catch (IllegalArgumentException ex) {
			// a retune this instance cannot hold exactly: it keeps its settings, and says so once
			if (!this.warned) {
				this.warned = true;
				logger.warn("Rate limit bucket '" + this.bucket + "' keeps its settings: the retune stored in Redis "
						+ "cannot be applied on this instance (" + ex.getMessage() + ")");
			}
		}
		this.readNanos = sentNanos;
		this.known = true;
		long mode = reply.sharedMode();
		if (mode != this.sharedMode) {
			this.sharedMode = mode;
			Consumer<@Nullable Boolean> listener = this.modeListener;
			if (listener != null) {
				listener.accept(shadow(mode));
			}
		}
	}

	/**
	 * Tells {@code listener} the mode in force whenever a reply changes it, and at once the mode last read
	 * ({@code true} shadow, {@code false} enforce, {@code null}: the configuration's).
	 *
	 * @param listener the bucket's statistics, where the interceptor reads the mode
	 */
	synchronized void onModeChange(Consumer<@Nullable Boolean> listener) {
		this.modeListener = listener;
		listener.accept(shadow(this.sharedMode));
	}

	/**
	 * @return whether the mode switched through an endpoint as last read is shadow ({@code false}:
	 *         enforce), or {@code null}: as configured
	 */
	@Nullable Boolean sharedShadow() {
		return shadow(this.sharedMode);
	}

	private static @Nullable Boolean shadow(long mode) {
		return (mode == Reply.SHADOW) ? Boolean.TRUE : (mode == Reply.ENFORCE) ? Boolean.FALSE : null;
	}

	/**
	 * Switches the bucket's mode for every instance: stores it in the retune record (the script's
	 * {@code switch} mode, on the template's keys) and takes on the reply, waiting for it at most the
	 * timeout.
	 *
	 * @param shadow {@code true} for shadow mode, {@code false} for enforce
	 * @throws IllegalStateException when Redis does not answer: a switch only this instance knew would be
	 *         undone by the next reply
	 */
	void switchMode(boolean shadow) {
		String mode = shadow ? "shadow" : "enforce";
		writeAndAdopt(Settings.switchArguments(this.configured, mode), "cannot be switched to " + mode + " mode");
	}

	/**
	 * Runs one writing call of the script on the template's keys and takes its reply on at once, waiting for
	 * Redis at most the timeout.
	 *
	 * @param arguments the script's arguments
	 * @param what what could not be done, for the exception ("cannot be retuned")
	 * @throws BackendUnavailableException when Redis does not answer
	 */
	private void writeAndAdopt(String[] arguments, String what) {
		long sent = this.clock.getAsLong();
		Throwable failure;
		try {
			List<Object> values = this.connection.run(this.keys, arguments).get(this.timeoutNanos, TimeUnit.NANOSECONDS);
			adopt(Reply.of(values), sent);
			return;
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			failure = ex;
		}
		catch (java.util.concurrent.ExecutionException ex) {
			failure = (ex.getCause() != null) ? ex.getCause() : ex;
		}
		catch (TimeoutException | RuntimeException ex) {
			failure = ex;
		}
		throw new BackendUnavailableException("Rate limit bucket '" + this.bucket + "' " + what
				+ " while Redis does not answer (" + describe(failure) + ")", failure);
	}

	/**
	 * Retunes the plan whose record this is, for every instance (contract revision 3, "Plans"): one call of
	 * the script's {@code retune} mode on the plan's keys stores {@code next} with the plan's configuration,
	 * and this instance takes the reply on at once; the keys' buckets on the plan of every instance read it
	 * within a second, as they read their bucket's. Waits for Redis at most the timeout.
	 *
	 * @param next the plan's new settings
	 * @throws BackendUnavailableException when Redis does not answer: a retune only this instance knew would
	 *         be undone by the next read
	 */
	void retunePlan(Settings next) {
		writeAndAdopt(Settings.arguments(this.configured, Mode.RETUNE, 0, 0, "", next),
				"cannot be retuned (" + this.templateKey + ")");
	}

	/**
	 * The settings for a call on a key's bucket now: read again in the background when older than
	 * {@value #REFRESH_MILLIS} ms.
	 *
	 * @param now the time, on the buckets' clock
	 * @return the settings, or {@code null} when they are older than {@value #STALE_MILLIS} ms (or were
	 *         never read) and the last read did not fail: wait for {@link #read()}, then use
	 *         {@link #current()}
	 */
	@Nullable Settings forKey(long now) {
		if (this.template != null) {
			// a plan's keys pass the bucket's last reset too: read in the background as the bucket's keys read it
			this.template.forKey(now);
		}
		boolean read = this.known;
		long age = now - this.readNanos;
		boolean failing = this.failing;
		if ((!read || age >= REFRESH_NANOS) && (!failing || now - this.nextReadNanos >= 0)) {
			read();
		}
		// while reads fail, nobody waits for one: the calls go on with the settings last read
		return ((read && age < STALE_NANOS) || failing) ? this.current : null;
	}

	/**
	 * Reads the retune in force (one read at a time: a read under way is joined).
	 *
	 * @return completes when the read has been answered ({@code true}), or failed or timed out
	 *         ({@code false}); never exceptionally
	 */
	CompletableFuture<Boolean> read() {
		for (;;) {
			CompletableFuture<Boolean> running = this.reading.get();
			if (running != null) {
				return running;
			}
			CompletableFuture<Boolean> next = new CompletableFuture<>();
			if (this.reading.compareAndSet(null, next)) {
				start(next);
				return next;
			}
		}
	}

	private void start(CompletableFuture<Boolean> done) {
		long sent = this.clock.getAsLong();
		CompletableFuture<List<Object>> reply;
		try {
			reply = this.connection.run(this.keys, Settings.arguments(this.configured, Mode.TUNE, 0, 0, "", null));
		}
		catch (RuntimeException ex) {
			reply = CompletableFuture.failedFuture(ex);
		}
		reply.orTimeout(this.timeoutNanos, TimeUnit.NANOSECONDS).whenComplete((values, ex) -> {
			Throwable failure = ex;
			if (failure == null) {
				try {
					adopt(Reply.of(values), sent);
				}
				catch (RuntimeException bad) {
					failure = bad; // not a reply of the script: the settings stay as they were
				}
			}
			boolean answered = failure == null;
			meter(failure, this.clock.getAsLong() - sent);
			readDone(answered, answered ? null : failure);
			this.reading.set(null);
			done.complete(answered);
		});
	}

	/**
	 * A failed read changes nothing: the keys go on with the settings last read, nobody waits for a read
	 * until one is answered again, and the next read goes after a back-off (100 ms doubling to 5 s), so
	 * a template that Redis does not answer costs the keys' calls no waiting. Said once at WARN after
	 * {@value FailureDetector#FAILURES_TO_TRIP} failed reads in a row (as the buckets' calls: one slow read
	 * under load is not worth a line), and once at INFO when reads are answered again.
	 */
	private synchronized void readDone(boolean answered, @Nullable Throwable failure) {
		if (answered) {
			this.failing = false;
			if (this.saidFailing) {
				this.saidFailing = false;
				logger.info("Rate limit bucket '" + this.bucket + "': the settings of its keys are read from Redis again");
			}
			this.failedReads = 0;
			return;
		}
		this.nextReadNanos = this.clock.getAsLong() + FailureDetector.backoffNanos(this.failedReads++);
		this.failing = true;
		if (!this.saidFailing && this.failedReads >= FailureDetector.FAILURES_TO_TRIP) {
			this.saidFailing = true;
			logger.warn("Rate limit bucket '" + this.bucket + "': the settings of its keys cannot be read from Redis ("
					+ describe(failure) + "); the keys go on with the settings last read, without waiting for a read");
		}
	}

	/** Times a read that ended: {@code ok}, {@code timeout} (timed as the timeout) or {@code error}. */
	private void meter(@Nullable Throwable failure, long nanos) {
		if (failure == null) {
			timed(BackendHealth.Outcome.OK, Math.max(nanos, 0));
		}
		else if (unwrap(failure) instanceof TimeoutException) {
			timed(BackendHealth.Outcome.TIMEOUT, this.timeoutNanos);
		}
		else {
			timed(BackendHealth.Outcome.ERROR, Math.max(nanos, 0));
		}
	}

	private static @Nullable Throwable unwrap(@Nullable Throwable failure) {
		return (failure instanceof CompletionException && failure.getCause() != null) ? failure.getCause() : failure;
	}

	private static String describe(@Nullable Throwable failure) {
		Throwable cause = unwrap(failure);
		return (cause == null || cause instanceof TimeoutException) ? "no answer within the timeout"
				: FailureDetector.describe(cause);
	}

	@Override
	public String toString() {
		return "TemplateTune '" + this.bucket + "' [" + this.current + "]";
	}
}
