package dev.ratelimit.redis;

import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;

import dev.ratelimit.core.AbstractReservation;
import dev.ratelimit.core.BackendHealth;
import dev.ratelimit.core.BackendUnavailableException;
import dev.ratelimit.core.CalendarQuota;
import dev.ratelimit.core.InvalidArgumentException;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.QuotaCalendar;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.core.StatsRecorder;
import org.jspecify.annotations.Nullable;

/**
 * A calendar quota shared by every instance of an application, on Redis (contract revision 3, "Calendar
 * quotas"): a fixed allowance per calendar period, all there at the period's start, nothing carried
 * over, counted in one Redis hash that lives until the period ends, so that a restart of every instance
 * loses nothing.
 *
 * <pre>
 * RedisCalendarQuota monthly = buckets.buildQuota(RedisCalendarQuota.builder()
 *         .name("monthly-calls")
 *         .limit(100_000)
 *         .calendar(QuotaCalendar.of(QuotaCalendar.Unit.MONTH, ZoneId.of("Europe/Berlin"))), null);
 * if (monthly.tryAcquire(1)) { ... }
 * </pre>
 *
 * <h2>Whose clock</h2>
 * Redis's {@code TIME}: the periods (boundaries in the calendar's zone, daylight-saving changes, month
 * lengths) are computed here with {@code java.time}, from this instance's wall clock corrected by what
 * Redis's replies said its clock reads, and passed to the script ({@code quota.lua}), which checks its
 * {@code TIME} against them and says its time when they do not hold it (this instance then asks again
 * with the periods of Redis's time). So every instance counts the same periods, whatever its own clock
 * says; the {@code InstantSource} the builder is given (the application's bean) only gives the first
 * guess.
 *
 * <h2>What a call does</h2>
 * A call that fits takes its tokens from the running period. One that does not waits for the next
 * boundary when its max-wait reaches it and the next period has room (its tokens are counted in the
 * next period at once, so callers that wait are counted in the order Redis saw them); otherwise it is
 * refused with the time until the boundary (or until the one after, when the next period is already
 * claimed whole) as its retry-after. A claim given up gives its tokens back to the period it was counted
 * in, while that period runs. {@link #refund} gives back to the running period, {@link #charge} takes
 * beyond the allowance (a debt, paid by the next period's allowance), {@link #reset()} makes the
 * running period's count zero.
 *
 * <h2>When Redis does not answer</h2>
 * Each call that Redis does not answer within the timeout is decided by the quota's failure policy, as a
 * {@link RedisTokenBucket}'s: {@code allow} lets it through, {@code deny} refuses it, {@code local}
 * limits it with an in-memory {@link CalendarQuota} of the same calendar and limit on this instance
 * (each instance then has the whole allowance of the period to itself, for what Redis does not count).
 * Unlike the token bucket it keeps no failure detector: every call asks Redis.
 *
 * <h2>Settings</h2>
 * The limit is passed with every call: the instance's settings in force. {@link #updateLimit} changes
 * this instance's (a plan's limit applied to a key's quota; a retune through this instance's endpoint).
 *
 * <p>Memory consistency effects: as for {@link RateLimiter}.
 */
public final class RedisCalendarQuota implements RateLimiter, BackendHealth {

	/** The script ({@code quota.lua}). */
	static final String SOURCE = BucketScript.load("dev/ratelimit/redis/quota.lua");

	/** Its SHA-1, for {@code EVALSHA}. */
	static final String SHA1 = BucketScript.sha1(SOURCE);

	private static final long GRANTED = 1;

	private static final long AT_BOUNDARY = 2;

	private static final long REFUSED = 0;

	private static final long CLOCK_OFF = -1;

	private final String name;

	private final String key;

	private final ScriptConnection connection;

	private final QuotaCalendar calendar;

	private final InstantSource wallClock;

	private final LongSupplier clock;

	private final long timeoutNanos;

	private final RedisTokenBucket.OnFailure onFailure;

