package dev.ratelimit.spring.client;

import java.io.InterruptedIOException;
import java.util.concurrent.locks.LockSupport;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.Reservation;
import dev.ratelimit.spring.PlannedKey;
import dev.ratelimit.spring.RateLimitPlanResolver;
import dev.ratelimit.spring.RegisteredBucket;
import dev.ratelimit.spring.engine.Limit;
import dev.ratelimit.spring.engine.Limits;
import org.jspecify.annotations.Nullable;

import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpRequest;

/**
 * The buckets of a fixed set of matching outbound rules: the engine's {@link Limits} (all or nothing, in
 * a fixed order by bucket name, one wait for the longest) and the {@link ServerGate}s of what the servers
 * said, which a call passes before it is sent.
 *
 * <p>A call whose gates hold nothing back takes its tokens the engine's way ({@link Limits#acquire}), as
 * a call without listening would. A call that a gate holds back is refused at once, before any claim,
 * when a gate's wait is longer than its bucket's max-wait; otherwise its claim and the gates are waited
 * for together ({@link GatedReservation}).
 */
final class ClientLimits {

	private final ClientRules.Compiled[] rules;

	private final Limits limits;

	private final long[] costs;

	private final long[] maxWaits;

	private final ClientRules.Gates[] gates;

	/** Each rule's bucket, whose {@code rejected} counts the calls its gate refuses. */
	private final RegisteredBucket[] buckets;

	private final ClientRules owner;

	/**
	 * Each keyed rule's plan resolver, when its bucket has plans and the application defines one (contract
	 * revision 3, "Plans": an outbound rule has no plan of its own; the resolver is the source); else
	 * {@code null}, and {@code null} altogether when no rule has one.
	 */
	private final @Nullable RateLimitPlanResolver @Nullable [] resolvers;

	/** Whether a rule's bucket keeps its gates elsewhere (a Redis bucket's, {@link SharedGates}). */
	private final boolean shared;

	ClientLimits(ClientRules.Compiled[] rules, RegisteredBucket[] buckets, ClientRules.Gates[] gates,
			ClientRules owner) {
		this.rules = rules;
		Limit[] limits = new Limit[buckets.length];
		this.costs = new long[buckets.length];
		this.maxWaits = new long[buckets.length];
		for (int i = 0; i < limits.length; i++) {
			limits[i] = Limit.of(buckets[i], buckets[i].maxWait(), rules[i].keyed(), false);
			this.costs[i] = rules[i].cost;
			this.maxWaits[i] = ServerAnswers.saturatedNanos(buckets[i].maxWait());
		}
		this.limits = Limits.of(limits);
		RateLimitPlanResolver[] found = new RateLimitPlanResolver[buckets.length];
		boolean any = false;
		for (int i = 0; i < found.length; i++) {
			found[i] = rules[i].keyed() ? buckets[i].planResolver() : null;
			any |= found[i] != null;
		}
		this.resolvers = any ? found : null;
		this.gates = gates;
		this.buckets = buckets;
		this.owner = owner;
		boolean shared = false;
		for (ClientRules.Gates bucketGates : gates) {
			shared |= bucketGates.shared();
		}
		this.shared = shared;
	}

	long now() {
		return this.owner.now();
	}

	/**
	 * A call: its keys (a key expression that fails, fails the call before anything is claimed), each with
	 * its plan from the resolver for a bucket with plans; the servers' word is kept per key, whatever its plan.
	 */
	OutboundCall call(HttpRequest request) {
		Object[] keys = new Object[this.rules.length];
		Gate[] gates = new Gate[this.rules.length];
		long now = now();
		for (int i = 0; i < keys.length; i++) {
			keys[i] = this.rules[i].key(request);
			gates[i] = this.gates[i].of(keys[i], now);
			RateLimitPlanResolver resolver = (this.resolvers != null) ? this.resolvers[i] : null;
			if (resolver != null && keys[i] != null) {
				keys[i] = planned(i, resolver, keys[i]);
			}
		}
		return new OutboundCall(this, keys, gates);
	}

	private Object planned(int i, RateLimitPlanResolver resolver, Object key) {
		String bucket = this.rules[i].bucket;
		try {
			return PlannedKey.of(key, resolver.plan(bucket, key));
		}
		catch (RuntimeException ex) {
			throw new IllegalArgumentException("The plan of bucket '" + bucket + "' failed for this call"
					+ " (ratelimit.clients.rules[" + this.rules[i].index + "]): the RateLimitPlanResolver ("
					+ resolver.getClass().getName() + ") threw " + ex, ex);
		}
	}

	/**
	 * Takes a call's tokens, parking the thread while it waits: the blocking clients.
	 *
	 * @throws RateLimitExceededException when refused; nothing is kept, nothing is sent
	 * @throws InterruptedIOException when interrupted while waiting; nothing is kept
	 */
	void acquire(OutboundCall call) throws InterruptedIOException {
		long now = now();
		try {
			if (quiet(call, now)) {
				boolean shared = this.shared;
				if (shared && !passShared(call, now)) {
					acquireHeldBack(call, now);
					return;
				}
				try {
					call.granted(this.limits.acquire(this.costs, call.keys));
				}
				catch (InterruptedException | RuntimeException | Error ex) {
					if (shared) {
						unpassShared(call, call.gates.length);
					}
					throw ex;
				}
				for (int i = 0; i < call.gates.length; i++) {
					if (call.gates[i] instanceof ServerGate local) {
						call.marks[i] = local.pass(this.costs[i], now);
					}
				}
				return;
			}
			acquireHeldBack(call, now);
		}
		catch (InterruptedException ex) {
			Thread.currentThread().interrupt();
			InterruptedIOException interrupted = new InterruptedIOException(
					"Interrupted while waiting for the tokens of an outbound call");
			interrupted.initCause(ex);
			throw interrupted;
		}
	}

