package dev.ratelimit.spring;

import org.springframework.boot.diagnostics.AbstractFailureAnalyzer;
import org.springframework.boot.diagnostics.FailureAnalysis;

/**
 * Turns a {@link RateLimitConfigurationException} into the "APPLICATION FAILED TO START" report: what
 * is wrong (bucket and property) and what to do (the accepted values).
 */
class RateLimitFailureAnalyzer extends AbstractFailureAnalyzer<RateLimitConfigurationException> {

	@Override
	protected FailureAnalysis analyze(Throwable rootFailure, RateLimitConfigurationException cause) {
		return new FailureAnalysis(cause.getDescription(), cause.getAction(), cause);
	}
}
