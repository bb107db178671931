/**
 * The Spring side of the Redis buckets: the {@code redis} bucket backend and its auto-configuration.
 * It depends on the limiter ({@code dev.ratelimit.redis}), which depends on the core only.
 */
@NullMarked
package dev.ratelimit.redis.autoconfigure;

import org.jspecify.annotations.NullMarked;