	private final StatsRecorder stats;

	private final AtomicInteger waiting = new AtomicInteger();

	private final List<CallListener> listeners = new CopyOnWriteArrayList<>();

	private volatile long limit;

	/** Redis's time less this instance's wall clock, as the last reply said, in microseconds. */
	private volatile long offsetMicros;

	/** The last reply's figures (for a view while Redis does not answer). */
	private volatile @Nullable List<Object> lastReply;

	private volatile @Nullable String lastError;

	/** The {@code local} policy's quota, made when first needed. */
	private volatile @Nullable CalendarQuota local;

	private RedisCalendarQuota(Builder builder) {
		this.name = Objects.requireNonNull(builder.name, "name");
		this.connection = Objects.requireNonNull(builder.connection, "connection");
		this.calendar = Objects.requireNonNull(builder.calendar, "calendar");
		this.limit = checkedLimit(builder.limit);
		this.wallClock = builder.wallClock;
		this.clock = builder.clock;
		this.timeoutNanos = builder.timeout.toNanos();
		this.onFailure = builder.onFailure;
		this.stats = builder.stats;
		String prefix = builder.keyPrefix;
		this.key = (builder.perKey == null) ? prefix + "{" + this.name + "}"
				: builder.perKey.isEmpty() ? prefix + "{" + this.name + "}:overflow"
						: prefix + "{" + this.name + ":" + builder.perKey + "}";
	}

	/**
	 * A builder.
	 *
	 * @return a new builder
	 */
	public static Builder builder() {
		return new Builder();
	}

	@Override
	public String name() {
		return this.name;
	}

	/**
	 * The quota's hash in Redis.
	 *
	 * @return {@code <prefix>{<bucket>}}, {@code <prefix>{<bucket>}:overflow} or {@code <prefix>{<bucket>:<key>}}
	 */
	public String key() {
		return this.key;
	}

	/**
	 * The calendar whose periods the quota follows.
	 *
	 * @return the calendar
	 */
	public QuotaCalendar calendar() {
		return this.calendar;
	}

	/**
	 * This instance's allowance per period.
	 *
	 * @return the limit
	 */
	public long limit() {
		return this.limit;
	}

	// ---- calls --------------------------------------------------------------------------------------

	@Override
	public boolean tryAcquire(long n) {
		checkCost(n);
		if (n == 0) {
			this.stats.recordGranted(0);
			return true;
		}
		List<Object> reply = answer(call("take", n, 0, 0));
		boolean granted = (reply != null) ? code(reply) == GRANTED : onFailureTryAcquire(n);
		if (granted) {
			this.stats.recordGranted(0);
		}
		else {
			this.stats.recordRejected();
		}
		return granted;
	}

	@Override
	public Permit acquire(long n, Duration maxWait) throws InterruptedException {
		AbstractReservation.budgetNanos(maxWait);
		checkCost(n);
		if (Thread.currentThread().isInterrupted()) {
			throw new InterruptedException("Interrupted before acquiring " + n + " tokens of '" + this.name + "'");
		}
		return claim(n, maxWait).await();
	}

	@Override
	public Reservation reserve(long n, Duration maxWait) {
		AbstractReservation.budgetNanos(maxWait);
		checkCost(n);
		return claim(n, maxWait);
	}

	private Claim claim(long n, Duration maxWait) {
		return new Claim(n, maxWait, this.clock.getAsLong());
	}

	/**
	 * Gives {@code n} tokens back to the running period (never below zero taken).
	 *
	 * @param n the tokens, {@code >= 0}
	 */
	@Override
	public void refund(long n) {
		if (checkedAmount(n) > 0) {
			requireAnswer(call("refund", n, 0, 0), "refund");
		}
	}

	/**
	 * Takes {@code n} tokens whether or not they fit: beyond the allowance, a debt that the next period's
	 * allowance pays.
	 *
	 * @param n the tokens, {@code >= 0}
	 */
	@Override
	public void charge(long n) {
		if (checkedAmount(n) > 0) {
			requireAnswer(call("charge", n, 0, 0), "charge");
		}
	}

