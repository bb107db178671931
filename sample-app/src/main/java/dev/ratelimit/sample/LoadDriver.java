package dev.ratelimit.sample;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import dev.ratelimit.core.RateLimitExceededException;

import org.springframework.stereotype.Component;

/**
 * Pushes every bucket harder than its rate for a while, so that limiting, waiting and refusals show up
 * in {@code /actuator/ratelimits} and {@code /actuator/metrics}. It calls the throttled beans in this
 * process (no network), from a bounded number of threads, for a bounded time: the writes, the partner
 * and the public quote from threads of their own, and every 20 ms a report, a search (its bucket is in
 * shadow mode: the searches it would refuse run, counted as {@code shadow-rejected}) and a quote for one
 * of five users (a bucket per user).
 */
@Component
public class LoadDriver {

	private static final long REFUSED_PAUSE_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

	/** The longest run accepted. */
	public static final Duration MAX_RUN = Duration.ofSeconds(60);

	private final OrderWriter orders;

	private final PartnerApiClient partner;

	private final ReportService reports;

	private final ShopController shop;

	private final SearchService search;

	public LoadDriver(OrderWriter orders, PartnerApiClient partner, ReportService reports, ShopController shop,
			SearchService search) {
		this.orders = orders;
		this.partner = partner;
		this.reports = reports;
		this.shop = shop;
		this.search = search;
	}

	/**
	 * Runs the load.
	 *
	 * @param duration how long, at most {@link #MAX_RUN}
	 * @return per bucket, the calls granted and refused during the run (for the shadow bucket
	 * {@code search-rollout}, the calls that ran: all of them, whatever it would have decided)
	 * @throws InterruptedException when interrupted
	 */
	public Map<String, Map<String, Long>> run(Duration duration) throws InterruptedException {
		if (duration.isNegative() || duration.isZero() || duration.compareTo(MAX_RUN) > 0) {
			throw new IllegalArgumentException("duration must be between 1 ms and " + MAX_RUN + ", was " + duration);
		}
		long end = System.nanoTime() + duration.toNanos();
		Map<String, Counts> counts = new LinkedHashMap<>();
		List<Thread> threads = new ArrayList<>();
		threads.addAll(start(4, end, counts.computeIfAbsent("db-writes", (k) -> new Counts()),
				() -> this.orders.write("load")));
		threads.addAll(start(2, end, counts.computeIfAbsent("partner-api", (k) -> new Counts()),
				() -> this.partner.shippingQuote("load")));
		threads.addAll(start(2, end, counts.computeIfAbsent("public-api", (k) -> new Counts()),
				() -> this.shop.quote("DE")));
		Counts reportCounts = counts.computeIfAbsent("reports", (k) -> new Counts());
		Counts userCounts = counts.computeIfAbsent("per-user", (k) -> new Counts());
		AtomicLong searches = new AtomicLong();
		List<CompletableFuture<String>> pending = new ArrayList<>();
		for (int round = 0; System.nanoTime() < end; round++) {
			this.search.search("load");
			searches.incrementAndGet();
			try {
				this.shop.userQuote("user-" + (round % 5));
				userCounts.granted.incrementAndGet();
			}
			catch (RateLimitExceededException ex) {
				userCounts.rejected.incrementAndGet();
			}
			pending.add(this.reports.render("load").whenComplete((report, failure) -> {
				if (failure == null) {
					reportCounts.granted.incrementAndGet();
				}
				else {
					reportCounts.rejected.incrementAndGet();
				}
			}));
			Thread.sleep(20);
		}
		for (Thread thread : threads) {
			thread.join();
		}
		for (CompletableFuture<String> future : pending) {
			try {
				future.get(5, TimeUnit.SECONDS);
			}
			catch (Exception ex) {
				// counted as refused above
			}
		}
		Map<String, Map<String, Long>> result = new LinkedHashMap<>();
		counts.forEach((bucket, c) -> result.put(bucket,
				Map.of("granted", c.granted.get(), "rejected", c.rejected.get())));
		result.put("search-rollout", Map.of("ran", searches.get()));
		return result;
	}

	private static List<Thread> start(int threads, long end, Counts counts, Runnable call) {
		List<Thread> started = new ArrayList<>();
		for (int i = 0; i < threads; i++) {
			Thread thread = new Thread(() -> {
				while (System.nanoTime() < end) {
					try {
						call.run();
						counts.granted.incrementAndGet();
					}
					catch (RateLimitExceededException ex) {
						counts.rejected.incrementAndGet();
						LockSupport.parkNanos(REFUSED_PAUSE_NANOS); // a refused client comes back soon, not at once
					}
				}
			}, "load-driver");
			thread.setDaemon(true);
			thread.start();
			started.add(thread);
		}
		return started;
	}

	private static final class Counts {

		final AtomicLong granted = new AtomicLong();

		final AtomicLong rejected = new AtomicLong();
	}
}
