package dev.ratelimit.sample;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.Test;
import tools.jackson.databind.JsonNode;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The shape of {@code docs/grafana/ratelimit-dashboard.json} that Grafana's one-click import needs, and
 * its PromQL against the meters' Prometheus names: {@code rate()} over counters only, every meter shown.
 * Whether each query returns series from a real Prometheus is {@link GrafanaDashboardPrometheusTests}.
 */
class GrafanaDashboardTests {

	/** The Prometheus names of the contract's meters, as Micrometer's Prometheus registry writes them. */
	private static final Set<String> COUNTER_SERIES = Set.of("ratelimit_calls_total", "ratelimit_keys_overflow_total",
			"ratelimit_client_throttled_total", "ratelimit_wait_seconds_count", "ratelimit_wait_seconds_sum",
			"ratelimit_wait_seconds_bucket", "ratelimit_backend_calls_seconds_count",
			"ratelimit_backend_calls_seconds_sum", "ratelimit_backend_calls_seconds_bucket");

	private static final Set<String> GAUGE_SERIES = Set.of("ratelimit_tokens_available", "ratelimit_tokens_deficiency",
			"ratelimit_waiting", "ratelimit_in_flight", "ratelimit_pool_level", "ratelimit_keys_active",
			"ratelimit_backend_up", "ratelimit_wait_seconds_max", "ratelimit_backend_calls_seconds_max");

	private static final Pattern METRIC = Pattern.compile("\\b(ratelimit_[a-z_]+)");

	private static final Pattern RATE_OF = Pattern.compile("\\b(rate|irate|increase)\\(\\s*([a-zA-Z_:]+)");

	private static final Pattern VARIABLE = Pattern.compile("\\$(\\w+)");

	private static final Pattern DATASOURCE_INPUT = Pattern.compile("\\$\\{DS_PROMETHEUS}");

	private final GrafanaDashboard dashboard = GrafanaDashboard.load();

	@Test
	void importsWithOneClick() {
		JsonNode root = this.dashboard.root();
		assertThat(root.path("schemaVersion").isInt()).as("schemaVersion is a number").isTrue();
		assertThat(root.path("schemaVersion").asInt()).isGreaterThanOrEqualTo(36);
		assertThat(root.path("title").asString()).isNotBlank();
		assertThat(root.path("uid").asString()).isNotBlank();
		assertThat(root.path("id").isNull()).as("no id of the Grafana it was exported from").isTrue();
		JsonNode inputs = root.path("__inputs");
		assertThat(inputs.size()).isEqualTo(1);
		assertThat(inputs.get(0).path("name").asString()).isEqualTo("DS_PROMETHEUS");
		assertThat(inputs.get(0).path("type").asString()).isEqualTo("datasource");
		assertThat(inputs.get(0).path("pluginId").asString()).isEqualTo("prometheus");
	}

	@Test
	void everyPanelAndVariableQueriesTheImportedPrometheus() {
		List<JsonNode> panels = this.dashboard.panels();
		assertThat(panels).isNotEmpty();
		Set<Integer> ids = new HashSet<>();
		for (JsonNode panel : panels) {
			String title = panel.path("title").asString();
			assertThat(ids.add(panel.path("id").asInt())).as("unique id of panel '%s'", title).isTrue();
			assertThat(panel.path("gridPos").path("w").asInt()).as("width of panel '%s'", title).isBetween(1, 24);
			assertThatUsesTheInput(panel.path("datasource"), "panel '" + title + "'");
			assertThat(panel.path("targets").size()).as("targets of panel '%s'", title).isPositive();
			for (JsonNode target : panel.path("targets")) {
				assertThatUsesTheInput(target.path("datasource"), "panel '" + title + "'");
				assertThat(target.path("expr").asString()).as("expr of panel '%s'", title).isNotBlank();
			}
		}
		for (JsonNode variable : this.dashboard.root().path("templating").path("list")) {
			assertThatUsesTheInput(variable.path("datasource"), "variable " + variable.path("name").asString());
		}
	}

