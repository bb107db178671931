package dev.ratelimit.spring.web;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;

import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.boot.actuate.autoconfigure.web.server.ManagementPortType;
import org.springframework.boot.actuate.endpoint.web.PathMappedEndpoint;
import org.springframework.boot.actuate.endpoint.web.PathMappedEndpoints;
import org.springframework.boot.actuate.endpoint.web.WebServerNamespace;
import org.springframework.core.env.Environment;
import org.springframework.util.ClassUtils;

/**
 * The paths of the actuator's web endpoints, which no web rule limits (a health check answered 429 takes an
 * instance out of its load balancer). Usually one prefix: the base path ({@code /actuator}), under the
 * dispatcher servlet's path in a Spring MVC application ({@code spring.mvc.servlet.path: /app} serves it at
 * {@code /app/actuator}). An actuator served at the root ({@code management.endpoints.web.base-path: /}) has no
 * prefix of its own: then each exposed endpoint's path is one ({@code /health}, {@code /ratelimits}), read from
 * the actuator's own mapping at the first request, so {@code path-mapping} is followed too; the application's
 * other paths stay limited. Also exempt: the health groups' additional paths on the application's server
 * ({@code /livez}, {@code /readyz}: Kubernetes restarts a pod whose liveness probe is answered 429). With the
 * actuator on a server of its own ({@code management.server.port}), nothing on the application's server is.
 */
final class ActuatorPaths {

	private static final String PATH_MAPPED_ENDPOINTS = "org.springframework.boot.actuate.endpoint.web.PathMappedEndpoints";

	private static final String MANAGEMENT_PORT_TYPE = "org.springframework.boot.actuate.autoconfigure.web.server.ManagementPortType";

	private final Supplier<List<String>> source;

	private volatile @Nullable List<String> prefixes;

	private ActuatorPaths(Supplier<List<String>> source) {
		this.source = source;
	}

	/**
	 * One prefix, as given.
	 *
	 * @param prefix the actuator's base path, e.g. {@code /actuator}; empty or {@code /} for none
	 * @return the paths
	 */
	public static ActuatorPaths of(String prefix) {
		String trimmed = trimmed(prefix);
		return new ActuatorPaths(() -> trimmed.isEmpty() ? List.of() : List.of(trimmed));
	}

	/**
	 * The actuator's paths in this application.
	 *
	 * @param environment {@code management.endpoints.web.base-path}, and {@code spring.mvc.servlet.path} when
	 * {@code servlet}
	 * @param beans where the actuator's endpoint mapping is, for an actuator served at the root
	 * @param servlet whether requests go through Spring MVC's dispatcher servlet
	 * @return the paths
	 */
	public static ActuatorPaths of(Environment environment, ListableBeanFactory beans, boolean servlet) {
		String base = trimmed(environment.getProperty("management.endpoints.web.base-path", "/actuator"));
		String servletPath = servlet ? trimmed(environment.getProperty("spring.mvc.servlet.path", "")) : "";
		ClassLoader classLoader = ActuatorPaths.class.getClassLoader();
		boolean endpoints = ClassUtils.isPresent(PATH_MAPPED_ENDPOINTS, classLoader);
		boolean ports = ClassUtils.isPresent(MANAGEMENT_PORT_TYPE, classLoader);
		return new ActuatorPaths(() -> {
			if (ports && !Endpoints.onTheApplicationsServer(environment)) {
				return List.of(); // the actuator has a server of its own (or none): here, every path is the application's
			}
			List<String> paths = new ArrayList<>();
			if (!base.isEmpty()) {
				paths.add(base);
			}
			if (endpoints) {
				paths.addAll(Endpoints.paths(beans, base.isEmpty()));
			}
			return paths.stream().map(ActuatorPaths::trimmed).filter((path) -> !path.isEmpty())
				.map((path) -> servletPath + path)
				.distinct()
				.toList();
		});
	}

	/**
	 * Whether a request's path (within the application) is the actuator's.
	 *
	 * @param path the path, from {@code /}
	 * @return whether no rule limits it
	 */
	boolean covers(String path) {
		List<String> prefixes = this.prefixes;
		if (prefixes == null) {
			prefixes = this.source.get();
			this.prefixes = prefixes;
		}
		for (String prefix : prefixes) {
			if (path.startsWith(prefix) && (path.length() == prefix.length() || path.charAt(prefix.length()) == '/')) {
				return true;
			}
		}
		return false;
	}

	/** {@code /actuator/} and {@code actuator} as {@code /actuator}; {@code /} as nothing. */
	private static String trimmed(String path) {
		String trimmed = path.trim();
		while (trimmed.endsWith("/")) {
			trimmed = trimmed.substring(0, trimmed.length() - 1);
		}
		return (trimmed.isEmpty() || trimmed.startsWith("/")) ? trimmed : "/" + trimmed;
	}

	@Override
	public String toString() {
		List<String> prefixes = this.prefixes;
		return (prefixes != null) ? prefixes.toString() : "(read at the first request)";
	}

	/** Loaded only when the actuator is there. */
	private static final class Endpoints {

		/** Whether the actuator's endpoints are served by the application's own server. */
		static boolean onTheApplicationsServer(Environment environment) {
			return ManagementPortType.get(environment) == ManagementPortType.SAME;
		}

		/**
		 * The actuator's paths that are not under its base path: every exposed endpoint's when it is served at
		 * the root, and the additional paths on the application's server ({@code /livez} and {@code /readyz}
		 * with {@code management.endpoint.health.probes.add-additional-paths}: a liveness probe answered 429
		 * restarts the pod).
		 */
		static List<String> paths(ListableBeanFactory beans, boolean atTheRoot) {
			PathMappedEndpoints endpoints = beans.getBeanProvider(PathMappedEndpoints.class).getIfAvailable();
			if (endpoints == null) {
				return List.of();
			}
			List<String> paths = new ArrayList<>();
			if (atTheRoot) {
				paths.addAll(endpoints.getAllPaths());
			}
			for (PathMappedEndpoint endpoint : endpoints) {
				paths.addAll(endpoint.getAdditionalPaths(WebServerNamespace.SERVER));
			}
			return paths;
		}
	}
}
