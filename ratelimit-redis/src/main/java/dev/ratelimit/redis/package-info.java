/**
 * Buckets shared by every instance of an application, on Redis: the limiter, which depends on the
 * core and on Spring Data Redis's connection factory, never on the starter's {@code dev.ratelimit.spring}
 * (the Spring side, {@code dev.ratelimit.redis.autoconfigure}, depends on this package, not the other
 * way round).
 */
@NullMarked
package dev.ratelimit.redis;

import org.jspecify.annotations.NullMarked;
