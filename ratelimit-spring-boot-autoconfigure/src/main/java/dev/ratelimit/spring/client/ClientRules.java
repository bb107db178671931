package dev.ratelimit.spring.client;

import java.net.URI;
import java.time.Duration;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;
import java.util.function.Supplier;
import java.util.regex.Pattern;

import dev.ratelimit.spring.BucketDefinitions;
import dev.ratelimit.spring.RateLimitConfigurationException;
import dev.ratelimit.spring.RateLimitProperties;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RegisteredBucket;
import dev.ratelimit.spring.http.RuleSyntax;
import org.jspecify.annotations.Nullable;

import org.springframework.expression.Expression;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.expression.spel.support.SimpleEvaluationContext;
import org.springframework.http.HttpRequest;
import org.springframework.http.server.PathContainer;
import org.springframework.web.util.pattern.PathPattern;

/**
 * {@code ratelimit.clients} (contract revision 3, "Outbound calls"), checked at start-up and compiled:
 * which rules an outgoing request matches (by host, path and method), the buckets it takes from (through
 * the engine, all or nothing as on an annotated method), the keys, and what the servers said about each
 * bucket ({@link ServerGate}s, per bucket and key).
 *
 * <p>Readings taken: {@code *} in a host pattern matches one label or more ({@code *.partner.net} matches
 * {@code a.partner.net} and {@code a.b.partner.net}, not {@code partner.net}); a pattern with a port
 * matches that port only, the scheme's default port ({@code 80}, {@code 443}) when the URI gives none;
 * an IPv6 literal is written with or without brackets. The server's remaining count is in the rule's
 * tokens (its {@code cost}, 1 by default): calls sent after the answered one are subtracted by their cost.
 */
public final class ClientRules {

	private static final SpelExpressionParser PARSER = new SpelExpressionParser();

	private static final String KEYS_ACCEPTED = "host, or a SpEL expression over #request";

	/** Keys with a gate of their own at most, per bucket; beyond, gates with nothing in force are dropped. */
	static final int MAX_GATES = 10_000;

	/** One rule, compiled. */
	static final class Compiled {

		final int index;

		final Pattern[] hosts;

		final int[] ports; // -1: any port

		final PathPattern @Nullable [] paths;

		final @Nullable Set<String> methods;

		final String bucket;

		final boolean hostKey;

		final @Nullable Expression expression;

		final long cost;

		Compiled(int index, Pattern[] hosts, int[] ports, PathPattern @Nullable [] paths, @Nullable Set<String> methods,
				String bucket, boolean hostKey, @Nullable Expression expression, long cost) {
			this.index = index;
			this.hosts = hosts;
			this.ports = ports;
			this.paths = paths;
			this.methods = methods;
			this.bucket = bucket;
			this.hostKey = hostKey;
			this.expression = expression;
			this.cost = cost;
		}

		boolean keyed() {
			return this.hostKey || this.expression != null;
		}

		boolean matches(String method, String host, int port, @Nullable PathContainer path) {
			if (this.methods != null && !this.methods.contains(method)) {
				return false;
			}
			boolean hostMatches = false;
			for (int i = 0; i < this.hosts.length && !hostMatches; i++) {
				hostMatches = (this.ports[i] < 0 || this.ports[i] == port) && this.hosts[i].matcher(host).matches();
			}
			if (!hostMatches) {
				return false;
			}
			if (this.paths == null) {
				return true;
			}
			for (PathPattern pattern : this.paths) {
				if (path != null && pattern.matches(path)) {
					return true;
				}
			}
			return false;
		}

		@Nullable Object key(HttpRequest request) {
			if (this.hostKey) {
				return host(request.getURI());
			}
			if (this.expression == null) {
				return null;
			}
			SimpleEvaluationContext context = SimpleEvaluationContext.forReadOnlyDataBinding()
				.withInstanceMethods()
				.build();
			context.setVariable("request", request);
			Object value = this.expression.getValue(context);
			return (value != null) ? value : "";
		}
	}

	private final Compiled[] rules;

	private final Supplier<RateLimiterRegistry> registry;

	private final LongSupplier clock;

	private final boolean listen;

	private final ServerAnswers answers;

	private final Throttled throttled;

	private final ConcurrentHashMap<Long, ClientLimits> matched = new ConcurrentHashMap<>();

	private final ConcurrentHashMap<String, Gates> gates = new ConcurrentHashMap<>();

	private final @Nullable SharedGates shared;

