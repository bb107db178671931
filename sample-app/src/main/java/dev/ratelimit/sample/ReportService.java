package dev.ratelimit.sample;

import java.util.concurrent.CompletableFuture;

import dev.ratelimit.annotation.RateLimited;

import org.springframework.stereotype.Service;

/**
 * Renders reports asynchronously. The {@code reports} bucket throttles them without blocking the
 * caller's thread: when no token is there, the returned future completes once one is.
 */
@Service
public class ReportService {

	private final OrderWriter orders;

	public ReportService(OrderWriter orders) {
		this.orders = orders;
	}

	/**
	 * Renders the sales report.
	 *
	 * @param name the report's name
	 * @return the report, when rendered
	 */
	@RateLimited("reports")
	public CompletableFuture<String> render(String name) {
		return CompletableFuture.supplyAsync(() -> "Report " + name + ": " + this.orders.count() + " orders");
	}
}
