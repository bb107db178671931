/**
 * What the two HTTP front ends (the web rules of {@code web} and the outbound rules of {@code client})
 * share to read their rules: the checked syntax of a rule's paths, methods, bucket and cost. Nothing here
 * limits or matches a call; it imports only the root package.
 */
@NullMarked
package dev.ratelimit.spring.http;

import org.jspecify.annotations.NullMarked;
