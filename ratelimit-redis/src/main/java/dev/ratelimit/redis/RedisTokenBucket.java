package dev.ratelimit.redis;

import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongSupplier;

import dev.ratelimit.core.AbstractReservation;
import dev.ratelimit.core.Permit;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterBuilder;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.core.SharedTokenBucket;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.spring.BackendHealth;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;

import org.springframework.core.io.ClassPathResource;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.data.redis.core.script.RedisScript;

/**
 * A rover bucket shared by every instance of an application, on Redis.
 *
 * <p>Every acquisition is one round trip: one Lua script (EVALSHA, falling back to EVAL when the
 * server does not know it yet) that replenishes the bucket with Redis's own clock ({@code TIME}, so
 * the instances' clocks do not matter), takes the tokens, and answers how long the caller must wait
 * for them. The caller then waits locally: its claim already holds its place, so nothing is retried
 * and nothing is compared-and-set. The state is one hash, {@code <key-prefix>{<bucket>}} (the braces
 * are a Redis Cluster hash tag), that expires when the bucket would be full again anyway.
 *
 * <h2>Exact arithmetic</h2>
 * The rate is held as exactly {@code A} tokens per {@code B} microseconds (reduced), and the bucket
 * keeps the remainder of a token in units of {@code 1/B}, so no fraction of a token is dropped however
 * often it is called. Lua numbers are doubles, exact below 2^53; the builder refuses a limit whose
 * {@code limit * B} would come near it.
 *
 * <h2>When Redis does not answer</h2>
 * A call waits for Redis at most {@code timeout} (connecting included; the command runs on a small
 * pool of its own, so a hung connection never holds the caller), then applies the failure policy at
 * once: {@link OnFailure#ALLOW} lets it through, {@link OnFailure#DENY} refuses it, {@link OnFailure#LOCAL}
 * limits it with an in-memory {@link SharedTokenBucket} of the same rate and limit (starting full).
 * After {@value #FAILURES_TO_TRIP} failures in a row (never on load: callers beyond the pool queue for
 * it) the bucket stops asking Redis for a back-off that doubles from 100 ms up to 5 s; then one caller
 * probes, and the first answer puts the bucket back on Redis.
 *
 * <h2>Capped release across instances</h2>
 * Tokens in flight are counted in the hash; a permit's close releases them. An instance that dies
 * holding tokens never releases them: they stay in flight until the key expires, an hour after the
 * bucket's last use, and the bucket runs that much below its limit meanwhile.
 */
public final class RedisTokenBucket implements RateLimiter, BackendHealth {

	private static final RedisScript<List> SCRIPT = RedisScript
		.of(new ClassPathResource("dev/ratelimit/redis/bucket.lua"), List.class);

	private static final long MAX_EXACT = 1L << 50;

	/**
	 * Failed or timed-out calls in a row after which the bucket runs on its policy (contract revision
	 * 2: several in a row, never load or one slow reply).
	 */
	static final int FAILURES_TO_TRIP = 3;

	private static final Log logger = LogFactory.getLog(RedisTokenBucket.class);

	private static final long MIN_BACKOFF_NANOS = TimeUnit.MILLISECONDS.toNanos(100);

	private static final long MAX_BACKOFF_NANOS = TimeUnit.SECONDS.toNanos(5);

	private static final long RELEASE_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

	/** What a call does when Redis does not answer in time. */
	public enum OnFailure {

		/** Let the call through. */
		ALLOW,
		/** Refuse the call with {@link RateLimitExceededException}. */
		DENY,
		/** Limit the call with an in-memory bucket of the same rate and limit. */
		LOCAL

	}

	private final String name;

	private final String key;

	private final StringRedisTemplate redis;

	private final boolean cappedRelease;

	private final long timeoutNanos;

	private final OnFailure onFailure;

	private final SharedTokenBucket fallback;

	private final StatsRecorder stats;

	private final ExecutorService executor;

