/**
 * HTTP 429 for refused calls.
 */
@NullMarked
package dev.ratelimit.spring.web;

import org.jspecify.annotations.NullMarked;
