package dev.ratelimit.benchmarks;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Drives each limiter's blocking call from 1, 2, 8 and 64 threads at 1,000 to 1,000,000 per second
 * with a strict burst (1 ms of tokens, at least 1), and reports the achieved rate, its error, and the
 * lateness of each grant against its due time ({@code start + k / rate} for the k-th grant): p50, p99
 * and max.
 *
 * <p>Usage: {@code java -cp benchmarks.jar dev.ratelimit.benchmarks.BlockingAccuracy [seconds-per-cell]
 * [limiters...]}; prints a Markdown table.
 */
public final class BlockingAccuracy {

	private static final int[] THREADS = { 1, 2, 8, 64 };

	private static final long[] RATES = { 1_000, 10_000, 100_000, 1_000_000 };

	private BlockingAccuracy() {
	}

	public static void main(String[] args) throws Exception {
		double seconds = (args.length > 0) ? Double.parseDouble(args[0]) : 1.0;
		List<Limiters> limiters = new ArrayList<>();
		for (int i = 1; i < args.length; i++) {
			limiters.add(Limiters.valueOf(args[i].toUpperCase(Locale.ROOT)));
		}
		if (limiters.isEmpty()) {
			limiters.addAll(Arrays.asList(Limiters.values()));
			limiters.remove(Limiters.QUOTA); // a calendar quota does not pace: there is no rate to be accurate to
		}
		System.out.println("| limiter | threads | target/s | achieved/s | error % | p50 late us | p99 late us | max late us |");
		System.out.println("|---|---:|---:|---:|---:|---:|---:|---:|");
		for (Limiters kind : limiters) {
			for (long rate : RATES) {
				for (int threads : THREADS) {
					Cell cell = run(kind, rate, threads, seconds);
					System.out.printf(Locale.ROOT, "| %s | %d | %,d | %,.0f | %+.2f | %.1f | %.1f | %.1f |%n",
							kind.name().toLowerCase(Locale.ROOT), threads, rate, cell.achieved, cell.errorPercent,
							cell.p50Micros, cell.p99Micros, cell.maxMicros);
				}
			}
		}
	}

	private static Cell run(Limiters kind, long rate, int threads, double seconds) throws InterruptedException {
		long burst = Math.max(1, rate / 1000);
		Limiters.Limiter limiter = kind.create(rate, burst);
		// drain the initial burst so that every grant has a due time on the schedule
		while (limiter.tryAcquire()) {
			Thread.onSpinWait();
		}
		long durationNanos = (long) (seconds * 1e9);
		int capacity = (int) Math.min(Integer.MAX_VALUE - 8, (long) (rate * seconds * 1.5) + 1024);
		long[] grantTimes = new long[capacity];
		AtomicLong count = new AtomicLong();
		long start = System.nanoTime();
		long end = start + durationNanos;
		List<Thread> workers = new ArrayList<>();
		for (int t = 0; t < threads; t++) {
			Thread worker = new Thread(() -> {
				try {
					while (System.nanoTime() < end) {
						limiter.acquire();
						long now = System.nanoTime();
						long k = count.getAndIncrement();
						if (k < grantTimes.length) {
							grantTimes[(int) k] = now;
						}
					}
				}
				catch (InterruptedException ex) {
					Thread.currentThread().interrupt();
				}
			});
			worker.setDaemon(true);
			worker.start();
			workers.add(worker);
		}
		for (Thread worker : workers) {
			worker.join();
		}
		int n = (int) Math.min(count.get(), grantTimes.length);
		long[] times = Arrays.copyOf(grantTimes, n);
		Arrays.sort(times);
		long last = (n > 0) ? times[n - 1] : end;
		double elapsed = Math.max(last, end) - start;
		double achieved = n / (elapsed / 1e9);
		double[] lateness = new double[n];
		double intervalNanos = 1e9 / rate;
		for (int k = 0; k < n; k++) {
			double due = start + (k + 1) * intervalNanos;
			lateness[k] = (times[k] - due) / 1e3;
		}
		Arrays.sort(lateness);
		Cell cell = new Cell();
		cell.achieved = achieved;
		cell.errorPercent = (achieved - rate) * 100.0 / rate;
		cell.p50Micros = (n > 0) ? lateness[n / 2] : Double.NaN;
		cell.p99Micros = (n > 0) ? lateness[Math.min(n - 1, (int) (n * 0.99))] : Double.NaN;
		cell.maxMicros = (n > 0) ? lateness[n - 1] : Double.NaN;
		return cell;
	}

	private static final class Cell {

		double achieved;

		double errorPercent;

		double p50Micros;

		double p99Micros;

		double maxMicros;
	}
}
