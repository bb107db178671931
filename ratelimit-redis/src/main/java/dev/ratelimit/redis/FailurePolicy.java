package dev.ratelimit.redis;

import java.time.Duration;
import java.util.function.LongSupplier;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.core.SharedTokenBucket;
import dev.ratelimit.core.StatsRecorder;
import dev.ratelimit.redis.BucketScript.Mode;
import dev.ratelimit.redis.BucketScript.Settings;
import dev.ratelimit.redis.FailureDetector.Call;
import org.jspecify.annotations.Nullable;

/**
 * What a call of a {@link RedisTokenBucket} does when Redis does not answer it (the bucket's
 * {@code on-failure}): one object, chosen when the bucket is made, that every place where Redis did not
 * answer asks. {@link #allow()} lets the call through, {@link #deny()} refuses it, {@link #local} limits
 * it with an in-memory bucket of the same rate and limit that mirrors, while Redis answers, what Redis
 * grants on this instance (see {@link RedisTokenBucket}'s notes).
 */
abstract sealed class FailurePolicy {

	/** @return the policy that lets every call through */
	static FailurePolicy allow() {
		return new Allow();
	}

	/** @return the policy that refuses every call */
	static FailurePolicy deny() {
		return new Deny();
	}

	/**
	 * @param own the bucket's configured settings
	 * @param clock the bucket's clock
	 * @return the policy that limits calls with an in-memory bucket of the settings in force
	 */
	static FailurePolicy local(Settings own, String name, LongSupplier clock) {
		return new Local(own, name, clock);
	}

	/** @return the policy's name, as {@code on-failure} says it */
	abstract String name();

	/**
	 * Decides a {@code tryAcquire} that Redis did not answer.
	 *
	 * @param n the tokens
	 * @param call the call that timed out or failed, or {@code null} when none was sent (a back-off)
	 * @param tune the bucket's settings
	 * @return whether the call goes ahead
	 */
	abstract boolean tryAcquire(long n, @Nullable Call call, TemplateTune tune);

	/**
	 * Decides a claim that Redis did not answer: lets it through ({@link RedisClaim#allow}), hands it to a
	 * local claim ({@link RedisClaim#decideLocally}), or refuses it (throws).
	 *
	 * @param claim the claim
	 * @param now the time
	 * @param leftNanos what is left of the claim's budget
	 */
	abstract void decide(RedisClaim claim, long now, long leftNanos);

	/**
	 * Takes ({@code CHARGE}) or gives back ({@code REFUND}) tokens that Redis granted or took back here: only
	 * the local policy's bucket counts them.
	 */
	void mirror(Mode mode, long n, TemplateTune tune) {
	}

	/**
	 * The tokens in flight on this instance of a capped bucket, which this policy keeps at most the limit
	 * (the local policy's), or {@code null} when the policy counts none.
	 *
	 * @return the count, or {@code null}
	 */
	@Nullable Flight flight() {
		return null;
	}

	/**
	 * Redis granted {@code n} capped tokens here: whether this instance may use them, that is whether they
	 * fit in its {@link #flight()} (taken from it if so). Only the local policy says no: when the calls it let
	 * through, which Redis does not count, hold the rest of the limit here.
	 *
	 * @return whether the grant is taken; {@code false}: give it back to Redis
	 */
	boolean admit(long n, TemplateTune tune) {
		Flight f = flight();
		return f == null || f.take(n, tune.current().limit());
	}

	/** {@code n} capped tokens in flight here (granted by Redis or by this policy) were released or given back. */
	void released(long n) {
		Flight f = flight();
		if (f != null) {
			f.release(n);
		}
	}

	/**
	 * How long until what this policy keeps here is full again: 0 when it keeps nothing (allow, deny) or is
	 * full, {@code -1} while a claim waits on it. A key's bucket whose policy is not full is not idle: dropping
	 * it would fill it again (contract revision 3, "per-key buckets under attack").
	 *
	 * @param tune the bucket's settings
	 * @return nanoseconds, 0, or {@code -1}
	 */
	long untilFull(TemplateTune tune) {
		return 0;
	}

	/**
	 * The bucket was reset (contract revision 3): the local policy's bucket is full again too, so that it
	 * keeps no debt of before the reset and grants nothing from it either.
	 */
	void reset() {
	}

	/**
	 * The view of a bucket that Redis did not answer.
	 *
	 * @param s the settings in force
	 * @param waiting callers waiting here
	 * @param stats the bucket's counts
	 * @param tune the bucket's settings
	 * @return the view: what the policy would let through
	 */
	RateLimiterSnapshot snapshot(Settings s, int waiting, StatsRecorder stats, TemplateTune tune) {
		return new RateLimiterSnapshot(s.rate().tokens(), s.rate().period(), s.limit(), s.capped(), 0, 0, waiting, 0,
				stats.granted(), stats.rejected(), null, Duration.ZERO);
	}

	private static final class Allow extends FailurePolicy {

		@Override
		String name() {
			return "allow";
		}

		@Override
		boolean tryAcquire(long n, @Nullable Call call, TemplateTune tune) {
			return true;
		}

