package dev.ratelimit.spring.client;

import java.net.URI;

import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitClientAutoConfiguration;
import org.junit.jupiter.api.Test;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.core.NestedExceptionUtils;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@code ratelimit.clients} checked at start-up (a bad rule fails naming its index and the property) and
 * which calls a rule matches.
 */
class ClientRulesStartUpTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(
				AutoConfigurations.of(RateLimitAutoConfiguration.class, RateLimitClientAutoConfiguration.class))
		.withPropertyValues("ratelimit.buckets.partner.rate=10");

	private void failsNaming(String expected, String... properties) {
		this.runner.withPropertyValues(properties).run((context) -> {
			assertThat(context).hasFailed();
			assertThat(NestedExceptionUtils.getMostSpecificCause(context.getStartupFailure()))
				.hasMessageContaining(expected);
		});
	}

	@Test
	void aRuleWithoutHostsFailsStartUp() {
		failsNaming("ratelimit.clients.rules[0].hosts is missing", "ratelimit.clients.rules[0].bucket=partner");
	}

	@Test
	void aRuleWithoutABucketFailsStartUp() {
		failsNaming("ratelimit.clients.rules[0].bucket is missing", "ratelimit.clients.rules[0].hosts=api.partner.com");
	}

	@Test
	void aRuleNamingAnUnknownBucketFailsStartUp() {
		failsNaming("ratelimit.clients.rules[1].bucket 'partnr' is not a configured bucket",
				"ratelimit.clients.rules[0].hosts=a.partner.com", "ratelimit.clients.rules[0].bucket=partner",
				"ratelimit.clients.rules[1].hosts=b.partner.com", "ratelimit.clients.rules[1].bucket=partnr");
	}

	@Test
	void aKeyThatIsNeitherHostNorAnExpressionFailsStartUp() {
		failsNaming("ratelimit.clients.rules[0].key 'ip' is not a key", "ratelimit.clients.rules[0].hosts=a.partner.com",
				"ratelimit.clients.rules[0].bucket=partner", "ratelimit.clients.rules[0].key=ip");
	}

	@Test
	void aMethodOneLetterFromAStandardOneFailsStartUp() {
		// GTE would match no call: every GET to the partner would go out unlimited
		failsNaming("ratelimit.clients.rules[0].methods has 'GTE', which is not an HTTP method; did you mean GET?",
				"ratelimit.clients.rules[0].hosts=a.partner.com", "ratelimit.clients.rules[0].bucket=partner",
				"ratelimit.clients.rules[0].methods=GTE");
	}

	@Test
	void aBadPortAndABadPathNameTheirHostAndPath() {
		failsNaming("ratelimit.clients.rules[0].hosts[1] 'b.partner.com:99999' has no valid port",
				"ratelimit.clients.rules[0].hosts=a.partner.com,b.partner.com:99999",
				"ratelimit.clients.rules[0].bucket=partner");
		failsNaming("ratelimit.clients.rules[0].paths[0] '/v1/{id' is not a path pattern",
				"ratelimit.clients.rules[0].hosts=a.partner.com", "ratelimit.clients.rules[0].bucket=partner",
				"ratelimit.clients.rules[0].paths=/v1/{id");
	}

	@Test
	void aMisspelledRulePropertyFailsStartUp() {
		failsNaming("did you mean ratelimit.clients.rules[0].hosts?", "ratelimit.clients.rules[0].hots=a.partner.com",
				"ratelimit.clients.rules[0].bucket=partner");
	}

	@Test
	void hostsMatchCaseInsensitivelyWithLabelWildcardsAndPorts() {
		this.runner
			.withPropertyValues("ratelimit.clients.rules[0].hosts=API.partner.com,*.partner.net,[::1]:8443",
					"ratelimit.clients.rules[0].bucket=partner", "ratelimit.clients.rules[1].hosts=api.partner.com:8443",
					"ratelimit.clients.rules[1].paths=/v1/**", "ratelimit.clients.rules[1].methods=post",
					"ratelimit.clients.rules[1].bucket=partner")
			.run((context) -> {
				ClientRules rules = context.getBean(ClientRules.class);
				assertThat(rules.match("GET", URI.create("https://api.PARTNER.com/x"))).isEqualTo(1);
				assertThat(rules.match("GET", URI.create("https://api.partner.com:8443/v1/x"))).isEqualTo(1);
				assertThat(rules.match("POST", URI.create("https://api.partner.com:8443/v1/x"))).isEqualTo(3);
				assertThat(rules.match("POST", URI.create("https://api.partner.com/v1/x"))).isEqualTo(1);
				assertThat(rules.match("POST", URI.create("https://api.partner.com:8443/v2/x"))).isEqualTo(1);
				assertThat(rules.match("GET", URI.create("http://a.partner.net/"))).isEqualTo(1);
				assertThat(rules.match("GET", URI.create("http://a.b.partner.net/"))).isEqualTo(1);
				assertThat(rules.match("GET", URI.create("http://partner.net/"))).isZero();
				assertThat(rules.match("GET", URI.create("http://evilpartner.net/"))).isZero();
				assertThat(rules.match("GET", URI.create("https://[::1]:8443/"))).isEqualTo(1);
				assertThat(rules.match("GET", URI.create("https://[::1]/"))).isZero();
				assertThat(ClientRules.host(URI.create("https://API.Partner.com:8443/x"))).isEqualTo("api.partner.com");
			});
	}
}
