package dev.ratelimit.spring.web;

import java.util.Collection;
import java.util.List;

import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.support.DefaultListableBeanFactory;
import org.springframework.boot.actuate.endpoint.Access;
import org.springframework.boot.actuate.endpoint.EndpointId;
import org.springframework.boot.actuate.endpoint.ExposableEndpoint;
import org.springframework.boot.actuate.endpoint.Operation;
import org.springframework.boot.actuate.endpoint.web.PathMappedEndpoint;
import org.springframework.boot.actuate.endpoint.web.PathMappedEndpoints;
import org.springframework.mock.env.MockEnvironment;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The actuator on a port of its own ({@code management.server.port}), at its root
 * ({@code management.endpoints.web.base-path: /}, the usual pairing: {@code :8081/health},
 * {@code :8081/prometheus}): the application's port serves none of the actuator's paths, so a
 * {@code /health} there is the application's own and must stay limited. Found in review of 34fabdd:
 * ActuatorPaths.of exempts each exposed endpoint's path from PathMappedEndpoints (a bean of the
 * application's context whatever the management port) and never reads {@code management.server.port},
 * so the application's {@code GET /health} (or {@code /info}, {@code /metrics}) on its own port is never
 * limited. (A unit test: this module's test classpath cannot bind {@code management.server.*}.)
 */
class ActuatorOnItsOwnPortTests {

	@Test
	void withTheActuatorOnItsOwnPortTheApplicationsPathsNamedLikeEndpointsStayLimited() {
		MockEnvironment environment = new MockEnvironment().withProperty("server.port", "8080")
			.withProperty("management.server.port", "8081")
			.withProperty("management.endpoints.web.base-path", "/");
		DefaultListableBeanFactory beans = new DefaultListableBeanFactory();
		beans.registerSingleton("pathMappedEndpoints",
				new PathMappedEndpoints("", () -> List.of(new Endpoint("health"))));
		ActuatorPaths paths = ActuatorPaths.of(environment, beans, true);
		assertThat(paths.covers("/health")).as("the application's own /health on port 8080").isFalse();
	}

	private record Endpoint(String id) implements ExposableEndpoint<Operation>, PathMappedEndpoint {

		@Override
		public EndpointId getEndpointId() {
			return EndpointId.of(this.id);
		}

		@Override
		public Access getDefaultAccess() {
			return Access.UNRESTRICTED;
		}

		@Override
		public Collection<Operation> getOperations() {
			return List.of();
		}

		@Override
		public String getRootPath() {
			return this.id;
		}
	}
}
