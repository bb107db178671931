package dev.ratelimit.spring.client;

import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.jspecify.annotations.Nullable;

import org.springframework.http.HttpHeaders;

/**
 * Reads what a server's answer says about its limit (contract revision 3, "Outbound calls"): the pause
 * of a 429 or 503 with {@code Retry-After} (whole seconds, or an HTTP date read with the wall clock), and
 * the remaining count with its reset of the IETF {@code RateLimit} field, of {@code X-RateLimit-Remaining}
 * with {@code X-RateLimit-Reset}, and of {@code x-ratelimit-remaining-requests} with
 * {@code x-ratelimit-reset-requests}. A malformed value is ignored: counted, and the first one logged at
 * DEBUG; it never fails the call. Every time is capped at {@code ratelimit.clients.max-pause}.
 *
 * <p>Readings taken: the IETF field's policies are structured-field list members
 * ({@code "<name>";r=<n>;t=<s>}, other parameters such as {@code pk} ignored); a policy without {@code r}
 * or {@code t} is ignored as a field without its pair; of several, the one with the fewest {@code r}
 * decides (on a tie, the longest {@code t}). {@code X-RateLimit-Reset} may be fractional (rounded up).
 * An HTTP date is accepted in the three forms RFC 9110 says recipients accept.
 */
final class ServerAnswers {

	private static final Log logger = LogFactory.getLog(ServerAnswers.class);

	/** {@code X-RateLimit-Reset} larger than a year of seconds is an epoch time. */
	static final long YEAR_SECONDS = 365L * 24 * 3600;

	private static final long NANOS_PER_SECOND = 1_000_000_000L;

	/** RFC 850's two-digit years: 70-99 are the 1900s, 00-69 the 2000s. */
	private static final DateTimeFormatter RFC_850 = new java.time.format.DateTimeFormatterBuilder()
		.appendPattern("EEEE, dd-MMM-")
		.appendValueReduced(java.time.temporal.ChronoField.YEAR, 2, 2, 1970)
		.appendPattern(" HH:mm:ss 'GMT'")
		.toFormatter(Locale.US);

	/** asctime, its day padded with a space, read with the spaces collapsed. */
	private static final DateTimeFormatter ASCTIME = DateTimeFormatter.ofPattern("EEE MMM d HH:mm:ss yyyy", Locale.US);

	/** A pause and lowerings, each in nanoseconds from the answer. */
	record Heard(long pause, List<long[]> lowerings) {

		static final Heard NOTHING = new Heard(0, List.of());

		boolean isEmpty() {
			return this.pause == 0 && this.lowerings.isEmpty();
		}
	}

	private final long maxPause;

	private final InstantSource wall;

	private final AtomicLong malformed = new AtomicLong();

	private final AtomicBoolean logged = new AtomicBoolean();

	ServerAnswers(Duration maxPause, InstantSource wall) {
		// at most a century: clock readings plus a pause never overflow
		this.maxPause = Math.min(saturatedNanos(maxPause), 100L * YEAR_SECONDS * NANOS_PER_SECOND);
		this.wall = wall;
	}

	/**
	 * Malformed values ignored since start.
	 *
	 * @return the count
	 */
	long malformed() {
		return this.malformed.get();
	}

	/** What an answer says: its pause (429 and 503 only) and its lowerings. */
	Heard read(int status, HttpHeaders headers) {
		long pause = 0;
		Instant now = null;
		if (status == 429 || status == 503) {
			String retryAfter = headers.getFirst(HttpHeaders.RETRY_AFTER);
			if (retryAfter != null) {
				now = this.wall.instant();
				long nanos = retryAfter(retryAfter, now);
				if (nanos < 0) {
					malformed(HttpHeaders.RETRY_AFTER, retryAfter);
				}
				else {
					pause = Math.min(nanos, this.maxPause);
				}
			}
		}
		List<long[]> lowerings = null;
		String ietf = joined(headers, "RateLimit");
		if (ietf != null) {
			long[] policy = ietf(ietf);
			if (policy == null) {
				malformed("RateLimit", ietf);
			}
			else {
				lowerings = add(lowerings, policy[0], seconds(policy[1]));
			}
		}
		String remaining = headers.getFirst("X-RateLimit-Remaining");
		String reset = headers.getFirst("X-RateLimit-Reset");
		if (remaining != null && reset != null) {
			long count = count(remaining);
			if (now == null) {
				now = this.wall.instant();
			}
			long nanos = resetNanos(reset, now);
			if (count < 0 || nanos < 0) {
				malformed("X-RateLimit-Remaining/X-RateLimit-Reset", remaining + " / " + reset);
			}
			else {
				lowerings = add(lowerings, count, nanos);
			}
		}
		remaining = headers.getFirst("x-ratelimit-remaining-requests");
		reset = headers.getFirst("x-ratelimit-reset-requests");
		if (remaining != null && reset != null) {
			long count = count(remaining);
			long nanos = goDuration(reset);
			if (count < 0 || nanos < 0) {
				malformed("x-ratelimit-remaining-requests/x-ratelimit-reset-requests", remaining + " / " + reset);
			}
			else {
				lowerings = add(lowerings, count, nanos);
			}
		}
		if (pause == 0 && lowerings == null) {
			return Heard.NOTHING;
		}
		return new Heard(pause, (lowerings != null) ? lowerings : List.of());
	}