	private ClientRules(Compiled[] rules, Supplier<RateLimiterRegistry> registry, LongSupplier clock, boolean listen,
			ServerAnswers answers, Throttled throttled, @Nullable SharedGates shared) {
		this.rules = rules;
		this.shared = shared;
		this.registry = registry;
		this.clock = clock;
		this.listen = listen;
		this.answers = answers;
		this.throttled = throttled;
	}

	/**
	 * What counts the servers' 429 and 503 answers ({@code ratelimit.client.throttled}).
	 */
	@FunctionalInterface
	public interface Throttled {

		/**
		 * Counts an answer.
		 *
		 * @param bucket the bucket of a rule that matched the call
		 * @param status {@code 429} or {@code 503}
		 */
		void count(String bucket, int status);
	}

	/**
	 * Checks and compiles the rules.
	 *
	 * @param clients the configured {@code ratelimit.clients}
	 * @param definitions the configured buckets
	 * @param registry the buckets, asked for on the first call
	 * @param clock the buckets' clock (nanoseconds), for pauses and resets in seconds
	 * @param wall the wall clock, for HTTP dates and epoch resets
	 * @param throttled what counts 429 and 503 answers
	 * @return the compiled rules
	 * @throws RateLimitConfigurationException naming the rule's index and the property, for the first
	 *         rule that is not valid
	 */
	public static ClientRules of(RateLimitProperties.Clients clients, BucketDefinitions definitions,
			Supplier<RateLimiterRegistry> registry, LongSupplier clock, InstantSource wall, Throttled throttled) {
		return of(clients, definitions, registry, clock, wall, throttled, null);
	}

	/**
	 * Checks and compiles the rules, with the gates of buckets shared by several instances kept where
	 * {@code shared} says (a Redis bucket's in Redis).
	 *
	 * @param clients the configured {@code ratelimit.clients}
	 * @param definitions the configured buckets
	 * @param registry the buckets, asked for on the first call
	 * @param clock the buckets' clock (nanoseconds), for pauses and resets in seconds
	 * @param wall the wall clock, for HTTP dates and epoch resets
	 * @param throttled what counts 429 and 503 answers
	 * @param shared where buckets' gates are kept outside this JVM, or {@code null} for nowhere
	 * @return the compiled rules
	 * @throws RateLimitConfigurationException naming the rule's index and the property, for the first
	 *         rule that is not valid
	 */
	public static ClientRules of(RateLimitProperties.Clients clients, BucketDefinitions definitions,
			Supplier<RateLimiterRegistry> registry, LongSupplier clock, InstantSource wall, Throttled throttled,
			@Nullable SharedGates shared) {
		List<RateLimitProperties.ClientRule> rules = clients.getRules();
		if (rules.size() > 64) {
			throw new RateLimitConfigurationException("ratelimit.clients.rules has " + rules.size() + " rules.",
					"Keep at most 64 rules (several hosts, paths and methods fit in one).");
		}
		Duration maxPause = clients.getMaxPause();
		if (maxPause == null || maxPause.isNegative()) {
			throw RuleSyntax.invalid("ratelimit.clients.max-pause", "is " + maxPause, "Set a duration >= 0, e.g. 1h (the default).");
		}
		List<Compiled> compiled = new ArrayList<>();
		for (int i = 0; i < rules.size(); i++) {
			compiled.add(compile(i, rules.get(i), definitions));
		}
		return new ClientRules(compiled.toArray(new Compiled[0]), registry, clock, clients.isListen(),
				new ServerAnswers(maxPause, wall), throttled, shared);
	}

	private static Compiled compile(int index, RateLimitProperties.ClientRule rule, BucketDefinitions definitions) {
		String prefix = "ratelimit.clients.rules[" + index + "].";
		List<String> hosts = rule.getHosts();
		if (hosts == null || hosts.isEmpty()) {
			throw RuleSyntax.invalid(prefix + "hosts", "is missing",
					"Give the rule the hosts it limits, e.g. hosts: [\"api.partner.com\", \"*.partner.net\"].");
		}
		Pattern[] patterns = new Pattern[hosts.size()];
		int[] ports = new int[hosts.size()];
		for (int i = 0; i < patterns.length; i++) {
			ports[i] = hostPattern(prefix + "hosts[" + i + "]", hosts.get(i), patterns, i);
		}
		PathPattern[] paths = RuleSyntax.paths(prefix, rule.getPaths(), "/v1/**");
		Set<String> methods = RuleSyntax.methods(prefix, rule.getMethods());
		String bucket = RuleSyntax.bucket(prefix, rule.getBucket(), definitions, "calls");
		RuleSyntax.cost(prefix, rule.getCost());
		String key = (rule.getKey() != null) ? rule.getKey().trim() : "";
		boolean hostKey = key.equals("host");
		Expression expression = (key.isEmpty() || hostKey) ? null : keyExpression(prefix, key);
		if (!key.isEmpty()) {
			BucketDefinitions.checkUsableWithKey(definitions.get(bucket), prefix.substring(0, prefix.length() - 1));
		}
		return new Compiled(index, patterns, ports, paths, methods, bucket, hostKey, expression, rule.getCost());
	}

