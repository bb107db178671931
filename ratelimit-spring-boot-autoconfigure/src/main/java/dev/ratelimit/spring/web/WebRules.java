package dev.ratelimit.spring.web;

import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Supplier;

import dev.ratelimit.spring.BucketDefinitions;
import dev.ratelimit.spring.PlannedKey;
import dev.ratelimit.spring.RateLimitPlanResolver;
import dev.ratelimit.spring.RateLimitConfigurationException;
import dev.ratelimit.spring.RateLimitProperties;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RegisteredBucket;
import dev.ratelimit.spring.http.RuleSyntax;

import org.jspecify.annotations.Nullable;

import org.springframework.expression.Expression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.expression.spel.support.SimpleEvaluationContext;
import org.springframework.http.server.PathContainer;
import org.springframework.web.util.pattern.PathPattern;

/**
 * {@code ratelimit.web.rules} (contract revision 2), checked at start-up and compiled: which rules a
 * request matches (by method and {@code PathPattern}), and the buckets and keys it takes from. Every
 * matching rule applies; the buckets of one set of matching rules are taken from together, as the
 * buckets of a method with several {@code @RateLimited} are (all or nothing, in a fixed order by bucket
 * name, one wait for the longest).
 *
 * <p>Keys: {@code ip} is the remote address as the server sees it (so Spring Boot's
 * {@code server.forward-headers-strategy} decides whether {@code X-Forwarded-For} counts; the starter
 * never reads that header itself), an IPv6 address keyed by its /64 prefix; {@code principal} the
 * authenticated user's name; {@code header:<Name>} the header's value; otherwise a SpEL expression
 * over {@code #request} (the framework's request). A request without the header, anonymous under
 * {@code principal}, or whose expression gives {@code null}, shares the key {@code ""}.
 */
final class WebRules {

	private static final SpelExpressionParser PARSER = new SpelExpressionParser();

	private static final String KEYS_ACCEPTED = "ip, principal, header:<Name>, or a SpEL expression over #request";

	enum KeyKind {

		NONE, IP, PRINCIPAL, HEADER, SPEL

	}

	/** One rule, compiled. */
	static final class Compiled {

		final int index;

		final PathPattern[] paths;

		final @Nullable Set<String> methods;

		final String bucket;

		final KeyKind kind;

		final @Nullable String header;

		final @Nullable Expression expression;

		final long cost;

		/** The rule's plan (contract revision 3), in the forms of a key; {@code NONE} when it has none. */
		final KeyKind planKind;

		final @Nullable String planHeader;

		final @Nullable Expression planExpression;

		/** Whether the rule's bucket has plans (then a keyed request's key carries its plan). */
		final boolean plans;

		Compiled(int index, PathPattern[] paths, @Nullable Set<String> methods, String bucket, KeyKind kind,
				@Nullable String header, @Nullable Expression expression, long cost) {
			this(index, paths, methods, bucket, kind, header, expression, cost, KeyKind.NONE, null, null, false);
		}

		Compiled(int index, PathPattern[] paths, @Nullable Set<String> methods, String bucket, KeyKind kind,
				@Nullable String header, @Nullable Expression expression, long cost, KeyKind planKind,
				@Nullable String planHeader, @Nullable Expression planExpression, boolean plans) {
			this.index = index;
			this.paths = paths;
			this.methods = methods;
			this.bucket = bucket;
			this.kind = kind;
			this.header = header;
			this.expression = expression;
			this.cost = cost;
			this.planKind = planKind;
			this.planHeader = planHeader;
			this.planExpression = planExpression;
			this.plans = plans;
		}

		boolean matches(String method, PathContainer path) {
			if (this.methods != null && !this.methods.contains(method)) {
				return false;
			}
			for (PathPattern pattern : this.paths) {
				if (pattern.matches(path)) {
					return true;
				}
			}
			return false;
		}
	}

	/**
	 * What a request sees of the rules it matches: their buckets, taken from together, and how each
	 * rule keys the request.
	 */
	public static final class Matched {

		private final Compiled[] rules;

		private final RequestLimits limits;

		private final boolean needsPrincipal;

		/**
		 * Each rule's plan resolver, for a keyed rule on a bucket with plans that names no plan itself;
		 * {@code null} when none applies.
		 */
		private final @Nullable RateLimitPlanResolver @Nullable [] resolvers;

		Matched(Compiled[] rules, RequestLimits limits) {
			this(rules, limits, null);
		}