	private List<long[]> add(@Nullable List<long[]> lowerings, long remaining, long nanos) {
		List<long[]> list = (lowerings != null) ? lowerings : new ArrayList<>(2);
		list.add(new long[] { remaining, Math.min(nanos, this.maxPause) });
		return list;
	}

	private void malformed(String field, String value) {
		this.malformed.incrementAndGet();
		if (logger.isDebugEnabled() && this.logged.compareAndSet(false, true)) {
			logger.debug("Ignored a malformed " + field + " in a server's answer: '" + value
					+ "' (further malformed values are counted, not logged)");
		}
	}

	private static @Nullable String joined(HttpHeaders headers, String name) {
		List<String> values = headers.get(name);
		if (values == null || values.isEmpty()) {
			return null;
		}
		return (values.size() == 1) ? values.get(0) : String.join(",", values);
	}

	/**
	 * A {@code Retry-After} value: whole seconds, or an HTTP date.
	 *
	 * @return the pause in nanoseconds, {@code 0} for none (0, a date in the past), {@code -1} when
	 *         malformed (a negative or fractional number included)
	 */
	static long retryAfter(String value, Instant now) {
		String v = value.trim();
		if (!v.isEmpty() && v.chars().allMatch((c) -> c >= '0' && c <= '9')) {
			return seconds(digits(v));
		}
		Instant date = httpDate(v);
		if (date == null) {
			return -1;
		}
		Duration left = Duration.between(now, date);
		return left.isNegative() ? 0 : saturatedNanos(left);
	}

	/** An HTTP date (IMF-fixdate, RFC 850 or asctime), or {@code null}. */
	static @Nullable Instant httpDate(String value) {
		for (DateTimeFormatter format : new DateTimeFormatter[] { DateTimeFormatter.RFC_1123_DATE_TIME, RFC_850,
				ASCTIME }) {
			try {
				if (format == DateTimeFormatter.RFC_1123_DATE_TIME) {
					if (!value.endsWith(" GMT")) {
						continue; // RFC 9110: always GMT
					}
					return java.time.ZonedDateTime.parse(value, format).toInstant();
				}
				LocalDateTime local = LocalDateTime.parse((format == ASCTIME) ? value.replaceAll(" +", " ") : value, format);
				return local.toInstant(ZoneOffset.UTC);
			}
			catch (DateTimeParseException ex) {
				// the next form
			}
		}
		return null;
	}

	/**
	 * The IETF {@code RateLimit} field: the policy with the fewest remaining.
	 *
	 * @return {@code {r, t}}, or {@code null} when no policy has both as non-negative integers
	 */
	static long @Nullable [] ietf(String value) {
		long[] chosen = null;
		for (String member : members(value)) {
			long r = -1;
			long t = -1;
			String[] parts = parameters(member);
			if (parts == null) {
				continue;
			}
			for (int i = 1; i < parts.length; i++) {
				String parameter = parts[i].trim();
				int eq = parameter.indexOf('=');
				String name = (eq < 0) ? parameter : parameter.substring(0, eq).trim();
				String v = (eq < 0) ? "" : parameter.substring(eq + 1).trim();
				if (name.equals("r")) {
					r = count(v);
				}
				else if (name.equals("t")) {
					t = count(v);
				}
			}
			if (r < 0 || t < 0) {
				continue;
			}
			if (chosen == null || r < chosen[0] || (r == chosen[0] && t > chosen[1])) {
				chosen = new long[] { r, t };
			}
		}
		return chosen;
	}

	/** The members of a structured-field list: split at commas outside strings. */
	private static List<String> members(String value) {
		List<String> members = new ArrayList<>();
		boolean quoted = false;
		int start = 0;
		for (int i = 0; i < value.length(); i++) {
			char c = value.charAt(i);
			if (c == '\\' && quoted) {
				i++;
			}
			else if (c == '"') {
				quoted = !quoted;
			}
			else if (c == ',' && !quoted) {
				members.add(value.substring(start, i));
				start = i + 1;
			}
		}
		members.add(value.substring(start));
		return members;
	}

