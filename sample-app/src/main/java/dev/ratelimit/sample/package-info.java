/**
 * The sample application: every feature of the starter in a small shop.
 */
@NullMarked
package dev.ratelimit.sample;

import org.jspecify.annotations.NullMarked;
