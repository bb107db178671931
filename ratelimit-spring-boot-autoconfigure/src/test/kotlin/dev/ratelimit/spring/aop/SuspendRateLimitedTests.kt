package dev.ratelimit.spring.aop

import dev.ratelimit.annotation.RateLimited
import dev.ratelimit.core.RateLimitExceededException
import dev.ratelimit.core.RateLimiter
import dev.ratelimit.spring.autoconfigure.RateLimitAutoConfiguration
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.async
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.assertj.core.api.Assertions.assertThat
import org.junit.jupiter.api.Test
import org.springframework.boot.autoconfigure.AutoConfigurations
import org.springframework.boot.test.context.runner.ApplicationContextRunner
import org.springframework.context.annotation.Bean
import org.springframework.context.annotation.Configuration

/**
 * Kotlin `suspend` methods (contract revision 2): limited like a `Mono`, without blocking a thread,
 * their capped tokens released when the coroutine completes.
 */
class SuspendRateLimitedTests {

    private val runner = ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration::class.java))
        .withUserConfiguration(CoroutineConfiguration::class.java)
        .withPropertyValues(
            "ratelimit.buckets.capped.rate=1000000", "ratelimit.buckets.capped.limit=1",
            "ratelimit.buckets.capped.capped-release=true", "ratelimit.buckets.capped.max-wait=10s",
            "ratelimit.buckets.hourly.rate=1", "ratelimit.buckets.hourly.period=1h",
            "ratelimit.buckets.hourly.max-wait=0",
            "ratelimit.buckets.watched.rate=1", "ratelimit.buckets.watched.period=1h",
            "ratelimit.buckets.watched.max-wait=0", "ratelimit.buckets.watched.mode=shadow",
        )

    @Test
    fun `capped tokens stay in flight until the coroutine completes`() {
        runner.run { context ->
            val service = context.getBean(CoroutineService::class.java)
            val capped = context.getBean("capped", RateLimiter::class.java)
            runBlocking {
                val gate = CompletableDeferred<Unit>()
                val call = async { service.hold(gate) }
                withTimeout(5_000) {
                    while (service.started == 0) {
                        delay(5)
                    }
                }
                // the body is suspended on the gate: its token is still in flight
                assertThat(capped.snapshot().inFlight()).isEqualTo(1.0)
                gate.complete(Unit)
                assertThat(call.await()).isEqualTo("done")
                assertThat(capped.snapshot().inFlight()).isZero()
            }
        }
    }

    @Test
    fun `a coroutine waiting for tokens blocks no thread`() {
        runner.run { context ->
            val service = context.getBean(CoroutineService::class.java)
            val capped = context.getBean("capped", RateLimiter::class.java)
            // runBlocking has one thread: were the waiting call to block it, the first call could never
            // complete and the test would time out
            runBlocking {
                val first = CompletableDeferred<Unit>()
                val second = CompletableDeferred<Unit>()
                val a = async { service.hold(first) }
                val b = async { service.hold(second) }
                // the first call runs (its body started), the second waits for its release
                withTimeout(5_000) {
                    while (service.started < 1 || capped.snapshot().waiting() < 1) {
                        delay(5)
                    }
                }
                assertThat(service.started).isEqualTo(1)
                first.complete(Unit)
                assertThat(a.await()).isEqualTo("done")
                second.complete(Unit)
                assertThat(withTimeout(5_000) { b.await() }).isEqualTo("done")
                assertThat(service.started).isEqualTo(2)
                assertThat(capped.snapshot().inFlight()).isZero()
            }
        }
    }

    @Test
    fun `a refusal is thrown in the coroutine and the fallback answers it`() {
        runner.run { context ->
            val service = context.getBean(CoroutineService::class.java)
            runBlocking {
                assertThat(service.quote("DE")).isEqualTo("live DE")
                assertThat(service.quote("DE")).isEqualTo("cached DE (hourly refused)")
                val refused = runCatching { service.plain() }.exceptionOrNull()
                assertThat(refused).isInstanceOfSatisfying(RateLimitExceededException::class.java) {
                    assertThat(it.bucket).isEqualTo("hourly")
                }
            }
        }
    }

    @Test
    fun `refundIf judges the coroutine's result`() {
        runner.run { context ->
            val service = context.getBean(CoroutineService::class.java)
            val hourly = context.getBean("hourly", RateLimiter::class.java)
            runBlocking {
                repeat(5) { assertThat(service.lookup(true)).isEqualTo("free") }
                assertThat(hourly.snapshot().available()).isEqualTo(1.0)
                assertThat(service.lookup(false)).isEqualTo("paid")
                assertThat(hourly.snapshot().available()).isZero()
            }
        }
    }
}

