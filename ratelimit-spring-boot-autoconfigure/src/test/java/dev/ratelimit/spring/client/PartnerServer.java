package dev.ratelimit.spring.client;

import java.io.IOException;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.Deque;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import com.sun.net.httpserver.HttpServer;

/**
 * A partner on 127.0.0.1 (a random port) that counts the requests reaching it and answers each with the
 * next scripted answer (200 "ok" when none is left).
 */
final class PartnerServer implements AutoCloseable {

	record Answer(int status, Map<String, String> headers) {
	}

	private final HttpServer server;

	private final AtomicInteger received = new AtomicInteger();

	private final Deque<Answer> script = new ArrayDeque<>();

	PartnerServer() throws IOException {
		this.server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
		this.server.createContext("/", (exchange) -> {
			this.received.incrementAndGet();
			Answer answer;
			synchronized (this.script) {
				answer = this.script.poll();
			}
			if (answer == null) {
				answer = new Answer(200, Map.of());
			}
			answer.headers().forEach((name, value) -> exchange.getResponseHeaders().add(name, value));
			byte[] body = ("ok " + this.received.get()).getBytes(StandardCharsets.UTF_8);
			exchange.getResponseHeaders().add("Content-Type", "text/plain");
			exchange.sendResponseHeaders(answer.status(), body.length);
			try (OutputStream out = exchange.getResponseBody()) {
				out.write(body);
			}
		});
		this.server.start();
	}

	/** Scripts the next answer. */
	void answer(int status, Map<String, String> headers) {
		synchronized (this.script) {
			this.script.add(new Answer(status, headers));
		}
	}

	int received() {
		return this.received.get();
	}

	String url(String path) {
		return "http://127.0.0.1:" + this.server.getAddress().getPort() + path;
	}

	@Override
	public void close() {
		this.server.stop(0);
	}
}
