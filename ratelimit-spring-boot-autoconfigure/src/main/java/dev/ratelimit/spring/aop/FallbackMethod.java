package dev.ratelimit.spring.aop;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.reflect.Method;
import java.util.Arrays;
import java.util.concurrent.CompletionStage;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.spring.RateLimitConfigurationException;
import org.aopalliance.intercept.MethodInvocation;
import org.jspecify.annotations.Nullable;

import org.springframework.core.KotlinDetector;
import org.springframework.core.ResolvableType;
import org.springframework.util.ClassUtils;
import org.springframework.util.ReflectionUtils;

/**
 * The {@code fallback} of a {@code @RateLimited} method (contract revision 2): a method of the same
 * bean with the same parameters, optionally followed by one {@link RateLimitExceededException}, whose
 * return type fits the guarded method's, resolved once (at start-up) into a method handle and called
 * on the target (not through the proxy) when, and only when, the call is refused.
 */
final class FallbackMethod {

	private final MethodHandle handle;

	private final boolean takesRefusal;

	/** A Kotlin suspend fallback (of a suspend method), called through Spring's coroutine support. */
	private final @Nullable Method suspending;

	private FallbackMethod(MethodHandle handle, boolean takesRefusal, @Nullable Method suspending) {
		this.handle = handle;
		this.takesRefusal = takesRefusal;
		this.suspending = suspending;
	}

	/**
	 * Resolves a fallback.
	 *
	 * @param name the annotation's {@code fallback}
	 * @param method the guarded method
	 * @param targetClass the bean's class
	 * @param where the annotation, for messages
	 * @return the fallback
	 * @throws RateLimitConfigurationException when it does not exist or does not fit, naming both
	 */
	static FallbackMethod resolve(String name, Method method, Class<?> targetClass, String where) {
		Class<?>[] parameters = method.getParameterTypes();
		boolean suspend = KotlinDetector.isSuspendingFunction(method);
		Class<?>[] withRefusal = Arrays.copyOf(parameters, parameters.length + 1);
		if (suspend) {
			// a suspend method's last parameter is its continuation: the refusal goes before it
			withRefusal[parameters.length] = parameters[parameters.length - 1];
			withRefusal[parameters.length - 1] = RateLimitExceededException.class;
		}
		else {
			withRefusal[parameters.length] = RateLimitExceededException.class;
		}
		Method fallback = ReflectionUtils.findMethod(targetClass, name, withRefusal);
		boolean takesRefusal = fallback != null;
		if (fallback == null) {
			fallback = ReflectionUtils.findMethod(targetClass, name, parameters);
		}
		String expected = name + "(" + describe(parameters) + ") or " + name + "(" + describe(withRefusal) + ")";
		if (fallback == null) {
			throw new RateLimitConfigurationException("The fallback of " + where + " does not exist: "
					+ ClassUtils.getShortName(targetClass) + " has no method " + expected + ".",
					"Declare " + expected + " returning " + method.getReturnType().getSimpleName()
							+ " in the same bean, or fix the fallback attribute.");
		}
		ResolvableType returns = ResolvableType.forMethodReturnType(method, targetClass);
		ResolvableType fallbackReturns = ResolvableType.forMethodReturnType(fallback, targetClass);
		// the type arguments are compared when the fallback says them: a raw fallback, or a generic one
		// (<T> Mono<T> shared by methods of several element types), fits as Java would assign it
		boolean elementsSaid = returns.hasGenerics() && fallbackReturns.hasGenerics()
				&& !fallbackReturns.hasUnresolvableGenerics();
		if (!fits(fallback.getReturnType(), method.getReturnType())
				|| (elementsSaid && !returns.isAssignableFrom(fallbackReturns))) {
			throw new RateLimitConfigurationException("The fallback " + fallback.getName() + " of " + where + " returns "
					+ simple(fallbackReturns) + ", which does not fit the method's " + simple(returns) + ".",
					"Make " + fallback.getName() + " return " + simple(returns)
							+ " (for CompletionStage, Mono and Flux, the same kind, of the same element type).");
		}
		try {
			MethodHandles.Lookup lookup = MethodHandles.privateLookupIn(fallback.getDeclaringClass(),
					MethodHandles.lookup());
			if (suspend) {
				ReflectionUtils.makeAccessible(fallback);
			}
			return new FallbackMethod(lookup.unreflect(fallback), takesRefusal, suspend ? fallback : null);
		}
		catch (IllegalAccessException ex) {
			throw new RateLimitConfigurationException("The fallback " + fallback.getName() + " of " + where
					+ " cannot be called: " + ex.getMessage() + ".", "Make it accessible (any visibility works in"
							+ " the application's own module).");
		}
	}

	private static boolean fits(Class<?> fallback, Class<?> method) {
		if (method == void.class) {
			return fallback == void.class;
		}
		if (CompletionStage.class.isAssignableFrom(method) || isReactive(method)) {
			return method.isAssignableFrom(fallback);
		}
		return ClassUtils.isAssignable(method, fallback);
	}

	/**
	 * A type as the source says it: {@code Mono<Integer>}, not {@code reactor.core.publisher.Mono<java.lang.Integer>}.
	 */
	private static String simple(ResolvableType type) {
		return type.toString().replaceAll("(?:[a-z_$][\\w$]*\\.)+", "").replace('$', '.');
	}

	private static boolean isReactive(Class<?> type) {
		String name = type.getName();
		return name.equals("reactor.core.publisher.Mono") || name.equals("reactor.core.publisher.Flux");
	}

	private static String describe(Class<?>[] types) {
		return String.join(", ", Arrays.stream(types).map(Class::getSimpleName).toList());
	}

	/**
	 * Calls the fallback instead of the refused method.
	 *
	 * @param invocation the refused call
	 * @param refusal why
	 * @return what the fallback returns
	 * @throws Throwable what the fallback throws
	 */
	Object invoke(MethodInvocation invocation, RateLimitExceededException refusal) throws Throwable {
		Object[] arguments = invocation.getArguments();
		if (this.suspending != null) {
			// the publisher Spring's coroutine support makes of it; the caller's continuation stays unused
			Object[] all = new Object[arguments.length + (this.takesRefusal ? 1 : 0)];
			System.arraycopy(arguments, 0, all, 0, arguments.length - 1);
			if (this.takesRefusal) {
				all[arguments.length - 1] = refusal;
			}
			return org.springframework.core.CoroutinesUtils.invokeSuspendingFunction(this.suspending,
					invocation.getThis(), all);
		}
		Object[] all = new Object[arguments.length + (this.takesRefusal ? 2 : 1)];
		all[0] = invocation.getThis();
		System.arraycopy(arguments, 0, all, 1, arguments.length);
		if (this.takesRefusal) {
			all[all.length - 1] = refusal;
		}
		return this.handle.invokeWithArguments(all);
	}
}
