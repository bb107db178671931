package dev.ratelimit.redis;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

/**
 * What the servers said about a Redis bucket's outbound calls (contract revision 3, "Outbound calls"),
 * kept in Redis beside the bucket, so that every instance's next call after an answer sees it: a pause
 * (a {@code 429} or {@code 503} with {@code Retry-After}) and the lowerings in force (a remaining count
 * until a reset). The contract's "written to the bucket's hash" is read as "written to the bucket's keys
 * in Redis": one hash, {@code <key-prefix>{<bucket>}:gate} (a key's bucket:
 * {@code <key-prefix>{<bucket>:<key>}:gate}), with the bucket's hash tag, beside {@code :retuned},
 * {@code :leases} and {@code :queue}; its fields are in the module's README and in {@code gate.lua}.
 * Pauses and resets run on Redis's clock ({@code TIME}): the bucket's clock is Redis's. The hash expires
 * when its last pause or reset is over (and not before a minute after the last call passed, so that the
 * answers of calls still out find the count their mark refers to). The calls out (passed, their answers
 * not heard yet) are kept in the hash too, so that an answer subtracts those of every instance that
 * passed before the answered call ({@link #done} ends one; a call passed a minute ago no longer counts).
 *
 * <p>Each method is one round trip (the outbound rules ask {@link #tryPass} once per call), waiting at
 * most the bucket's timeout. A gate Redis does not answer holds nothing back: {@link #tryPass} lets the
 * call pass (its mark is {@link #UNCOUNTED}, whose answer lowers nothing), {@link #delay} is {@code 0},
 * {@link #level} is {@code Long.MAX_VALUE}, a pause or a lowering is lost. Nothing is thrown into the
 * caller; the first failure after a success is logged at WARN, the first success after failures at INFO,
 * and every failure is counted ({@link #failures}).
 *
 * <pre>
 * RedisServerGate gate = buckets.gate("ratelimit:", "partner-api", null, Duration.ofMillis(200));
 * long mark = gate.tryPass(1);             // -1: held back; gate.delay(1) says how long
 * gate.pause(Duration.ofSeconds(30).toNanos());   // a 429 with Retry-After: 30
 * </pre>
 *
 * <p>Memory consistency effects: each method's script runs atomically in Redis; what one instance
 * wrote is seen by every call of any instance that Redis answers after it.
 */
public final class RedisServerGate {

	private static final Log logger = LogFactory.getLog(RedisServerGate.class);

	/** The script, {@code gate.lua}. */
	static final String SOURCE = BucketScript.load("dev/ratelimit/redis/gate.lua");

	static final String SHA1 = BucketScript.sha1(SOURCE);

	/** The mark of a call passed while Redis did not answer: its answer lowers nothing. */
	public static final long UNCOUNTED = Long.MAX_VALUE;

	/** The most lowerings a gate keeps apart, as the local gate (G4). */
	static final int MAX_STEPS = 16;

	/** How long the count of passed calls is kept after the last write, in microseconds. */
	static final long KEEP_MICROS = TimeUnit.MINUTES.toMicros(1);

	private final ScriptConnection connection;

	private final String[] keys;

	private final String bucket;

	private final long timeoutNanos;

	/** The clock in microseconds for tests, or {@code null} for Redis's {@code TIME}. */
	private final @Nullable LongSupplier clock;

	private final long keepMicros;

	private final AtomicLong failures = new AtomicLong();

	private final AtomicBoolean failing = new AtomicBoolean();

	RedisServerGate(ScriptConnection connection, String key, String bucket, Duration timeout,
			@Nullable LongSupplier clock, long keepMicros) {
		this.connection = connection;
		this.keys = new String[] { key };
		this.bucket = bucket;
		this.timeoutNanos = timeout.toNanos();
		this.clock = clock;
		this.keepMicros = keepMicros;
	}

	/**
	 * The gate's key in Redis.
	 *
	 * @param keyPrefix the bucket's key prefix
	 * @param bucket the bucket's name
	 * @param key the key of a key's bucket, or {@code null} for the bucket itself
	 * @return {@code <key-prefix>{<bucket>}:gate} or {@code <key-prefix>{<bucket>:<key>}:gate}
	 */
	static String key(String keyPrefix, String bucket, @Nullable String key) {
		return keyPrefix + "{" + bucket + ((key != null) ? ":" + key : "") + "}:gate";
	}

	/**
	 * The gate's key in Redis.
	 *
	 * @return the key
	 */
	public String key() {
		return this.keys[0];
	}

	/**
	 * How long a call of {@code cost} tokens waits before the gate lets it pass.
	 *
	 * @param cost the call's tokens
	 * @return nanoseconds, {@code 0} when it may pass now (or Redis does not answer)
	 */
	public long delay(long cost) {
		List<Object> reply = call("delay", Long.toString(cost));
		return (reply != null) ? nanos(reply.get(1)) : 0;
	}

