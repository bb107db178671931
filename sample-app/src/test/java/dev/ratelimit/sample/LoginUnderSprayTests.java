package dev.ratelimit.sample;

import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;

import dev.ratelimit.core.RateLimitExceededException;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The README's login example ({@code login-failures}: 5 failed logins per 15 minutes per user name) under
 * a sprayer, over real HTTP (contract revision 3, "per-key buckets under attack"): threads send failed
 * logins under random user names, as fast as the machine allows, for a few seconds (over HTTP, and one in
 * process on the same bucket, for the volume a busy machine's HTTP does not reach), while users with the
 * correct password keep logging in over HTTP: every one of their logins succeeds, none gets a 429. The store is
 * made small ({@code keys.memory: 1MB}, room for some 1,400 user names) so that the sprayer's names fill it
 * many times over: buckets that owe tokens are forgotten, their debts kept (KeyedBuckets K7, K8). Before
 * revision 3, the sprayed names filled {@code keys.max} and the users shared an overflow bucket the
 * sprayer kept empty: every user got 429 "retry after 138 s".
 */
@SpringBootTest(webEnvironment = WebEnvironment.RANDOM_PORT,
		properties = "ratelimit.buckets.login-failures.keys.memory=1MB")
class LoginUnderSprayTests {

	private static final Duration RUN = Duration.ofSeconds(6);

	private static final int USERS = 4;

	private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

	@Value("${local.server.port}")
	private int port;

	@Autowired
	private LoginService logins;

	@Test
	void usersWithTheRightPasswordKeepLoggingInWhileASprayerFailsUnderRandomNames() throws Exception {
		long end = System.nanoTime() + RUN.toNanos();
		AtomicInteger sprayed = new AtomicInteger();
		AtomicInteger sprayRefused = new AtomicInteger();
		AtomicInteger correct = new AtomicInteger();
		ConcurrentLinkedQueue<String> wrong = new ConcurrentLinkedQueue<>();
		List<Thread> threads = new ArrayList<>();
		for (int s = 0; s < 2; s++) {
			long seed = System.nanoTime() + s;
			threads.add(new Thread(() -> {
				SplittableRandom random = new SplittableRandom(seed);
				while (System.nanoTime() - end < 0) {
					String name = "x" + Long.toHexString(random.nextLong()); // a new name each time
					int status = login(name, "wrong", wrong);
					if (status == 200) {
						sprayed.incrementAndGet();
					}
					else if (status == 429) {
						sprayRefused.incrementAndGet();
					}
					else if (status < 0) {
						return;
					}
				}
			}));
		}
		// and in process, on the same bucket, the rate HTTP alone does not reach on a busy machine
		long inProcessSeed = System.nanoTime();
		threads.add(new Thread(() -> {
			SplittableRandom random = new SplittableRandom(inProcessSeed);
			while (System.nanoTime() - end < 0) {
				try {
					this.logins.login("y" + Long.toHexString(random.nextLong()), "wrong");
					sprayed.incrementAndGet();
				}
				catch (RateLimitExceededException ex) {
					sprayRefused.incrementAndGet();
				}
			}
		}));
		for (int u = 0; u < USERS; u++) {
			String user = "user" + u + "@example.com";
			threads.add(new Thread(() -> {
				while (System.nanoTime() - end < 0) {
					int status = login(user, "secret", wrong);
					if (status == 200) {
						correct.incrementAndGet();
					}
					else {
						wrong.add(user + " with the right password: " + status);
						return;
					}
				}
			}));
		}
		threads.forEach(Thread::start);
		for (Thread thread : threads) {
			thread.join();
		}
		System.out.printf("login under spray: %d failed logins under new names (%d refused), %d correct logins%n",
				sprayed.get(), sprayRefused.get(), correct.get());
		assertThat(wrong).as("users locked out by the sprayer").isEmpty();
		assertThat(correct.get()).isPositive();
		assertThat(sprayed.get()).as("the premise: the sprayer's names overfill the store (about 1,400)")
			.isGreaterThan(3_000);
	}

	/** One login; its status, or -1 after an exception (noted). */
	private int login(String user, String password, ConcurrentLinkedQueue<String> wrong) {
		String form = "user=" + URLEncoder.encode(user, StandardCharsets.UTF_8) + "&password=" + password;
		HttpRequest request = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + this.port + "/login"))
			.timeout(Duration.ofSeconds(30))
			.header("Content-Type", "application/x-www-form-urlencoded")
			.POST(HttpRequest.BodyPublishers.ofString(form))
			.build();
		try {
			HttpResponse<String> response = this.http.send(request, HttpResponse.BodyHandlers.ofString());
			if (response.statusCode() == 200 && password.equals("secret") && !response.body().contains("\"ok\":true")) {
				wrong.add(user + ": " + response.body());
			}
			return response.statusCode();
		}
		catch (Exception ex) {
			wrong.add(ex.toString());
			return -1;
		}
	}
}