		Matched(Compiled[] rules, RequestLimits limits, @Nullable RateLimitPlanResolver @Nullable [] resolvers) {
			this.rules = rules;
			this.limits = limits;
			this.needsPrincipal = Arrays.stream(rules)
				.anyMatch((rule) -> rule.kind == KeyKind.PRINCIPAL || rule.planKind == KeyKind.PRINCIPAL);
			this.resolvers = resolvers;
		}

		/**
		 * The matched rules' buckets.
		 *
		 * @return the limits
		 */
		public RequestLimits limits() {
			return this.limits;
		}

		/**
		 * Whether a rule keys the request by its principal (WebFlux resolves it first).
		 *
		 * @return whether the principal is needed
		 */
		public boolean needsPrincipal() {
			return this.needsPrincipal;
		}

		/**
		 * Each bucket's key for a request, in the order of {@link #limits()}.
		 *
		 * @param request the request
		 * @return the keys ({@code null} for a rule without a key)
		 */
		public @Nullable Object[] keys(RequestView request) {
			Object[] keys = new Object[this.rules.length];
			for (int i = 0; i < keys.length; i++) {
				Compiled rule = this.rules[i];
				Object key = key(rule.kind, rule.header, rule.expression, request);
				if (key != null && rule.plans) {
					key = planned(rule, key, request, (this.resolvers != null) ? this.resolvers[i] : null);
				}
				keys[i] = key;
			}
			return keys;
		}

		/**
		 * A keyed request's key with its plan (contract revision 3, "Plans"): the rule's {@code plan} when
		 * it has one (a missing header, an anonymous principal or a {@code null} expression: no plan), else
		 * the application's resolver, else the key alone (the bucket's own settings).
		 */
		private static Object planned(Compiled rule, Object key, RequestView request,
				@Nullable RateLimitPlanResolver resolver) {
			if (rule.planKind != KeyKind.NONE) {
				Object plan;
				try {
					plan = key(rule.planKind, rule.planHeader, rule.planExpression, request);
				}
				catch (RuntimeException ex) {
					throw new IllegalArgumentException("The plan of ratelimit.web.rules[" + rule.index + "] (bucket '"
							+ rule.bucket + "') failed for this request: " + ex.getMessage(), ex);
				}
				return PlannedKey.of(key, (plan != null) ? plan.toString() : null);
			}
			if (resolver != null) {
				try {
					return PlannedKey.of(key, resolver.plan(rule.bucket, key));
				}
				catch (RuntimeException ex) {
					throw new IllegalArgumentException("The plan of bucket '" + rule.bucket + "' failed for this request"
							+ " (ratelimit.web.rules[" + rule.index + "]): the RateLimitPlanResolver ("
							+ resolver.getClass().getName() + ") threw " + ex, ex);
				}
			}
			return key;
		}

		private static @Nullable Object key(KeyKind kind, @Nullable String header, @Nullable Expression expression,
				RequestView request) {
			return switch (kind) {
				case NONE -> null;
				case IP -> ipKey(request.remoteAddress());
				case PRINCIPAL -> orEmpty(request.principal());
				case HEADER -> orEmpty(request.header(header));
				case SPEL -> {
					SimpleEvaluationContext context = SimpleEvaluationContext.forReadOnlyDataBinding()
						.withInstanceMethods()
						.build();
					context.setVariable("request", request.request());
					Object value = expression.getValue(context);
					yield (value != null) ? value : "";
				}
			};
		}
	}

	/**
	 * What a key needs of a request, for Spring MVC and WebFlux alike.
	 */
	public interface RequestView {

		/**
		 * The remote address as the server sees it.
		 *
		 * @return the address, or {@code null} when unknown
		 */
		@Nullable InetAddress remoteAddress();

		/**
		 * The authenticated user's name.
		 *
		 * @return the name, or {@code null} when anonymous
		 */
		@Nullable String principal();

		/**
		 * A header's first value.
		 *
		 * @param name the header
		 * @return the value, or {@code null} when absent
		 */
		@Nullable String header(String name);

		/**
		 * The framework's request, {@code #request} of a SpEL key.
		 *
		 * @return the request
		 */
		Object request();
	}

	private final Compiled[] rules;

	private final Supplier<RateLimiterRegistry> registry;

	private final ConcurrentHashMap<Long, Matched> matched = new ConcurrentHashMap<>();

	private WebRules(Compiled[] rules, Supplier<RateLimiterRegistry> registry) {
		this.rules = rules;
		this.registry = registry;
	}

