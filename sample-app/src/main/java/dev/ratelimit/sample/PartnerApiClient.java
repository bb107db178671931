package dev.ratelimit.sample;

import java.util.concurrent.ThreadLocalRandom;

import dev.ratelimit.annotation.RateLimited;

import org.springframework.stereotype.Service;

/**
 * Calls a partner's API that allows a fixed number of calls per second. The {@code partner-api}
 * bucket is a hybrid pacer: it keeps the calls on the partner's schedule rather than allowing bursts,
 * and when the application falls behind (the endpoint's {@code behindSchedule}) it catches up at the
 * configured burst ratio. The partner is simulated in-process so that the sample needs no network.
 */
@Service
public class PartnerApiClient {

	/**
	 * Asks the partner for a shipping quote.
	 *
	 * @param destination where to ship
	 * @return the quote in cents
	 */
	@RateLimited("partner-api")
	public long shippingQuote(String destination) {
		return 500 + Math.floorMod(destination.hashCode(), 1000) + ThreadLocalRandom.current().nextInt(10);
	}
}
