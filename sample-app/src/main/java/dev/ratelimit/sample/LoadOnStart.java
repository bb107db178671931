package dev.ratelimit.sample;

import java.time.Duration;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.ApplicationArguments;
import org.springframework.boot.ApplicationRunner;
import org.springframework.stereotype.Component;

/**
 * With {@code --sample.load-on-start=<seconds>}, runs the {@link LoadDriver} once the application is
 * up and logs what each bucket granted and refused.
 */
@Component
public class LoadOnStart implements ApplicationRunner {

	private static final Log logger = LogFactory.getLog(LoadOnStart.class);

	private final LoadDriver driver;

	private final double seconds;

	public LoadOnStart(LoadDriver driver, @Value("${sample.load-on-start:0}") double seconds) {
		this.driver = driver;
		this.seconds = seconds;
	}

	@Override
	public void run(ApplicationArguments args) throws Exception {
		if (this.seconds > 0) {
			logger.info("Load on start: " + this.driver.run(Duration.ofMillis((long) (this.seconds * 1000))));
		}
	}
}
