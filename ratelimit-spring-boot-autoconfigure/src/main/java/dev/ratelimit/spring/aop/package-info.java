/**
 * The advisor and interceptor that apply {@code @RateLimited}.
 */
@NullMarked
package dev.ratelimit.spring.aop;

import org.jspecify.annotations.NullMarked;
