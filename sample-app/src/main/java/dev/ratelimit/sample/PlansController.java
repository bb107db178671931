package dev.ratelimit.sample;

import java.util.Map;

import dev.ratelimit.annotation.RateLimited;
import org.jspecify.annotations.Nullable;

import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * An API sold by plan (contract revision 3, "Plans" and "Calendar quotas"): each API key ({@code X-Api-Key})
 * has the limits of its customer's plan ({@code X-Plan}: none for free, {@code pro}, {@code enterprise}).
 * The web rule on {@code /api/v1/**} gives each key its rate ({@code api-by-plan}); the annotation here
 * gives it its monthly quota ({@code api-monthly}), which resets at the start of each calendar month.
 * (A real API would look the key's plan up, with a {@code RateLimitPlanResolver} bean, rather than trust
 * a header.)
 */
@RestController
public class PlansController {

	@GetMapping("/api/v1/forecast/{city}")
	@RateLimited(value = "api-monthly", key = "#apiKey", plan = "#plan")
	public Map<String, Object> forecast(@PathVariable String city, @RequestHeader("X-Api-Key") String apiKey,
			@RequestHeader(name = "X-Plan", required = false) @Nullable String plan) {
		return Map.of("city", city, "forecast", "sunny", "plan", (plan != null) ? plan : "free");
	}
}
