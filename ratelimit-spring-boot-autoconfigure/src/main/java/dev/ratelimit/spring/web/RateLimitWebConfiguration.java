package dev.ratelimit.spring.web;

import java.util.List;
import java.util.Set;

import dev.ratelimit.spring.BucketDefinitions;
import dev.ratelimit.spring.RateLimitConfigurationException;
import dev.ratelimit.spring.RateLimitProperties;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.engine.GrantObserver;
import dev.ratelimit.spring.engine.RateLimitExecutors;

import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.context.ApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Import;
import org.springframework.core.env.Environment;
import org.springframework.web.filter.reactive.ServerWebExchangeContextFilter;

/**
 * The web front end's part of the starter's auto-configuration (imported by
 * {@code RateLimitAutoConfiguration}): the 429 answer of a web application, and the web rules with their
 * filter for Spring MVC or WebFlux, each under the conditions of its kind of application. Here, so that
 * the front end's types stay inside this package.
 */
@Configuration(proxyBeanMethods = false)
public final class RateLimitWebConfiguration {

	/**
	 * The web rules' errors, reported with the buckets' (every error of the tree at once) by the starter's
	 * registrar of buckets, where the
	 * rules are checked at all: where {@link WebRulesConfiguration} registered its {@link WebRules} (a web
	 * application with Spring's path patterns, and no {@code WebRules} bean of its own), which it has
	 * when the registrar runs.
	 */
	public static List<RateLimitConfigurationException> ruleErrors(RateLimitProperties properties,
			BucketDefinitions definitions, Set<String> invalid, ApplicationContext context) {
		if (!(context instanceof ConfigurableApplicationContext configurable)
				|| !configurable.getBeanFactory().containsBeanDefinition(WEB_RULES_BEAN_NAME)
				|| !WEB_RULES_BEAN_NAME.equals(
						configurable.getBeanFactory().getBeanDefinition(WEB_RULES_BEAN_NAME).getFactoryMethodName())) {
			return List.of();
		}
		return WebRules.errors(properties.getWeb().getRules(), definitions, invalid);
	}

	/** The name of the web rules' bean, its factory method's. */
	private static final String WEB_RULES_BEAN_NAME = "rateLimitWebRules";

	@Configuration(proxyBeanMethods = false)
	@ConditionalOnWebApplication
	@ConditionalOnClass(name = "org.springframework.http.ProblemDetail")
	static class WebConfiguration {

		@Bean
		@ConditionalOnMissingBean
		RateLimitExceptionHandler rateLimitExceptionHandler(RateLimitProperties properties,
				ObjectProvider<RateLimiterRegistry> registry) {
			return new RateLimitExceptionHandler(properties.getWeb().isExposeKey(), properties.getWeb().getHeaders(),
					registry::getIfAvailable);
		}
	}

	/**
	 * After Spring Security's filter chain ({@code spring.security.filter.order}, -100 by default), so
	 * that {@code principal} keys resolve.
	 */
	private static int ruleFilterOrder(Environment environment) {
		return environment.getProperty("spring.security.filter.order", Integer.class, -100) + 10;
	}

	/**
	 * The web rules, checked at start-up, for whichever kind of web application this is.
	 */
	@Configuration(proxyBeanMethods = false)
	@ConditionalOnWebApplication
	@ConditionalOnClass(name = "org.springframework.web.util.pattern.PathPattern")
	static class WebRulesConfiguration {

		@Bean
		@ConditionalOnMissingBean
		WebRules rateLimitWebRules(RateLimitProperties properties, BucketDefinitions definitions,
				ObjectProvider<RateLimiterRegistry> registry) {
			return WebRules.of(properties.getWeb().getRules(), definitions, registry::getObject);
		}
	}

	/**
	 * Web rules in a Spring MVC application: a servlet filter, registered only when rules exist.
	 */
	@Configuration(proxyBeanMethods = false)
	@Import(WebRulesConfiguration.class)
	@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
	@ConditionalOnClass(name = { "jakarta.servlet.Filter", "org.springframework.web.filter.OncePerRequestFilter",
			"org.springframework.web.util.pattern.PathPattern" })
	static class ServletRulesConfiguration {

		@Bean
		FilterRegistrationBean<RateLimitFilter> rateLimitFilter(WebRules rules, RateLimitProperties properties,
				Environment environment, ListableBeanFactory beans, ObjectProvider<RateLimitExecutors> executors) {
			RateLimitProperties.Web web = properties.getWeb();
			FilterRegistrationBean<RateLimitFilter> registration = new FilterRegistrationBean<>(new RateLimitFilter(
					rules, web.getHeaders(), web.isExposeKey(), ActuatorPaths.of(environment, beans, true),
					executors::getObject));
			registration.setOrder(ruleFilterOrder(environment));
			registration.setAsyncSupported(true);
			registration.setEnabled(!rules.isEmpty());
			return registration;
		}

		@Bean
		@ConditionalOnProperty(name = "ratelimit.web.headers", havingValue = "ietf")
		GrantObserver rateLimitServletLevels() {
			return new ServletLevels();
		}
	}

	/**
	 * Web rules in a WebFlux application: a {@code WebFilter}, made only when rules exist.
	 */
	@Configuration(proxyBeanMethods = false)
	@Import(WebRulesConfiguration.class)
	@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
	@ConditionalOnClass(name = { "org.springframework.web.server.WebFilter", "reactor.core.publisher.Mono" })
	static class ReactiveRulesConfiguration {

		/** The exchange in the Reactor context, where annotated controller methods find their response. */
		@Bean
		@ConditionalOnProperty(name = "ratelimit.web.headers", havingValue = "ietf")
		@ConditionalOnMissingBean
		ServerWebExchangeContextFilter rateLimitExchangeContextFilter() {
			return new ServerWebExchangeContextFilter();
		}

		@Bean
		@ConditionalOnProperty(name = "ratelimit.web.headers", havingValue = "ietf")
		GrantObserver rateLimitReactiveLevels() {
			return new ReactiveLevels();
		}

		@Bean
		RateLimitWebFilter rateLimitWebFilter(WebRules rules, RateLimitProperties properties, Environment environment,
				ListableBeanFactory beans) {
			RateLimitProperties.Web web = properties.getWeb();
			return new RateLimitWebFilter(rules, web.getHeaders(), web.isExposeKey(),
					ActuatorPaths.of(environment, beans, false), ruleFilterOrder(environment));
		}
	}
}
