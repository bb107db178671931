package dev.ratelimit.spring.client;

import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;

import org.junit.jupiter.api.Test;

import org.springframework.http.HttpHeaders;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The header parsers against the IETF draft's forms (draft-ietf-httpapi-ratelimit-headers: a policy as a
 * string or a token, the {@code r} and {@code t} parameters, other parameters such as {@code pk}, several
 * policies in one field or in several field lines) and the vendors' forms; malformed values ignored and
 * counted.
 */
class ServerAnswersTests {

	private static final long SECOND = 1_000_000_000L;

	private static final Instant NOW = Instant.parse("1994-11-06T08:49:00Z");

	private final ServerAnswers answers = new ServerAnswers(Duration.ofHours(1), InstantSource.fixed(NOW));

	@Test
	void retryAfterInSecondsAndAsEachFormOfHttpDate() {
		assertThat(ServerAnswers.retryAfter("120", NOW)).isEqualTo(120 * SECOND);
		assertThat(ServerAnswers.retryAfter("Sun, 06 Nov 1994 08:49:37 GMT", NOW)).isEqualTo(37 * SECOND);
		assertThat(ServerAnswers.retryAfter("Sunday, 06-Nov-94 08:49:37 GMT", NOW)).isEqualTo(37 * SECOND);
		assertThat(ServerAnswers.retryAfter("Sun Nov  6 08:49:37 1994", NOW)).isEqualTo(37 * SECOND);
	}

	@Test
	void retryAfterThatPausesNothingOrIsMalformed() {
		assertThat(ServerAnswers.retryAfter("0", NOW)).isZero();
		assertThat(ServerAnswers.retryAfter("Sun, 06 Nov 1994 08:48:00 GMT", NOW)).isZero();
		assertThat(ServerAnswers.retryAfter("-5", NOW)).isEqualTo(-1);
		assertThat(ServerAnswers.retryAfter("1.5", NOW)).isEqualTo(-1);
		assertThat(ServerAnswers.retryAfter("soon", NOW)).isEqualTo(-1);
		assertThat(ServerAnswers.retryAfter("Sun, 06 Nov 1994 08:49:37 CET", NOW)).isEqualTo(-1);
	}

	@Test
	void ietfPoliciesTheFewestRemainingDecides() {
		assertThat(ServerAnswers.ietf("\"default\";r=50;t=30")).containsExactly(50, 30);
		assertThat(ServerAnswers.ietf("\"problemPolicy\";r=0;t=10")).containsExactly(0, 10);
		assertThat(ServerAnswers.ietf("day;r=100;t=36000")).containsExactly(100, 36000);
		assertThat(ServerAnswers.ietf("\"peruser\";r=5;t=20;pk=:dXNlcjEyMw==:")).containsExactly(5, 20);
		assertThat(ServerAnswers.ietf("\"burst\";r=40;t=1, \"daily\";r=2;t=60000")).containsExactly(2, 60000);
		assertThat(ServerAnswers.ietf("\"a,b\";r=3;t=5,\"c\";r=3;t=9")).containsExactly(3, 9);
		assertThat(ServerAnswers.ietf("\"default\";r=50")).isNull(); // no t: no reset to hold it until
		assertThat(ServerAnswers.ietf("\"default\";r=-1;t=3")).isNull();
		assertThat(ServerAnswers.ietf("\"default\";r=1.5;t=3")).isNull();
		assertThat(ServerAnswers.ietf("1;r=1;t=3")).isNull();
	}

	@Test
	void ietfFieldLinesAreOneList() {
		HttpHeaders headers = new HttpHeaders();
		headers.add("RateLimit", "\"hour\";r=9;t=3600");
		headers.add("RateLimit", "\"minute\";r=1;t=40");
		ServerAnswers.Heard heard = this.answers.read(200, headers);
		assertThat(heard.lowerings()).singleElement().satisfies((l) -> assertThat(l).containsExactly(1, 40 * SECOND));
	}

	@Test
	void xRateLimitResetInSecondsOrAsEpoch() {
		assertThat(ServerAnswers.resetNanos("30", NOW)).isEqualTo(30 * SECOND);
		assertThat(ServerAnswers.resetNanos("0.25", NOW)).isEqualTo(SECOND / 4);
		assertThat(ServerAnswers.resetNanos(String.valueOf(ServerAnswers.YEAR_SECONDS), NOW))
			.isEqualTo(ServerAnswers.YEAR_SECONDS * SECOND);
		assertThat(ServerAnswers.resetNanos(String.valueOf(NOW.getEpochSecond() + 90), NOW)).isEqualTo(90 * SECOND);
		assertThat(ServerAnswers.resetNanos(String.valueOf(NOW.getEpochSecond() - 90), NOW)).isZero();
		assertThat(ServerAnswers.resetNanos("-3", NOW)).isEqualTo(-1);
		assertThat(ServerAnswers.resetNanos("3s", NOW)).isEqualTo(-1);
	}

	@Test
	void goDurationsAsOpenAiSendsThem() {
		assertThat(ServerAnswers.goDuration("1m6s")).isEqualTo(66 * SECOND);
		assertThat(ServerAnswers.goDuration("6m0s")).isEqualTo(360 * SECOND);
		assertThat(ServerAnswers.goDuration("1h2m3.5s")).isEqualTo(3723 * SECOND + SECOND / 2);
		assertThat(ServerAnswers.goDuration("20ms")).isEqualTo(20_000_000L);
		assertThat(ServerAnswers.goDuration("7.66s")).isEqualTo(7_660_000_000L);
		assertThat(ServerAnswers.goDuration("500us")).isEqualTo(500_000L);
		assertThat(ServerAnswers.goDuration("0")).isZero();
		assertThat(ServerAnswers.goDuration("-1s")).isEqualTo(-1);
		assertThat(ServerAnswers.goDuration("5")).isEqualTo(-1);
		assertThat(ServerAnswers.goDuration("5d")).isEqualTo(-1);
	}

	@Test
	void aFieldWithoutItsPairIsIgnoredAndMalformedValuesAreCounted() {
		HttpHeaders headers = new HttpHeaders();
		headers.set("X-RateLimit-Remaining", "0");
		headers.set("x-ratelimit-reset-requests", "1s");
		assertThat(this.answers.read(200, headers).isEmpty()).isTrue();
		assertThat(this.answers.malformed()).isZero();
		headers.set("Retry-After", "soon");
		headers.set("X-RateLimit-Reset", "later");
		assertThat(this.answers.read(429, headers).isEmpty()).isTrue();
		assertThat(this.answers.malformed()).isEqualTo(2);
	}

	@Test
	void aServersWordIsCappedAtMaxPause() {
		ServerAnswers capped = new ServerAnswers(Duration.ofSeconds(10), InstantSource.fixed(NOW));
		HttpHeaders headers = new HttpHeaders();
		headers.set("Retry-After", "3600");
		headers.set("RateLimit", "\"default\";r=0;t=86400");
		ServerAnswers.Heard heard = capped.read(503, headers);
		assertThat(heard.pause()).isEqualTo(10 * SECOND);
		assertThat(heard.lowerings()).singleElement().satisfies((l) -> assertThat(l).containsExactly(0, 10 * SECOND));
	}

	@Test
	void retryAfterPausesOnlyA429OrA503() {
		HttpHeaders headers = new HttpHeaders();
		headers.set("Retry-After", "30");
		assertThat(this.answers.read(200, headers).isEmpty()).isTrue();
		assertThat(this.answers.read(500, headers).isEmpty()).isTrue();
		assertThat(this.answers.read(429, headers).pause()).isEqualTo(30 * SECOND);
	}
}
