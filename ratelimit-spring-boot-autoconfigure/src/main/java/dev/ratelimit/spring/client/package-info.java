/**
 * The outbound rules' front end (contract revision 3, "Outbound calls"): limits on the HTTP calls the
 * application makes through {@code RestClient}, {@code RestTemplate} and {@code WebClient}, which take from
 * the engine and listen to what the servers answer.
 */
@NullMarked
package dev.ratelimit.spring.client;

import org.jspecify.annotations.NullMarked;
