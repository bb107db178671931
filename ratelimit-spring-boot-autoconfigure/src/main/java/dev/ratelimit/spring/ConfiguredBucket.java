package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.Consumer;
import java.util.function.ToLongFunction;

import dev.ratelimit.core.HybridRateLimiter;
import dev.ratelimit.core.RateLimiter;
import org.jspecify.annotations.Nullable;

/**
 * A configured bucket and its limiter; {@link #update} retunes the limiter in place.
 */
final class ConfiguredBucket implements RegisteredBucket {

	private final RateLimiter limiter;

	private final @Nullable BucketMaker maker;

	private volatile BucketDefinition definition;

	private volatile @Nullable KeyedBuckets keyed;

	private final List<Consumer<KeyedBuckets>> whenKeyed = new ArrayList<>();

	private volatile @Nullable ToLongFunction<@Nullable Object> heldBack;

	private final BucketStats stats;

	/** The plans in shadow mode (their {@code mode: shadow}). */
	private final Set<String> shadowPlans;

	/** The plans' settings in force, by name in configuration order (retunes replace the map); empty without plans. */
	private volatile Map<String, BucketDefinition> plans;

	/** The plans' settings as configured (a backend's record of a plan is made from them). */
	private final Map<String, BucketDefinition> configuredPlans;

	ConfiguredBucket(BucketDefinition definition, RateLimiter limiter, @Nullable BucketMaker maker, BucketStats stats) {
		this(definition, limiter, maker, stats, Map.of());
	}

	ConfiguredBucket(BucketDefinition definition, RateLimiter limiter, @Nullable BucketMaker maker, BucketStats stats,
			Map<String, BucketDefinition> plans) {
		this(definition, limiter, maker, stats, plans, Set.of());
	}

	ConfiguredBucket(BucketDefinition definition, RateLimiter limiter, @Nullable BucketMaker maker, BucketStats stats,
			Map<String, BucketDefinition> plans, Set<String> shadowPlans) {
		this.shadowPlans = Set.copyOf(shadowPlans);
		this.definition = definition;
		this.limiter = limiter;
		this.maker = maker;
		this.stats = stats;
		this.plans = Collections.unmodifiableMap(new LinkedHashMap<>(plans));
		this.configuredPlans = this.plans;
	}

	@Override
	public BucketStats stats() {
		return this.stats;
	}

	@Override
	public KeyedBuckets keyed() {
		KeyedBuckets keys = this.keyed;
		if (keys == null) {
			synchronized (this) {
				keys = this.keyed;
				if (keys == null) {
					keys = makeKeyed();
					this.keyed = keys;
					for (Consumer<KeyedBuckets> action : this.whenKeyed) {
						action.accept(keys);
					}
				}
			}
		}
		return keys;
	}

	private KeyedBuckets makeKeyed() {
		BucketDefinition template = this.definition;
		String name = template.name();
		if (this.maker == null) {
			throw new IllegalStateException("Bucket '" + name + "' was not made by the starter: it has no per-key buckets");
		}
		BucketDefinitions.checkUsableWithKey(template, "a key");
		BucketMaker make = this.maker;
		Map<String, @Nullable Duration> maxWaits = new LinkedHashMap<>();
		this.plans.forEach((plan, settings) -> maxWaits.put(plan, settings.maxWait()));
		// a key's bucket on a backend keeps its state there; what its object keeps here, the backend says (K7)
		BucketBackend backend = (template.backend() != Backend.LOCAL) ? make.backendOf(template) : null;
		return new KeyedBuckets(template.keysMax(), template.keysMemory(), true, make.clock(),
				new KeyMaker(template, make, backend), maxWaits);
	}

	/**
	 * Makes and keeps up to date the buckets of keys ({@link KeyedBuckets.Maker}): each with its plan's
	 * settings; on a backend, what a key's object keeps here is the backend's to say (K7).
	 */
	private final class KeyMaker implements KeyedBuckets.Maker {

		private final BucketDefinition template;

		private final BucketMaker make;

		private final @Nullable BucketBackend backend;

		KeyMaker(BucketDefinition template, BucketMaker make, @Nullable BucketBackend backend) {
			this.template = template;
			this.make = make;
			this.backend = backend;
		}

		@Override
		public RateLimiter make(@Nullable String plan, @Nullable Object key) {
			return this.make.createForKey(settingsOf(plan), key, known(plan));
		}

		@Override
		public void follow(@Nullable String plan, RateLimiter bucket) {
			BucketDefinition settings = settingsOf(plan);
			if (this.backend != null && this.backend.follow(bucket, settings, known(plan))) {
				return; // the backend keeps the plans' settings in force (a Redis token bucket's records)
			}
			bringUpToDate(bucket, settings);
			if (bucket instanceof HybridRateLimiter pacer && settings instanceof BucketDefinition.Hybrid hybrid) {
				pacer.updateBurstRatio((hybrid.burstRatio() != null) ? hybrid.burstRatio() : DEFAULT_BURST_RATIO);
			}
		}