	/**
	 * Makes the running period's count zero for every instance: the whole allowance is there again (callers
	 * waiting for the next period keep their claims on it).
	 *
	 * @throws BackendUnavailableException when Redis does not answer
	 */
	@Override
	public void reset() {
		requireAnswer(call("reset", 0, 0, 0), "reset");
		CalendarQuota fallback = this.local;
		if (fallback != null) {
			fallback.reset();
		}
	}

	/**
	 * The view: the tokens left in the running period (as Redis counts them), {@code resetsAt} its end.
	 * While Redis does not answer, the last reply's figures.
	 */
	@Override
	public RateLimiterSnapshot snapshot() {
		List<Object> reply = answer(call("peek", 0, 0, 0));
		if (reply == null) {
			reply = this.lastReply;
		}
		long limit = this.limit;
		long used = (reply != null) ? number(reply, 1) : 0;
		Instant now = now();
		QuotaCalendar.Period period = this.calendar.periodOf(now);
		Instant end = (reply != null && number(reply, 5) > 0) ? micros(number(reply, 5)) : period.end();
		Instant start = (reply != null && number(reply, 4) > 0) ? micros(number(reply, 4)) : period.start();
		Duration untilReset = Duration.between(now, end);
		if (untilReset.isNegative()) {
			untilReset = Duration.ZERO;
		}
		long available = Math.max(0, limit - used);
		long owed = Math.max(0, used - limit) + ((reply != null) ? number(reply, 6) : 0);
		return new RateLimiterSnapshot(limit, Duration.between(start, end), limit, false, available, owed,
				this.waiting.get(), 0, this.stats.granted(), this.stats.rejected(), null, Duration.ZERO,
				(used == 0) ? Duration.ZERO : untilReset, end, untilReset);
	}

	/**
	 * Refused: a quota has no rate; its allowance is its limit per calendar period.
	 *
	 * @throws IllegalArgumentException always
	 */
	@Override
	public void updateRate(long tokens, Duration period) {
		throw new IllegalArgumentException("'" + this.name + "' is a calendar quota: it has no rate (its allowance is"
				+ " its limit, " + this.limit + " per " + this.calendar.unit() + "); change the limit instead");
	}

	/**
	 * Changes this instance's allowance per period, from its next call on (the tokens taken stay taken).
	 *
	 * @param limit the new allowance, {@code 1..2^50}
	 */
	@Override
	public void updateLimit(long limit) {
		this.limit = checkedLimit(limit);
		CalendarQuota fallback = this.local;
		if (fallback != null) {
			fallback.updateLimit(limit);
		}
	}

	/**
	 * Whether this object holds nothing that Redis does not: nobody waits on it here, and the {@code local}
	 * policy's quota counted nothing in its period (the count is in Redis, so a key's quota dropped and made
	 * again counts on).
	 */
	@Override
	public boolean isIdle() {
		return untilLocalFull() == 0;
	}

	/**
	 * What dropping this object would lose (contract revision 3, "per-key buckets under attack"), as
	 * {@link RedisTokenBucket#untilLocalFull()} answers it for a bucket: {@code 0} when nothing (nobody waits
	 * here and the {@code local} policy's quota, if one was made, counted nothing in its current period), else
	 * {@code -1}: a key's quota whose in-memory count stands is kept until its period ends, never forgotten
	 * with a debt (its count is owed until the period's end, which the store's debt records do not hold for a
	 * backend's key).
	 *
	 * @return 0 or -1
	 */
	public long untilLocalFull() {
		if (this.waiting.get() != 0) {
			return -1;
		}
		CalendarQuota fallback = this.local;
		return (fallback == null || fallback.snapshot().available() >= fallback.limit()) ? 0 : -1;
	}

	// ---- health -------------------------------------------------------------------------------------

	@Override
	public boolean isUp() {
		return this.lastError == null;
	}

