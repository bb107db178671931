package dev.ratelimit.spring;

import java.time.InstantSource;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongSupplier;

import dev.ratelimit.core.RateLimiter;
import dev.ratelimit.core.StatsRecorder;
import org.jspecify.annotations.Nullable;

import org.springframework.beans.factory.ListableBeanFactory;

/**
 * Makes the limiters of configured buckets: the bucket's own, and for a bucket used with a key, each
 * key's and the overflow bucket, all counting their calls in the bucket's one statistics recorder (so
 * the meters, tagged by bucket only, add every key up).
 */
final class BucketMaker {

	static final String BEAN_NAME = "rateLimitBucketMaker";

	private final ListableBeanFactory beanFactory;

	private final Map<String, BucketStats> stats = new ConcurrentHashMap<>();

	/** The clock and the backends, looked up once (a new key's bucket must not search the context). */
	private volatile @Nullable LongSupplier clock;

	private volatile @Nullable InstantSource wallClock;

	private volatile @Nullable List<BucketBackend> backends;

	BucketMaker(ListableBeanFactory beanFactory) {
		this.beanFactory = beanFactory;
	}

	RateLimiter create(BucketDefinition definition) {
		return BucketFactory.create(definition, stats(definition), clock(), wallClock(), backends());
	}

	/**
	 * One key's bucket (or the overflow bucket, for a {@code null} key), counting in the template's
	 * statistics.
	 */
	RateLimiter createForKey(BucketDefinition definition, @Nullable Object key) {
		return BucketFactory.createForKey(definition, stats(definition), clock(), wallClock(), backends(),
				(key != null) ? String.valueOf(key) : null);
	}

	/**
	 * One key's bucket on a plan (contract revision 3, "Plans"), or on the template's settings for a
	 * {@code null} plan, counting in the template's statistics; the overflow bucket for a {@code null} key.
	 */
	RateLimiter createForKey(BucketDefinition definition, @Nullable Object key, @Nullable String plan) {
		if (key == null) {
			return createForKey(definition, null);
		}
		return BucketFactory.createForKey(definition, stats(definition), clock(), wallClock(), backends(),
				String.valueOf(key), plan);
	}

	/**
	 * The backend that makes the buckets of a bucket that is not local (its keys' included).
	 */
	BucketBackend backendOf(BucketDefinition definition) {
		return BucketFactory.backendFor(definition, backends());
	}

	/**
	 * The bucket's one statistics recorder, which also holds its mode.
	 */
	BucketStats stats(BucketDefinition definition) {
		return this.stats.computeIfAbsent(definition.name(), (name) -> {
			BucketDefinitions definitions = this.beanFactory.getBean(RateLimitBucketRegistrar.DEFINITIONS_BEAN_NAME,
					BucketDefinitions.class);
			StatsRecorder counts = this.beanFactory.getBean(BucketStatsFactory.class).create(name);
			BucketStats stats = new BucketStats(counts, definitions.mode(name), definitions.allShadow());
			stats.observeWith(this.beanFactory.getBeanProvider(WaitObserver.class).getIfAvailable(() -> WaitObserver.NONE));
			return stats;
		});
	}

	LongSupplier clock() {
		LongSupplier nanos = this.clock;
		if (nanos == null) {
			RateLimitClock clock = this.beanFactory.getBeanProvider(RateLimitClock.class)
				.getIfAvailable(() -> System::nanoTime);
			nanos = clock::nanoTime;
			this.clock = nanos;
		}
		return nanos;
	}

	/**
	 * The wall clock of calendar quotas: the application's {@link InstantSource} bean (tests move it),
	 * by default the system's.
	 */
	private InstantSource wallClock() {
		InstantSource source = this.wallClock;
		if (source == null) {
			source = this.beanFactory.getBeanProvider(InstantSource.class).getIfAvailable(InstantSource::system);
			this.wallClock = source;
		}
		return source;
	}

	/**
	 * The application's plan resolver (contract revision 3, "Plans"), or {@code null} when it defines
	 * none.
	 */
	@Nullable RateLimitPlanResolver planResolver() {
		return this.beanFactory.getBeanProvider(RateLimitPlanResolver.class).getIfAvailable();
	}

	private List<BucketBackend> backends() {
		List<BucketBackend> found = this.backends;
		if (found == null) {
			found = this.beanFactory.getBeanProvider(BucketBackend.class).orderedStream().toList();
			this.backends = found;
		}
		return found;
	}
}