	/**
	 * Checks and compiles the rules.
	 *
	 * @param rules the configured rules
	 * @param definitions the configured buckets
	 * @param registry the buckets, asked for on the first request
	 * @return the compiled rules
	 * @throws RateLimitConfigurationException naming the rule's index and the property, for the first
	 *         rule that is not valid
	 */
	public static WebRules of(List<RateLimitProperties.Rule> rules, BucketDefinitions definitions,
			Supplier<RateLimiterRegistry> registry) {
		List<RateLimitConfigurationException> errors = errors(rules, definitions, Set.of());
		if (!errors.isEmpty()) {
			throw RateLimitConfigurationException.of(errors);
		}
		List<Compiled> compiled = new ArrayList<>();
		for (int i = 0; i < rules.size(); i++) {
			compiled.add(compile(i, rules.get(i), definitions));
		}
		return new WebRules(compiled.toArray(new Compiled[0]), registry);
	}

	/**
	 * The errors of every rule (issue #30: start-up reports every error of the {@code ratelimit} tree at
	 * once), each as {@link #of} would report it alone.
	 *
	 * @param rules the configured rules
	 * @param definitions the configured buckets that are valid
	 * @param invalid configured buckets that are not (their errors are reported already): a rule naming
	 *        one is not checked
	 * @return the errors, in the rules' order, empty when none
	 */
	public static List<RateLimitConfigurationException> errors(List<RateLimitProperties.Rule> rules,
			BucketDefinitions definitions, Set<String> invalid) {
		if (rules.size() > 64) {
			return List.of(new RateLimitConfigurationException("ratelimit.web.rules has " + rules.size() + " rules.",
					"Keep at most 64 rules (several paths and methods fit in one)."));
		}
		List<RateLimitConfigurationException> errors = new ArrayList<>();
		for (int i = 0; i < rules.size(); i++) {
			RateLimitProperties.Rule rule = rules.get(i);
			if (rule.getBucket() != null && invalid.contains(rule.getBucket().trim())) {
				continue;
			}
			try {
				compile(i, rule, definitions);
			}
			catch (RateLimitConfigurationException ex) {
				errors.add(ex);
			}
		}
		return errors;
	}

	private static Compiled compile(int index, RateLimitProperties.Rule rule, BucketDefinitions definitions) {
		String prefix = "ratelimit.web.rules[" + index + "].";
		PathPattern[] paths = paths(prefix, rule.getPaths());
		Set<String> methods = methods(prefix, rule.getMethods());
		String bucket = RuleSyntax.bucket(prefix, rule.getBucket(), definitions, "requests");
		RuleSyntax.cost(prefix, rule.getCost());
		String key = (rule.getKey() != null) ? rule.getKey().trim() : "";
		KeyKind kind = keyKind(prefix, key, "key");
		if (kind != KeyKind.NONE) {
			BucketDefinitions.checkUsableWithKey(definitions.get(bucket), prefix.substring(0, prefix.length() - 1));
		}
		String header = (kind == KeyKind.HEADER) ? key.substring("header:".length()).trim() : null;
		Expression expression = (kind == KeyKind.SPEL) ? PARSER.parseExpression(key) : null;
		String plan = (rule.getPlan() != null) ? rule.getPlan().trim() : "";
		KeyKind planKind = plan.isEmpty() ? KeyKind.NONE : keyKind(prefix, plan, "plan");
		boolean plans = !definitions.plans(bucket).isEmpty();
		if (planKind != KeyKind.NONE) {
			if (kind == KeyKind.NONE) {
				throw RuleSyntax.invalid(prefix + "plan", "is '" + plan + "', but the rule has no key: a plan is a key's",
						"Give the rule a key too (e.g. key: header:X-Api-Key), or remove the plan.");
			}
			if (!plans) {
				throw RuleSyntax.invalid(prefix + "plan", "is '" + plan + "', but bucket '" + bucket + "' has no plans",
						"Add the plans under ratelimit.buckets." + bucket + ".plans, or remove the rule's plan.");
			}
		}
		String planHeader = (planKind == KeyKind.HEADER) ? plan.substring("header:".length()).trim() : null;
		Expression planExpression = (planKind == KeyKind.SPEL) ? PARSER.parseExpression(plan) : null;
		return new Compiled(index, paths, methods, bucket, kind, header, expression, rule.getCost(), planKind,
				planHeader, planExpression, plans && kind != KeyKind.NONE);
	}

	private static PathPattern[] paths(String prefix, @Nullable List<String> configured) {
		PathPattern[] paths = RuleSyntax.paths(prefix, configured, "/api/**");
		if (paths == null) {
			throw RuleSyntax.invalid(prefix + "paths", "is missing", "Give the rule the paths it limits, e.g. paths: [\"/api/**\"].");
		}
		return paths;
	}