	@Override
	public String health() {
		String error = this.lastError;
		return (error == null) ? "up" : "Redis does not answer (" + error + "); policy " + policyName();
	}

	@Override
	public void onCall(CallListener listener) {
		this.listeners.add(listener);
	}

	@Override
	public String toString() {
		return "RedisCalendarQuota[" + this.name + ", " + this.limit + " per " + this.calendar + ", " + this.key + "]";
	}

	// ---- the script ---------------------------------------------------------------------------------

	/** A call of the script with the periods of this instance's estimate of Redis's time; asks again once. */
	private CompletableFuture<List<Object>> call(String mode, long n, long maxWaitMicros, long counted) {
		long sent = this.clock.getAsLong();
		return send(mode, n, maxWaitMicros, counted, now()).thenCompose((reply) -> {
			if (code(reply) != CLOCK_OFF) {
				return CompletableFuture.completedFuture(reply);
			}
			// this instance's clock is off Redis's: its periods are computed from Redis's time
			long redisMicros = number(reply, 3);
			this.offsetMicros = redisMicros - micros(this.wallClock.instant());
			Instant redisNow = micros(redisMicros).plusNanos(this.clock.getAsLong() - sent);
			return send(mode, n, maxWaitMicros, counted, redisNow);
		}).whenComplete((reply, ex) -> told(ex, this.clock.getAsLong() - sent));
	}

	private CompletableFuture<List<Object>> send(String mode, long n, long maxWaitMicros, long counted, Instant now) {
		QuotaCalendar.Period period = this.calendar.periodOf(now);
		QuotaCalendar.Period next = this.calendar.next(period);
		String[] arguments = { mode, Long.toString(n), Long.toString(this.limit), Long.toString(micros(period.start())),
				Long.toString(micros(period.end())), Long.toString(micros(next.end())), Long.toString(maxWaitMicros),
				Long.toString(counted) };
		return this.connection.run(SHA1, SOURCE, new String[] { this.key }, arguments);
	}

	private void told(@Nullable Throwable ex, long nanos) {
		Outcome outcome = (ex == null) ? Outcome.OK
				: (unwrap(ex) instanceof TimeoutException) ? Outcome.TIMEOUT : Outcome.ERROR;
		if (ex == null) {
			this.lastError = null;
		}
		else {
			this.lastError = ScriptConnection.describe(unwrap(ex));
		}
		for (CallListener listener : this.listeners) {
			listener.called(outcome, nanos);
		}
	}

	/** The reply within the timeout, or {@code null} (told to the health: {@link #lastError}). */
	private @Nullable List<Object> answer(CompletableFuture<List<Object>> call) {
		try {
			List<Object> reply = call.get(this.timeoutNanos, TimeUnit.NANOSECONDS);
			this.lastReply = reply;
			return reply;
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			return null;
		}
		catch (TimeoutException ex) {
			this.lastError = "no answer within " + Duration.ofNanos(this.timeoutNanos);
			return null;
		}
		catch (ExecutionException ex) {
			this.lastError = ScriptConnection.describe(unwrap(ex));
			return null;
		}
	}

	private void requireAnswer(CompletableFuture<List<Object>> call, String what) {
		if (answer(call) == null) {
			throw new BackendUnavailableException("Calendar quota '" + this.name + "' cannot " + what
					+ " while Redis does not answer (" + this.lastError + ")", null);
		}
	}

	private boolean onFailureTryAcquire(long n) {
		return switch (this.onFailure) {
			case ALLOW -> true;
			case DENY -> false;
			case LOCAL -> local().tryAcquire(n);
		};
	}

	private String policyName() {
		return this.onFailure.name().toLowerCase(java.util.Locale.ROOT);
	}