	/** A SpEL key over {@code #request}, parsed. */
	private static Expression keyExpression(String prefix, String key) {
		if (!key.contains("#request")) {
			throw RuleSyntax.invalid(prefix + "key", "'" + key + "' is not a key", "Use " + KEYS_ACCEPTED + ".");
		}
		try {
			return PARSER.parseExpression(key);
		}
		catch (RuntimeException ex) {
			throw RuleSyntax.invalid(prefix + "key", "'" + key + "' is not a valid SpEL expression: " + ex.getMessage(),
					"Use " + KEYS_ACCEPTED + ".");
		}
	}

	/**
	 * One of a rule's hosts: {@code host}, {@code host:port}, {@code [IPv6]:port}, with {@code *} for a label or
	 * more; its pattern goes into {@code patterns[i]}.
	 *
	 * @return the port, or {@code -1} for any port
	 */
	private static int hostPattern(String property, @Nullable String configured, Pattern[] patterns, int i) {
		String host = (configured != null) ? configured.trim().toLowerCase(Locale.ROOT) : "";
		int port = -1;
		String digits = null;
		if (host.startsWith("[")) { // [IPv6]:port
			int close = host.indexOf(']');
			String rest = (close > 0) ? host.substring(close + 1) : "";
			if (rest.startsWith(":")) {
				digits = rest.substring(1);
				host = host.substring(0, close + 1);
			}
		}
		else if (host.indexOf(':') >= 0 && host.indexOf(':') == host.lastIndexOf(':')) { // host:port
			digits = host.substring(host.indexOf(':') + 1);
			host = host.substring(0, host.indexOf(':'));
		}
		if (digits != null) {
			if (!digits.matches("[0-9]{1,5}") || Integer.parseInt(digits) > 65535) {
				throw RuleSyntax.invalid(property, "'" + configured + "' has no valid port",
						"Write a host, optionally with a port: api.partner.com or api.partner.com:8443.");
			}
			port = Integer.parseInt(digits);
		}
		host = unbracket(host);
		if (host.isEmpty() || !host.matches("[a-z0-9*._:%-]+") || host.contains("**")) {
			throw RuleSyntax.invalid(property, "'" + configured + "' is not a host pattern",
					"Write a host name (api.partner.com), * for one label or more (*.partner.net), or an IP address.");
		}
		StringBuilder regex = new StringBuilder();
		for (String label : host.split("\\.", -1)) {
			if (regex.length() > 0) {
				regex.append("\\.");
			}
			regex.append(label.equals("*") ? "[^.]+(?:\\.[^.]+)*" : Pattern.quote(label).replace("*", "\\E[^.]*\\Q"));
		}
		patterns[i] = Pattern.compile(regex.toString());
		return port;
	}

	private static String unbracket(String host) {
		return (host.startsWith("[") && host.endsWith("]")) ? host.substring(1, host.length() - 1) : host;
	}

	/** The {@code host} key: the URI's host in lower case, without the port (an IPv6 literal unbracketed). */
	static String host(URI uri) {
		String host = uri.getHost();
		return (host != null) ? unbracket(host.toLowerCase(Locale.ROOT)) : "";
	}

	/**
	 * Whether there is no rule.
	 *
	 * @return {@code true} without rules
	 */
	public boolean isEmpty() {
		return this.rules.length == 0;
	}

	/**
	 * Malformed values in servers' answers ignored since start.
	 *
	 * @return the count
	 */
	public long malformed() {
		return this.answers.malformed();
	}

	/**
	 * The rules a call matches.
	 *
	 * @param method the call's method
	 * @param uri the call's URI
	 * @return a bit per matching rule, {@code 0} for none
	 */
	long match(String method, URI uri) {
		if (this.rules.length == 0) {
			return 0;
		}
		String host = host(uri);
		int port = uri.getPort();
		if (port < 0) {
			port = "https".equalsIgnoreCase(uri.getScheme()) ? 443 : 80;
		}
		String raw = uri.getRawPath();
		PathContainer path = (raw != null) ? PathContainer.parsePath(raw.isEmpty() ? "/" : raw) : null;
		long mask = 0;
		for (int i = 0; i < this.rules.length; i++) {
			if (this.rules[i].matches(method, host, port, path)) {
				mask |= 1L << i;
			}
		}
		return mask;
	}