		@Override
		public boolean keepsStateElsewhere() {
			return this.backend != null;
		}

		@Override
		public long untilFull(RateLimiter bucket) {
			return (this.backend != null) ? this.backend.untilFullHere(bucket)
					: KeyedBuckets.Maker.super.untilFull(bucket);
		}

		@Override
		public long entryBytes() {
			return (this.template instanceof BucketDefinition.Quota && this.backend == null)
					? KeyedBuckets.QUOTA_ENTRY_BYTES : KeyedBuckets.ENTRY_BYTES;
		}

		@Override
		public long countOf(RateLimiter bucket) {
			// a backend's key keeps its count there; what its object keeps here is a debt in time
			return (this.backend != null) ? -1 : KeyedBuckets.Maker.super.countOf(bucket);
		}

		@Override
		public void owe(@Nullable String plan, RateLimiter bucket, long ahead, boolean whole) {
			if (this.backend == null) {
				KeyedBuckets.Maker.super.owe(plan, bucket, ahead, whole);
				return;
			}
			// from the settings in force, not the bucket's view (which would ask the backend)
			BucketDefinition settings = settingsOf(plan);
			long limit = (settings instanceof BucketDefinition.Shared shared) ? shared.limit() : 1;
			long missing = KeyedBuckets.missing(settings.exactRate().tokens(), settings.exactRate().period(), limit,
					ahead, whole);
			if (missing > 0) {
				this.backend.owe(bucket, missing);
			}
		}
	}

	/** The pacer's burst ratio when none is configured (the core's default). */
	private static final double DEFAULT_BURST_RATIO = 1.1;

	/** The settings in force of a plan, or of the template for {@code null} (or a plan no longer known). */
	private BucketDefinition settingsOf(@Nullable String plan) {
		BucketDefinition settings = (plan != null) ? this.plans.get(plan) : null;
		return (settings != null) ? settings : this.definition;
	}

	/** The plan, or {@code null} for one not configured (the template's settings). */
	private @Nullable String known(@Nullable String plan) {
		return (plan != null && this.plans.containsKey(plan)) ? plan : null;
	}

	@Override
	public Map<String, BucketDefinition> plans() {
		return this.plans;
	}

	@Override
	public Set<String> shadowPlans() {
		return this.shadowPlans;
	}

	@Override
	public @Nullable RateLimitPlanResolver planResolver() {
		return (this.plans.isEmpty() || this.maker == null) ? null : this.maker.planResolver();
	}

	/**
	 * Retunes one plan (contract revision 3, "Plans"): its settings change, and every key's bucket on
	 * that plan takes them at once, as a template's retune does for the keys on the template (K5). The
	 * new settings are checked as the configuration checks them, by making a bucket with them; a
	 * refusal changes nothing. A backend that keeps its plans' settings (a Redis token bucket) retunes the
	 * plan there, for every instance, and checks them itself; when it cannot be reached nothing changes.
	 */
	@Override
	public synchronized void update(String plan, @Nullable BigDecimal rate, @Nullable Long limit) {
		BucketDefinition current = this.plans.get(plan);
		if (current == null) {
			throw new IllegalArgumentException("Bucket '" + name() + "' has no plan '" + plan + "'; "
					+ (this.plans.isEmpty() ? "it has no plans" : "its plans are " + String.join(", ", this.plans.keySet())));
		}
		BucketDefinition next;
		try {
			next = current.withRateAndLimit(rate, limit);
			if (!retunedOnBackend(plan, next, rate, limit) && this.maker != null) {
				this.maker.createForKey(next, null); // the builder checks the settings together
			}
		}
		catch (dev.ratelimit.core.BackendUnavailableException ex) {
			throw ex; // nothing changed: said as the template's retune says it
		}
		catch (RuntimeException ex) {
			throw new IllegalArgumentException("Plan '" + plan + "' of bucket '" + name() + "': " + ex.getMessage(), ex);
		}
		Map<String, BucketDefinition> changed = new LinkedHashMap<>(this.plans);
		changed.put(plan, next);
		this.plans = Collections.unmodifiableMap(changed);
		KeyedBuckets keys = this.keyed;
		if (keys != null) {
			keys.retuned(plan, nanosPerToken(current), nanosPerToken(next));
		}
	}

