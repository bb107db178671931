package dev.ratelimit.spring.web;

import java.time.Duration;

import dev.ratelimit.core.RateLimiterSnapshot;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.mock.web.MockHttpServletResponse;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * A controller method's fields against those a web rule already set: on a tie of {@code r} the bucket
 * longer until full is the closer to refusing, decided on the exact times the rule left, not on the whole
 * seconds its field carries.
 */
class RateLimitHeadersTieTests {

	private static RateLimiterSnapshot snapshot(double available, Duration untilFull) {
		return new RateLimiterSnapshot(10, Duration.ofSeconds(1), 10, false, available, 0, 0, 0, 0, 0, null,
				Duration.ZERO, untilFull);
	}

	@AfterEach
	void clear() {
		RequestContextHolder.resetRequestAttributes();
	}

	@Test
	void aTieOfRGoesToTheMethodsBucketWhenItIsLongerUntilFullThanTheRules() {
		// the rule's bucket: r=5, 0.7 s until full, sent as t=1; the method's: r=5, 0.8 s, also t=1
		RateLimitHeaders.Level rule = RateLimitHeaders.level("rule", snapshot(5, Duration.ofMillis(700)));
		assertThat(rule.limit()).isEqualTo("\"rule\";r=5;t=1");
		MockHttpServletRequest request = new MockHttpServletRequest();
		MockHttpServletResponse response = new MockHttpServletResponse();
		request.setAttribute(RateLimitHeaders.LEVEL_ATTRIBUTE, rule);
		response.setHeader(RateLimitHeaders.POLICY, rule.policy());
		response.setHeader(RateLimitHeaders.LIMIT, rule.limit());
		RequestContextHolder.setRequestAttributes(new ServletRequestAttributes(request, response));
		ServletLevels observer = new ServletLevels();
		observer.granted(observer.capture(null), new String[] { "method" },
				new RateLimiterSnapshot[] { snapshot(5, Duration.ofMillis(800)) });
		assertThat(response.getHeader(RateLimitHeaders.LIMIT)).isEqualTo("\"method\";r=5;t=1");
	}

	@Test
	void aTieOfRKeepsTheRulesFieldsWhenTheRulesBucketIsLongerUntilFull() {
		RateLimitHeaders.Level rule = RateLimitHeaders.level("rule", snapshot(5, Duration.ofMillis(900)));
		assertThat(RateLimitHeaders.toSend(new String[] { "method" },
				new RateLimiterSnapshot[] { snapshot(5, Duration.ofMillis(800)) }, rule, rule.limit()))
			.isNull();
	}
}
