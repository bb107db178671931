package dev.ratelimit.spring.actuate;

import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

import dev.ratelimit.spring.ClosestName;

import org.springframework.boot.actuate.endpoint.EndpointId;
import org.springframework.boot.actuate.endpoint.OperationType;
import org.springframework.boot.actuate.endpoint.invoke.OperationInvoker;
import org.springframework.boot.actuate.endpoint.invoke.OperationInvokerAdvisor;
import org.springframework.boot.actuate.endpoint.invoke.OperationParameter;
import org.springframework.boot.actuate.endpoint.invoke.OperationParameters;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;

/**
 * Refuses a retune ({@code POST /actuator/ratelimits/{name}}) that carries a field the endpoint does
 * not know, with a 400 naming it and the closest known field (the reason in the body, as for a bad value). The actuator hands an operation only the
 * arguments it declares, so without this {@code {"rate": 250, "limt": 40}} changed the rate and
 * silently dropped the misspelt limit.
 */
public final class RetuneFields implements OperationInvokerAdvisor {

	private static final EndpointId ENDPOINT = EndpointId.of("ratelimits");

	@Override
	public OperationInvoker apply(EndpointId endpointId, OperationType operationType,
			OperationParameters parameters, OperationInvoker invoker) {
		if (!ENDPOINT.equals(endpointId) || operationType != OperationType.WRITE) {
			return invoker;
		}
		Set<String> known = parameters.stream().map(OperationParameter::getName).collect(Collectors.toSet());
		List<String> fields = List.of("rate", "limit", "mode", "plan");
		return (context) -> {
			for (String argument : context.getArguments().keySet()) {
				if (!known.contains(argument)) {
					// the web extension's 400 with the reason in the body (JMX operations take no other fields)
					return RateLimitsWebEndpointExtension.failure(WebEndpointResponse.STATUS_BAD_REQUEST,
							"Bad Request", unknown(argument, fields));
				}
			}
			return invoker.invoke(context);
		};
	}

	private static String unknown(String field, List<String> fields) {
		return "'" + field + "' is not a field of a retune"
				+ ("period".equals(field) ? " (the period stays as configured: give the rate per that period)."
						: "; did you mean '" + ClosestName.of(field, fields) + "'?")
				+ " A retune takes rate, limit and/or mode, e.g. {\"rate\": 200}, or a plan with its rate and/or limit,"
				+ " e.g. {\"plan\": \"pro\", \"rate\": 150}; nothing was changed.";
	}
}