	/**
	 * A member's item and parameters, split at semicolons outside strings; {@code null} when its item is
	 * neither a string nor a token.
	 */
	private static String @Nullable [] parameters(String member) {
		List<String> parts = new ArrayList<>();
		boolean quoted = false;
		int start = 0;
		for (int i = 0; i < member.length(); i++) {
			char c = member.charAt(i);
			if (c == '\\' && quoted) {
				i++;
			}
			else if (c == '"') {
				quoted = !quoted;
			}
			else if (c == ';' && !quoted) {
				parts.add(member.substring(start, i));
				start = i + 1;
			}
		}
		if (quoted) {
			return null;
		}
		parts.add(member.substring(start));
		String item = parts.get(0).trim();
		boolean string = item.length() >= 2 && item.startsWith("\"") && item.endsWith("\"");
		boolean token = item.matches("[A-Za-z*][!#$%&'*+.^_`|~0-9A-Za-z:/-]*");
		return (string || token) ? parts.toArray(new String[0]) : null;
	}

	/** A non-negative integer (at most 15 digits), or {@code -1}. */
	static long count(String value) {
		String v = value.trim();
		if (v.isEmpty() || v.length() > 15 || !v.chars().allMatch((c) -> c >= '0' && c <= '9')) {
			return -1;
		}
		return Long.parseLong(v);
	}

	/**
	 * An {@code X-RateLimit-Reset} value: seconds from now, or an epoch time in seconds when larger than a
	 * year of seconds; may be fractional (rounded up).
	 *
	 * @return nanoseconds from now ({@code 0} for an epoch time in the past), or {@code -1} when malformed
	 */
	static long resetNanos(String value, Instant now) {
		String v = value.trim();
		if (!v.matches("[0-9]{1,15}(\\.[0-9]{1,9})?")) {
			return -1;
		}
		int dot = v.indexOf('.');
		long whole = Long.parseLong((dot < 0) ? v : v.substring(0, dot));
		long fraction = 0;
		if (dot >= 0) {
			String digits = (v.substring(dot + 1) + "000000000").substring(0, 9);
			fraction = Long.parseLong(digits);
		}
		if (whole > YEAR_SECONDS) {
			Duration left = Duration.between(now, Instant.ofEpochSecond(whole, fraction));
			return left.isNegative() ? 0 : saturatedNanos(left);
		}
		long nanos = seconds(whole);
		return (nanos > Long.MAX_VALUE - fraction) ? Long.MAX_VALUE : nanos + fraction;
	}

	/**
	 * A Go duration ({@code 1m6s}, {@code 20ms}, {@code 1.5s}, {@code 6m0.5s}; units h, m, s, ms, us, µs,
	 * ns), as OpenAI's {@code x-ratelimit-reset-requests} gives it.
	 *
	 * @return nanoseconds, or {@code -1} when malformed (a sign included)
	 */
	static long goDuration(String value) {
		String v = value.trim();
		if (v.equals("0")) {
			return 0;
		}
		if (v.isEmpty()) {
			return -1;
		}
		double total = 0;
		int i = 0;
		while (i < v.length()) {
			int start = i;
			while (i < v.length() && (Character.isDigit(v.charAt(i)) || v.charAt(i) == '.')) {
				i++;
			}
			if (start == i) {
				return -1;
			}
			double number;
			try {
				number = Double.parseDouble(v.substring(start, i));
			}
			catch (NumberFormatException ex) {
				return -1;
			}
			int unitStart = i;
			while (i < v.length() && !Character.isDigit(v.charAt(i)) && v.charAt(i) != '.') {
				i++;
			}
			double unit = switch (v.substring(unitStart, i)) {
				case "h" -> 3600e9;
				case "m" -> 60e9;
				case "s" -> 1e9;
				case "ms" -> 1e6;
				case "us", "µs", "μs" -> 1e3;
				case "ns" -> 1;
				default -> -1;
			};
			if (unit < 0) {
				return -1;
			}
			total += number * unit;
		}
		return (total >= Long.MAX_VALUE) ? Long.MAX_VALUE : (long) Math.ceil(total);
	}

	private static long digits(String v) {
		return (v.length() > 15) ? Long.MAX_VALUE / NANOS_PER_SECOND : Long.parseLong(v);
	}

	private static long seconds(long seconds) {
		return (seconds > Long.MAX_VALUE / NANOS_PER_SECOND) ? Long.MAX_VALUE : seconds * NANOS_PER_SECOND;
	}

	static long saturatedNanos(Duration duration) {
		try {
			return duration.toNanos();
		}
		catch (ArithmeticException ex) {
			return duration.isNegative() ? Long.MIN_VALUE : Long.MAX_VALUE;
		}
	}
}
