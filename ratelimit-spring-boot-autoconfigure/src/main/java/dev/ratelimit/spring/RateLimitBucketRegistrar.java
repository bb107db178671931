package dev.ratelimit.spring;


import dev.ratelimit.core.CalendarQuota;
import dev.ratelimit.core.HybridRateLimiter;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.SharedTokenBucket;

import org.springframework.aop.config.AopConfigUtils;
import org.springframework.beans.BeansException;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.beans.factory.support.BeanDefinitionRegistry;
import org.springframework.beans.factory.support.BeanDefinitionRegistryPostProcessor;
import org.springframework.beans.factory.support.RootBeanDefinition;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.context.EnvironmentAware;
import org.springframework.core.env.Environment;

/**
 * Registers a bean per configured bucket, named after the bucket, unless the application defines a
 * bean of that name itself; and the auto-proxy creator that applies the {@code @RateLimited} advisor.
 * The buckets are checked here, so an invalid configuration fails start-up before any bean is made.
 */
public final class RateLimitBucketRegistrar
		implements BeanDefinitionRegistryPostProcessor, EnvironmentAware, BeanFactoryAware {

	static final String DEFINITIONS_BEAN_NAME = "rateLimitBucketDefinitions";

	private Environment environment;

	private ListableBeanFactory beanFactory;

	@Override
	public void setEnvironment(Environment environment) {
		this.environment = environment;
	}

	@Override
	public void setBeanFactory(BeanFactory beanFactory) throws BeansException {
		this.beanFactory = (ListableBeanFactory) beanFactory;
	}

	@Override
	public void postProcessBeanDefinitionRegistry(BeanDefinitionRegistry registry) throws BeansException {
		BucketPropertyChecks.check(this.environment);
		RateLimitProperties properties = Binder.get(this.environment)
			.bind("ratelimit", RateLimitProperties.class)
			.orElseGet(RateLimitProperties::new);
		BucketDefinitions definitions = BucketDefinitions.of(properties);
		registry.registerBeanDefinition(DEFINITIONS_BEAN_NAME,
				new RootBeanDefinition(BucketDefinitions.class, () -> definitions));
		registry.registerBeanDefinition(BucketMaker.BEAN_NAME,
				new RootBeanDefinition(BucketMaker.class, () -> new BucketMaker(this.beanFactory)));
		for (BucketDefinition definition : definitions.asMap().values()) {
			if (registry.containsBeanDefinition(definition.name())) {
				continue; // the application's own bean of that name wins
			}
			RootBeanDefinition bean = new RootBeanDefinition(RateLimiter.class);
			bean.setTargetType(beanType(definition));
			bean.setInstanceSupplier(() -> create(definition));
			registry.registerBeanDefinition(definition.name(), bean);
		}
		AopConfigUtils.registerAutoProxyCreatorIfNecessary(registry);
	}

	@Override
	public void postProcessBeanFactory(ConfigurableListableBeanFactory beanFactory) throws BeansException {
	}

	private static Class<? extends RateLimiter> beanType(BucketDefinition definition) {
		if (definition.backend() != Backend.LOCAL) {
			return RateLimiter.class;
		}
		return switch (definition.type()) {
			case HYBRID -> HybridRateLimiter.class;
			case QUOTA -> CalendarQuota.class;
			case SHARED -> SharedTokenBucket.class;
		};
	}

	private RateLimiter create(BucketDefinition definition) {
		return this.beanFactory.getBean(BucketMaker.BEAN_NAME, BucketMaker.class).create(definition);
	}
}
