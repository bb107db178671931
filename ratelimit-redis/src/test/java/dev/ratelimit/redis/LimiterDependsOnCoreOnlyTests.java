package dev.ratelimit.redis;

import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The seam between the limiter and Spring runs one way (issue 29): the limiter's classes
 * ({@code dev.ratelimit.redis}) name no type of the starter ({@code dev.ratelimit.spring}), and only the
 * adapter ({@code dev.ratelimit.redis.autoconfigure}) does. Read from the compiled classes: a class's
 * constant pool names every type it uses.
 */
class LimiterDependsOnCoreOnlyTests {

	@Test
	void theLimiterPackageNamesNoTypeOfTheStarterAndTheAdapterDoes() throws IOException, URISyntaxException {
		Path classes = Path.of(RedisTokenBucket.class.getProtectionDomain().getCodeSource().getLocation().toURI());
		List<Path> limiter = classFiles(classes.resolve("dev/ratelimit/redis"));
		assertThat(limiter).as("the limiter's classes").hasSizeGreaterThan(8);
		for (Path file : limiter) {
			assertThat(names(file)).as("%s names a type of dev.ratelimit.spring", classes.relativize(file))
				.doesNotContain("dev/ratelimit/spring/");
		}
		// the check can fail: the adapter's classes do name the starter's types
		List<Path> adapter = classFiles(classes.resolve("dev/ratelimit/redis/autoconfigure"));
		assertThat(adapter).anySatisfy((file) -> assertThat(names(file)).contains("dev/ratelimit/spring/"));
	}

	private static List<Path> classFiles(Path directory) throws IOException {
		try (Stream<Path> files = Files.list(directory)) {
			return files.filter((file) -> file.toString().endsWith(".class")).toList();
		}
	}

	private static String names(Path classFile) {
		try {
			return new String(Files.readAllBytes(classFile), StandardCharsets.ISO_8859_1);
		}
		catch (IOException ex) {
			throw new IllegalStateException(ex);
		}
	}
}