	/** Whether the bucket's backend keeps its plans' settings, and retuned {@code plan} there. */
	private boolean retunedOnBackend(String plan, BucketDefinition next, @Nullable BigDecimal rate,
			@Nullable Long limit) {
		BucketDefinition configured = this.configuredPlans.get(plan);
		if (this.maker == null || configured == null || next.backend() == Backend.LOCAL) {
			return false;
		}
		return this.maker.backendOf(next).retunePlan(configured, plan, (rate != null) ? next.exactRate() : null, limit);
	}

	/** Brings a key's bucket made from an older definition to the template's settings (K4). */
	private void bringUpToDate(RateLimiter bucket) {
		bringUpToDate(bucket, this.definition);
	}

	/**
	 * Brings a key's bucket to {@code current}'s settings, as a retune does: the rate first (the time
	 * that passed counts at the old rate), then the limit (tokens above it are dropped).
	 */
	private static void bringUpToDate(RateLimiter bucket, BucketDefinition current) {
		if (current instanceof BucketDefinition.Quota quota) {
			bucket.updateLimit(quota.limit()); // (a quota has no rate)
			return;
		}
		bucket.updateRate(current.exactRate().tokens(), current.exactRate().period());
		if (current instanceof BucketDefinition.Shared shared) {
			bucket.updateLimit(shared.limit());
		}
		else if (current instanceof BucketDefinition.Hybrid hybrid && hybrid.limit() != null) {
			bucket.updateLimit(hybrid.limit());
		}
	}

	@Override
	public void reset() {
		this.limiter.reset();
		KeyedBuckets keys = this.keyed;
		if (keys != null) {
			keys.reset();
		}
	}

	@Override
	public long heldBackTo(@Nullable Object key) {
		ToLongFunction<@Nullable Object> level = this.heldBack;
		return (level != null) ? level.applyAsLong(key) : Long.MAX_VALUE;
	}

	@Override
	public void holdBackBy(ToLongFunction<@Nullable Object> level) {
		this.heldBack = level;
	}

	@Override
	public void whenKeyed(Consumer<KeyedBuckets> action) {
		KeyedBuckets keys;
		synchronized (this) {
			keys = this.keyed;
			if (keys == null) {
				this.whenKeyed.add(action);
				return;
			}
		}
		action.accept(keys);
	}

	@Override
	public int keys() {
		KeyedBuckets keys = this.keyed;
		return (keys != null) ? keys.size() : 0;
	}

	@Override
	public double keysLoad() {
		KeyedBuckets keys = this.keyed;
		return (keys != null) ? keys.load() : 0;
	}

	private static double nanosPerToken(BucketDefinition definition) {
		return (double) definition.exactRate().period().toNanos() / definition.exactRate().tokens();
	}

	@Override
	public String name() {
		return this.definition.name();
	}

	@Override
	public String type() {
		return this.definition.type().value();
	}

	@Override
	public String backend() {
		return this.definition.backend().value();
	}

	@Override
	public BigDecimal rate() {
		return this.definition.rate();
	}

	@Override
	public Duration period() {
		return this.definition.period();
	}

	@Override
	public Duration maxWait() {
		return this.definition.maxWait();
	}

	@Override
	public RateLimiter limiter() {
		return this.limiter;
	}

	/**
	 * The definition in force, changed by {@link #update}.
	 *
	 * @return the definition
	 */
	BucketDefinition definition() {
		return this.definition;
	}

	/**
	 * Retunes the limiter: {@code updateLimit} and {@code updateRate} (the time that passed is counted
	 * at the old rate first); waiters keep their place. The limiter checks the values (one place per
	 * rule); a refusal changes nothing and is said in the configuration's words.
	 */
	@Override
	public synchronized void update(@Nullable BigDecimal rate, @Nullable Long limit) {
		BucketDefinition current = this.definition;
		BucketDefinition next;
		try {
			next = current.withRateAndLimit(rate, limit);
		}
		catch (RateLimitConfigurationException ex) {
			throw new IllegalArgumentException(ex.getMessage(), ex);
		}
		// the limit to put back if the rate is refused after the limit changed (a snapshot only then)
		long before = (limit != null && rate != null) ? (long) this.limiter.snapshot().limit() : 0;
		try {
			if (limit != null) {
				this.limiter.updateLimit(limit);
			}
			if (rate != null) {
				this.limiter.updateRate(next.exactRate().tokens(), next.exactRate().period());
			}
		}
		catch (IllegalArgumentException ex) {
			if (before >= 1 && limit != before) {
				this.limiter.updateLimit(before);
			}
			throw new IllegalArgumentException(CoreArguments.translate(next, ex).getMessage(), ex);
		}
		this.definition = next;
		KeyedBuckets keys = this.keyed;
		if (keys != null) {
			keys.retuned(nanosPerToken(current), nanosPerToken(next));
		}
	}

	@Override
	public String toString() {
		return "RegisteredBucket[" + name() + ", " + type() + ", " + rate() + " per " + period() + "]";
	}
}