	/** The rule's methods in upper case ({@code HEAD} with {@code GET}), or {@code null} for every method. */
	private static @Nullable Set<String> methods(String prefix, @Nullable List<String> configured) {
		Set<String> methods = RuleSyntax.methods(prefix, configured);
		if (methods != null && methods.contains("GET")) {
			// Spring MVC and WebFlux answer HEAD with the GET handler: without it, HEAD would run every limited GET
			// handler unlimited (its body only is dropped)
			methods.add("HEAD");
		}
		return methods;
	}

	/** What kind of key a rule's {@code key} is, checked: a header's name, a SpEL expression that parses. */
	private static KeyKind keyKind(String prefix, String key, String property) {
		if (key.isEmpty()) {
			return KeyKind.NONE;
		}
		if (key.equals("ip")) {
			return KeyKind.IP;
		}
		if (key.equals("principal")) {
			return KeyKind.PRINCIPAL;
		}
		if (key.startsWith("header:")) {
			if (!key.substring("header:".length()).trim().matches("[!#$%&'*+.^_`|~0-9A-Za-z-]+")) {
				throw RuleSyntax.invalid(prefix + property, "'" + key + "' does not name a header", "Write header:<Name>, e.g. header:X-Api-Key.");
			}
			return KeyKind.HEADER;
		}
		if (!key.contains("#request")) {
			throw RuleSyntax.invalid(prefix + property, "'" + key + "' is not a key", "Use " + KEYS_ACCEPTED + ".");
		}
		try {
			PARSER.parseExpression(key);
		}
		catch (RuntimeException ex) {
			throw RuleSyntax.invalid(prefix + property, "'" + key + "' is not a valid SpEL expression: " + ex.getMessage(),
					"Use " + KEYS_ACCEPTED + ".");
		}
		return KeyKind.SPEL;
	}

	/** A start-up failure naming the rule's property; {@code what} ends without punctuation, or with a question. */
	/**
	 * Whether there is no rule.
	 *
	 * @return {@code true} without rules
	 */
	public boolean isEmpty() {
		return this.rules.length == 0;
	}

	/**
	 * The rules a request matches.
	 *
	 * @param method the request's method
	 * @param path the request's path within the application
	 * @return a bit per matching rule (bit {@code i} for rule {@code i}), {@code 0} for none
	 */
	public long match(String method, PathContainer path) {
		long mask = 0;
		for (int i = 0; i < this.rules.length; i++) {
			if (this.rules[i].matches(method, path)) {
				mask |= 1L << i;
			}
		}
		return mask;
	}

	/**
	 * The buckets of a set of matching rules, made on first use of the set.
	 *
	 * @param mask the rules, from {@link #match}
	 * @return their buckets and keys
	 */
	public Matched matched(long mask) {
		Matched found = this.matched.get(mask);
		if (found == null) {
			found = this.matched.computeIfAbsent(mask, this::make);
		}
		return found;
	}

	private Matched make(long mask) {
		List<Compiled> chosen = RuleSyntax.chosen(this.rules, mask, (rule) -> rule.bucket, (rule) -> rule.index);
		RateLimiterRegistry buckets = this.registry.get();
		List<RegisteredBucket> registered = new ArrayList<>();
		long[] costs = new long[chosen.size()];
		boolean[] keyed = new boolean[chosen.size()];
		RateLimitPlanResolver[] resolvers = null;
		for (int i = 0; i < costs.length; i++) {
			Compiled rule = chosen.get(i);
			RegisteredBucket bucket = buckets.get(rule.bucket);
			registered.add(bucket);
			costs[i] = rule.cost;
			keyed[i] = rule.kind != KeyKind.NONE;
			if (rule.plans && rule.planKind == KeyKind.NONE && bucket.planResolver() != null) {
				if (resolvers == null) {
					resolvers = new RateLimitPlanResolver[costs.length];
				}
				resolvers[i] = bucket.planResolver();
			}
		}
		return new Matched(chosen.toArray(new Compiled[0]), new RequestLimits(registered, costs, keyed), resolvers);
	}

	/**
	 * The key of a remote address: the address itself, an IPv6 address its /64 prefix (a client holds
	 * a whole /64, and could otherwise take a new key per request).
	 */
	static String ipKey(@Nullable InetAddress address) {
		if (address == null) {
			return "";
		}
		byte[] bytes = address.getAddress();
		if (bytes.length == 4) {
			return address.getHostAddress();
		}
		StringBuilder prefix = new StringBuilder();
		for (int i = 0; i < 8; i += 2) {
			prefix.append(Integer.toHexString(((bytes[i] & 0xff) << 8) | (bytes[i + 1] & 0xff))).append(':');
		}
		return prefix.append(":/64").toString();
	}

	private static String orEmpty(@Nullable String value) {
		return (value != null) ? value : "";
	}
}
