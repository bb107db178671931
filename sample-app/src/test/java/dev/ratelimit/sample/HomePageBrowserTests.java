package dev.ratelimit.sample;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.logging.Level;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.openqa.selenium.By;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.chrome.ChromeDriverService;
import org.openqa.selenium.chrome.ChromeOptions;
import org.openqa.selenium.logging.LogEntry;
import org.openqa.selenium.logging.LogType;
import org.openqa.selenium.logging.LoggingPreferences;
import org.openqa.selenium.support.ui.WebDriverWait;
import tools.jackson.databind.json.JsonMapper;

import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The sample's home page in a real headless browser (Debian's {@code chromium} and
 * {@code chromium-driver}; skipped with a message when they are absent): it loads without console
 * errors, shows every configured bucket, and its numbers move when its button runs the load. It leaves
 * screenshots in {@code target/home-page-under-load.png} and {@code target/home-page.png}.
 */
@SpringBootTest(webEnvironment = WebEnvironment.RANDOM_PORT)
class HomePageBrowserTests {

	private static final Path CHROMIUM = Path.of("/usr/bin/chromium");

	private static final Path CHROMEDRIVER = Path.of("/usr/bin/chromedriver");

	private static final Duration PATIENCE = Duration.ofSeconds(30);

	@LocalServerPort
	private int port;

	private ChromeDriver browser;

	@BeforeEach
	void startTheBrowser() {
		Assumptions.assumeTrue(Files.isExecutable(CHROMIUM) && Files.isExecutable(CHROMEDRIVER),
				"Chromium is not installed: the Debian packages 'chromium' and 'chromium-driver'"
						+ " (apt-get install -y chromium chromium-driver) run this test; .ci/run installs them");
		// the driver is given (and SE_OFFLINE is set by the build): Selenium Manager downloads nothing
		System.setProperty("webdriver.chrome.driver", CHROMEDRIVER.toString());
		ChromeOptions options = new ChromeOptions();
		options.setBinary(CHROMIUM.toFile());
		options.addArguments("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
				"--window-size=1280,1000");
		LoggingPreferences logs = new LoggingPreferences();
		logs.enable(LogType.BROWSER, Level.ALL);
		options.setCapability(ChromeOptions.LOGGING_PREFS, logs);
		ChromeDriverService service = new ChromeDriverService.Builder()
			.usingDriverExecutable(CHROMEDRIVER.toFile())
			.usingAnyFreePort()
			.build();
		this.browser = new ChromeDriver(service, options);
	}

	@AfterEach
	void stopTheBrowser() {
		if (this.browser != null) {
			this.browser.quit();
		}
	}

