package dev.ratelimit.core;

import java.time.Duration;

import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Every refusal of an argument says which argument and what is accepted as data, not only in its message
 * (issue #29): a caller words it in its own terms without matching the text.
 */
class InvalidArgumentExceptionTests {

	private final FakeClock clock = new FakeClock();

	private SharedTokenBucket.Builder tenPerSecond() {
		return SharedTokenBucket.builder().rate(10, Duration.ofSeconds(1)).clock(this.clock);
	}

	@Test
	void aBucketsBuilderNamesTheArgumentAndItsRange() {
		refused(() -> tenPerSecond().limit(0).build(), "limit", 0L, 1L, SharedTokenBucket.MAX_COST);
		refused(() -> tenPerSecond().limit(SharedTokenBucket.MAX_COST + 1).build(), "limit",
				SharedTokenBucket.MAX_COST + 1, 1L, SharedTokenBucket.MAX_COST);
		refused(() -> SharedTokenBucket.builder().rate(1L << 51, Duration.ofSeconds(1)).build(), "limit", 1L << 51, 1L,
				SharedTokenBucket.MAX_COST); // the default: one period's rate
		refused(() -> tenPerSecond().initial(11).build(), "initial", 11L, 0L, 10L);
		refused(() -> tenPerSecond().threshold(0).build(), "threshold", 0L, 1L, 10L);
		refused(() -> tenPerSecond().rate(0, Duration.ofSeconds(1)).build(), "rate", 0L, 1L, null);
		refused(() -> tenPerSecond().rate(1, Duration.ZERO).build(), "period", Duration.ZERO, Duration.ofNanos(1),
				Duration.ofNanos(Long.MAX_VALUE));
		refused(() -> tenPerSecond().clock(null), "clock", null, null, null);
	}

	@Test
	void aBucketsCallsNameTheArgumentAndItsRange() {
		SharedTokenBucket bucket = tenPerSecond().build();
		refused(() -> bucket.tryAcquire(-1), "n", -1L, 0L, null);
		refused(() -> bucket.tryAcquire(SharedTokenBucket.MAX_COST + 1), "n", SharedTokenBucket.MAX_COST + 1, 0L,
				SharedTokenBucket.MAX_COST);
		refused(() -> bucket.acquire(1, Duration.ofSeconds(-1)), "maxWait", Duration.ofSeconds(-1), Duration.ZERO, null);
		refused(() -> bucket.updateLimit(0), "limit", 0L, 1L, SharedTokenBucket.MAX_COST);
		SharedTokenBucket capped = tenPerSecond().cappedRelease(true).build();
		refused(() -> capped.grab(11), "n", 11L, 0L, 10L);
	}

	@Test
	void thePacerNamesTheArgumentAndItsRange() {
		HybridRateLimiter.Builder builder = HybridRateLimiter.builder().rate(1_000, Duration.ofSeconds(1)).clock(this.clock);
		refused(() -> builder.burstRatio(0.5).build(), "burstRatio", 0.5, 1.0, null);
		refused(() -> builder.burstRatio(1.1).limit(0).build(), "limit", 0L, 1L, SharedTokenBucket.MAX_COST);
		refused(() -> builder.limit(10).maxBacklog(Duration.ofSeconds(-1)).build(), "maxBacklog", Duration.ofSeconds(-1),
				Duration.ZERO, null);
		HybridRateLimiter pacer = builder.maxBacklog(null).build();
		refused(() -> pacer.tryAcquire(-1), "n", -1L, 0L, null);
		refused(() -> HybridRateLimiter.parse("fast"), "spec", "fast", null, null);
	}

	private static void refused(ThrowingCallable call, String argument, Object value, Object least, Object most) {
		assertThatThrownBy(call).isInstanceOfSatisfying(InvalidArgumentException.class, (ex) -> {
			assertThat(ex.argument()).isEqualTo(argument);
			assertThat(ex.getMessage()).startsWith(argument.equals("spec") ? "Invalid rate spec"
					: argument);
			assertThat(ex.value()).isEqualTo(value);
			assertThat(ex.least()).isEqualTo(least);
			assertThat(ex.most()).isEqualTo(most);
		});
	}
}
