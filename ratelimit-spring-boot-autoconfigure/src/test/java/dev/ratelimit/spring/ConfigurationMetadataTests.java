package dev.ratelimit.spring;

import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import org.springframework.boot.json.JsonParserFactory;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The IDE's view of the configuration: the generated {@code spring-configuration-metadata.json}
 * describes every property a bucket knows, with its type and a description.
 */
class ConfigurationMetadataTests {

	/** How the metadata names a field of a web rule, an element of the list ratelimit.web.rules. */
	private static final String RULE = "ratelimit.web.rules[].";

	private static Map<String, Object> metadata() throws Exception {
		String json;
		try (InputStream in = ConfigurationMetadataTests.class
			.getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
			assertThat(in).as("the generated metadata").isNotNull();
			json = new String(in.readAllBytes(), StandardCharsets.UTF_8);
		}
		return JsonParserFactory.getJsonParser().parseMap(json);
	}

	/**
	 * Issue #30: the IDE had no entry for a web rule's fields ({@code ratelimit.web.rules[0].paths}, ...),
	 * and no values to offer for {@code ratelimit.health.backend-down-status}.
	 */
	@Test
	@SuppressWarnings("unchecked")
	void describesEveryFieldOfAWebRuleAndOffersTheHealthStatuses() throws Exception {
		Map<String, Object> metadata = metadata();
		Map<String, Map<String, Object>> properties = new HashMap<>();
		for (Object property : (List<Object>) metadata.get("properties")) {
			Map<String, Object> entry = (Map<String, Object>) property;
			properties.put((String) entry.get("name"), entry);
		}
		List<String> fields = BucketPropertyChecks.KNOWN_OUTSIDE_BUCKETS.stream()
			.filter((name) -> name.startsWith("web.rules."))
			.map((name) -> name.substring("web.rules.".length()))
			.toList();
		assertThat(fields).contains("paths", "methods", "bucket", "key", "cost");
		for (String field : fields) {
			Map<String, Object> property = properties.get(RULE + field);
			assertThat(property).as("metadata of %s%s", RULE, field).isNotNull();
			assertThat((String) property.get("type")).as("type of %s", field).isNotBlank();
			assertThat((String) property.get("description")).as("description of %s", field).isNotBlank();
		}
		assertThat(properties.keySet().stream().filter((name) -> name.startsWith(RULE)))
			.as("no entry for a field a rule does not have")
			.containsExactlyInAnyOrderElementsOf(fields.stream().map((field) -> RULE + field).toList());
		Map<String, Object> statuses = ((List<Map<String, Object>>) metadata.get("hints")).stream()
			.filter((hint) -> "ratelimit.health.backend-down-status".equals(hint.get("name")))
			.findFirst()
			.orElse(null);
		assertThat(statuses).as("hints of ratelimit.health.backend-down-status").isNotNull();
		assertThat(((List<Map<String, Object>>) statuses.get("values")).stream().map((value) -> value.get("value")))
			.contains("UP", "DOWN", "OUT_OF_SERVICE");
	}

	@Test
	@SuppressWarnings("unchecked")
	void describesEveryBucketPropertyWithATypeAndADescription() throws Exception {
		Map<String, Object> metadata = metadata();
		Map<String, Map<String, Object>> properties = new HashMap<>();
		for (Object property : (List<Object>) metadata.get("properties")) {
			Map<String, Object> entry = (Map<String, Object>) property;
			properties.put((String) entry.get("name"), entry);
		}
		List<String> known = BucketPropertyChecks.KNOWN;
		assertThat(known).isNotEmpty();
		for (String name : known) {
			Map<String, Object> property = properties.get("ratelimit.buckets.*." + name);
			assertThat(property).as("metadata of ratelimit.buckets.*.%s", name).isNotNull();
			assertThat((String) property.get("type")).as("type of %s", name).isNotBlank();
			assertThat((String) property.get("description")).as("description of %s", name).isNotBlank();
		}
		assertThat(properties).containsKeys("ratelimit.buckets", "ratelimit.enabled", "ratelimit.interceptor-order");
		// the start-up check of names outside the buckets knows exactly the properties there are (a rule's
		// fields are the list's, described by the list)
		List<String> outside = properties.keySet().stream()
			.filter((name) -> name.startsWith("ratelimit.") && !name.startsWith("ratelimit.buckets"))
			.filter((name) -> !name.startsWith(RULE)) // a rule's fields: the test below
			.map((name) -> name.substring("ratelimit.".length()))
			.sorted()
			.toList();
		List<String> checked = BucketPropertyChecks.KNOWN_OUTSIDE_BUCKETS.stream()
			.map((name) -> name.startsWith("web.rules.") ? "web.rules"
					: name.startsWith("clients.rules.") ? "clients.rules" : name)
			.distinct()
			.sorted()
			.toList();
		assertThat(checked).isEqualTo(outside);
		// the conversion check binds each value to the property's own type, and knows every typed property
		// (enums and strings aside: the choices check and no check)
		BucketPropertyChecks.checkedTypes()
			.forEach((name, type) -> assertThat(properties.get("ratelimit.buckets.*." + name).get("type"))
				.as("type of ratelimit.buckets.*.%s", name)
				.isEqualTo(type.getName()));
		BucketPropertyChecks.checkedTypesOutsideBuckets().forEach((name, type) -> {
			if (!name.startsWith("web.rules.") && !name.startsWith("clients.rules.")) {
				assertThat(properties.get("ratelimit." + name).get("type")).as("type of ratelimit.%s", name)
					.isEqualTo(type.getName());
			}
		});
		List<String> typed = properties.entrySet().stream()
			.filter((entry) -> entry.getKey().startsWith("ratelimit.buckets.*."))
			.filter((entry) -> !String.valueOf(entry.getValue().get("type")).equals(String.class.getName())
					&& !String.valueOf(entry.getValue().get("type")).startsWith("dev.ratelimit."))
			.map((entry) -> entry.getKey().substring("ratelimit.buckets.*.".length()))
			.sorted()
			.toList();
		assertThat(BucketPropertyChecks.checkedTypes().keySet()).containsExactlyElementsOf(typed);
	}
}