class SuspendSeveralBucketsAndShadowTests {

    private val runner = ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(RateLimitAutoConfiguration::class.java))
        .withUserConfiguration(CoroutineConfiguration::class.java)
        .withPropertyValues(
            "ratelimit.buckets.capped.rate=1000000", "ratelimit.buckets.capped.limit=1",
            "ratelimit.buckets.capped.capped-release=true", "ratelimit.buckets.capped.max-wait=10s",
            "ratelimit.buckets.hourly.rate=1", "ratelimit.buckets.hourly.period=1h",
            "ratelimit.buckets.hourly.max-wait=0",
            "ratelimit.buckets.watched.rate=1", "ratelimit.buckets.watched.period=1h",
            "ratelimit.buckets.watched.max-wait=0", "ratelimit.buckets.watched.mode=shadow",
        )

    @Test
    fun `a suspend method with two buckets takes from both or from neither`() {
        runner.run { context ->
            val service = context.getBean(CoroutineService::class.java)
            val capped = context.getBean("capped", RateLimiter::class.java)
            val hourly = context.getBean("hourly", RateLimiter::class.java)
            runBlocking {
                assertThat(service.both()).isEqualTo("both")
                assertThat(capped.snapshot().inFlight()).isZero()
                val refused = runCatching { service.both() }.exceptionOrNull()
                assertThat(refused).isInstanceOfSatisfying(RateLimitExceededException::class.java) {
                    assertThat(it.bucket).isEqualTo("hourly")
                }
                // capped gave its claim back: nothing in flight, nothing owed
                assertThat(capped.snapshot().inFlight()).isZero()
                assertThat(capped.snapshot().deficiency()).isZero()
                assertThat(hourly.snapshot().rejected()).isEqualTo(1)
            }
        }
    }

    @Test
    fun `a suspend method on a shadow bucket is never refused`() {
        runner.run { context ->
            val service = context.getBean(CoroutineService::class.java)
            runBlocking {
                repeat(3) { assertThat(service.watched()).isEqualTo("watched") }
            }
            assertThat(context.getBean("watched", RateLimiter::class.java).snapshot().granted()).isEqualTo(1)
        }
    }
}

@Configuration(proxyBeanMethods = false)
open class CoroutineConfiguration {

    @Bean
    open fun coroutineService() = CoroutineService()
}

open class CoroutineService {

    // open, so that the proxy's getter reads the target's field
    @Volatile
    open var started = 0

    @RateLimited("capped")
    open suspend fun hold(gate: CompletableDeferred<Unit>): String {
        started++
        gate.await()
        return "done"
    }

    @RateLimited(value = "hourly", fallback = "cachedQuote")
    open suspend fun quote(country: String): String {
        delay(1)
        return "live $country"
    }

    open suspend fun cachedQuote(country: String, refusal: RateLimitExceededException): String {
        delay(1)
        return "cached $country (${refusal.bucket} refused)"
    }

    @RateLimited("hourly")
    open suspend fun plain(): String = "plain"

    @RateLimited("capped")
    @RateLimited("hourly")
    open suspend fun both(): String {
        delay(1)
        return "both"
    }

    @RateLimited("watched")
    open suspend fun watched(): String = "watched"

    @RateLimited(value = "hourly", refundIf = "#result == 'free'")
    open suspend fun lookup(free: Boolean): String {
        delay(1)
        return if (free) "free" else "paid"
    }
}
