/**
 * Buckets shared by every instance of an application, on Redis: the limiter, which depends on the
 * core and on Spring Data Redis's connection factory, never on the starter's {@code dev.ratelimit.spring}
 * (the Spring side, {@code dev.ratelimit.redis.autoconfigure}, depends on this package, not the other
 * way round).
 *
 * <h2>The {@code local} policy's mirror</h2>
 * With {@code local}, the in-memory bucket of a {@link RedisTokenBucket} is a <em>mirror</em> while the bucket asks Redis: every
 * call Redis grants here takes its tokens from it too (a charge: it may owe tokens), and every refund
 * gives them back. So a call that Redis alone does not answer in time (one slow reply, a cold start,
 * while the bucket has not switched) is limited by what this instance's calls have already taken: on
 * one instance the bucket's bound holds whether Redis or the mirror decided (up to the difference between
 * Redis's clock and this one's), for the calls it decided that reached Redis (their late grants stay
 * there). Across instances each mirror knows only its own instance's calls, so while calls keep timing
 * out the instances together may go up to each one's own bound (the README's "One slow reply"). When the bucket switches to its policy,
 * the in-memory bucket goes on from there: it started full when the bucket was made, and a switch does
 * not fill it again (that would let this instance take {@code limit} more at once, beyond its bound); it
 * limits this instance alone until Redis answers again. (Capped release: the mirror counts the rate; the
 * tokens in flight on this instance, whoever granted them, are counted apart, {@link FailurePolicy.Flight}:
 * the policy lets a call through only within the limit less what this instance holds, and a grant of Redis
 * that would take this instance past its limit goes back, so one instance never has more than {@code limit}
 * in flight. A capped call the policy let through after its call went unanswered keeps that call's late
 * grant in Redis until it ends, so that Redis counts the call that runs.)
 *
 * <h2>Capped release across instances</h2>
 * Each call's tokens are held under a lease ({@code <instance>:<sequence>#<n>}) with a deadline,
 * {@code lease} after the grant: a permit's close releases them exactly once, tokens not released
 * within the lease come back (an instance that died leaks nothing for longer), and a release after
 * that changes nothing. Callers waiting for releases hold a ticket in a queue in Redis and are served
 * in arrival order across instances; the script publishes every release on
 * {@code <key>:woken}, which wakes them to ask again (and they ask at most
 * {@value RedisTokenBucket#MAX_RELEASE_ASK_MILLIS} ms apart if a message is missed). A key's bucket is subscribed to its
 * channel only from its first claim that waits for releases until it is idle (asked before the bucket is
 * dropped), so an instance holds no subscription for the keys it has seen and dropped.
 *
 * <h2>Resetting</h2>
 * {@link RedisTokenBucket#reset()} (contract revision 3) makes the bucket's hash full in one script call, what callers owed
 * forgotten (capped: the tokens in flight stay in flight under their leases, and the queue keeps its order),
 * and records the reset with the retune ({@code rst}); the script publishes it on
 * {@code <key-prefix>{<bucket>}:reset}, so that every instance reads it at once ({@link TemplateTune}) and
 * drops what it holds from before: its {@code local} policy's bucket is reset, and its callers waiting for
 * time or releases claim again from the full bucket. The overflow bucket and each key's bucket follow it at
 * their next call on any instance (a hash whose {@code z} is older than the reset is full again; a key's call
 * passes the template's reset as read with its settings, at most {@value TemplateTune#STALE_MILLIS} ms old,
 * as for a retune). The instance that resets also resets the keys' buckets it holds at once.
 *
 * <h2>Buckets of keys</h2>
 * A bucket used with a key has, on each instance, one {@link TemplateTune} shared by its own bucket, its
 * overflow bucket ({@code <key-prefix>{<bucket>}:overflow}) and the bucket of each key
 * ({@code <key-prefix>{<bucket>:<key>}}). There is one retune for all of them, the template's: the
 * overflow bucket reads it in each call (same hash tag), and a key's bucket, in another Redis Cluster hash
 * slot, passes the settings in force as arguments, read at most {@value TemplateTune#STALE_MILLIS} ms
 * before its call, with the time of the retune they come from. A key's hash expires when full, like any
 * bucket's, and keeps no retune: an idle key costs Redis nothing, and comes back with the settings in
 * force. It records the settings it was written with, so that the first call after a retune counts the
 * time before the retune at those (the README's "Settings that changed since the last write": exact for
 * one retune between two writes of a key; with several, the time up to the last counts at the key's).
 */
@NullMarked
package dev.ratelimit.redis;

import org.jspecify.annotations.NullMarked;