	/**
	 * Lets a call pass when nothing holds it back: counts its tokens as sent.
	 *
	 * @param cost the call's tokens
	 * @return the call's mark ({@code >= 0}), {@code -1} when it must wait ({@link #delay}), or
	 *         {@link #UNCOUNTED} when Redis does not answer
	 */
	public long tryPass(long cost) {
		List<Object> reply = call("pass", Long.toString(cost), Long.toString(this.keepMicros));
		return (reply != null) ? (Long) reply.get(0) : UNCOUNTED;
	}

	/**
	 * Takes back a pass of a call that did not go out after all.
	 *
	 * @param mark the call's mark ({@link #UNCOUNTED}: nothing was counted)
	 * @param cost the call's tokens
	 */
	public void unpass(long mark, long cost) {
		if (mark != UNCOUNTED) {
			call("unpass", Long.toString(cost), Long.toString(mark));
		}
	}

	/**
	 * The call of {@code mark} is no longer out (its answer heard, or its exchange failed): answers to
	 * later calls no longer subtract it (G5 of the starter's {@code ServerGate}).
	 *
	 * @param mark the call's mark ({@link #UNCOUNTED}: nothing was counted)
	 * @param cost the call's tokens
	 */
	public void done(long mark, long cost) {
		if (mark != UNCOUNTED) {
			call("done", Long.toString(cost), Long.toString(mark));
		}
	}

	/**
	 * Pauses the gate for {@code nanos} from now, on Redis's clock (a longer pause in force stays).
	 *
	 * @param nanos the pause, rounded up to a microsecond
	 */
	public void pause(long nanos) {
		if (nanos > 0) {
			call("pause", Long.toString(micros(nanos)), Long.toString(this.keepMicros));
		}
	}

	/**
	 * The server said {@code remaining} tokens remain for {@code resetNanos} from now, answering the call
	 * whose mark was {@code mark}.
	 *
	 * @param remaining the server's remaining count
	 * @param mark the answered call's mark ({@link #UNCOUNTED}: nothing is lowered)
	 * @param resetNanos the time until the server's count resets, rounded up to a microsecond
	 */
	public void lower(long remaining, long mark, long resetNanos) {
		if (mark != UNCOUNTED && resetNanos > 0) {
			call("lower", Long.toString(remaining), Long.toString(mark), Long.toString(micros(resetNanos)),
					Long.toString(this.keepMicros), Integer.toString(MAX_STEPS));
		}
	}

	/**
	 * The level the servers' answers leave now.
	 *
	 * @return {@code 0} while paused, the lowered level while lowered, {@code Long.MAX_VALUE} when
	 *         nothing holds calls back (or Redis does not answer)
	 */
	public long level() {
		List<Object> reply = call("level");
		if (reply == null) {
			return Long.MAX_VALUE;
		}
		long level = (Long) reply.get(0);
		return (level < 0) ? Long.MAX_VALUE : level;
	}

	/**
	 * Calls of this gate that Redis did not answer in time, or answered with an error.
	 *
	 * @return the count since the gate was made
	 */
	public long failures() {
		return this.failures.get();
	}

	private @Nullable List<Object> call(String mode, String... rest) {
		String[] arguments = new String[rest.length + 2];
		arguments[0] = mode;
		arguments[1] = (this.clock != null) ? Long.toString(this.clock.getAsLong()) : "";
		System.arraycopy(rest, 0, arguments, 2, rest.length);
		try {
			List<Object> reply = this.connection.run(SHA1, SOURCE, this.keys, arguments)
				.get(this.timeoutNanos, TimeUnit.NANOSECONDS);
			if (this.failing.compareAndSet(true, false)) {
				logger.info("Redis answers the outbound gate of bucket '" + this.bucket + "' again");
			}
			return reply;
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			failed(ex);
		}
		catch (ExecutionException | TimeoutException | RuntimeException ex) {
			failed(ex);
		}
		return null;
	}

	private void failed(Exception ex) {
		this.failures.incrementAndGet();
		if (this.failing.compareAndSet(false, true)) {
			Throwable cause = (ex instanceof ExecutionException && ex.getCause() != null) ? ex.getCause() : ex;
			logger.warn("Redis did not answer the outbound gate of bucket '" + this.bucket + "' (" + key() + "): "
					+ ((cause instanceof TimeoutException) ? "no answer within " + Duration.ofNanos(this.timeoutNanos)
							: cause.toString())
					+ "; the servers' word about it holds no call back until Redis answers again");
		}
	}

	private static long micros(long nanos) {
		return nanos / 1000 + ((nanos % 1000 != 0) ? 1 : 0);
	}

	private static long nanos(Object micros) {
		long value = (Long) micros;
		return (value >= Long.MAX_VALUE / 1000) ? Long.MAX_VALUE : value * 1000;
	}

	@Override
	public String toString() {
		return "RedisServerGate[" + key() + "]";
	}
}
