package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.Set;
import java.util.function.Supplier;

import org.jspecify.annotations.Nullable;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.BucketDefinitions;
import dev.ratelimit.spring.RateLimitConfigurationException;

import org.aopalliance.aop.Advice;

import org.springframework.aop.Pointcut;
import org.springframework.aop.support.AbstractPointcutAdvisor;
import org.springframework.aop.support.StaticMethodMatcherPointcut;
import org.springframework.util.ClassUtils;
import org.springframework.util.ReflectionUtils;

/**
 * Applies the {@link RateLimitInterceptor} to {@link RateLimited @RateLimited} methods, and to every
 * public method (not {@code Object}'s) of a {@code @RateLimited} class. While the application starts,
 * matching checks each annotation: a bucket that does not exist, a cost that does not parse or a
 * max-wait that is not a duration fails start-up with a message that says which.
 */
public final class RateLimitAdvisor extends AbstractPointcutAdvisor {

	private static final long serialVersionUID = 1L;

	private final transient Pointcut pointcut;

	private final transient RateLimitInterceptor interceptor;

	/**
	 * Creates the advisor.
	 *
	 * @param definitions the configured buckets, asked for when a method is matched
	 * @param interceptor the interceptor
	 */
	public RateLimitAdvisor(Supplier<BucketDefinitions> definitions, RateLimitInterceptor interceptor) {
		this.interceptor = interceptor;
		this.pointcut = new RateLimitedPointcut(definitions);
	}

	@Override
	public Pointcut getPointcut() {
		return this.pointcut;
	}

	@Override
	public Advice getAdvice() {
		return this.interceptor;
	}

	/**
	 * Finds the annotation that applies to a method: its own, else its class's when it is public and not
	 * declared by {@code Object}.
	 */
	static @Nullable RateLimited find(Method method, Class<?> targetClass) {
		Method specific = ClassUtils.getMostSpecificMethod(method, targetClass);
		RateLimited own = org.springframework.core.annotation.AnnotatedElementUtils.findMergedAnnotation(specific,
				RateLimited.class);
		if (own != null) {
			return own;
		}
		if (!Modifier.isPublic(specific.getModifiers()) || ReflectionUtils.isObjectMethod(specific)
				|| Modifier.isStatic(specific.getModifiers())) {
			return null;
		}
		return org.springframework.core.annotation.AnnotatedElementUtils.findMergedAnnotation(targetClass,
				RateLimited.class);
	}

	private static final class RateLimitedPointcut extends StaticMethodMatcherPointcut {

		private final Supplier<BucketDefinitions> definitions;

		RateLimitedPointcut(Supplier<BucketDefinitions> definitions) {
			this.definitions = definitions;
		}

		@Override
		public boolean matches(Method method, Class<?> targetClass) {
			RateLimited annotation = find(method, targetClass);
			if (annotation == null) {
				return false;
			}
			String where = "@RateLimited on " + ClassUtils.getQualifiedMethodName(method, targetClass);
			BucketDefinitions definitions = this.definitions.get();
			Set<String> names = definitions.names();
			if (!names.contains(annotation.value())) {
				throw RateLimitConfigurationException.unknownBucket(annotation.value(), where, names);
			}
			if (!annotation.key().isBlank()) {
				BucketDefinitions.checkUsableWithKey(definitions.get(annotation.value()), where);
			}
			try {
				InvocationPlan.checkAnnotation(annotation, method, targetClass, where);
			}
			catch (IllegalArgumentException ex) {
				throw new RateLimitConfigurationException(ex.getMessage() + ".",
						"Fix the cost, maxWait or key attribute of the annotation.");
			}
			return true;
		}
	}
}
