package dev.ratelimit.sample;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import tools.jackson.databind.JsonNode;
import tools.jackson.databind.json.JsonMapper;

/**
 * The Grafana dashboard shipped in {@code docs/grafana/ratelimit-dashboard.json}, read as Grafana reads
 * it: its panels and each panel's PromQL queries, with the dashboard's variables substituted as Grafana
 * does before it sends a query to Prometheus.
 */
final class GrafanaDashboard {

	/** Where the dashboard lies, from the sample's module directory (the tests' working directory). */
	static final Path FILE = Path.of("..", "docs", "grafana", "ratelimit-dashboard.json");

	private static final JsonMapper JSON = JsonMapper.builder().build();

	private final JsonNode root;

	private GrafanaDashboard(JsonNode root) {
		this.root = root;
	}

	static GrafanaDashboard load() {
		if (!Files.isRegularFile(FILE)) {
			throw new IllegalStateException("The dashboard is not at " + FILE.toAbsolutePath().normalize()
					+ ": the tests run from the sample-app directory of the repository");
		}
		try {
			return new GrafanaDashboard(JSON.readTree(Files.readString(FILE)));
		}
		catch (IOException ex) {
			throw new UncheckedIOException(ex);
		}
	}

	JsonNode root() {
		return this.root;
	}

	/** Every panel that shows data (rows left out), in the dashboard's order. */
	List<JsonNode> panels() {
		List<JsonNode> panels = new ArrayList<>();
		collect(this.root.get("panels"), panels);
		return panels;
	}

	private static void collect(JsonNode list, List<JsonNode> into) {
		if (list == null) {
			return;
		}
		for (JsonNode panel : list) {
			if ("row".equals(panel.path("type").asString())) {
				collect(panel.get("panels"), into); // a collapsed row holds its panels
			}
			else {
				into.add(panel);
			}
		}
	}

	/** Every query of every panel: panel title, the target's refId and its PromQL. */
	List<Query> queries() {
		List<Query> queries = new ArrayList<>();
		for (JsonNode panel : panels()) {
			for (JsonNode target : panel.path("targets")) {
				queries.add(new Query(panel.path("title").asString(), target.path("refId").asString(),
						target.path("expr").asString()));
			}
		}
		return queries;
	}

	/**
	 * A panel's query as Grafana sends it: each {@code $name} of {@code variables} replaced (longest
	 * names first, so that {@code $__rate_interval} is not taken for another variable).
	 */
	static String substitute(String expr, Map<String, String> variables) {
		String result = expr;
		List<String> names = new ArrayList<>(variables.keySet());
		names.sort((a, b) -> b.length() - a.length());
		for (String name : names) {
			result = result.replace("$" + name, variables.get(name));
		}
		return result;
	}

	record Query(String panel, String refId, String expr) {

		@Override
		public String toString() {
			return "panel '" + this.panel + "' query " + this.refId + ": " + this.expr;
		}
	}
}
