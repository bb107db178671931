/**
 * The limiters, the rover bucket {@link dev.ratelimit.core.SharedTokenBucket}, the pacer
 * {@link dev.ratelimit.core.HybridRateLimiter} and the calendar quota
 * {@link dev.ratelimit.core.CalendarQuota}, and what they share. Plain Java, no runtime dependency.
 */
@NullMarked
package dev.ratelimit.core;

import org.jspecify.annotations.NullMarked;
