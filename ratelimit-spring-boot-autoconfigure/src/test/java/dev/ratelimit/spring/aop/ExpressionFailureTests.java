package dev.ratelimit.spring.aop;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.RateLimitClock;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import reactor.core.publisher.Mono;
import reactor.test.StepVerifier;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Contract revision 3: an expression of {@code cost} or {@code key} that throws, or gives a value the
 * bucket cannot take (negative, not a number, beyond 2^50), fails the call before it runs with an
 * {@code IllegalArgumentException} naming the bucket, the attribute and the expression; one of
 * {@code settle} that gives such a value is reported at WARN once, the call's result and its cost
 * standing, and no caller waits for an answer that cannot come. Each of these failed on the code
 * before: the raw SpEL or NPE reached the caller, a settle beyond 2^50 threw after the method ran (a
 * {@code CompletableFuture} never completed, a {@code Mono} failed in its cleanup).
 */
@ExtendWith(OutputCaptureExtension.class)
class ExpressionFailureTests {

	private static final long TWO_TO_THE_51 = 1L << 51;

	private final AtomicLong now = new AtomicLong(1_000_000_000L);

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(ServiceConfiguration.class)
		.withBean(RateLimitClock.class, () -> this.now::get)
		.withPropertyValues("ratelimit.buckets.orders.rate=10", "ratelimit.buckets.orders.limit=10",
				"ratelimit.buckets.orders.max-wait=0");

	@Test
	void aCostExpressionThatThrowsFailsTheCallNamingBucketAndExpressionAndTheMethodDoesNotRun() {
		this.runner.run((context) -> {
			Orders orders = context.getBean(Orders.class);
			assertThatThrownBy(() -> orders.byLength(null)).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("cost '#name.length()'")
				.hasMessageContaining("bucket 'orders'")
				.hasMessageContaining("Orders.byLength");
			assertThatThrownBy(() -> orders.parsed("twelve")).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("cost 'T(Long).parseLong(#count)'")
				.hasMessageContaining("bucket 'orders'");
			assertThat(orders.runs()).isZero();
			assertThat(available(context)).isEqualTo(10);
		});
	}

	@Test
	void aCostBeyondTwoToTheFiftyFailsTheCallBeforeItRuns() {
		this.runner.run((context) -> {
			Orders orders = context.getBean(Orders.class);
			assertThatThrownBy(() -> orders.costing(TWO_TO_THE_51)).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("cost '#tokens'")
				.hasMessageContaining("bucket 'orders'")
				.hasMessageContaining("2^50");
			assertThat(orders.runs()).isZero();
		});
	}

	@Test
	void aKeyExpressionThatThrowsFailsTheCallNamingBucketAndExpression() {
		this.runner.run((context) -> {
			Orders orders = context.getBean(Orders.class);
			assertThatThrownBy(() -> orders.keyed(null)).isInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("key '#user.trim()'")
				.hasMessageContaining("bucket 'orders'");
			assertThat(orders.runs()).isZero();
		});
	}

	@Test
	void aCostExpressionThatThrowsFailsTheFutureOfACompletionStageMethod() {
		this.runner.run((context) -> {
			Orders orders = context.getBean(Orders.class);
			CompletableFuture<Integer> future = orders.asyncByLength(null);
			assertThat(future).isCompletedExceptionally();
			assertThatThrownBy(future::join).hasCauseInstanceOf(IllegalArgumentException.class)
				.hasMessageContaining("bucket 'orders'");
			assertThat(orders.runs()).isZero();
		});
	}

	@Test
	void aSettleBeyondTwoToTheFiftyLeavesEveryKindOfCallItsResultAndItsCostAndSaysSoOnce(CapturedOutput output)
			throws Exception {
		this.runner.run((context) -> {
			Orders orders = context.getBean(Orders.class);
			assertThat(orders.settled(TWO_TO_THE_51)).isEqualTo(1);
			CompletableFuture<Integer> future = orders.asyncSettled(TWO_TO_THE_51);
			assertThat(future.get(5, TimeUnit.SECONDS)).isEqualTo(2);
			StepVerifier.create(orders.monoSettled(TWO_TO_THE_51)).expectNext(3).verifyComplete();
			assertThat(available(context)).isEqualTo(7); // each call's cost of 1 stands
			assertThat(output.getAll()).containsOnlyOnce("settle '#real' of @RateLimited on " + Orders.class.getName()
					+ ".settled");
		});
	}

	private static long available(org.springframework.context.ApplicationContext context) {
		return (long) context.getBean("orders", RateLimiter.class).snapshot().available();
	}

	@Configuration(proxyBeanMethods = false)
	static class ServiceConfiguration {

		@Bean
		Orders orderService() {
			return new Orders();
		}
	}

	static class Orders {

		private final AtomicInteger runs = new AtomicInteger();

		public int runs() {
			return this.runs.get();
		}

		@RateLimited(value = "orders", cost = "#name.length()")
		public int byLength(String name) {
			return this.runs.incrementAndGet();
		}

		@RateLimited(value = "orders", cost = "#name.length()")
		public CompletableFuture<Integer> asyncByLength(String name) {
			return CompletableFuture.completedFuture(this.runs.incrementAndGet());
		}

		@RateLimited(value = "orders", cost = "T(Long).parseLong(#count)")
		public int parsed(String count) {
			return this.runs.incrementAndGet();
		}

		@RateLimited(value = "orders", cost = "#tokens")
		public int costing(long tokens) {
			return this.runs.incrementAndGet();
		}

		@RateLimited(value = "orders", key = "#user.trim()")
		public int keyed(String user) {
			return this.runs.incrementAndGet();
		}

		@RateLimited(value = "orders", settle = "#real")
		public int settled(long real) {
			return this.runs.incrementAndGet();
		}

		@RateLimited(value = "orders", settle = "#real")
		public CompletableFuture<Integer> asyncSettled(long real) {
			return CompletableFuture.completedFuture(this.runs.incrementAndGet());
		}

		@RateLimited(value = "orders", settle = "#real")
		public Mono<Integer> monoSettled(long real) {
			return Mono.fromSupplier(this.runs::incrementAndGet);
		}
	}
}
