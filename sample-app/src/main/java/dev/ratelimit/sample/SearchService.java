package dev.ratelimit.sample;

import java.util.List;

import dev.ratelimit.annotation.RateLimited;

import org.springframework.stereotype.Service;

/**
 * Search, under a limit being rolled out: the {@code search-rollout} bucket is in shadow mode, so it
 * decides as it would but never holds a search back, and {@code ratelimit.calls{outcome=shadow-rejected}}
 * shows how many searches it would refuse. When that number looks right, switch it to enforce
 * ({@code POST /actuator/ratelimits/search-rollout {"mode": "enforce"}}, or {@code mode: enforce}).
 */
@Service
public class SearchService {

	/**
	 * Searches the catalogue.
	 *
	 * @param query what to look for
	 * @return the items found
	 */
	@RateLimited("search-rollout")
	public List<String> search(String query) {
		return List.of(query + " (paperback)", query + " (hardcover)");
	}
}