	/** The {@code local} policy's quota: same calendar and limit, on this instance's wall clock. */
	private CalendarQuota local() {
		CalendarQuota fallback = this.local;
		if (fallback == null) {
			synchronized (this) {
				fallback = this.local;
				if (fallback == null) {
					fallback = CalendarQuota.builder()
						.name(this.name)
						.limit(this.limit)
						.calendar(this.calendar)
						.clock(this.wallClock)
						.build();
					this.local = fallback;
				}
			}
		}
		return fallback;
	}

	private Instant now() {
		return this.wallClock.instant().plus(this.offsetMicros, java.time.temporal.ChronoUnit.MICROS);
	}

	private void checkCost(long n) {
		checkedAmount(n);
		long max = this.limit;
		if (n > max) {
			throw new InvalidArgumentException("n", n, 0L, max, "n must be at most " + max + " tokens (the limit of '"
					+ this.name + "' per " + this.calendar.unit() + ": more can never be granted in one period), was " + n);
		}
	}

	private static long checkedAmount(long n) {
		if (n < 0) {
			throw new InvalidArgumentException("n", n, 0L, null, "n must be >= 0 tokens, was " + n);
		}
		return n;
	}

	private static long checkedLimit(long limit) {
		if (limit < 1 || limit > CalendarQuota.MAX_LIMIT) {
			throw new InvalidArgumentException("limit", limit, 1L, CalendarQuota.MAX_LIMIT,
					"limit must be between 1 and " + CalendarQuota.MAX_LIMIT + " tokens, was " + limit);
		}
		return limit;
	}

	private static long code(List<Object> reply) {
		return number(reply, 0);
	}

	private static long number(List<Object> reply, int index) {
		Object value = reply.get(index);
		return (value instanceof Number number) ? number.longValue() : Long.parseLong(String.valueOf(value));
	}

	private static long micros(Instant instant) {
		return Math.addExact(Math.multiplyExact(instant.getEpochSecond(), 1_000_000L), instant.getNano() / 1000);
	}

	private static Instant micros(long micros) {
		return Instant.ofEpochSecond(Math.floorDiv(micros, 1_000_000L), Math.floorMod(micros, 1_000_000L) * 1000L);
	}

	private static Throwable unwrap(Throwable ex) {
		Throwable t = ex;
		while ((t instanceof ExecutionException || t instanceof java.util.concurrent.CompletionException)
				&& t.getCause() != null) {
			t = t.getCause();
		}
		return t;
	}

	/**
	 * A claim: the script's answer arrives later (polled as {@link #awaitingAnswer()} meanwhile); granted
	 * now, at the boundary the answer names, or refused. Given up, it gives its tokens back to the period
	 * they were counted in (when the answer comes after the give-up, then).
	 */
	private final class Claim extends AbstractReservation {

		private final long n;

		private final long sentNanos;

		private final CompletableFuture<List<Object>> answer;

		/** When the answer arrived, on {@link #clock}. */
		private volatile long arrivedNanos;

		/** The policy's claim when Redis did not answer in time ({@code local}). */
		private volatile @Nullable Reservation fallback;

		private volatile boolean allowed;

		private volatile boolean givenUp;

		Claim(long n, Duration maxWait, long nowNanos) {
			super(RedisCalendarQuota.this.name, n, maxWait, RedisCalendarQuota.this.clock, nowNanos,
					RedisCalendarQuota.this.stats, RedisCalendarQuota.this.waiting);
			this.n = n;
			this.sentNanos = nowNanos;
			long budget = AbstractReservation.saturatedNanos(maxWait);
			if (n == 0) {
				this.answer = CompletableFuture.completedFuture(List.of(GRANTED, 0L, 0L, 0L, 0L, 0L, 0L));
				this.arrivedNanos = nowNanos;
				return;
			}
			this.answer = call("take", n, budget / 1000, 0);
			this.answer.whenComplete((reply, ex) -> {
				this.arrivedNanos = RedisCalendarQuota.this.clock.getAsLong();
				if (reply != null) {
					RedisCalendarQuota.this.lastReply = reply;
					if (this.givenUp) {
						giveBackCounted(reply);
					}
				}
				wake();
			});
		}

