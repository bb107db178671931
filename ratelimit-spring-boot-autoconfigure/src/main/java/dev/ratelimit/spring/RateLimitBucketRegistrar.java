package dev.ratelimit.spring;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

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
import org.springframework.boot.context.properties.bind.Bindable;
import org.springframework.boot.context.properties.bind.Binder;
import org.springframework.boot.context.properties.bind.handler.IgnoreErrorsBindHandler;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ApplicationContextAware;
import org.springframework.context.EnvironmentAware;
import org.springframework.core.env.Environment;

/**
 * Registers a bean per configured bucket, named after the bucket, unless the application defines a
 * bean of that name itself; and the auto-proxy creator that applies the {@code @RateLimited} advisor.
 * The buckets are checked here, so an invalid configuration fails start-up before any bean is made;
 * and with them whatever else of the {@code ratelimit} tree the auto-configuration asks to check here
 * (the web rules), so that start-up reports every error of the tree at once (issue #30: five mistakes
 * took five restarts), each as it would be reported alone.
 */
public final class RateLimitBucketRegistrar
		implements BeanDefinitionRegistryPostProcessor, EnvironmentAware, BeanFactoryAware, ApplicationContextAware {

	/**
	 * A check of the {@code ratelimit} tree beside the buckets', run with them so that its errors are
	 * reported with theirs.
	 */
	@FunctionalInterface
	public interface ConfigurationCheck {

		/**
		 * The errors of what this check covers.
		 *
		 * @param properties the bound properties (a value that failed to bind left as its default)
		 * @param definitions the buckets that are valid
		 * @param invalid the configured buckets that are not (already reported: not to be reported
		 *        again as missing)
		 * @param context the application context, to tell what kind of application it is
		 * @return the errors, in configuration order, empty when none
		 */
		List<RateLimitConfigurationException> errors(RateLimitProperties properties, BucketDefinitions definitions,
				Set<String> invalid, ApplicationContext context);
	}

	private final List<ConfigurationCheck> checks;

	private ApplicationContext context;

	static final String DEFINITIONS_BEAN_NAME = "rateLimitBucketDefinitions";

	private Environment environment;

	private ListableBeanFactory beanFactory;

	/**
	 * Creates the registrar with the buckets' checks alone.
	 */
	public RateLimitBucketRegistrar() {
		this(List.of());
	}

	/**
	 * Creates the registrar.
	 *
	 * @param checks further checks of the {@code ratelimit} tree, whose errors are reported with the
	 *        buckets'
	 */
	public RateLimitBucketRegistrar(List<ConfigurationCheck> checks) {
		this.checks = List.copyOf(checks);
	}

	@Override
	public void setApplicationContext(ApplicationContext context) {
		this.context = context;
	}

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
		BucketDefinitions definitions = checkedDefinitions();
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

	/**
	 * Every check of the tree, every error gathered: the properties as written, then each bucket (one
	 * whose properties failed is not checked again), then the further checks.
	 */
	private BucketDefinitions checkedDefinitions() {
		List<BucketPropertyChecks.Found> found = BucketPropertyChecks.errors(this.environment);
		List<RateLimitConfigurationException> errors = new ArrayList<>();
		Set<String> invalid = new LinkedHashSet<>();
		for (BucketPropertyChecks.Found error : found) {
			errors.add(error.error());
			if (error.bucket() != null) {
				invalid.add(error.bucket());
			}
		}
		Binder binder = Binder.get(this.environment);
		// with errors found, what failed to bind is left as its default (those errors say it); without,
		// binding fails as it would
		RateLimitProperties properties = (found.isEmpty()
				? binder.bind("ratelimit", RateLimitProperties.class)
				: binder.bind("ratelimit", Bindable.of(RateLimitProperties.class), new IgnoreErrorsBindHandler()))
			.orElseGet(RateLimitProperties::new);
		BucketDefinitions definitions = BucketDefinitions.of(properties, invalid, errors);
		properties.getBuckets().keySet().stream().filter((name) -> definitions.get(name) == null).forEach(invalid::add);
		for (ConfigurationCheck check : this.checks) {
			errors.addAll(check.errors(properties, definitions, invalid, this.context));
		}
		if (!errors.isEmpty()) {
			throw RateLimitConfigurationException.of(errors);
		}
		return definitions;
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
