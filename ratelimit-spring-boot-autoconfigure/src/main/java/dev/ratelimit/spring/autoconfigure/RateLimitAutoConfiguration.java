package dev.ratelimit.spring.autoconfigure;

import java.util.List;
import java.util.concurrent.Executor;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.aop.RateLimitAdvisor;
import dev.ratelimit.spring.engine.RateLimitExecutors;
import dev.ratelimit.spring.aop.RateLimitInterceptor;
import dev.ratelimit.spring.engine.GrantObserver;
import dev.ratelimit.spring.BucketDefinitions;
import dev.ratelimit.spring.web.RateLimitWebConfiguration;
import dev.ratelimit.spring.actuate.RateLimitObservabilityConfiguration;
import dev.ratelimit.spring.DefaultRateLimiterRegistry;
import dev.ratelimit.spring.RateLimitConfigurationException;
import dev.ratelimit.spring.RateLimitProperties;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RateLimitBucketRegistrar;

import org.springframework.beans.factory.BeanNotOfRequiredTypeException;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.annotation.Qualifier;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBooleanProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Role;
import org.springframework.core.env.Environment;

/**
 * Auto-configuration of the ratelimit starter: a bean per bucket of {@code ratelimit.buckets} (named
 * after the bucket), the {@link RateLimiterRegistry}, the {@code @RateLimited} advisor and, in a web
 * application, HTTP 429 for {@link dev.ratelimit.core.RateLimitExceededException}.
 *
 * <p>The advisor's order is {@code ratelimit.interceptor-order} (default
 * {@link RateLimitProperties#DEFAULT_INTERCEPTOR_ORDER}, outside {@code @Transactional}, whose advisor
 * has the lowest precedence by default): lower orders run outside. Capped-release tokens then come back
 * after the transaction has committed or rolled back. To throttle inside the transaction instead, give
 * the transaction advisor a lower order ({@code @EnableTransactionManagement(order = ...)}) than this
 * one. Against a retry or a circuit breaker: an order below theirs takes tokens once per call, an
 * order above theirs once per attempt.
 */
@AutoConfiguration
@ConditionalOnBooleanProperty(name = "ratelimit.enabled", matchIfMissing = true)
@EnableConfigurationProperties(RateLimitProperties.class)
@Import({ RateLimitObservabilityConfiguration.class, RateLimitWebConfiguration.class })
public final class RateLimitAutoConfiguration {

	@Bean
	static RateLimitBucketRegistrar rateLimitBucketRegistrar() {
		return new RateLimitBucketRegistrar(List.of(RateLimitWebConfiguration::ruleErrors));
	}

	@Bean
	@ConditionalOnMissingBean
	RateLimiterRegistry rateLimiterRegistry(BucketDefinitions definitions, ListableBeanFactory beanFactory) {
		return DefaultRateLimiterRegistry.of(definitions, (name) -> bucketBean(beanFactory, name), beanFactory);
	}

	/**
	 * The bucket's bean: the starter's, or the application's of the same name when it is a limiter; a
	 * bean of another type that took the bucket's name fails start-up naming both.
	 */
	private static RateLimiter bucketBean(ListableBeanFactory beanFactory, String name) {
		try {
			return beanFactory.getBean(name, RateLimiter.class);
		}
		catch (BeanNotOfRequiredTypeException ex) {
			throw new RateLimitConfigurationException("Bucket '" + name + "': the application has a bean named '"
					+ name + "' of type " + ex.getActualType().getName() + ", which is not a rate limiter; every bucket"
					+ " is a bean named after it (an application's bean of that name replaces it only when it is a "
					+ RateLimiter.class.getName() + ").",
					"Rename the bucket or the bean, e.g. ratelimit.buckets." + name + "-limit or @Bean(\"" + name
							+ "Service\").");
		}
	}

	@Bean
	@ConditionalOnMissingBean
	RateLimitExecutors rateLimitExecutors(RateLimitProperties properties,
			@Qualifier(RateLimitExecutors.RUNNER_BEAN_NAME) ObjectProvider<Executor> runner) {
		RateLimitProperties.ExecutorSettings executor = properties.getExecutor();
		return new RateLimitExecutors(runner.getIfAvailable(), executor.getMaxThreads(), executor.isVirtualThreads(),
				executor.isPropagateContext());
	}

	@Bean
	@Role(BeanDefinition.ROLE_INFRASTRUCTURE)
	static RateLimitAdvisor rateLimitAdvisor(Environment environment, ObjectProvider<BucketDefinitions> definitions,
			ObjectProvider<RateLimiterRegistry> registry, ObjectProvider<RateLimitExecutors> executors,
			ObjectProvider<GrantObserver> observers) {
		int order = environment.getProperty("ratelimit.interceptor-order", Integer.class,
				RateLimitProperties.DEFAULT_INTERCEPTOR_ORDER);
		RateLimitAdvisor advisor = new RateLimitAdvisor(definitions::getObject,
				new RateLimitInterceptor(registry::getObject, executors::getObject, observers::getIfAvailable));
		advisor.setOrder(order);
		return advisor;
	}
}
