package dev.ratelimit.sample;

import java.util.Map;

import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.RestController;

/**
 * The public API. No annotation here: the web rule {@code /api/public/**} in {@code application.yml}
 * limits every request to 5 per second per client address, and answers with the IETF
 * {@code RateLimit} fields.
 */
@RestController
public class PublicController {

	@GetMapping("/api/public/catalogue/{item}")
	public Map<String, Object> item(@PathVariable String item) {
		return Map.of("item", item, "cents", 1290);
	}
}
