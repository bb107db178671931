package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;

import org.jspecify.annotations.Nullable;

import dev.ratelimit.annotation.RateLimited;

import org.springframework.aot.hint.ExecutableMode;
import org.springframework.aot.hint.MemberCategory;
import org.springframework.aot.hint.RuntimeHints;
import org.springframework.beans.factory.aot.BeanRegistrationAotContribution;
import org.springframework.beans.factory.aot.BeanRegistrationAotProcessor;
import org.springframework.beans.factory.support.RegisteredBean;
import org.springframework.util.ReflectionUtils;

/**
 * Ahead-of-time processing for GraalVM native images: for every bean with {@code @RateLimited}
 * methods (or class), registers the reflection the interceptor needs at run time: the methods
 * themselves, whose annotation it reads and whose parameters its SpEL cost expressions name, and the
 * annotation type. ({@code @RateLimited} lives in the framework-free core, so it cannot carry Spring's
 * {@code @Reflective}; this processor does what that would.)
 */
final class RateLimitedAotProcessor implements BeanRegistrationAotProcessor {

	@Override
	public @Nullable BeanRegistrationAotContribution processAheadOfTime(RegisteredBean registeredBean) {
		Class<?> beanClass = registeredBean.getBeanClass();
		List<Method> limited = new ArrayList<>();
		ReflectionUtils.doWithMethods(beanClass, (method) -> {
			if (!RateLimitAdvisor.find(method, beanClass).isEmpty()) {
				limited.add(method);
			}
		}, ReflectionUtils.USER_DECLARED_METHODS);
		if (limited.isEmpty()) {
			return null;
		}
		return (generationContext, code) -> {
			RuntimeHints hints = generationContext.getRuntimeHints();
			hints.reflection().registerType(RateLimited.class, MemberCategory.INVOKE_PUBLIC_METHODS);
			hints.reflection().registerType(dev.ratelimit.annotation.RateLimits.class, MemberCategory.INVOKE_PUBLIC_METHODS);
			for (Method method : limited) {
				hints.reflection().registerMethod(method, ExecutableMode.INVOKE);
			}
		};
	}
}