	@Test
	void showsEveryBucketLiveAndItsNumbersMoveWhenTheLoadRuns() throws Exception {
		List<String> configured = configuredBuckets();
		this.browser.get("http://127.0.0.1:" + this.port + "/");
		WebDriverWait wait = new WebDriverWait(this.browser, PATIENCE, Duration.ofMillis(100));
		wait.withMessage("a card for every configured bucket " + configured)
			.until((page) -> shownBuckets().equals(configured));
		// two reads: the sparklines have a first rate
		wait.withMessage("a first rate of grants under every bucket")
			.until((page) -> !text("db-writes", ".granted-rate").endsWith("-/s"));
		assertThat(text("db-writes", ".gauge .of")).isEqualTo("of 10 available");
		assertThat(text("partner-api", ".settings")).contains("hybrid");
		Map<String, Long> grantedBefore = shownCounts("dd.granted");
		long publicRefusedBefore = count(text("public-api", "dd.rejected"));

		this.browser.findElement(By.id("load")).click();
		// the load runs for 5 s: the button is disabled meanwhile
		assertThat(this.browser.findElement(By.id("load")).isEnabled()).as("the button while the load runs").isFalse();
		wait.withMessage("the load's first grants on the page")
			.until((page) -> count(text("db-writes", "dd.granted")) > grantedBefore.get("db-writes"));
		screenshot("home-page-under-load.png");
		wait.withMessage("refusals of the public API on the page")
			.until((page) -> count(text("public-api", "dd.rejected")) > publicRefusedBefore);
		wait.withMessage("grants in the db-writes sparkline").until((page) -> sparklineRose("db-writes", "granted"));
		wait.withMessage("refusals in the public-api sparkline").until((page) -> sparklineRose("public-api", "refused"));
		wait.withMessage("the load's end").until((page) -> text("status").startsWith("load done: "));
		assertThat(this.browser.findElement(By.id("load")).isEnabled()).isTrue();
		Map<String, Long> grantedAfter = shownCounts("dd.granted");
		for (String bucket : List.of("db-writes", "partner-api", "reports")) {
			assertThat(grantedAfter.get(bucket)).as("granted by %s on the page", bucket)
				.isGreaterThan(grantedBefore.get(bucket));
		}

		screenshot("home-page.png");
		List<String> errors = new ArrayList<>();
		for (LogEntry entry : this.browser.manage().logs().get(LogType.BROWSER)) {
			if (entry.getLevel().intValue() >= Level.SEVERE.intValue()) {
				errors.add(entry.getLevel() + " " + entry.getMessage());
			}
		}
		assertThat(errors).as("the browser's console").isEmpty();
	}

	/** For a person to look at (not compared): {@code target/<name>}. */
	private void screenshot(String name) throws IOException {
		Path screenshot = Path.of("target", name);
		Files.createDirectories(screenshot.getParent());
		Files.copy(this.browser.getScreenshotAs(OutputType.FILE).toPath(), screenshot,
				StandardCopyOption.REPLACE_EXISTING);
	}

	private List<String> configuredBuckets() throws Exception {
		HttpResponse<String> response = HttpClient.newHttpClient()
			.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + this.port + "/actuator/ratelimits"))
				.timeout(PATIENCE)
				.build(), HttpResponse.BodyHandlers.ofString());
		assertThat(response.statusCode()).isEqualTo(200);
		return new ArrayList<>(JsonMapper.builder().build().readTree(response.body()).get("buckets").propertyNames());
	}

	private List<String> shownBuckets() {
		List<String> names = new ArrayList<>();
		for (WebElement card : this.browser.findElements(By.cssSelector("section.bucket"))) {
			names.add(card.getDomAttribute("data-bucket") + "");
			assertThat(card.findElement(By.tagName("h2")).getText()).isEqualTo(card.getDomAttribute("data-bucket"));
		}
		return names;
	}

	private Map<String, Long> shownCounts(String selector) {
		Map<String, Long> counts = new HashMap<>();
		for (WebElement card : this.browser.findElements(By.cssSelector("section.bucket"))) {
			counts.put(card.getDomAttribute("data-bucket"), count(card.findElement(By.cssSelector(selector)).getText()));
		}
		return counts;
	}

	private String text(String bucket, String selector) {
		return this.browser.findElement(By.cssSelector("section.bucket[data-bucket='" + bucket + "'] " + selector))
			.getText();
	}

	private String text(String id) {
		return this.browser.findElement(By.id(id)).getText();
	}

	/** A sparkline point above its baseline (the y of a zero rate is 47). */
	private boolean sparklineRose(String bucket, String line) {
		String points = this.browser
			.findElement(By.cssSelector("section.bucket[data-bucket='" + bucket + "'] .spark ." + line))
			.getDomAttribute("points");
		if (points == null || points.isBlank()) {
			return false;
		}
		for (String point : points.trim().split(" ")) {
			if (Double.parseDouble(point.substring(point.indexOf(',') + 1)) < 47) {
				return true;
			}
		}
		return false;
	}

	private static long count(String shown) {
		return Long.parseLong(shown.replace(",", ""));
	}
}
