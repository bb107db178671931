package dev.ratelimit.spring.aop;

import java.lang.reflect.AnnotatedElement;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.BucketDefinitions;
import dev.ratelimit.spring.RateLimitConfigurationException;

import org.aopalliance.aop.Advice;

import org.springframework.aop.Pointcut;
import org.springframework.aop.support.AbstractPointcutAdvisor;
import org.springframework.aop.support.StaticMethodMatcherPointcut;
import org.springframework.core.annotation.MergedAnnotation;
import org.springframework.core.annotation.MergedAnnotations;
import org.springframework.core.annotation.MergedAnnotations.SearchStrategy;
import org.springframework.core.annotation.RepeatableContainers;
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
	 * Finds the annotations that apply to a method: its own, else its class's when it is public and
	 * not declared by {@code Object}. Of each, the nearest declaration wins (an override's annotations
	 * replace those of the method it overrides, as a single annotation always did); repeated
	 * annotations come in the order written.
	 */
	static List<RateLimited> find(Method method, Class<?> targetClass) {
		Method specific = ClassUtils.getMostSpecificMethod(method, targetClass);
		List<RateLimited> own = nearest(specific);
		if (!own.isEmpty()) {
			return own;
		}
		if (!Modifier.isPublic(specific.getModifiers()) || ReflectionUtils.isObjectMethod(specific)
				|| Modifier.isStatic(specific.getModifiers())) {
			return List.of();
		}
		return nearest(targetClass);
	}

	/**
	 * Whether the annotations that apply to a method are on the method (or a method it overrides or
	 * implements), not on its class.
	 */
	static boolean declaredOnMethod(Method method, Class<?> targetClass) {
		return !nearest(ClassUtils.getMostSpecificMethod(method, targetClass)).isEmpty();
	}

	private static List<RateLimited> nearest(AnnotatedElement element) {
		List<MergedAnnotation<RateLimited>> found = MergedAnnotations
			.from(element, SearchStrategy.TYPE_HIERARCHY, RepeatableContainers.standardRepeatables())
			.stream(RateLimited.class)
			.toList();
		if (found.isEmpty()) {
			return List.of();
		}
		int nearest = found.stream().mapToInt(MergedAnnotation::getAggregateIndex).min().getAsInt();
		return found.stream()
			.filter((annotation) -> annotation.getAggregateIndex() == nearest)
			.map(MergedAnnotation::synthesize)
			.toList();
	}

	private static final class RateLimitedPointcut extends StaticMethodMatcherPointcut {

		private final Supplier<BucketDefinitions> definitions;

		RateLimitedPointcut(Supplier<BucketDefinitions> definitions) {
			this.definitions = definitions;
		}

		@Override
		public boolean matches(Method method, Class<?> targetClass) {
			List<RateLimited> annotations = find(method, targetClass);
			if (annotations.isEmpty()) {
				return false;
			}
			String where = AnnotatedLimit.where(method, targetClass);
			BucketDefinitions definitions = this.definitions.get();
			Set<String> names = definitions.names();
			for (RateLimited annotation : annotations) {
				if (!names.contains(annotation.value())) {
					throw RateLimitConfigurationException.unknownBucket(annotation.value(), where, names);
				}
				if (!annotation.key().isBlank()) {
					BucketDefinitions.checkUsableWithKey(definitions.get(annotation.value()), where);
				}
				if (!annotation.plan().isBlank() && definitions.plans(annotation.value()).isEmpty()) {
					throw new RateLimitConfigurationException(where + " names a plan ('" + annotation.plan()
							+ "') for bucket '" + annotation.value() + "', which has no plans.",
							"Add the plans under ratelimit.buckets." + annotation.value()
									+ ".plans, or remove the plan attribute.");
				}
			}
			try {
				InvocationPlan.checkAnnotations(annotations, method, targetClass, where);
			}
			catch (IllegalArgumentException ex) {
				throw new RateLimitConfigurationException(ex.getMessage() + ".",
						"Fix the cost, maxWait, key, plan, refundIf or settle attribute of the annotation.");
			}
			return true;
		}
	}
}