		@Override
		protected long delayNanos(long nowNanos) {
			Reservation local = this.fallback;
			if (local != null) {
				return pollLocally(local);
			}
			if (this.allowed) {
				return 0;
			}
			if (!this.answer.isDone()) {
				if (nowNanos - this.sentNanos <= RedisCalendarQuota.this.timeoutNanos) {
					return AWAITING_ANSWER;
				}
				return decideWithoutRedis("no answer within " + Duration.ofNanos(RedisCalendarQuota.this.timeoutNanos));
			}
			List<Object> reply = this.answer.getNow(null);
			if (reply == null || this.answer.isCompletedExceptionally()) {
				return decideWithoutRedis(RedisCalendarQuota.this.lastError);
			}
			long code = code(reply);
			if (code == GRANTED) {
				return 0;
			}
			if (code == AT_BOUNDARY) {
				long ready = this.arrivedNanos + Math.multiplyExact(number(reply, 2), 1000L);
				return Math.max(0, ready - nowNanos);
			}
			throw refusedNow(Duration.ofNanos(Math.multiplyExact(Math.max(number(reply, 2), 1), 1000L)), null);
		}

		private long decideWithoutRedis(@Nullable String why) {
			switch (RedisCalendarQuota.this.onFailure) {
				case ALLOW -> {
					this.allowed = true;
					return 0;
				}
				case LOCAL -> {
					try {
						Reservation local = local().reserve(this.n, Duration.ZERO);
						this.fallback = local;
						return pollLocally(local);
					}
					catch (RateLimitExceededException ex) {
						throw refusedNow(ex.getRetryAfter(), null);
					}
				}
				default -> throw refusedNow(Duration.ofSeconds(1), "Calendar quota '" + RedisCalendarQuota.this.name
						+ "' refuses calls while Redis does not answer (" + why + ")");
			}
		}

		private long pollLocally(Reservation local) {
			try {
				return local.poll();
			}
			catch (RateLimitExceededException ex) {
				throw refusedNow(ex.getRetryAfter(), null);
			}
		}

		/** Refuses the claim here: given up (its tokens, if any, back) and counted as rejected once. */
		private RateLimitExceededException refusedNow(Duration retryAfter, @Nullable String message) {
			if (cancel()) {
				RedisCalendarQuota.this.stats.recordRejected();
			}
			return (message != null) ? new RateLimitExceededException(RedisCalendarQuota.this.name, this.n, retryAfter, message)
					: new RateLimitExceededException(RedisCalendarQuota.this.name, this.n, retryAfter);
		}

		@Override
		protected void giveBack() {
			this.givenUp = true;
			Reservation local = this.fallback;
			if (local != null) {
				local.cancel();
			}
			List<Object> reply = this.answer.getNow(null);
			if (reply != null && !this.answer.isCompletedExceptionally()) {
				giveBackCounted(reply);
			}
			// no answer yet: the answer gives back what it granted when it comes
		}

		private final java.util.concurrent.atomic.AtomicBoolean returned = new java.util.concurrent.atomic.AtomicBoolean();

		/** Gives back what the answer counted (once): in the running period, or in the next one claimed. */
		private void giveBackCounted(List<Object> reply) {
			long code = code(reply);
			if (this.n == 0 || (code != GRANTED && code != AT_BOUNDARY) || !this.returned.compareAndSet(false, true)) {
				return;
			}
			long counted = (code == GRANTED) ? number(reply, 4) : number(reply, 5);
			call("cancel", this.n, 0, counted);
		}

		@Override
		protected Permit grantedPermit() {
			Reservation local = this.fallback;
			return (local != null) ? local.permit() : Permit.noop();
		}
	}

	/**
	 * Builds a {@link RedisCalendarQuota}; the connection comes from {@link RedisBuckets#buildQuota}.
	 */
	public static final class Builder {

		private @Nullable String name;

		private long limit;

		private @Nullable QuotaCalendar calendar;

