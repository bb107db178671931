package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.time.Duration;
import java.time.Instant;
import java.time.InstantSource;
import java.time.LocalDateTime;
import java.time.ZoneId;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import dev.ratelimit.annotation.RateLimited;
import dev.ratelimit.core.CalendarQuota;
import dev.ratelimit.core.RateLimitExceededException;
import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.spring.actuate.BucketView;
import dev.ratelimit.spring.actuate.RateLimitsEndpoint;
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.ratelimit.spring.autoconfigure.RateLimitEndpointAutoConfiguration;
import dev.ratelimit.spring.web.RateLimitHeaders;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import org.springframework.boot.actuate.endpoint.InvalidEndpointRequestException;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Calendar quotas ({@code type: quota}, contract revision 3) as the starter makes them: on the
 * application's wall clock (a fake {@link InstantSource} bean here), with keys, beside a rate on one
 * method, in the endpoint's view and in the IETF fields; and the start-up failures for what a quota does
 * not take.
 */
class QuotaBucketsTests {

	private static final ZoneId BERLIN = ZoneId.of("Europe/Berlin");

	/** The wall clock every test moves: 23:00 in Berlin on the day of the change to summer time. */
	private static final AtomicReference<Instant> NOW = new AtomicReference<>();

	private final ApplicationContextRunner runner = new ApplicationContextRunner()
		.withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
		.withUserConfiguration(WallClockConfiguration.class)
		.withInitializer((context) -> NOW.set(berlin("2026-03-29T23:00:00")));

	private static Instant berlin(String local) {
		return LocalDateTime.parse(local).atZone(BERLIN).toInstant();
	}

	@Test
	void makesACalendarQuotaOnTheApplicationsWallClock() {
		this.runner
			.withPropertyValues("ratelimit.buckets.daily.type=quota", "ratelimit.buckets.daily.limit=1000",
					"ratelimit.buckets.daily.calendar=day", "ratelimit.buckets.daily.zone=Europe/Berlin")
			.run((context) -> {
				assertThat(context).hasNotFailed();
				RateLimiter daily = context.getBean("daily", RateLimiter.class);
				assertThat(daily).isInstanceOf(CalendarQuota.class);
				RegisteredBucket bucket = context.getBean(RateLimiterRegistry.class).get("daily");
				assertThat(bucket.type()).isEqualTo("quota");
				assertThat(daily.tryAcquire(1000)).isTrue();
				assertThatThrownBy(() -> daily.acquire(1, Duration.ZERO))
					.isInstanceOfSatisfying(RateLimitExceededException.class,
							(ex) -> assertThat(ex.getRetryAfter()).isEqualTo(Duration.ofHours(1)));
				NOW.set(berlin("2026-03-30T00:00:00")); // midnight: a new day's allowance
				assertThat(daily.tryAcquire(1000)).isTrue();
				assertThat(daily.tryAcquire(1)).isFalse();
			});
	}

