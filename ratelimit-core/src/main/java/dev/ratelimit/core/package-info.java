/**
 * The two limiters, the rover bucket {@link dev.ratelimit.core.SharedTokenBucket} and the pacer
 * {@link dev.ratelimit.core.HybridRateLimiter}, and what they share. Plain Java, no runtime dependency.
 */
@NullMarked
package dev.ratelimit.core;

import org.jspecify.annotations.NullMarked;