	private final LongSupplier clock = System::nanoTime;

	private final AtomicInteger waiting = new AtomicInteger();

	private final AtomicBoolean probing = new AtomicBoolean();

	private volatile Rate rate;

	private volatile long downUntil;

	private volatile int failures;

	private volatile String lastError;

	private RedisTokenBucket(Builder builder) {
		if (builder.connectionFactory == null) {
			throw new IllegalArgumentException("connectionFactory must not be null");
		}
		if (builder.timeout == null || builder.timeout.isZero() || builder.timeout.isNegative()) {
			throw new IllegalArgumentException("timeout must be a positive duration, was " + builder.timeout);
		}
		dev.ratelimit.core.Rate rate = builder.bucketRate();
		this.fallback = SharedTokenBucket.builder()
			.name(builder.bucketName())
			.rate(rate)
			.limit(builder.limit)
			.cappedRelease(builder.cappedRelease)
			.clock(builder.fallbackClock())
			.stats(builder.bucketStats())
			.build();
		this.rate = Rate.of(rate.tokens(), rate.period(), builder.limit);
		this.name = builder.bucketName();
		this.key = builder.keyPrefix + "{" + builder.bucketName() + "}";
		this.redis = new StringRedisTemplate(builder.connectionFactory);
		this.cappedRelease = builder.cappedRelease;
		this.timeoutNanos = builder.timeout.toNanos();
		this.onFailure = builder.onFailure;
		this.stats = builder.bucketStats();
		// calls queue for a thread rather than being rejected: a burst of callers is load, not an outage
		ThreadPoolExecutor pool = new ThreadPoolExecutor(64, 64, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), (runnable) -> {
			Thread thread = new Thread(runnable, "ratelimit-redis-" + builder.bucketName());
			thread.setDaemon(true);
			return thread;
		});
		pool.allowCoreThreadTimeOut(true);
		this.executor = pool;
	}

	/**
	 * Starts a builder.
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
	 * The key of the bucket's hash.
	 *
	 * @return the key, {@code <key-prefix>{<bucket>}}
	 */
	public String key() {
		return this.key;
	}

	/**
	 * Whether the last call reached Redis.
	 *
	 * @return {@code true} while Redis answers
	 */
	@Override
	public boolean isUp() {
		return this.failures < FAILURES_TO_TRIP;
	}

	/**
	 * The health of the backend for the endpoint: {@code up}, or {@code down} with the last error.
	 *
	 * @return the health
	 */
	@Override
	public String health() {
		return isUp() ? "up" : "down: " + this.lastError;
	}

	@Override
	public boolean tryAcquire(long n) {
		checkCost(n);
		if (n == 0) {
			this.stats.recordGranted(0);
			return true;
		}
		List<Long> reply = call("acquire", n, 0);
		if (reply == null) {
			return switch (this.onFailure) {
				case ALLOW -> {
					this.stats.recordGranted(0);
					yield true;
				}
				case DENY -> {
					this.stats.recordRejected();
					yield false;
				}
				case LOCAL -> this.fallback.tryAcquire(n);
			};
		}
		if (reply.get(0) == 1 && reply.get(1) == 0) {
			this.stats.recordGranted(0);
			return true;
		}
		this.stats.recordRejected();
		return false;
	}

	@Override
	public Permit acquire(long n, Duration maxWait) throws InterruptedException {
		AbstractReservation.budgetNanos(maxWait);
		checkCost(n);
		if (Thread.currentThread().isInterrupted()) {
			throw new InterruptedException("Interrupted before acquiring " + n + " tokens of '" + this.name + "'");
		}
		Reservation reservation = reserve(n, maxWait);
		// a claim on Redis, or on the local fallback while Redis does not answer: either way it already
		// holds its tokens' place, so wait for it (claiming again would take the tokens twice)
		return ((AbstractReservation) reservation).await();
	}

	@Override
	public Reservation reserve(long n, Duration maxWait) {
		long budget = AbstractReservation.budgetNanos(maxWait);
		checkCost(n);
		long start = this.clock.getAsLong();
		if (n == 0) {
			return new Claim(0, maxWait, start, start);
		}
		List<Long> reply = call("acquire", n, TimeUnit.NANOSECONDS.toMicros(budget));
		if (reply == null) {
			return switch (this.onFailure) {
				case ALLOW -> new Claim(0, maxWait, start, start);
				case DENY -> {
					this.stats.recordRejected();
					throw new RateLimitExceededException(this.name, n, Duration.ofNanos(remainingBackoff()),
							"Rate limit bucket '" + this.name + "' refuses calls while Redis does not answer ("
									+ this.lastError + ")");
				}
				case LOCAL -> this.fallback.reserve(n, maxWait);
			};
		}
		long code = reply.get(0);
		long waitNanos = TimeUnit.MICROSECONDS.toNanos(reply.get(1));
		if (code == 0) {
			this.stats.recordRejected();
			throw new RateLimitExceededException(this.name, n, Duration.ofNanos(waitNanos));
		}
		if (code == 2) {
			return new Claim(n, maxWait, start, Long.MIN_VALUE);
		}
		return new Claim(n, maxWait, start, start + waitNanos);
	}

	/**
	 * Capped release: lets {@code n} tokens taken by {@link #tryAcquire(long)} be replenished again.
	 *
	 * @param n the tokens released
	 */
	public void release(long n) {
		if (this.cappedRelease && n > 0) {
			try {
				this.executor.execute(() -> call("release", n, 0));
			}
			catch (RejectedExecutionException ex) {
				call("release", n, 0);
			}
		}
	}

	@Override
	public RateLimiterSnapshot snapshot() {
		Rate r = this.rate;
		List<Long> reply = call("peek", 0, 0);
		if (reply == null) {
			RateLimiterSnapshot local = this.fallback.snapshot();
			return new RateLimiterSnapshot(r.tokens, r.period, r.limit, this.cappedRelease,
					(this.onFailure == OnFailure.LOCAL) ? local.available() : 0,
					(this.onFailure == OnFailure.LOCAL) ? local.deficiency() : 0,
					this.waiting.get() + ((this.onFailure == OnFailure.LOCAL) ? local.waiting() : 0),
					(this.onFailure == OnFailure.LOCAL) ? local.inFlight() : 0, this.stats.granted(),
					this.stats.rejected(), null, Duration.ZERO);
		}
		long level = reply.get(2);
		return new RateLimiterSnapshot(r.tokens, r.period, r.limit, this.cappedRelease, Math.max(level, 0),
				Math.max(-level, 0), this.waiting.get(), reply.get(4), this.stats.granted(), this.stats.rejected(),
				null, Duration.ZERO);
	}

	@Override
	public synchronized void updateRate(long tokens, Duration period) {
		Rate next = Rate.of(tokens, period, this.rate.limit);
		call("peek", 0, 0); // the time that passed counts at the old rate
		this.rate = next;
		this.fallback.updateRate(tokens, period);
	}

	@Override
	public synchronized void updateLimit(long limit) {
		Rate r = this.rate;
		this.rate = Rate.of(r.tokens, r.period, limit);
		this.fallback.updateLimit(limit);
	}

	// ---- Redis calls ----------------------------------------------------------------------------------

	/**
	 * Runs the script, waiting at most the timeout; {@code null} when Redis did not answer (or is in its
	 * back-off), after which the caller applies the failure policy.
	 */
	private List<Long> call(String mode, long n, long maxWaitMicros) {
		long now = this.clock.getAsLong();
		boolean probe = false;
		if (this.failures >= FAILURES_TO_TRIP) {
			if (now - this.downUntil < 0 || !this.probing.compareAndSet(false, true)) {
				return null;
			}
			probe = true;
		}
		Rate r = this.rate;
		Future<List<Long>> future;
		try {
			future = this.executor.submit(() -> execute(r, mode, n, maxWaitMicros));
		}
		catch (RejectedExecutionException ex) {
			failed(ex);
			return null;
		}
		try {
			List<Long> reply = future.get(this.timeoutNanos, TimeUnit.NANOSECONDS);
			if (this.failures >= FAILURES_TO_TRIP) {
				logger.info("Rate limit bucket '" + this.name + "' is back on Redis (" + this.key + ")");
			}
			this.failures = 0;
			this.lastError = null;
			return reply;
		}
		catch (InterruptedException ex) {
			future.cancel(true);
			Thread.currentThread().interrupt();
			return null;
		}
		catch (TimeoutException | ExecutionException ex) {
			future.cancel(true);
			failed(ex);
			return null;
		}
		finally {
			if (probe) {
				this.probing.set(false);
			}
		}
	}

	@SuppressWarnings("unchecked")
	private List<Long> execute(Rate r, String mode, long n, long maxWaitMicros) {
		return this.redis.execute((RedisScript<List<Long>>) (RedisScript<?>) SCRIPT, List.of(this.key),
				Long.toString(r.a), Long.toString(r.b), Long.toString(r.limit), Long.toString(n),
				Long.toString(maxWaitMicros), this.cappedRelease ? "1" : "0", mode);
	}

	private void failed(Exception ex) {
		int f = this.failures + 1;
		this.failures = f;
		Throwable cause = (ex instanceof ExecutionException && ex.getCause() != null) ? ex.getCause() : ex;
		this.lastError = (cause instanceof TimeoutException) ? "no answer within " + Duration.ofNanos(this.timeoutNanos)
				: cause.getClass().getSimpleName() + ": " + cause.getMessage();
		if (f == FAILURES_TO_TRIP) {
			logger.warn("Rate limit bucket '" + this.name + "' runs on its on-failure policy (" + this.onFailure
					.name()
					.toLowerCase(java.util.Locale.ROOT) + ") after " + f + " failed calls to Redis in a row: "
					+ this.lastError);
		}
		if (f >= FAILURES_TO_TRIP) {
			long backoff = Math.min(MAX_BACKOFF_NANOS, MIN_BACKOFF_NANOS << Math.min(f - FAILURES_TO_TRIP, 6));
			this.downUntil = this.clock.getAsLong() + backoff;
		}
	}

	private long remainingBackoff() {
		return Math.max(this.downUntil - this.clock.getAsLong(), 1);
	}

	private void checkCost(long n) {
		if (n < 0) {
			throw new IllegalArgumentException("n must be >= 0, was " + n);
		}
		if (this.cappedRelease && n > this.rate.limit) {
			throw new IllegalArgumentException("n must be at most the limit (" + this.rate.limit
					+ ") of capped bucket '" + this.name + "', was " + n + ": it could never be granted");
		}
	}

	@Override
	public String toString() {
		return "RedisTokenBucket '" + this.name + "' [" + this.key + ", " + health() + "]";
	}

	/** The rate as A tokens per B microseconds, reduced, and the limit. */
	private record Rate(long tokens, Duration period, long limit, long a, long b) {

		static Rate of(long tokens, Duration period, long limit) {
			if (tokens <= 0) {
				throw new IllegalArgumentException("rate must be > 0 tokens per period, was " + tokens);
			}
			if (period == null || period.isZero() || period.isNegative()) {
				throw new IllegalArgumentException("period must be a positive duration, was " + period);
			}
			if (limit < 1) {
				throw new IllegalArgumentException("limit must be >= 1, was " + limit);
			}
			long nanos = period.toNanos();
			long scaled = Math.multiplyExact(tokens, 1000L);
			long g = gcd(scaled, nanos);
			long a = scaled / g;
			long b = nanos / g;
			if (b >= MAX_EXACT / limit || a >= MAX_EXACT) {
				throw new IllegalArgumentException("limit " + limit + " with " + tokens + " per " + period
						+ " is too fine for exact arithmetic in Redis (Lua doubles); use a coarser period or a smaller"
						+ " limit");
			}
			return new Rate(tokens, period, limit, a, b);
		}

		private static long gcd(long x, long y) {
			while (y != 0) {
				long t = x % y;
				x = y;
				y = t;
			}
			return x;
		}
	}

	/** A caller's claim in Redis: covered at {@code due}, or waiting for releases. */
	private final class Claim extends AbstractReservation {

		private volatile long due;

		private volatile boolean claimed;

		Claim(long n, Duration maxWait, long start, long due) {
			super(RedisTokenBucket.this.name, n, maxWait, RedisTokenBucket.this.clock, start,
					RedisTokenBucket.this.stats, RedisTokenBucket.this.waiting);
			this.due = due;
			this.claimed = (due != Long.MIN_VALUE) && n > 0;
		}

		@Override
		protected long delayNanos(long nowNanos) {
			if (this.due == Long.MIN_VALUE) {
				List<Long> reply = call("acquire", tokens(), 0);
				if (reply == null || reply.get(0) != 1) {
					return AWAITING_RELEASE;
				}
				this.claimed = true;
				this.due = nowNanos;
			}
			return Math.max(this.due - nowNanos, 0);
		}

		@Override
		protected void giveBack() {
			if (this.claimed) {
				call("refund", tokens(), 0);
			}
		}

		@Override
		protected Permit grantedPermit() {
			if (!RedisTokenBucket.this.cappedRelease || tokens() == 0 || !this.claimed) {
				return Permit.noop();
			}
			long n = tokens();
			return Permit.once(() -> release(n));
		}
	}

	/**
	 * Builds a {@link RedisTokenBucket}.
	 */
	public static final class Builder extends RateLimiterBuilder<Builder> {

		private RedisConnectionFactory connectionFactory;

		private String keyPrefix = "ratelimit:";

		private long limit = 1;

		private boolean cappedRelease;

		private Duration timeout = Duration.ofMillis(100);

		private OnFailure onFailure = OnFailure.LOCAL;

		private Builder() {
		}

		/** @param connectionFactory the Redis connection factory @return this builder */
		public Builder connectionFactory(RedisConnectionFactory connectionFactory) {
			this.connectionFactory = connectionFactory;
			return this;
		}

		/** @param keyPrefix the prefix of the bucket's key @return this builder */
		public Builder keyPrefix(String keyPrefix) {
			this.keyPrefix = keyPrefix;
			return this;
		}

		/** @param limit the most tokens banked @return this builder */
		public Builder limit(long limit) {
			this.limit = limit;
			return this;
		}

		/** @param cappedRelease whether tokens return only on release @return this builder */
		public Builder cappedRelease(boolean cappedRelease) {
			this.cappedRelease = cappedRelease;
			return this;
		}

		/** @param timeout the longest a call waits for Redis @return this builder */
		public Builder timeout(Duration timeout) {
			this.timeout = timeout;
			return this;
		}

		/** @param onFailure what a call does when Redis does not answer @return this builder */
		public Builder onFailure(OnFailure onFailure) {
			this.onFailure = onFailure;
			return this;
		}

		/**
		 * Builds the bucket.
		 *
		 * @return the bucket
		 */
		public RedisTokenBucket build() {
			String name = limiterName();
			if (name == null || name.isEmpty()) {
				throw new IllegalArgumentException("name must not be empty: it names the bucket's key");
			}
			return new RedisTokenBucket(this);
		}

		private String bucketName() {
			return Objects.requireNonNull(limiterName());
		}

		private dev.ratelimit.core.Rate bucketRate() {
			return limiterRate();
		}

		private LongSupplier fallbackClock() {
			return limiterClock();
		}

		private StatsRecorder bucketStats() {
			return limiterStats();
		}
	}
}
