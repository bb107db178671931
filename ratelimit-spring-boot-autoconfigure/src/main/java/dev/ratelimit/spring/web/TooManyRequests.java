package dev.ratelimit.spring.web;

import java.time.Duration;
import java.util.List;
import java.util.function.BiConsumer;

import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.RateLimiterRegistry;
import dev.ratelimit.spring.RegisteredBucket;
import dev.ratelimit.spring.WebHeaders;
import dev.ratelimit.spring.engine.KeyedBucketExceeded;
import dev.ratelimit.spring.engine.SeveralBucketsExceeded;
import org.jspecify.annotations.Nullable;

import org.springframework.http.HttpHeaders;

/**
 * What a refusal answers over HTTP, the same for an annotated method (through
 * {@link RateLimitExceptionHandler}) and a web rule (through the filters): 429, {@code Retry-After}
 * unless {@code headers: none}, with {@code headers: ietf} the {@code RateLimit} fields of the refusing
 * bucket, and an RFC 9457 problem detail naming the bucket ({@code violated-policies} with
 * {@code headers: ietf}, {@code key} with {@code expose-key}).
 */
final class TooManyRequests {

	static final String PROBLEM_JSON = "application/problem+json";

	private TooManyRequests() {
	}

	static String detail(RateLimitExceededException ex) {
		String what = (ex.getBucket() != null) ? "bucket '" + ex.getBucket() + "'" : "a rate limiter";
		return "Rate limit of " + what + " exceeded; retry after " + retryAfterSeconds(ex.getRetryAfter()) + " s.";
	}

	static long retryAfterSeconds(Duration retryAfter) {
		long seconds = retryAfter.getSeconds() + ((retryAfter.getNano() > 0) ? 1 : 0);
		return Math.max(seconds, 1);
	}

	/**
	 * Sets the 429's headers.
	 *
	 * @param header what sets a header
	 * @param ex the refusal
	 * @param mode {@code ratelimit.web.headers}
	 * @param level the refusing bucket's level, for {@code ietf}, as it was at the refusal
	 *        ({@link RateLimitHeaders#atRefusal})
	 */
	static void headers(BiConsumer<String, String> header, RateLimitExceededException ex, WebHeaders mode,
			RateLimitHeaders.@Nullable Level level) {
		if (mode == WebHeaders.NONE) {
			return;
		}
		header.accept(HttpHeaders.RETRY_AFTER, Long.toString(retryAfterSeconds(ex.getRetryAfter())));
		if (mode == WebHeaders.IETF && level != null) {
			header.accept(RateLimitHeaders.POLICY, level.policy());
			header.accept(RateLimitHeaders.LIMIT, level.limit());
		}
	}

	/**
	 * The refusing bucket's level, for an annotated method's refusal: the bucket that refused, as the
	 * refusal holds it for a key's bucket (the key's own or the overflow bucket), else the bucket found by
	 * name (and, for a refusal made elsewhere with a key, the bucket that key's calls take from now); as
	 * it was at the refusal, for the refused cost ({@link RateLimitHeaders#atRefusal}).
	 */
	static RateLimitHeaders.@Nullable Level level(RateLimitExceededException ex, @Nullable RateLimiterRegistry registry) {
		if (registry == null || ex.getBucket() == null) {
			return null;
		}
		RegisteredBucket bucket = registry.find(ex.getBucket()).orElse(null);
		if (bucket == null) {
			return null;
		}
		RateLimiter limiter = KeyedBucketExceeded.refusedBy(ex);
		if (limiter == null && ex.getKey() != null && bucket.keys() > 0) {
			// the refusal names the key as text (String.valueOf): a key of another type (#id, a number) is
			// found by its text, as bucketOf, which looks the key up as it is, would not
			limiter = bucket.keyed().find(ex.getKey());
			if (limiter == null) {
				limiter = bucket.keyed().bucketOf(ex.getKey());
			}
		}
		if (limiter == null) {
			limiter = bucket.limiter();
		}
		return RateLimitHeaders.atRefusal(RateLimitHeaders.level(bucket.name(), limiter.snapshot()), ex, ex.getCost());
	}

	/**
	 * The problem detail's {@code violated-policies}: every bucket that refused the call.
	 */
	static List<String> violated(RateLimitExceededException ex) {
		if (ex instanceof SeveralBucketsExceeded several) {
			return several.getRefusingBuckets();
		}
		return (ex.getBucket() != null) ? List.of(ex.getBucket()) : List.of();
	}

	/**
	 * The problem detail as JSON, for the filters (which answer before any message converter).
	 */
	static String json(RateLimitExceededException ex, String instance, boolean exposeKey, boolean ietf) {
		// as Spring writes the exception handler's ProblemDetail for an annotated method: the same fields in
		// the same order, the default type ("about:blank") left out as RFC 9457 allows
		StringBuilder json = new StringBuilder(256).append('{');
		field(json, "detail", detail(ex)).append(',');
		field(json, "instance", instance).append(',');
		json.append("\"status\":429,");
		field(json, "title", "Too Many Requests");
		if (ex.getBucket() != null) {
			field(json.append(','), "bucket", ex.getBucket());
			if (ietf) {
				json.append(",\"violated-policies\":[");
				List<String> violated = violated(ex);
				for (int i = 0; i < violated.size(); i++) {
					string((i > 0) ? json.append(',') : json, violated.get(i));
				}
				json.append(']');
			}
		}
		if (exposeKey && ex.getKey() != null) {
			field(json.append(','), "key", ex.getKey());
		}
		return json.append('}').toString();
	}

	private static StringBuilder field(StringBuilder json, String name, String value) {
		return string(string(json, name).append(':'), value);
	}

	private static StringBuilder string(StringBuilder json, String value) {
		json.append('"');
		for (int i = 0; i < value.length(); i++) {
			char c = value.charAt(i);
			switch (c) {
				case '"' -> json.append("\\\"");
				case '\\' -> json.append("\\\\");
				case '\n' -> json.append("\\n");
				case '\r' -> json.append("\\r");
				case '\t' -> json.append("\\t");
				default -> {
					if (c < 0x20) {
						json.append(String.format("\\u%04x", (int) c));
					}
					else {
						json.append(c);
					}
				}
			}
		}
		return json.append('"');
	}
}
