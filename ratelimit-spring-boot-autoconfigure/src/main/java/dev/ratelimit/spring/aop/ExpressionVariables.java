package dev.ratelimit.spring.aop;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

import org.springframework.core.DefaultParameterNameDiscoverer;
import org.springframework.core.ParameterNameDiscoverer;
import org.springframework.expression.spel.SpelNode;
import org.springframework.expression.spel.ast.VariableReference;
import org.springframework.expression.spel.standard.SpelExpression;
import org.springframework.expression.spel.standard.SpelExpressionParser;

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
	 * Checks that every {@code #name} of {@code source} is a parameter of {@code method} ({@code #p0} and
	 * {@code #a0} by index, {@code #root} and {@code #this} too) or one of {@code extra}. Nothing is checked
	 * when the parameters' names are not known (a class compiled without {@code -parameters} nor debug
	 * information), nor for an expression that does not parse (its parser says so).
	 *
	 * @param attribute the annotation's attribute, for the message
	 * @param source the expression
	 * @param method the annotated method
	 * @param where the annotation, for the message
	 * @param extra the call's other variables
	 * @throws IllegalArgumentException naming the first unknown variable and the known ones
	 */
	static void check(String attribute, String source, Method method, String where, Set<String> extra) {
		String[] names = NAMES.getParameterNames(method);
		if (names == null) {
			return;
		}
		SpelExpression expression;
		try {
			expression = PARSER.parseRaw(source.trim());
		}
		catch (RuntimeException ex) {
			return;
		}
		List<String> known = new ArrayList<>(Arrays.asList(names));
		List<String> unknown = new ArrayList<>();
		collect(expression.getAST(), known, extra, names.length, unknown);
		if (!unknown.isEmpty()) {
			String parameters = known.isEmpty() ? "it has no parameters"
					: "its parameters are " + known.stream().map((name) -> "#" + name).collect(Collectors.joining(", "))
							+ " (or #p0, #p1, ... by position)";
			String others = extra.isEmpty() ? ""
					: "; " + attribute + " also has " + extra.stream().sorted().map((name) -> "#" + name)
						.collect(Collectors.joining(" and "));
			throw new IllegalArgumentException(attribute + " '" + source + "' of " + where + " names #" + unknown.get(0)
					+ ", which the call does not have: " + parameters + others);
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
