package dev.ratelimit.spring.aop;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.RateLimiterSnapshot;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.RateLimitConfigurationException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.ApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * {@code refundIf} and {@code settle} (contract revision 2): evaluated when the call completes, for
 * every return kind; the tokens given back are available at once, a larger real cost is paid by the
 * callers that come after. Time comes from a fake clock.
 */
@ExtendWith(OutputCaptureExtension.class)
class RefundIfAndSettleTests {

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(AccountsConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withPropertyValues("ratelimit.buckets.login.rate=3", "ratelimit.buckets.login.period=1h",
				"ratelimit.buckets.login.max-wait=0", "ratelimit.buckets.llm.rate=10",
				"ratelimit.buckets.llm.limit=10", "ratelimit.buckets.llm.max-wait=0",
				"ratelimit.buckets.capped-login.rate=1", "ratelimit.buckets.capped-login.period=1h",
				"ratelimit.buckets.capped-login.limit=2", "ratelimit.buckets.capped-login.capped-release=true",
				"ratelimit.buckets.capped-login.max-wait=0");

	private static RateLimiterSnapshot snapshot(ApplicationContext context, String name) {
		return context.getBean(name, RateLimiter.class).snapshot();
	}

	@Test
	void refundIfCountsOnlyTheCallsThatShouldCount() {
		this.runner.run((context) -> {
			Accounts accounts = context.getBean(Accounts.class);
			for (int i = 0; i < 20; i++) {
				assertThat(accounts.login("alice", true).ok()).isTrue(); // successes are refunded
			}
			accounts.login("alice", false);
			accounts.login("alice", false);
			accounts.login("alice", false);
			// three failed logins: alice's bucket is empty; bob's is not
			assertThatThrownBy(() -> accounts.login("alice", true)).isInstanceOf(RateLimitExceededException.class);
			assertThat(accounts.login("bob", false).ok()).isFalse();
		});
	}

	@Test
	void refundIfSeesTheException() {
		this.runner.run((context) -> {
			Accounts accounts = context.getBean(Accounts.class);
			for (int i = 0; i < 10; i++) {
				assertThatThrownBy(() -> accounts.lookup(true)).isInstanceOf(IllegalStateException.class);
			}
			assertThat(snapshot(context, "login").available()).isEqualTo(3);
			accounts.lookup(false);
			assertThat(snapshot(context, "login").available()).isEqualTo(2);
		});
	}

	@Test
	void settleGivesBackTheDifferenceWhenTheRealCostIsSmaller() {
		this.runner.run((context) -> {
			Accounts accounts = context.getBean(Accounts.class);
			assertThat(accounts.complete(8, 3)).isEqualTo(3);
			assertThat(snapshot(context, "llm").available()).isEqualTo(7);
			assertThat(accounts.complete(7, 0)).isZero();
			assertThat(snapshot(context, "llm").available()).isEqualTo(7);
		});
	}

	@Test
	void settleWithALargerCostMakesTheNextCallerWaitForExactlyTheDifference() {
		this.runner.run((context) -> {
			Accounts accounts = context.getBean(Accounts.class);
			accounts.complete(10, 10);
			// without settle, one token would be 100 ms away
			RateLimiter llm = context.getBean("llm", RateLimiter.class);
			assertThatThrownBy(() -> llm.acquire(1, Duration.ZERO)).isInstanceOfSatisfying(
					RateLimitExceededException.class,
					(ex) -> assertThat(ex.getRetryAfter()).isEqualTo(Duration.ofMillis(100)));
			this.now.addAndGet(TimeUnit.SECONDS.toNanos(1));
			accounts.complete(10, 13); // used 3 more than it took
			assertThatThrownBy(() -> llm.acquire(1, Duration.ZERO)).isInstanceOfSatisfying(
					RateLimitExceededException.class,
					(ex) -> assertThat(ex.getRetryAfter()).isEqualTo(Duration.ofMillis(400)));
		});
	}

	@Test
	void aCappedBucketStillReleasesAndRefundIfActsOnTheRate() {
		this.runner.run((context) -> {
			Accounts accounts = context.getBean(Accounts.class);
			for (int i = 0; i < 100; i++) {
				accounts.cappedLogin(true);
			}
			RateLimiterSnapshot s = snapshot(context, "capped-login");
			assertThat(s.inFlight()).isZero();
			assertThat(s.available()).isEqualTo(2);
			accounts.cappedLogin(false);
			accounts.cappedLogin(false);
			assertThatThrownBy(() -> accounts.cappedLogin(true)).isInstanceOf(RateLimitExceededException.class);
			assertThat(snapshot(context, "capped-login").inFlight()).isZero();
		});
	}

	@Test
	void completionStageMonoAndFluxAreJudgedWhenTheyComplete() throws Exception {
		this.runner.run((context) -> {
			Accounts accounts = context.getBean(Accounts.class);
			CompletableFuture<Integer> pending = new CompletableFuture<>();
			CompletableFuture<Integer> result = accounts.asyncComplete(9, pending);
			assertThat(snapshot(context, "llm").available()).isEqualTo(1);
			pending.complete(4);
			assertThat(result.get(1, TimeUnit.SECONDS)).isEqualTo(4);
			assertThat(snapshot(context, "llm").available()).isEqualTo(6);
			StepVerifier.create(accounts.monoComplete(6, 1)).expectNext(1).verifyComplete();
			assertThat(snapshot(context, "llm").available()).isEqualTo(5);
			// a Flux has no single result: its refundIf judges the terminal signal
			StepVerifier.create(accounts.stream(5, false)).expectNext(1, 2).verifyComplete();
			assertThat(snapshot(context, "llm").available()).isEqualTo(5);
			StepVerifier.create(accounts.stream(5, true)).expectNext(1, 2).verifyError(IllegalStateException.class);
			assertThat(snapshot(context, "llm").available()).isZero();
		});
	}

	@Test
	void anExpressionThatFailsLeavesTheCostAndSaysSoOnce(CapturedOutput output) {
		this.runner.run((context) -> {
			Accounts accounts = context.getBean(Accounts.class);
			accounts.broken(2);
			accounts.broken(2);
			assertThat(snapshot(context, "llm").available()).isEqualTo(6);
			assertThat(output.getAll()).containsOnlyOnce("settle '#result.nothing' of @RateLimited on")
				.contains("the call's cost stands");
		});
	}

	@Test
	void anExpressionThatDoesNotParseFailsStartUp() {
		this.runner.withUserConfiguration(BadSettleConfiguration.class).run((context) -> {
			assertThat(context).hasFailed();
			Throwable failure = context.getStartupFailure();
			while (failure != null && !(failure instanceof RateLimitConfigurationException)) {
				failure = failure.getCause();
			}
			assertThat(failure).isNotNull().hasMessageContaining("settle '#result +'")
				.hasMessageContaining("BadSettle.call");
		});
	}

	record LoginResult(boolean ok) {
	}

	@Configuration(proxyBeanMethods = false)
	static class AccountsConfiguration {

		@Bean
		Accounts accounts() {
			return new Accounts();
		}
	}

	static class Accounts {

		@RateLimited(value = "login", key = "#user", refundIf = "#result.ok()")
		public LoginResult login(String user, boolean ok) {
			return new LoginResult(ok);
		}

		@RateLimited(value = "login", refundIf = "#exception != null")
		public String lookup(boolean fail) {
			if (fail) {
				throw new IllegalStateException("not found");
			}
			return "found";
		}

		@RateLimited(value = "llm", cost = "#maxTokens", settle = "#result")
		public long complete(long maxTokens, long used) {
			return used;
		}

		@RateLimited(value = "capped-login", refundIf = "#result")
		public boolean cappedLogin(boolean ok) {
			return ok;
		}

		@RateLimited(value = "llm", cost = "#maxTokens", settle = "#result")
		public CompletableFuture<Integer> asyncComplete(int maxTokens, CompletableFuture<Integer> used) {
			return used;
		}

		@RateLimited(value = "llm", cost = "#maxTokens", settle = "#result")
		public Mono<Integer> monoComplete(int maxTokens, int used) {
			return Mono.just(used);
		}

		@RateLimited(value = "llm", cost = "#cost", refundIf = "#exception == null")
		public Flux<Integer> stream(int cost, boolean fail) {
			Flux<Integer> items = Flux.just(1, 2);
			return fail ? items.concatWith(Flux.error(new IllegalStateException("cut"))) : items;
		}

		@RateLimited(value = "llm", cost = "#cost", settle = "#result.nothing")
		public int broken(int cost) {
			return cost;
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class BadSettleConfiguration {

		@Bean
		BadSettle badSettle() {
			return new BadSettle();
		}
	}

	static class BadSettle {

		@RateLimited(value = "llm", settle = "#result +")
		public int call() {
			return 1;
		}
	}
}