		@Override
		void decide(RedisClaim claim, long now, long leftNanos) {
			claim.allow(now);
		}
	}

	private static final class Deny extends FailurePolicy {

		@Override
		String name() {
			return "deny";
		}

		@Override
		boolean tryAcquire(long n, @Nullable Call call, TemplateTune tune) {
			return false;
		}

		@Override
		void decide(RedisClaim claim, long now, long leftNanos) {
			throw claim.refusedWhileDown();
		}
	}

	/**
	 * The tokens in flight on one instance of a capped bucket, whoever granted them (Redis, or the local
	 * policy for a call Redis did not answer): the local policy lets a call through only within the limit
	 * less this count, and a grant of Redis that does not fit (the calls the policy let through, which Redis
	 * does not count, hold the rest) is given back, so that one instance never has more than {@code limit}
	 * tokens in flight (contract revision 3). Exact: one lock, held for a comparison and an addition.
	 */
	static final class Flight {

		private long tokens;

		/**
		 * Takes {@code n} tokens if they fit under {@code limit}.
		 *
		 * @return whether they were taken
		 */
		synchronized boolean take(long n, long limit) {
			if (this.tokens + n > limit) {
				return false;
			}
			this.tokens += n;
			return true;
		}

		synchronized void release(long n) {
			this.tokens = Math.max(0, this.tokens - n);
		}

		synchronized long tokens() {
			return this.tokens;
		}
	}

	/**
	 * The in-memory bucket: a mirror of Redis's grants here while the bucket asks Redis, the bucket while
	 * it runs on its policy. It follows the settings in force ({@link TemplateTune}) when used. It counts the
	 * rate; a capped bucket's tokens in flight here are counted by its {@link Flight}, whoever granted them,
	 * so that the policy starts with the limit less what this instance holds (contract revision 3).
	 */
	private static final class Local extends FailurePolicy {

		private final SharedTokenBucket bucket;

		private final @Nullable Flight flight;

		/** The settings the bucket was last brought to. */
		private volatile Settings settings;

		private final Object lock = new Object();

		Local(Settings own, String name, LongSupplier clock) {
			this.settings = own;
			// it counts nothing itself: the Redis bucket counts every call once, whoever decides it
			this.bucket = SharedTokenBucket.builder()
				.name(name)
				.rate(own.rate())
				.limit(own.limit())
				.clock(clock)
				.build();
			this.flight = own.capped() ? new Flight() : null;
		}

		@Override
		@Nullable Flight flight() {
			return this.flight;
		}

		@Override
		String name() {
			return "local";
		}

		@Override
		boolean tryAcquire(long n, @Nullable Call call, TemplateTune tune) {
			SharedTokenBucket local = at(tune);
			boolean granted = local.tryAcquire(n);
			if (granted && this.flight != null && !this.flight.take(n, tune.current().limit())) {
				local.refund(n); // this instance holds the limit in flight already
				granted = false;
			}
			if (granted && call != null) {
				call.keepWhenLate(); // a late grant counts this call in Redis (capped: until it is released)
			}
			return granted;
		}

		@Override
		void decide(RedisClaim claim, long now, long leftNanos) {
			Reservation local;
			try {
				local = at(claim.tune()).reserve(claim.cost(), Duration.ofNanos(leftNanos));
			}
			catch (RateLimitExceededException ex) {
				throw claim.refused(ex.getRetryAfter(), null);
			}
			claim.decideLocally(local);
		}

		@Override
		void mirror(Mode mode, long n, TemplateTune tune) {
			if (mode == Mode.REFUND) {
				at(tune).refund(n);
			}
			else {
				at(tune).charge(n);
			}
		}

		@Override
		void reset() {
			this.bucket.reset();
		}

		@Override
		long untilFull(TemplateTune tune) {
			RateLimiterSnapshot view = at(tune).snapshot();
			if (view.waiting() != 0 || view.deficiency() != 0) {
				return -1;
			}
			return view.untilFull().toNanos();
		}

		@Override
		RateLimiterSnapshot snapshot(Settings s, int waiting, StatsRecorder stats, TemplateTune tune) {
			RateLimiterSnapshot view = at(tune).snapshot();
			long inFlight = (this.flight != null) ? this.flight.tokens() : 0;
			double available = (this.flight != null) ? Math.min(view.available(), Math.max(0, s.limit() - inFlight))
					: view.available();
			return new RateLimiterSnapshot(s.rate().tokens(), s.rate().period(), s.limit(), s.capped(), available,
					view.deficiency(), waiting + view.waiting(), inFlight, stats.granted(), stats.rejected(), null,
					Duration.ZERO);
		}

		/** The bucket, at the settings in force. */
		private SharedTokenBucket at(TemplateTune tune) {
			Settings s = tune.current();
			if (s != this.settings) {
				synchronized (this.lock) {
					Settings was = this.settings;
					// (the same settings read again with another retune time change nothing here)
					if (s != was && (!s.rate().equals(was.rate()) || s.limit() != was.limit())) {
						this.bucket.updateRate(s.rate().tokens(), s.rate().period());
						this.bucket.updateLimit(s.limit());
					}
					this.settings = s;
				}
			}
			return this.bucket;
		}
	}
}
