/**
 * Buckets shared by every instance of an application, on Redis.
 */
@NullMarked
package dev.ratelimit.redis;

import org.jspecify.annotations.NullMarked;
