package dev.ratelimit.spring.web;

import java.util.ArrayList;
import java.util.List;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import jakarta.servlet.Filter;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.security.autoconfigure.SecurityAutoConfiguration;
import org.springframework.boot.security.autoconfigure.web.servlet.SecurityFilterAutoConfiguration;
import org.springframework.boot.security.autoconfigure.web.servlet.ServletWebSecurityAutoConfiguration;
import org.springframework.boot.test.context.assertj.AssertableWebApplicationContext;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.boot.web.servlet.AbstractFilterRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.annotation.AnnotationAwareOrderComparator;
import org.springframework.security.config.Customizer;
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.provisioning.InMemoryUserDetailsManager;
import org.springframework.security.web.SecurityFilterChain;
import org.springframework.test.web.servlet.MockMvc;
import org.springframework.test.web.servlet.setup.MockMvcBuilders;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.servlet.config.annotation.EnableWebMvc;

import static org.assertj.core.api.Assertions.assertThat;
import static org.springframework.test.web.servlet.request.MockMvcRequestBuilders.get;
import static org.springframework.test.web.servlet.result.MockMvcResultMatchers.status;

/**
 * {@code key: principal} behind Spring Security: the rule's filter is registered after Spring
 * Security's filter chain, so the authenticated user's name is the key. The filters run in the order
 * the servlet container gives them (their registrations' order), as in a running application.
 */
class WebRulesSecurityTests {

	private final WebApplicationContextRunner runner = new WebApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class, SecurityAutoConfiguration.class,
				ServletWebSecurityAutoConfiguration.class, SecurityFilterAutoConfiguration.class))
		.withUserConfiguration(SecuredConfiguration.class)
		.withPropertyValues("ratelimit.buckets.per-user.rate=1", "ratelimit.buckets.per-user.period=1h",
				"ratelimit.buckets.per-user.limit=1", "ratelimit.buckets.per-user.max-wait=0",
				"ratelimit.web.rules[0].paths=/api/**", "ratelimit.web.rules[0].bucket=per-user",
				"ratelimit.web.rules[0].key=principal");

	/** The filters of the context, in the order a servlet container applies them. */
	private static MockMvc mvc(AssertableWebApplicationContext context) {
		List<AbstractFilterRegistrationBean<?>> registrations = new ArrayList<>();
		for (AbstractFilterRegistrationBean<?> registration : context.getBeansOfType(AbstractFilterRegistrationBean.class)
			.values()) {
			registrations.add(registration);
		}
		registrations.sort(AnnotationAwareOrderComparator.INSTANCE);
		Filter[] filters = registrations.stream().map(AbstractFilterRegistrationBean::getFilter).toArray(Filter[]::new);
		assertThat(filters).hasSizeGreaterThanOrEqualTo(2);
		assertThat(filters[filters.length - 1]).isInstanceOf(RateLimitFilter.class);
		return MockMvcBuilders.webAppContextSetup(context).addFilters(filters).build();
	}

	@Test
	void eachAuthenticatedUserHasABucketOfTheirOwn() throws Exception {
		this.runner.run((context) -> {
			MockMvc mvc = mvc(context);
			mvc.perform(get("/api/me").with(basic("alice"))).andExpect(status().isOk());
			mvc.perform(get("/api/me").with(basic("alice"))).andExpect(status().isTooManyRequests());
			mvc.perform(get("/api/me").with(basic("bob"))).andExpect(status().isOk());
			// refused by Spring Security first: no token taken
			mvc.perform(get("/api/me")).andExpect(status().isUnauthorized());
			assertThat(context.getBean("per-user", RateLimiter.class).snapshot().rejected()).isEqualTo(1);
		});
	}

	private static org.springframework.test.web.servlet.request.RequestPostProcessor basic(String user) {
		return (request) -> {
			String token = java.util.Base64.getEncoder()
				.encodeToString((user + ":secret").getBytes(java.nio.charset.StandardCharsets.UTF_8));
			request.addHeader("Authorization", "Basic " + token);
			return request;
		};
	}

	@Configuration(proxyBeanMethods = false)
	@EnableWebMvc
	static class SecuredConfiguration {

		@Bean
		SecurityFilterChain api(HttpSecurity http) throws Exception {
			return http.authorizeHttpRequests((requests) -> requests.anyRequest().authenticated())
				.httpBasic(Customizer.withDefaults())
				.build();
		}

		@Bean
		InMemoryUserDetailsManager users() {
			return new InMemoryUserDetailsManager(User.withUsername("alice").password("{noop}secret").build(),
					User.withUsername("bob").password("{noop}secret").build());
		}

		@Bean
		Me me() {
			return new Me();
		}
	}

	@RestController
	static class Me {

		@GetMapping("/api/me")
		String me(java.security.Principal principal) {
			return principal.getName();
		}
	}
}
