package dev.ratelimit.spring;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.function.LongToIntFunction;

/**
 * The seeds of the auto-configuration's model tests: a fixed run (seeds {@code 0..n-1}) and a random one
 * ({@code n} seeds from a random first), and one seed alone with {@code -Dmodel.seed=<seed>} to replay a
 * failure (the random run is then empty). Each test groups its seeds by the configuration they run in.
 */
public final class ModelSeeds {

	private ModelSeeds() {
	}

	/**
	 * Seeds to run and what they are, for the test's report.
	 *
	 * @param what "fixed seeds", or the first random seed
	 * @param list the seeds
	 */
	public record Seeds(String what, List<Long> list) {
	}

	/**
	 * Seeds {@code 0..count-1}, or the one given with {@code -Dmodel.seed}.
	 *
	 * @param count how many
	 * @return the seeds
	 */
	public static Seeds fixed(long count) {
		Long only = Long.getLong("model.seed");
		if (only != null) {
			return new Seeds("seed " + only, List.of(only));
		}
		List<Long> seeds = new ArrayList<>();
		for (long seed = 0; seed < count; seed++) {
			seeds.add(seed);
		}
		return new Seeds("fixed seeds", seeds);
	}

	/**
	 * {@code count} consecutive seeds from a random first one; none with {@code -Dmodel.seed} (the fixed run
	 * replays that one).
	 *
	 * @param count how many
	 * @return the seeds
	 */
	public static Seeds random(long count) {
		if (Long.getLong("model.seed") != null) {
			return new Seeds("no random seeds (-Dmodel.seed)", List.of());
		}
		long first = new SplittableRandom().nextLong();
		List<Long> seeds = new ArrayList<>();
		for (long i = 0; i < count; i++) {
			seeds.add(first + i);
		}
		return new Seeds("random seeds from " + first, seeds);
	}

	/**
	 * The seeds that run in configuration {@code slot}.
	 *
	 * @param seeds every seed of the run
	 * @param slot the configuration
	 * @param slotOf the configuration of a seed
	 * @return those of {@code seeds} in {@code slot}, in order
	 */
	public static List<Long> inSlot(List<Long> seeds, int slot, LongToIntFunction slotOf) {
		List<Long> mine = new ArrayList<>();
		for (long seed : seeds) {
			if (slotOf.applyAsInt(seed) == slot) {
				mine.add(seed);
			}
		}
		return mine;
	}
}
