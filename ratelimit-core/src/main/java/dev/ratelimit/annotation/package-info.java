/**
 * {@link dev.ratelimit.annotation.RateLimited}, framework-free.
 */
@NullMarked
package dev.ratelimit.annotation;

import org.jspecify.annotations.NullMarked;
