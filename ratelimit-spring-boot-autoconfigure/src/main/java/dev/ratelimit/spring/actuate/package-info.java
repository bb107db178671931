/**
 * Meters and the {@code ratelimits} actuator endpoint.
 */
@NullMarked
package dev.ratelimit.spring.actuate;

import org.jspecify.annotations.NullMarked;
