package dev.ratelimit.sample;

import java.util.concurrent.ThreadLocalRandom;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;

import org.springframework.stereotype.Service;

/**
 * Calls a partner's API that allows a fixed number of calls per second and a daily quota: two buckets
 * on one method. The {@code partner-api} bucket is a hybrid pacer: it keeps the calls on the partner's
 * schedule rather than allowing bursts, and when the application falls behind (the endpoint's
 * {@code behindSchedule}) it catches up at the configured burst ratio. The {@code partner-daily}
 * bucket is the quota. A call takes from both or from neither; when either refuses, the shop answers
 * with an estimate instead ({@code fallback}). The partner is simulated in-process so that the sample
 * needs no network.
 */
@Service
public class PartnerApiClient {

	/**
	 * Asks the partner for a shipping quote.
	 *
	 * @param destination where to ship
	 * @return the quote in cents
	 */
	@RateLimited(value = "partner-api", fallback = "estimatedQuote")
	@RateLimited("partner-daily")
	public long shippingQuote(String destination) {
		return 500 + Math.floorMod(destination.hashCode(), 1000) + ThreadLocalRandom.current().nextInt(10);
	}

	/**
	 * What the shop answers when the partner's budget is spent: a flat estimate, never the partner's
	 * price (a negative number tells the client it is an estimate).
	 */
	long estimatedQuote(String destination, RateLimitExceededException refusal) {
		return -1500;
	}
}
