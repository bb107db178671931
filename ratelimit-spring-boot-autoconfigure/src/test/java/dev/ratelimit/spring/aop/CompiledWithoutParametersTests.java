package dev.ratelimit.spring.aop;

import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Contract revision 3: a class compiled without {@code -parameters} (any build without Spring Boot's Maven
 * parent or Gradle plugin). Before, {@code key = "#user"} started, the start-up check was skipped, and
 * every call failed "key '#user' ... is null" though the argument was "bob". The class is compiled here,
 * without the flag, and loaded on its own.
 */
class CompiledWithoutParametersTests {

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withPropertyValues("ratelimit.buckets.per-user.rate=1", "ratelimit.buckets.per-user.max-wait=0");

	@TempDir
	Path dir;

	@Test
	void aKeyNamingAParameterWhoseNameIsNotCompiledInFailsStartUpSayingWhatToDo() throws Exception {
		Class<?> quotes = compileWithoutParameters("#user");
		this.runner.withClassLoader(quotes.getClassLoader()).withBean(quotes).run((context) -> {
			assertThat(context).hasFailed();
			assertThat(context.getStartupFailure()).rootCause()
				.hasMessageContaining("key '#user' of @RateLimited on fixture.Quotes.quote")
				.hasMessageContaining("compiled without -parameters")
				.hasMessageContaining("#p0");
		});
	}

	@Test
	void aKeyByPositionWorksWithoutParameterNames() throws Exception {
		Class<?> quotes = compileWithoutParameters("#p0");
		this.runner.withClassLoader(quotes.getClassLoader()).withBean(quotes).run((context) -> {
			assertThat(context).hasNotFailed();
			Object bean = context.getBean(quotes);
			assertThat(quotes.getMethod("quote", String.class).invoke(bean, "bob")).isEqualTo("bob");
			assertThat(quotes.getMethod("quote", String.class).invoke(bean, "alice")).isEqualTo("alice");
		});
	}

	private Class<?> compileWithoutParameters(String key) throws Exception {
		Path source = this.dir.resolve("src/fixture/Quotes.java");
		Files.createDirectories(source.getParent());
		Files.writeString(source, """
				package fixture;

				import dev.ratelimit.annotation.RateLimited;

				public class Quotes {

					@RateLimited(value = "per-user", key = "%s")
					public String quote(String user) {
						return user;
					}
				}
				""".formatted(key));
		Path classes = Files.createDirectories(this.dir.resolve("classes"));
		String annotations;
		try {
			annotations = Path.of(RateLimited.class.getProtectionDomain().getCodeSource().getLocation().toURI())
				.toString();
		}
		catch (java.net.URISyntaxException ex) {
			throw new IllegalStateException(ex);
		}
		JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
		// no -parameters: the flag whose absence is the case
		int status = javac.run(null, null, null, "--release", "17", "-g", "-cp", annotations, "-d", classes.toString(),
				source.toString());
		assertThat(status).as("javac").isZero();
		URLClassLoader loader = new URLClassLoader(new URL[] { classes.toUri().toURL() },
				getClass().getClassLoader());
		Class<?> quotes = loader.loadClass("fixture.Quotes");
		assertThat(List.of(quotes.getMethod("quote", String.class).getParameters()))
			.allSatisfy((parameter) -> assertThat(parameter.isNamePresent()).isFalse());
		return quotes;
	}
}