	private static void assertThatUsesTheInput(JsonNode datasource, String what) {
		assertThat(datasource.path("type").asString()).as("datasource type of %s", what).isEqualTo("prometheus");
		assertThat(datasource.path("uid").asString()).as("datasource of %s", what).matches(DATASOURCE_INPUT);
	}

	@Test
	void hasABucketVariableFromTheCallCounter() {
		JsonNode bucket = null;
		Set<String> names = new HashSet<>();
		for (JsonNode variable : this.dashboard.root().path("templating").path("list")) {
			names.add(variable.path("name").asString());
			if ("bucket".equals(variable.path("name").asString())) {
				bucket = variable;
			}
		}
		assertThat(bucket).as("a variable named bucket").isNotNull();
		assertThat(bucket.path("query").path("query").asString())
			.isEqualTo("label_values(ratelimit_calls_total, bucket)");
		assertThat(bucket.path("multi").asBoolean()).isTrue();
		for (GrafanaDashboard.Query query : this.dashboard.queries()) {
			Matcher variable = VARIABLE.matcher(query.expr());
			while (variable.find()) {
				assertThat(variable.group(1)).as("a variable of the dashboard or Grafana's, in %s", query)
					.isIn(with(names, "__rate_interval"));
			}
			assertThat(query.expr()).as("%s is limited to the chosen buckets", query).contains("bucket=~\"$bucket\"");
		}
	}

	private static Set<String> with(Set<String> names, String name) {
		Set<String> all = new HashSet<>(names);
		all.add(name);
		return all;
	}

	/** {@code rate()} of a gauge is a number without meaning, and a counter without {@code rate()} only grows. */
	@Test
	void ratesAreTakenOfCountersOnlyAndGaugesAreShownAsTheyAre() {
		for (GrafanaDashboard.Query query : this.dashboard.queries()) {
			Matcher metric = METRIC.matcher(query.expr());
			while (metric.find()) {
				assertThat(metric.group(1)).as("a meter's Prometheus name in %s", query)
					.isIn(with(COUNTER_SERIES, GAUGE_SERIES));
				if (COUNTER_SERIES.contains(metric.group(1))) {
					assertThat(query.expr()).as("%s takes the rate of its counter", query).containsPattern(
							"\\b(rate|increase)\\(\\s*" + metric.group(1) + "\\b");
				}
			}
			Matcher rate = RATE_OF.matcher(query.expr());
			while (rate.find()) {
				assertThat(rate.group(2)).as("what %s takes the rate of", query).isIn(COUNTER_SERIES);
			}
		}
	}

	private static Set<String> with(Set<String> first, Set<String> second) {
		Set<String> all = new HashSet<>(first);
		all.addAll(second);
		return all;
	}

	@Test
	void showsEveryMeter() {
		Set<String> shown = new TreeSet<>();
		for (GrafanaDashboard.Query query : this.dashboard.queries()) {
			Matcher metric = METRIC.matcher(query.expr());
			while (metric.find()) {
				shown.add(metric.group(1));
			}
		}
		assertThat(shown).contains("ratelimit_calls_total", "ratelimit_wait_seconds_bucket", "ratelimit_tokens_available",
				"ratelimit_tokens_deficiency", "ratelimit_waiting", "ratelimit_in_flight", "ratelimit_pool_level",
				"ratelimit_keys_active", "ratelimit_keys_overflow_total", "ratelimit_backend_up",
				"ratelimit_backend_calls_seconds_count", "ratelimit_client_throttled_total");
		for (String outcome : List.of("granted", "rejected", "shadow-rejected")) {
			assertThat(this.dashboard.queries()).as("a query of outcome %s", outcome)
				.anyMatch((query) -> query.expr().contains("outcome=\"" + outcome + "\""));
		}
	}
}
