package dev.ratelimit.benchmarks.partner;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

import com.sun.net.httpserver.HttpServer;

/**
 * A partner API on 127.0.0.1 that enforces its own limit with a token bucket (a second's worth of burst)
 * and halves its rate half-way through the run. A call it has a token for gets 200 with the IETF field
 * ({@code RateLimit: "default";r=<tokens left>;t=<seconds until full>}); one it has none for gets 429
 * with {@code Retry-After} (whole seconds until the next token, at least 1) and the IETF field with
 * {@code r=0}. It counts, per calling instance (header {@code X-Instance}) and per minute of the run, the
 * 429s it answered, and the calls it granted, against its allowance (the burst plus what its rate
 * brought over the run).
 */
final class SimulatedPartner implements AutoCloseable {

	private static final long SECOND = 1_000_000_000L;

	private final HttpServer server;

	private final ExecutorService executor = Executors.newFixedThreadPool(8);

	private final long start;

	private final long halveAt;

	private final double rate;

	private double tokens;

	private long updated;

	private long granted;

	/** The calls granted before the rate was halved; -1 until then. */
	private long grantedBeforeHalving = -1;

	/** 429s per instance per minute. */
	private final long[][] throttled;

	/** When each instance got its first 429, nanoseconds from the start; -1 before. */
	private final long[] firstThrottled;

	SimulatedPartner(double ratePerSecond, long runNanos, int instances, int minutes) throws IOException {
		this.rate = ratePerSecond;
		this.start = System.nanoTime();
		this.halveAt = this.start + runNanos / 2;
		this.updated = this.start;
		this.tokens = ratePerSecond; // full: a second's worth
		this.throttled = new long[instances][minutes];
		this.firstThrottled = new long[instances];
		java.util.Arrays.fill(this.firstThrottled, -1);
		this.server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 64);
		this.server.setExecutor(this.executor);
		this.server.createContext("/", (exchange) -> {
			String instance = exchange.getRequestHeaders().getFirst("X-Instance");
			int status;
			String ietf;
			String retryAfter = null;
			long now = System.nanoTime();
			synchronized (this) {
				refill(now);
				double perSecond = rateAt(now);
				if (this.tokens >= 1) {
					this.tokens -= 1;
					this.granted++;
					status = 200;
					long full = (long) Math.ceil((perSecond - this.tokens) / perSecond);
					ietf = "\"default\";r=" + (long) Math.floor(this.tokens) + ";t=" + full;
				}
				else {
					status = 429;
					long next = Math.max(1, (long) Math.ceil((1 - this.tokens) / perSecond));
					retryAfter = String.valueOf(next);
					ietf = "\"default\";r=0;t=" + next;
					if (instance != null) {
						int i = Integer.parseInt(instance);
						int minute = (int) Math.min((now - this.start) / (60 * SECOND), this.throttled[i].length - 1);
						this.throttled[i][minute]++;
						if (this.firstThrottled[i] < 0) {
							this.firstThrottled[i] = now - this.start;
						}
					}
				}
			}
			exchange.getResponseHeaders().add("RateLimit", ietf);
			if (retryAfter != null) {
				exchange.getResponseHeaders().add("Retry-After", retryAfter);
			}
			byte[] body = ((status == 200) ? "ok" : "slow down").getBytes(StandardCharsets.UTF_8);
			exchange.sendResponseHeaders(status, body.length);
			try (OutputStream out = exchange.getResponseBody()) {
				out.write(body);
			}
		});
		this.server.start();
	}

	private double rateAt(long now) {
		return (now - this.halveAt < 0) ? this.rate : this.rate / 2;
	}

	private void refill(long now) {
		// the rate changes at halveAt: refill each side at its own rate
		if (this.updated - this.halveAt < 0 && now - this.halveAt >= 0) {
			this.grantedBeforeHalving = this.granted;
			this.tokens = Math.min(this.rate, this.tokens + this.rate * (this.halveAt - this.updated) / SECOND);
			this.updated = this.halveAt;
		}
		double perSecond = rateAt(now);
		this.tokens = Math.min(perSecond, this.tokens + perSecond * (now - this.updated) / SECOND);
		this.updated = now;
	}

	/** The most the partner could have granted from its start to {@code now}: the burst and its rate's tokens. */
	synchronized double allowance(long now) {
		long first = Math.min(now, this.halveAt) - this.start;
		long second = Math.max(0, now - this.halveAt);
		return this.rate + this.rate * first / SECOND + this.rate / 2 * second / SECOND;
	}

	/** Each half's calls granted against its allowance. */
	synchronized String halves(long now) {
		long first = (this.grantedBeforeHalving < 0) ? this.granted : this.grantedBeforeHalving;
		double firstAllowance = allowance(Math.min(now, this.halveAt));
		double secondAllowance = allowance(now) - firstAllowance;
		return String.format(java.util.Locale.ROOT, "first half: %d of %.0f (%.1f %%); second half: %d of %.0f (%.1f %%)",
				first, firstAllowance, 100 * first / firstAllowance, this.granted - first, secondAllowance,
				(secondAllowance > 0) ? 100 * (this.granted - first) / secondAllowance : 0.0);
	}

	synchronized long granted() {
		return this.granted;
	}

	synchronized long[][] throttled() {
		long[][] copy = new long[this.throttled.length][];
		for (int i = 0; i < copy.length; i++) {
			copy[i] = this.throttled[i].clone();
		}
		return copy;
	}

	synchronized long[] firstThrottled() {
		return this.firstThrottled.clone();
	}

	long start() {
		return this.start;
	}

	String url() {
		return "http://127.0.0.1:" + this.server.getAddress().getPort() + "/v1/things";
	}

	@Override
	public void close() {
		this.server.stop(0);
		this.executor.shutdownNow();
	}
}
