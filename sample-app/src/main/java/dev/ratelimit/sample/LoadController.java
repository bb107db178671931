package dev.ratelimit.sample;

import java.time.Duration;
import java.util.Map;

import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code POST /load?seconds=5}: runs the {@link LoadDriver} and answers what each bucket granted and
 * refused meanwhile.
 */
@RestController
public class LoadController {

	private final LoadDriver driver;

	public LoadController(LoadDriver driver) {
		this.driver = driver;
	}

	@PostMapping("/load")
	public ResponseEntity<?> load(@RequestParam(defaultValue = "5") double seconds) throws InterruptedException {
		Duration duration = Duration.ofMillis((long) (seconds * 1000));
		if (duration.isZero() || duration.isNegative() || duration.compareTo(LoadDriver.MAX_RUN) > 0) {
			return ResponseEntity.badRequest()
				.body(Map.of("error", "seconds must be > 0 and at most " + LoadDriver.MAX_RUN.toSeconds()));
		}
		return ResponseEntity.ok(this.driver.run(duration));
	}
}
