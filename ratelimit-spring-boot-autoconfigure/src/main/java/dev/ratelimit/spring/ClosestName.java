package dev.ratelimit.spring;

import java.util.Collection;
import java.util.Comparator;

/**
 * The known name closest to a misspelt one, by edit distance, for the starter's messages ("did you mean
 * ...?"): bucket properties at start-up, fields of a retune through the endpoint. Internal to the
 * starter, public only for its packages.
 */
public final class ClosestName {

	private ClosestName() {
	}

	/**
	 * The candidate closest to {@code name}.
	 *
	 * @param name the name given
	 * @param candidates the known names, not empty
	 * @return the closest (the first of those at the same distance, in the candidates' order)
	 */
	public static String of(String name, Collection<String> candidates) {
		return candidates.stream().min(Comparator.comparingInt((known) -> distance(name, known))).orElseThrow();
	}

	/**
	 * Levenshtein distance: insertions, deletions and substitutions of one character each count 1.
	 *
	 * @param a a name
	 * @param b another
	 * @return the distance between them
	 */
	public static int distance(String a, String b) {
		int[] previous = new int[b.length() + 1];
		int[] current = new int[b.length() + 1];
		for (int j = 0; j <= b.length(); j++) {
			previous[j] = j;
		}
		for (int i = 1; i <= a.length(); i++) {
			current[0] = i;
			for (int j = 1; j <= b.length(); j++) {
				int substitution = previous[j - 1] + ((a.charAt(i - 1) == b.charAt(j - 1)) ? 0 : 1);
				current[j] = Math.min(substitution, Math.min(previous[j], current[j - 1]) + 1);
			}
			int[] swap = previous;
			previous = current;
			current = swap;
		}
		return previous[b.length()];
	}
}