	@Test
	void theZoneDefaultsToUtcAndTheSystemClockIsUsedWithoutABean() {
		new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration.class))
			.withPropertyValues("ratelimit.buckets.monthly.type=quota", "ratelimit.buckets.monthly.limit=5",
					"ratelimit.buckets.monthly.calendar=month")
			.run((context) -> {
				CalendarQuota monthly = context.getBean("monthly", CalendarQuota.class);
				assertThat(monthly.calendar().zone()).isEqualTo(java.time.ZoneOffset.UTC);
				Instant now = Instant.now();
				assertThat(monthly.currentPeriod().start()).isBeforeOrEqualTo(now);
				assertThat(monthly.currentPeriod().end()).isAfter(now);
			});
	}

	@ParameterizedTest(name = "{0}={1}")
	@CsvSource({ "rate, 5", "period, 2s", "initial, 1", "capped-release, false", "burst-ratio, 1.1",
			"max-backlog, 1s" })
	void refusesWhatAQuotaDoesNotTakeNamingTheBucketAndTheProperty(String property, String value) {
		this.runner
			.withPropertyValues("ratelimit.buckets.monthly.type=quota", "ratelimit.buckets.monthly.limit=100",
					"ratelimit.buckets.monthly.calendar=month", "ratelimit.buckets.monthly." + property + "=" + value)
			.run((context) -> {
				assertThat(context).hasFailed();
				RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
				assertThat(ex.getDescription()).contains("Bucket 'monthly'")
					.contains("ratelimit.buckets.monthly." + property + " does not apply to a quota");
				assertThat(ex.getAction()).contains("Remove ratelimit.buckets.monthly." + property)
					.contains("A quota takes limit, calendar, zone, max-wait, mode, keys.max and backend");
			});
	}

	@ParameterizedTest(name = "{0}")
	@CsvSource(delimiter = '|', value = {
			"calendar=day|ratelimit.buckets.q.limit is not set|a whole number from 1 to 1125899906842624",
			"limit=10|ratelimit.buckets.q.calendar is not set|minute, hour, day, week, month or year",
			"limit=10,calendar=fortnight|ratelimit.buckets.q.calendar is 'fortnight'|minute, hour, day, week, month or year",
			"limit=0,calendar=day|ratelimit.buckets.q.limit is 0|a whole number from 1 to 1125899906842624",
			"limit=10,calendar=day,zone=Mars/Olympus|ratelimit.buckets.q.zone is 'Mars/Olympus'|a time zone ID",
			"limit=10,calendar=day,backend=redis|no module provides that backend|Add dev.ratelimit:ratelimit-redis" })
	void needsALimitAndACalendarAndSaysWhatIsAccepted(String properties, String description, String action) {
		ApplicationContextRunner runner = this.runner.withPropertyValues("ratelimit.buckets.q.type=quota");
		for (String property : properties.split(",")) {
			runner = runner.withPropertyValues("ratelimit.buckets.q." + property);
		}
		runner.run((context) -> {
			assertThat(context).hasFailed();
			RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
			assertThat(ex.getDescription()).contains("Bucket 'q'").contains(description);
			assertThat(ex.getAction()).contains(action);
		});
	}

	@ParameterizedTest
	@CsvSource({ "calendar, day", "zone, Europe/Berlin" })
	void calendarAndZoneBelongToQuotas(String property, String value) {
		this.runner.withPropertyValues("ratelimit.buckets.b.rate=10", "ratelimit.buckets.b." + property + "=" + value)
			.run((context) -> {
				RateLimitConfigurationException ex = rootCause(context.getStartupFailure());
				assertThat(ex.getDescription()).contains("ratelimit.buckets.b." + property)
					.contains("applies to quota buckets only");
			});
	}

	@Test
	void theViewShowsTheRunningPeriodAndWhenItResets() {
		this.runner.withConfiguration(AutoConfigurations.of(RateLimitEndpointAutoConfiguration.class))
			.withPropertyValues("management.endpoints.web.exposure.include=ratelimits", "ratelimit.buckets.daily.type=quota",
					"ratelimit.buckets.daily.limit=1000", "ratelimit.buckets.daily.calendar=day",
					"ratelimit.buckets.daily.zone=Europe/Berlin", "ratelimit.buckets.api.rate=10")
			.run((context) -> {
				NOW.set(berlin("2026-03-29T12:00:00"));
				RateLimitsEndpoint endpoint = context.getBean(RateLimitsEndpoint.class);
				context.getBean("daily", RateLimiter.class).tryAcquire(400);
				BucketView daily = endpoint.bucket("daily");
				assertThat(daily.type()).isEqualTo("quota");
				assertThat(daily.available()).isEqualTo(600L);
				assertThat(daily.limit()).isEqualTo(1000L);
				assertThat(daily.rate()).isEqualByComparingTo("1000");
				assertThat(daily.period()).isEqualTo("PT23H"); // the day of the change to summer time
				assertThat(daily.resetsAt()).isEqualTo("2026-03-29T22:00:00Z");
				assertThat(endpoint.bucket("api").resetsAt()).isNull();
				assertThatThrownBy(() -> endpoint.update("daily", new BigDecimal("5"), null, null))
					.isInstanceOf(InvalidEndpointRequestException.class)
					.hasMessageContaining("a quota has no rate");
				BucketView lowered = endpoint.update("daily", null, 500L, null);
				assertThat(lowered.limit()).isEqualTo(500L);
				assertThat(lowered.available()).isEqualTo(100L);
			});
	}

	@Test
	void theIetfFieldsGiveTheTimeUntilTheBoundaryAndThePeriodsLength() {
		this.runner
			.withPropertyValues("ratelimit.buckets.daily.type=quota", "ratelimit.buckets.daily.limit=1000",
					"ratelimit.buckets.daily.calendar=day", "ratelimit.buckets.daily.zone=Europe/Berlin")
			.run((context) -> {
				NOW.set(berlin("2026-03-29T22:59:59.500"));
				RateLimiter daily = context.getBean("daily", RateLimiter.class);
				assertThat(RateLimitHeaders.level("daily", daily.snapshot()).limit()).isEqualTo("\"daily\";r=1000;t=3601");
				daily.tryAcquire(10);
				RateLimitHeaders.Level level = RateLimitHeaders.level("daily", daily.snapshot());
				assertThat(level.policy()).isEqualTo("\"daily\";q=1000;w=82800"); // 23 hours
				assertThat(level.limit()).isEqualTo("\"daily\";r=990;t=3601");
			});
	}

	@Test
	void aQuotaBesideARateOnOneMethodRefusesWithTheTimeUntilMidnightAndTakesNothingFromTheRate() {
		this.runner.withUserConfiguration(PartnerConfiguration.class)
			.withPropertyValues("ratelimit.buckets.per-second.rate=100", "ratelimit.buckets.per-second.max-wait=0",
					"ratelimit.buckets.partner-daily.type=quota", "ratelimit.buckets.partner-daily.limit=3",
					"ratelimit.buckets.partner-daily.calendar=day", "ratelimit.buckets.partner-daily.zone=Europe/Berlin",
					"ratelimit.buckets.partner-daily.max-wait=0")
			.run((context) -> {
				Partner partner = context.getBean(Partner.class);
				for (int i = 0; i < 3; i++) {
					partner.call();
				}
				RateLimiter perSecond = context.getBean("per-second", RateLimiter.class);
				double before = perSecond.snapshot().available();
				assertThatThrownBy(partner::call).isInstanceOfSatisfying(RateLimitExceededException.class, (ex) -> {
					assertThat(ex.getBucket()).isEqualTo("partner-daily");
					assertThat(ex.getRetryAfter()).isEqualTo(Duration.ofHours(1));
				});
				assertThat(partner.calls()).isEqualTo(3);
				assertThat(perSecond.snapshot().available()).isEqualTo(before);
			});
	}

	@Test
	void eachKeyHasAQuotaOfItsOwn() {
		this.runner.withUserConfiguration(CustomersConfiguration.class)
			.withPropertyValues("ratelimit.buckets.per-customer.type=quota", "ratelimit.buckets.per-customer.limit=2",
					"ratelimit.buckets.per-customer.calendar=month", "ratelimit.buckets.per-customer.max-wait=0")
			.run((context) -> {
				Customers customers = context.getBean(Customers.class);
				customers.call("a");
				customers.call("a");
				customers.call("b");
				assertThatThrownBy(() -> customers.call("a")).isInstanceOfSatisfying(
						RateLimitExceededException.class, (ex) -> assertThat(ex.getKey()).isEqualTo("a"));
				customers.call("b");
				NOW.set(Instant.parse("2026-04-01T00:00:00Z")); // April: both have their allowance again
				customers.call("a");
				customers.call("a");
				assertThat(context.getBean(RateLimiterRegistry.class).get("per-customer").keys()).isEqualTo(2);
			});
	}

	private static RateLimitConfigurationException rootCause(Throwable failure) {
		Throwable t = failure;
		while (t != null && !(t instanceof RateLimitConfigurationException)) {
			t = t.getCause();
		}
		assertThat(t).as("a RateLimitConfigurationException in %s", failure).isNotNull();
		return (RateLimitConfigurationException) t;
	}

	@Configuration(proxyBeanMethods = false)
	static class WallClockConfiguration {

		@Bean
		InstantSource wallClock() {
			return NOW::get;
		}
	}

	@Configuration(proxyBeanMethods = false)
	static class PartnerConfiguration {

		@Bean
		Partner partner() {
			return new Partner();
		}

		/** A nanosecond clock that stands still: the rate bucket gets no token back between calls. */
		@Bean
		RateLimitClock standingClock() {
			return () -> 0L;
		}
	}

	static class Partner {

		private final AtomicInteger calls = new AtomicInteger();

		int calls() {
			return this.calls.get();
		}

		@RateLimited("per-second")
		@RateLimited("partner-daily")
		public void call() {
			this.calls.incrementAndGet();
		}

	}

	@Configuration(proxyBeanMethods = false)
	static class CustomersConfiguration {

		@Bean
		Customers customers() {
			return new Customers();
		}
	}

	static class Customers {

		@RateLimited(value = "per-customer", key = "#customer")
		public void call(String customer) {
		}
	}
}
