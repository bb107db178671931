package dev.ratelimit.spring.aop;

import dev.ratelimit.annotation.RateLimited;
import org.junit.jupiter.api.Test;

import org.springframework.aot.generate.ClassNameGenerator;
import org.springframework.aot.generate.DefaultGenerationContext;
import org.springframework.aot.generate.InMemoryGeneratedFiles;
import org.springframework.aot.hint.RuntimeHints;
import org.springframework.aot.hint.predicate.RuntimeHintsPredicates;
import org.springframework.context.aot.ApplicationContextAotGenerator;
import org.springframework.context.support.GenericApplicationContext;
import org.springframework.javapoet.ClassName;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Ahead-of-time processing (what a GraalVM native build of the application runs) registers the
 * reflection the interceptor needs for {@code @RateLimited} methods, and nothing for other beans.
 */
class RateLimitedAotProcessorTests {

	@Test
	void registersTheRateLimitedMethodsOfBeansForReflection() {
		GenericApplicationContext context = new GenericApplicationContext();
		context.registerBean(QuoteService.class);
		context.registerBean(PlainService.class);
		DefaultGenerationContext generation = new DefaultGenerationContext(
				new ClassNameGenerator(ClassName.get("dev.ratelimit.test", "Aot")), new InMemoryGeneratedFiles());
		new ApplicationContextAotGenerator().processAheadOfTime(context, generation);
		RuntimeHints hints = generation.getRuntimeHints();
		assertThat(RuntimeHintsPredicates.reflection().onMethodInvocation(QuoteService.class, "quote")).accepts(hints);
		assertThat(RuntimeHintsPredicates.reflection().onMethodInvocation(ClassLevelService.class, "report"))
			.rejects(hints);
		assertThat(RuntimeHintsPredicates.reflection().onType(RateLimited.class)).accepts(hints);
		assertThat(RuntimeHintsPredicates.reflection().onMethodInvocation(PlainService.class, "work")).rejects(hints);
	}

	@Test
	void coversMethodsLimitedThroughTheirClass() {
		GenericApplicationContext context = new GenericApplicationContext();
		context.registerBean(ClassLevelService.class);
		DefaultGenerationContext generation = new DefaultGenerationContext(
				new ClassNameGenerator(ClassName.get("dev.ratelimit.test", "Aot")), new InMemoryGeneratedFiles());
		new ApplicationContextAotGenerator().processAheadOfTime(context, generation);
		assertThat(RuntimeHintsPredicates.reflection().onMethodInvocation(ClassLevelService.class, "report"))
			.accepts(generation.getRuntimeHints());
	}

	public static class QuoteService {

		@RateLimited(value = "quotes", cost = "#symbols.length")
		public String quote(String... symbols) {
			return String.join(",", symbols);
		}
	}

	@RateLimited("reports")
	public static class ClassLevelService {

		public String report() {
			return "report";
		}
	}

	public static class PlainService {

		public String work() {
			return "work";
		}
	}
}
