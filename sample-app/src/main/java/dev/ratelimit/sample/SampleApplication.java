package dev.ratelimit.sample;

import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * A shop back end that throttles its database writes, its calls to a partner API, its report
 * rendering and its public quote endpoint, each with a bucket from {@code application.yml}.
 *
 * <p>Run it, then push every bucket past its rate for a few seconds and watch the limiter work:
 *
 * <pre>
 * curl -X POST 'localhost:8080/load?seconds=5'
 * curl localhost:8080/actuator/ratelimits
 * </pre>
 *
 * Or start it with {@code --sample.load-on-start=5} to run the load once it is up.
 */
@SpringBootApplication
public class SampleApplication {

	public static void main(String[] args) {
		SpringApplication.run(SampleApplication.class, args);
	}
}
