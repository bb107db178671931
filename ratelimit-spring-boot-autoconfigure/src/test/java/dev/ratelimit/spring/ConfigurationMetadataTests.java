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

	@Test
	@SuppressWarnings("unchecked")
	void describesEveryBucketPropertyWithATypeAndADescription() throws Exception {
		String json;
		try (InputStream in = getClass().getResourceAsStream("/META-INF/spring-configuration-metadata.json")) {
			assertThat(in).as("the generated metadata").isNotNull();
			json = new String(in.readAllBytes(), StandardCharsets.UTF_8);
		}
		Map<String, Object> metadata = JsonParserFactory.getJsonParser().parseMap(json);
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