	/** The limits of a set of matching rules, made on first use of the set. */
	ClientLimits matched(long mask) {
		ClientLimits found = this.matched.get(mask);
		if (found == null) {
			found = this.matched.computeIfAbsent(mask, this::make);
		}
		return found;
	}

	private ClientLimits make(long mask) {
		List<Compiled> chosen = RuleSyntax.chosen(this.rules, mask, (rule) -> rule.bucket, (rule) -> rule.index);
		RateLimiterRegistry buckets = this.registry.get();
		RegisteredBucket[] registered = new RegisteredBucket[chosen.size()];
		Gates[] gates = new Gates[chosen.size()];
		for (int i = 0; i < registered.length; i++) {
			RegisteredBucket bucket = buckets.get(chosen.get(i).bucket);
			registered[i] = bucket;
			gates[i] = gatesOf(bucket);
		}
		return new ClientLimits(chosen.toArray(new Compiled[0]), registered, gates, this);
	}

	private Gates gatesOf(RegisteredBucket bucket) {
		return this.gates.computeIfAbsent(bucket.name(), (name) -> {
			// the views' available shows the level the servers' answers leave (contract revision 3)
			bucket.holdBackBy((key) -> level(name, key));
			return new Gates(bucket, this.shared);
		});
	}

	/**
	 * Binds every rule's bucket to its gates before the first call: the endpoint's {@code available} then
	 * shows what the servers said from the start, on every instance (a Redis bucket's gate may have been
	 * written by another instance before this one calls).
	 */
	public void bindViews() {
		if (this.rules.length == 0) {
			return;
		}
		RateLimiterRegistry buckets = this.registry.get();
		for (Compiled rule : this.rules) {
			gatesOf(buckets.get(rule.bucket));
		}
	}

	long now() {
		return this.clock.getAsLong();
	}

	boolean listening() {
		return this.listen;
	}

	ServerAnswers answers() {
		return this.answers;
	}

	Throttled throttled() {
		return this.throttled;
	}

	/**
	 * The level the servers' answers leave a bucket (or a key's bucket) now: {@code 0} while paused, the
	 * lowered level while lowered, {@code Long.MAX_VALUE} when no answer holds it back.
	 *
	 * @param bucket the bucket
	 * @param key the key, or {@code null} for the bucket itself
	 * @return the level
	 */
	public long level(String bucket, @Nullable Object key) {
		Gates gates = this.gates.get(bucket);
		if (gates == null) {
			return Long.MAX_VALUE;
		}
		Gate gate = gates.find(key);
		return (gate != null) ? gate.level(now()) : Long.MAX_VALUE;
	}

	/**
	 * A bucket's gates: the bucket's own, and one per key; kept where {@link SharedGates} says for a
	 * bucket it keeps, else in this JVM.
	 */
	static final class Gates {

		private final RegisteredBucket bucket;

		private final @Nullable SharedGates store;

		private final Gate unkeyed;

		private final boolean shared;

		private final ConcurrentHashMap<Object, Gate> keyed = new ConcurrentHashMap<>();

		Gates(RegisteredBucket bucket, @Nullable SharedGates store) {
			this.bucket = bucket;
			this.store = store;
			Gate own = (store != null) ? store.gate(bucket, null) : null;
			this.shared = own != null;
			this.unkeyed = (own != null) ? own : new ServerGate();
		}

		/** Whether the gates are kept outside this JVM. */
		boolean shared() {
			return this.shared;
		}

		Gate of(@Nullable Object key, long now) {
			if (key == null) {
				return this.unkeyed;
			}
			Gate gate = this.keyed.get(key);
			if (gate != null) {
				return gate;
			}
			if (this.keyed.size() >= MAX_GATES) {
				// a key's gate with nothing in force is a new gate (its count of sent calls only matters to
				// answers of calls still out, which keep their gate); a gate kept elsewhere is only a handle
				this.keyed.values().removeIf((g) -> !(g instanceof ServerGate local) || local.quiet(now));
			}
			return this.keyed.computeIfAbsent(key, this::make);
		}

		private Gate make(Object key) {
			Gate kept = (this.shared && this.store != null) ? this.store.gate(this.bucket, key) : null;
			return (kept != null) ? kept : new ServerGate();
		}

		@Nullable Gate find(@Nullable Object key) {
			return (key == null) ? this.unkeyed : this.keyed.get(key);
		}
	}
}
