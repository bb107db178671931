package dev.ratelimit.spring.aop;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import java.util.concurrent.atomic.AtomicInteger;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.aopalliance.intercept.MethodInterceptor;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

import org.springframework.aop.support.DefaultPointcutAdvisor;
import org.springframework.aop.support.annotation.AnnotationMatchingPointcut;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Role;
import org.springframework.core.Ordered;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A {@code Mono} method subscribed more than once (a second subscriber, {@code retry()}, {@code repeat()}):
 * "on subscription the tokens are taken, and the method is invoked once they are there", each time, and with
 * the advice that runs inside the rate limiter each time. By default the rate limiter's advisor runs outside
 * {@code @Transactional}'s (see {@code RateLimitAutoConfiguration}), so a method whose re-subscription skipped
 * the inner advice would run its second attempt outside its transaction.
 *
 * <p>Found by a reviewer's model test of the async paths: {@code ReactorInvocations} called
 * {@code invocation.proceed()} once per subscription on the one {@code MethodInvocation} of the call, whose
 * interceptor index is already at the end of the chain after the first proceed, so the second goes straight to
 * the method.
 */
class ResubscribedMonoTests {

	/** Runs of the inner advice. */
	static final AtomicInteger INNER_ADVICE_CALLS = new AtomicInteger();

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(GreeterConfiguration.class)
		.withPropertyValues("ratelimit.buckets.greetings.rate=100", "ratelimit.buckets.greetings.limit=10",
				"ratelimit.buckets.greetings.max-wait=0");

	@Test
	void eachSubscriptionRunsTheMethodWithTheAdviceInsideTheRateLimiter() {
		this.runner.run((context) -> {
			Greeter greeter = context.getBean(Greeter.class);
			INNER_ADVICE_CALLS.set(0);
			Mono<String> hello = greeter.hello();
			assertThat(hello.block()).isEqualTo("hello 1");
			assertThat(hello.block()).isEqualTo("hello 2");
			assertThat(greeter.calls()).isEqualTo(2);
			assertThat(INNER_ADVICE_CALLS.get()).as("runs of the advice inside the rate limiter (as @Transactional's is)")
				.isEqualTo(2);
		});
	}

	@Target(ElementType.METHOD)
	@Retention(RetentionPolicy.RUNTIME)
	@interface Inner {

	}

	@Configuration(proxyBeanMethods = false)
	static class GreeterConfiguration {

		@Bean
		Greeter greeter() {
			return new Greeter();
		}

		/** An advisor with the lowest precedence, as {@code @Transactional}'s has by default: inside the rate limiter. */
		@Bean
		@Role(BeanDefinition.ROLE_INFRASTRUCTURE)
		static DefaultPointcutAdvisor innerAdvisor() {
			MethodInterceptor counting = (invocation) -> {
				INNER_ADVICE_CALLS.incrementAndGet();
				return invocation.proceed();
			};
			DefaultPointcutAdvisor advisor = new DefaultPointcutAdvisor(
					new AnnotationMatchingPointcut(null, Inner.class, true), counting);
			advisor.setOrder(Ordered.LOWEST_PRECEDENCE);
			return advisor;
		}
	}

	static class Greeter {

		private final AtomicInteger calls = new AtomicInteger();

		@RateLimited("greetings")
		@Inner
		public Mono<String> hello() {
			int n = this.calls.incrementAndGet();
			return Mono.just("hello " + n);
		}

		public int calls() {
			return this.calls.get();
		}
	}
}
