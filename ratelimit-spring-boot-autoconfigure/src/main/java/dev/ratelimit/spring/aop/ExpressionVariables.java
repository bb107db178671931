package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

import org.jspecify.annotations.Nullable;

import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.expression.spel.SpelNode;
import org.springframework.expression.spel.ast.VariableReference;
import org.springframework.expression.spel.standard.SpelExpression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.util.ClassUtils;

/**
 * The variables an annotation's expression names, checked against what a call will have. SpEL gives an
 * unknown {@code #name} the value {@code null} without a word, so {@code cost = "#row.size()"} on
 * {@code write(List rows)} started, and every call then failed with "method size() on null context
 * object", naming neither the method nor the attribute. A name that is not a parameter fails start-up.
 */
final class ExpressionVariables {

	private static final ParameterNameDiscoverer NAMES = new DefaultParameterNameDiscoverer();

	private static final SpelExpressionParser PARSER = new SpelExpressionParser();

	/** The variables of a completion expression beside the parameters. */
	static final Set<String> COMPLETION = Set.of("result", "exception");

	private ExpressionVariables() {
	}

	/**
	 * The names a call's expression may use for the method's parameters: those of the method itself, of
	 * the most specific one on the target class, and of every method it overrides or implements (a JDK
	 * proxy evaluates on the interface's method, a class proxy on the class's: an interface's annotation
	 * may use the interface's names, an implementation may name them otherwise).
	 *
	 * @return the names, or {@code null} when some of them are not known (compiled without
	 *         {@code -parameters} nor debug information): then nothing is checked
	 */
	static @Nullable List<String> parameterNames(Method method, Class<?> targetClass) {
		Set<String> names = new LinkedHashSet<>();
		Set<Method> methods = new LinkedHashSet<>();
		methods.add(method);
		Method specific = ClassUtils.getMostSpecificMethod(method, targetClass);
		methods.add(specific);
		for (Class<?> type = targetClass; type != null && type != Object.class; type = type.getSuperclass()) {
			methods.add(ClassUtils.getMostSpecificMethod(specific, type));
		}
		for (Class<?> type : ClassUtils.getAllInterfacesForClassAsSet(targetClass)) {
			try {
				methods.add(type.getMethod(specific.getName(), specific.getParameterTypes()));
			}
			catch (NoSuchMethodException ex) {
				// not one of this interface's
			}
		}
		for (Method candidate : methods) {
			if (candidate.getName().equals(specific.getName())
					&& Arrays.equals(candidate.getParameterTypes(), specific.getParameterTypes())) {
				String[] found = NAMES.getParameterNames(candidate);
				if (found == null) {
					return null;
				}
				names.addAll(Arrays.asList(found));
			}
		}
		return new ArrayList<>(names);
	}

	/**
	 * Checks that every {@code #name} of {@code source} is a parameter ({@code #p0} and {@code #a0} by
	 * position, {@code #root} and {@code #this} too) or one of {@code extra}. Nothing is checked without the
	 * parameters' names, nor for an expression that does not parse (its parser says so).
	 *
	 * @param attribute the annotation's attribute, for the message
	 * @param source the expression
	 * @param parameters the names of the method's parameters ({@link #parameterNames}), or {@code null} to
	 *        check nothing
	 * @param positions how many parameters the method has ({@code #p0} ... by position)
	 * @param where the annotation, for the message
	 * @param extra the call's other variables
	 * @throws IllegalArgumentException naming the first unknown variable and the known ones
	 */
	static void check(String attribute, String source, @Nullable List<String> parameters, int positions,
			String where, Set<String> extra) {
		if (parameters == null) {
			return;
		}
		SpelExpression expression;
		try {
			expression = PARSER.parseRaw(source.trim());
		}
		catch (RuntimeException ex) {
			return;
		}
		List<String> known = parameters;
		List<String> unknown = new ArrayList<>();
		collect(expression.getAST(), known, extra, positions, unknown);
		if (!unknown.isEmpty()) {
			String described = known.isEmpty() ? "it has no parameters"
					: "its parameters are " + known.stream().map((name) -> "#" + name).collect(Collectors.joining(", "))
							+ " (or #p0, #p1, ... by position)";
			String others = extra.isEmpty() ? ""
					: "; " + attribute + " also has " + extra.stream().sorted().map((name) -> "#" + name)
						.collect(Collectors.joining(" and "));
			throw new IllegalArgumentException(attribute + " '" + source + "' of " + where + " names #" + unknown.get(0)
					+ ", which the call does not have: " + described + others);
		}
	}

	/**
	 * Checks an expression of a method whose parameters' names are not known (its class was compiled
	 * without {@code -parameters}): SpEL would give every {@code #name} the value {@code null} at every
	 * call, so a name that is not by position ({@code #p0}, {@code #a0}), {@code #root}, {@code #this} or
	 * one of {@code extra} fails start-up (contract revision 3).
	 *
	 * @param attribute the annotation's attribute, for the message
	 * @param source the expression
	 * @param positions how many parameters the method has
	 * @param where the annotation, naming the method, for the message
	 * @param extra the call's other variables
	 * @throws IllegalArgumentException naming the expression, the method and the two ways out
	 */
	static void checkWithoutNames(String attribute, String source, int positions, String where, Set<String> extra) {
		SpelExpression expression;
		try {
			expression = PARSER.parseRaw(source.trim());
		}
		catch (RuntimeException ex) {
			return; // its parser says so
		}
		List<String> unknown = new ArrayList<>();
		collect(expression.getAST(), List.of(), extra, positions, unknown);
		if (!unknown.isEmpty()) {
			throw new IllegalArgumentException(attribute + " '" + source + "' of " + where + " names #" + unknown.get(0)
					+ ", but the names of the method's parameters are not known: its class was compiled without"
					+ " -parameters, and #" + unknown.get(0) + " would be null at every call. Compile with -parameters"
					+ " (Spring Boot's Maven parent and Gradle plugin do), or name the parameters by position: #p0 or"
					+ " #a0 for the first, #p1 or #a1 for the second");
		}
	}

	private static void collect(SpelNode node, List<String> parameters, Set<String> extra, int count,
			List<String> unknown) {
		if (node instanceof VariableReference) {
			String name = node.toStringAST().substring(1);
			if (!parameters.contains(name) && !extra.contains(name) && !"root".equals(name) && !"this".equals(name)
					&& !byPosition(name, count)) {
				unknown.add(name);
			}
		}
		for (int i = 0; i < node.getChildCount(); i++) {
			collect(node.getChild(i), parameters, extra, count, unknown);
		}
	}

	private static boolean byPosition(String name, int count) {
		if (!name.matches("[ap][0-9]{1,9}")) {
			return false;
		}
		return Integer.parseInt(name.substring(1)) < count;
	}
}