	/** A call that a gate holds back: refused at once, or its claim and the gates waited for together. */
	private void acquireHeldBack(OutboundCall call, long now) throws InterruptedException {
		Reservation claim = reserve(call, now);
		Thread thread = Thread.currentThread();
		claim.onWake(() -> LockSupport.unpark(thread));
		for (;;) {
			if (thread.isInterrupted()) {
				claim.cancel();
				throw new InterruptedException();
			}
			long delay = claim.poll();
			if (delay == 0) {
				call.granted(claim.permit());
				return;
			}
			LockSupport.parkNanos(this, delay);
		}
	}

	/**
	 * Claims a call's tokens without waiting, the gates included: refused at once when a gate's wait is
	 * longer than its bucket's max-wait.
	 */
	Reservation reserve(OutboundCall call, long now) {
		int refusing = refusing(call, now, 0);
		if (refusing >= 0) {
			throw refusal(refusing, call, now);
		}
		return new GatedReservation(this.limits.reserve(this.costs, call.keys), call, this, now);
	}

	/**
	 * Whether no local gate holds anything back (a gate kept elsewhere is asked when the call passes it:
	 * {@link #passShared}).
	 */
	private boolean quiet(OutboundCall call, long now) {
		for (Gate gate : call.gates) {
			if (gate instanceof ServerGate local && !local.quiet(now)) {
				return false;
			}
		}
		return true;
	}

	/**
	 * Passes the gates kept elsewhere (one round trip each), before the call takes its tokens: all of them,
	 * or none when one holds the call back.
	 */
	private boolean passShared(OutboundCall call, long now) {
		for (int i = 0; i < call.gates.length; i++) {
			if (!(call.gates[i] instanceof ServerGate)) {
				long mark = call.gates[i].tryPass(this.costs[i], now);
				if (mark < 0) {
					unpassShared(call, i);
					return false;
				}
				call.marks[i] = mark;
			}
		}
		return true;
	}

	private void unpassShared(OutboundCall call, int before) {
		for (int i = 0; i < before; i++) {
			if (!(call.gates[i] instanceof ServerGate)) {
				call.gates[i].unpass(call.marks[i], this.costs[i]);
			}
		}
	}

	/** The gate whose wait is the longest of those beyond what is left of their bucket's max-wait, or -1. */
	int refusing(OutboundCall call, long now, long waited) {
		int refusing = -1;
		long longest = 0;
		for (int i = 0; i < call.gates.length; i++) {
			long delay = call.gates[i].delay(this.costs[i], now);
			if (delay > 0 && delay > this.maxWaits[i] - waited && delay > longest) {
				refusing = i;
				longest = delay;
			}
		}
		return refusing;
	}

	/** A refusal by rule {@code i}'s gate, counted in its bucket's {@code rejected} as a refusal for tokens is. */
	RateLimitExceededException refusal(int i, OutboundCall call, long now) {
		this.buckets[i].stats().recordRejected();
		return GatedReservation.refusal(this.rules[i].bucket, call.keys[i], this.costs[i],
				call.gates[i].delay(this.costs[i], now));
	}

	long gateDelay(OutboundCall call, long now) {
		long longest = 0;
		for (int i = 0; i < call.gates.length; i++) {
			longest = Math.max(longest, call.gates[i].delay(this.costs[i], now));
		}
		return longest;
	}

	/** Passes every gate, or none. */
	boolean tryPass(OutboundCall call, long now) {
		for (int i = 0; i < call.gates.length; i++) {
			long mark = call.gates[i].tryPass(this.costs[i], now);
			if (mark < 0) {
				for (int j = 0; j < i; j++) {
					call.gates[j].unpass(call.marks[j], this.costs[j]);
				}
				return false;
			}
			call.marks[i] = mark;
		}
		return true;
	}

	/**
	 * The call is no longer out (its answer heard and obeyed, or its exchange failed): each gate stops
	 * counting it among the calls out (G5 of {@link ServerGate}).
	 */
	void done(OutboundCall call) {
		long now = now();
		for (int i = 0; i < call.gates.length; i++) {
			call.gates[i].done(call.marks[i], this.costs[i], now);
		}
	}

	/** What a server answered a call: counted when 429 or 503 (once per bucket), obeyed when listening. */
	void answered(OutboundCall call, int status, HttpHeaders headers) {
		if (status == 429 || status == 503) {
			for (int i = 0; i < this.rules.length; i++) {
				if (i == 0 || !this.rules[i].bucket.equals(this.rules[i - 1].bucket)) {
					this.owner.throttled().count(this.rules[i].bucket, status);
				}
			}
		}
		if (!this.owner.listening()) {
			return;
		}
		ServerAnswers.Heard heard = this.owner.answers().read(status, headers);
		if (heard.isEmpty()) {
			return;
		}
		long now = now();
		for (int i = 0; i < call.gates.length; i++) {
			obey(call.gates[i], heard, call.marks[i], now);
		}
	}

	/** Applies what a server said to a gate, for the call whose mark on it was {@code mark}. */
	static void obey(Gate gate, ServerAnswers.Heard heard, long mark, long now) {
		if (heard.pause() > 0) {
			gate.pause(now + heard.pause(), now);
		}
		for (long[] lowering : heard.lowerings()) {
			gate.lower(lowering[0], mark, now + lowering[1], now);
		}
	}
}