		private String keyPrefix = "ratelimit:";

		private @Nullable String perKey;

		private Duration timeout = Duration.ofMillis(100);

		private RedisTokenBucket.OnFailure onFailure = RedisTokenBucket.OnFailure.LOCAL;

		private InstantSource wallClock = InstantSource.system();

		private LongSupplier clock = System::nanoTime;

		private StatsRecorder stats = StatsRecorder.concurrent();

		private @Nullable ScriptConnection connection;

		private Builder() {
		}

		/**
		 * @param name the bucket's name
		 * @return this builder
		 */
		public Builder name(String name) {
			this.name = name;
			return this;
		}

		/**
		 * @param limit the tokens per calendar period, {@code 1..2^50}
		 * @return this builder
		 */
		public Builder limit(long limit) {
			this.limit = limit;
			return this;
		}

		/**
		 * @param unit the calendar period
		 * @param zone the calendar's zone
		 * @return this builder
		 */
		public Builder calendar(QuotaCalendar.Unit unit, ZoneId zone) {
			this.calendar = QuotaCalendar.of(unit, zone);
			return this;
		}

		/**
		 * @param calendar the calendar (UTC unless it says otherwise)
		 * @return this builder
		 */
		public Builder calendar(QuotaCalendar calendar) {
			this.calendar = calendar;
			return this;
		}

		/**
		 * @param unit a calendar period in UTC
		 * @return this builder
		 */
		public Builder calendar(QuotaCalendar.Unit unit) {
			return calendar(unit, ZoneOffset.UTC);
		}

		/**
		 * @param keyPrefix the prefix of the quota's hash (default {@code ratelimit:})
		 * @return this builder
		 */
		public Builder keyPrefix(String keyPrefix) {
			this.keyPrefix = Objects.requireNonNull(keyPrefix, "keyPrefix");
			return this;
		}

		/**
		 * @param timeout how long a call waits for Redis before the failure policy decides it
		 * @return this builder
		 */
		public Builder timeout(Duration timeout) {
			this.timeout = Objects.requireNonNull(timeout, "timeout");
			return this;
		}

		/**
		 * @param onFailure what a call that Redis does not answer does
		 * @return this builder
		 */
		public Builder onFailure(RedisTokenBucket.OnFailure onFailure) {
			this.onFailure = Objects.requireNonNull(onFailure, "onFailure");
			return this;
		}

		/**
		 * @param wallClock the first guess of the time (Redis's {@code TIME} corrects it); the local policy's clock
		 * @return this builder
		 */
		public Builder wallClock(InstantSource wallClock) {
			this.wallClock = Objects.requireNonNull(wallClock, "wallClock");
			return this;
		}

		/**
		 * @param clock the nanosecond clock of waits
		 * @return this builder
		 */
		public Builder clock(LongSupplier clock) {
			this.clock = Objects.requireNonNull(clock, "clock");
			return this;
		}

		/**
		 * @param stats where calls are counted
		 * @return this builder
		 */
		public Builder stats(StatsRecorder stats) {
			this.stats = Objects.requireNonNull(stats, "stats");
			return this;
		}

		Builder connection(ScriptConnection connection) {
			this.connection = connection;
			return this;
		}

		Builder perKey(@Nullable String key) {
			this.perKey = key;
			return this;
		}

		/**
		 * Builds the quota.
		 *
		 * @return the quota
		 * @throws IllegalArgumentException when a setting is out of range
		 */
		public RedisCalendarQuota build() {
			if (this.name == null) {
				throw new IllegalArgumentException("name must be set: the quota's hash is named after it");
			}
			if (this.calendar == null) {
				throw new IllegalArgumentException("calendar must be set: minute, hour, day, week, month or year");
			}
			if (this.timeout.isNegative() || this.timeout.isZero()) {
				throw new IllegalArgumentException("timeout must be positive, was " + this.timeout);
			}
			return new RedisCalendarQuota(this);
		}
	}
}
