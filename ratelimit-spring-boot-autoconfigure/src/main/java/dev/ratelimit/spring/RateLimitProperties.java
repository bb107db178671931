package dev.ratelimit.spring;

import java.math.BigDecimal;
import java.time.Duration;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import dev.ratelimit.core.QuotaCalendar;
import org.jspecify.annotations.Nullable;
import org.springframework.util.unit.DataSize;

import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.core.Ordered;

/**
 * Configuration of the ratelimit starter: the buckets, by name, that {@code @RateLimited} methods
 * take their tokens from.
 *
 * <pre>{@code
 * ratelimit:
 *   buckets:
 *     db-writes:
 *       rate: 500
 *       limit: 100
 *       capped-release: true
 * }</pre>
 */
@ConfigurationProperties("ratelimit")
public class RateLimitProperties {

	/** The order of the interceptor the starter puts around {@code @RateLimited} methods. */
	public static final int DEFAULT_INTERCEPTOR_ORDER = Ordered.LOWEST_PRECEDENCE - 100;

	/**
	 * Whether the starter is on: buckets, the @RateLimited interceptor, meters and the endpoint.
	 */
	private boolean enabled = true;

	/**
	 * Order of the @RateLimited interceptor among other advice; lower runs outside. The default runs
	 * outside @Transactional (whose default order is the lowest precedence), so capped-release tokens
	 * come back after the transaction completes.
	 */
	private int interceptorOrder = DEFAULT_INTERCEPTOR_ORDER;

	/**
	 * Buckets by name, as @RateLimited("name") refers to them.
	 */
	private Map<String, Bucket> buckets = new LinkedHashMap<>();

	/**
	 * Mode of every bucket: shadow puts every bucket in shadow mode (it decides but never holds a call
	 * back), whatever the bucket's own mode says; enforce (the default) leaves each bucket's mode.
	 */
	private BucketMode mode = BucketMode.ENFORCE;

	private final HealthSettings health = new HealthSettings();

	private final Web web = new Web();

	private final Clients clients = new Clients();

	private final ExecutorSettings executor = new ExecutorSettings();

	public boolean isEnabled() {
		return this.enabled;
	}

	public void setEnabled(boolean enabled) {
		this.enabled = enabled;
	}

	public int getInterceptorOrder() {
		return this.interceptorOrder;
	}

	public void setInterceptorOrder(int interceptorOrder) {
		this.interceptorOrder = interceptorOrder;
	}

	public BucketMode getMode() {
		return this.mode;
	}

	public void setMode(BucketMode mode) {
		this.mode = mode;
	}

	public Map<String, Bucket> getBuckets() {
		return this.buckets;
	}

	public void setBuckets(Map<String, Bucket> buckets) {
		this.buckets = buckets;
	}

	public HealthSettings getHealth() {
		return this.health;
	}

	public Web getWeb() {
		return this.web;
	}

	public Clients getClients() {
		return this.clients;
	}

	public ExecutorSettings getExecutor() {
		return this.executor;
	}

	/**
	 * The threads on which CompletionStage methods that had to wait for their tokens run (an Executor
	 * bean named rateLimitTaskExecutor replaces them).
	 */
	public static class ExecutorSettings {

		/**
		 * Most threads running delayed calls at once; 0 (the default) makes them as needed, and idle ones
		 * end after a minute. Calls beyond the most wait in line for a thread.
		 */
		private int maxThreads;

		/**
		 * Whether delayed calls run on virtual threads, one per call (needs Java 21 or later).
		 */
		private boolean virtualThreads;

		/**
		 * Whether a delayed call runs with the caller's context (MDC, security, observation: every
		 * ThreadLocalAccessor registered with Micrometer's ContextRegistry), when
		 * io.micrometer:context-propagation is on the class path.
		 */
		private boolean propagateContext = true;

		public int getMaxThreads() {
			return this.maxThreads;
		}

		public void setMaxThreads(int maxThreads) {
			this.maxThreads = maxThreads;
		}

		public boolean isVirtualThreads() {
			return this.virtualThreads;
		}

		public void setVirtualThreads(boolean virtualThreads) {
			this.virtualThreads = virtualThreads;
		}

		public boolean isPropagateContext() {
			return this.propagateContext;
		}

		public void setPropagateContext(boolean propagateContext) {
			this.propagateContext = propagateContext;
		}
	}

	/**
	 * How refusals are answered over HTTP.
	 */
	public static class Web {

		/**
		 * Whether the 429's problem detail carries the refused call's key (a per-key bucket's value).
		 * Off by default: keys may be personal data (user ids, IP addresses).
		 */
		private boolean exposeKey;

		/**
		 * Rate-limit headers: retry-after (Retry-After on a 429 only), ietf (also the IETF draft's
		 * RateLimit-Policy and RateLimit fields on every limited response, and violated-policies in the
		 * 429's problem detail) or none (no header at all, Retry-After included).
		 */
		private WebHeaders headers = WebHeaders.RETRY_AFTER;

		/**
		 * Limits on HTTP requests by URL pattern, tried in order; every matching rule applies.
		 */
		private List<Rule> rules = new ArrayList<>();

		public boolean isExposeKey() {
			return this.exposeKey;
		}

		public void setExposeKey(boolean exposeKey) {
			this.exposeKey = exposeKey;
		}

		public WebHeaders getHeaders() {
			return this.headers;
		}

		public void setHeaders(WebHeaders headers) {
			this.headers = headers;
		}

		public List<Rule> getRules() {
			return this.rules;
		}

		public void setRules(List<Rule> rules) {
			this.rules = rules;
		}
	}

	/**
	 * Limits on the HTTP calls the application makes (RestClient, RestTemplate, WebClient and HTTP
	 * interface clients built from the auto-configured builders), contract revision 3.
	 */
	public static class Clients {

		/**
		 * Whether limited calls obey what the servers answer: a 429 or 503 with Retry-After pauses the
		 * rule's bucket, and the IETF RateLimit, X-RateLimit-* and x-ratelimit-*-requests fields lower it
		 * until their reset.
		 */
		private boolean listen = true;

		/**
		 * Longest pause or reset a server's answer is obeyed for; a longer one counts as this long.
		 */
		private Duration maxPause = Duration.ofHours(1);

		/**
		 * Limits on outbound calls by host (and optionally path and method); every matching rule applies.
		 */
		private List<ClientRule> rules = new ArrayList<>();

		public boolean isListen() {
			return this.listen;
		}

		public void setListen(boolean listen) {
			this.listen = listen;
		}

		public Duration getMaxPause() {
			return this.maxPause;
		}

		public void setMaxPause(Duration maxPause) {
			this.maxPause = maxPause;
		}

		public List<ClientRule> getRules() {
			return this.rules;
		}

		public void setRules(List<ClientRule> rules) {
			this.rules = rules;
		}
	}

	/**
	 * One outbound rule: the calls it matches and the bucket they take from.
	 */
	public static class ClientRule {

		/**
		 * Hosts the rule limits, matched case-insensitively; * matches one label or more (*.partner.net);
		 * without the port unless the pattern names one (api.partner.com:8443); required.
		 */
		private List<String> hosts = new ArrayList<>();

		/**
		 * Spring PathPattern patterns of the paths the rule limits, e.g. /v1/**; empty (the default) for
		 * every path.
		 */
		private List<String> paths = new ArrayList<>();

		/**
		 * HTTP methods the rule limits (GET, POST, ...); empty (the default) for every method.
		 */
		private List<String> methods = new ArrayList<>();

		/**
		 * The bucket the matching calls take from; required, a configured bucket of any type.
		 */
		private @Nullable String bucket;

		/**
		 * One bucket per key: host (the host in lower case, without the port) or a SpEL expression over
		 * #request (the outgoing request, Spring's HttpRequest). Empty (the default): the bucket itself.
		 */
		private @Nullable String key;

		/**
		 * Tokens a matching call takes.
		 */
		private long cost = 1;

		public List<String> getHosts() {
			return this.hosts;
		}

		public void setHosts(List<String> hosts) {
			this.hosts = hosts;
		}

		public List<String> getPaths() {
			return this.paths;
		}

		public void setPaths(List<String> paths) {
			this.paths = paths;
		}

		public List<String> getMethods() {
			return this.methods;
		}

		public void setMethods(List<String> methods) {
			this.methods = methods;
		}

		public @Nullable String getBucket() {
			return this.bucket;
		}

		public void setBucket(@Nullable String bucket) {
			this.bucket = bucket;
		}

		public @Nullable String getKey() {
			return this.key;
		}

		public void setKey(@Nullable String key) {
			this.key = key;
		}

		public long getCost() {
			return this.cost;
		}

		public void setCost(long cost) {
			this.cost = cost;
		}
	}

	/**
	 * One web rule: the requests it matches and the bucket they take from.
	 */
	public static class Rule {

		/**
		 * Spring PathPattern patterns of the paths the rule limits, e.g. /api/**; required.
		 */
		private List<String> paths = new ArrayList<>();

		/**
		 * HTTP methods the rule limits (GET, POST, ...); empty (the default) for every method.
		 */
		private List<String> methods = new ArrayList<>();

		/**
		 * The bucket the matching requests take from; required, a configured bucket.
		 */
		private @Nullable String bucket;

		/**
		 * One bucket per key: ip (the remote address, IPv6 by its /64), principal (the authenticated
		 * user's name), header:<Name> (the header's value), or a SpEL expression over #request. A
		 * request without the header, or anonymous under principal, shares the key "" (empty). Empty
		 * (the default): the bucket itself.
		 */
		private @Nullable String key;

		/**
		 * The key's plan, for a bucket with plans, in the same forms as key: ip, principal, header:<Name>
		 * or a SpEL expression over #request; a request without the header (or null) gets the bucket's own
		 * settings. Empty (the default): the application's RateLimitPlanResolver, if any.
		 */
		private @Nullable String plan;

		/**
		 * Tokens a matching request takes.
		 */
		private long cost = 1;

		public List<String> getPaths() {
			return this.paths;
		}

		public void setPaths(List<String> paths) {
			this.paths = paths;
		}

		public List<String> getMethods() {
			return this.methods;
		}

		public void setMethods(List<String> methods) {
			this.methods = methods;
		}

		public @Nullable String getBucket() {
			return this.bucket;
		}

		public void setBucket(@Nullable String bucket) {
			this.bucket = bucket;
		}

		public @Nullable String getKey() {
			return this.key;
		}

		public void setKey(@Nullable String key) {
			this.key = key;
		}

		public @Nullable String getPlan() {
			return this.plan;
		}

		public void setPlan(@Nullable String plan) {
			this.plan = plan;
		}

		public long getCost() {
			return this.cost;
		}

		public void setCost(long cost) {
			this.cost = cost;
		}
	}

	/**
	 * Settings of the ratelimits health contributor.
	 */
	public static class HealthSettings {

		/**
		 * Health status reported while a bucket runs on its failure policy because its backend does not
		 * answer. UP by default, so that a Redis outage does not take the application out of a load
		 * balancer unless asked; DOWN or OUT_OF_SERVICE to make it.
		 */
		private String backendDownStatus = "UP";

		public String getBackendDownStatus() {
			return this.backendDownStatus;
		}

		public void setBackendDownStatus(String backendDownStatus) {
			this.backendDownStatus = backendDownStatus;
		}
	}

	/**
	 * One bucket. Properties that apply to one type only are rejected on the other.
	 */
	public static class Bucket {

		/**
		 * Kind of limiter: shared (the rover token bucket, bursts up to limit), hybrid (the three-pool
		 * pacer that holds a schedule) or quota (a fixed allowance of limit tokens per calendar period).
		 */
		private BucketType type = BucketType.SHARED;

		/**
		 * Tokens (hybrid: operations) per period; > 0, fractions allowed (0.5 per 1s is 1 per 2s).
		 */
		private @Nullable BigDecimal rate;

		/**
		 * Period of the rate.
		 */
		private Duration period = Duration.ofSeconds(1);

		/**
		 * Shared: most tokens banked, the largest burst (default one period's rate, at least 1). Hybrid:
		 * the active pool in operations (default the larger of 1 ms of operations and 2). Quota (required):
		 * the tokens of each calendar period, all there at its start.
		 */
		private @Nullable Long limit;

		/**
		 * Quota only (required): the calendar period whose boundaries refill it: minute, hour, day, week
		 * (from Monday), month or year.
		 */
		private QuotaCalendar.@Nullable Unit calendar;

		/**
		 * Quota only: the time zone of the calendar, e.g. Europe/Berlin (default UTC).
		 */
		private @Nullable ZoneId zone;

		/** Whether the period was set (a quota refuses it; its default does not count). */
		private boolean periodSet;

		/**
		 * Shared only: tokens available at start, 0 to limit (default limit, a full bucket).
		 */
		private @Nullable Long initial;

		/**
		 * Shared only: whether tokens return only when guarded calls complete, making the limit a bound
		 * on calls in flight too (default false).
		 */
		private @Nullable Boolean cappedRelease;

		/**
		 * Longest a caller waits for tokens before it is refused; 0 never waits.
		 */
		private Duration maxWait = Duration.ofSeconds(1);

		/**
		 * Hybrid only: how fast callers may catch up while behind schedule, as a multiple of the rate;
		 * >= 1.0, 1.0 never catches up (default 1.1).
		 */
		private @Nullable Double burstRatio;

		/**
		 * Hybrid only: the most schedule time the pacer catches up after callers fell behind (after an
		 * idle hour, it runs at rate * burst-ratio for at most max-backlog / (burst-ratio - 1), then at
		 * rate); the whole lag is still reported. Default: no bound.
		 */
		private @Nullable Duration maxBacklog;

		/**
		 * Where the bucket's state lives: local (in this JVM) or redis (shared by every instance, needs
		 * ratelimit-redis and a RedisConnectionFactory).
		 */
		private Backend backend = Backend.LOCAL;

		/**
		 * Settings of the redis backend.
		 */
		private final Redis redis = new Redis();

		private final Keys keys = new Keys();

		/**
		 * Per-key settings by customer plan (keyed buckets only): a key whose call names a plan gets that
		 * plan's settings, what the plan does not set coming from this bucket; other keys get this
		 * bucket's.
		 */
		private Map<String, Plan> plans = new LinkedHashMap<>();

		/**
		 * enforce (the default): the bucket holds calls back; shadow: it decides as usual but never
		 * holds a call back, counting what it would have refused as shadow-rejected.
		 */
		private BucketMode mode = BucketMode.ENFORCE;

		public BucketMode getMode() {
			return this.mode;
		}

		public void setMode(BucketMode mode) {
			this.mode = mode;
		}

		public BucketType getType() {
			return this.type;
		}

		public void setType(BucketType type) {
			this.type = type;
		}

		public @Nullable BigDecimal getRate() {
			return this.rate;
		}

		public void setRate(@Nullable BigDecimal rate) {
			this.rate = rate;
		}

		public Duration getPeriod() {
			return this.period;
		}

		public void setPeriod(Duration period) {
			this.period = period;
			this.periodSet = true;
		}

		/**
		 * Whether {@code period} was set rather than left at its default.
		 *
		 * @return {@code true} when it was set
		 */
		boolean isPeriodSet() {
			return this.periodSet;
		}

		public QuotaCalendar.@Nullable Unit getCalendar() {
			return this.calendar;
		}

		public void setCalendar(QuotaCalendar.@Nullable Unit calendar) {
			this.calendar = calendar;
		}

		public @Nullable ZoneId getZone() {
			return this.zone;
		}

		public void setZone(@Nullable ZoneId zone) {
			this.zone = zone;
		}

		public @Nullable Long getLimit() {
			return this.limit;
		}

		public void setLimit(@Nullable Long limit) {
			this.limit = limit;
		}

		public @Nullable Long getInitial() {
			return this.initial;
		}

		public void setInitial(@Nullable Long initial) {
			this.initial = initial;
		}

		public @Nullable Boolean getCappedRelease() {
			return this.cappedRelease;
		}

		public void setCappedRelease(@Nullable Boolean cappedRelease) {
			this.cappedRelease = cappedRelease;
		}

		public Duration getMaxWait() {
			return this.maxWait;
		}

		public void setMaxWait(Duration maxWait) {
			this.maxWait = maxWait;
		}

		public @Nullable Double getBurstRatio() {
			return this.burstRatio;
		}

		public void setBurstRatio(@Nullable Double burstRatio) {
			this.burstRatio = burstRatio;
		}

		public @Nullable Duration getMaxBacklog() {
			return this.maxBacklog;
		}

		public void setMaxBacklog(@Nullable Duration maxBacklog) {
			this.maxBacklog = maxBacklog;
		}

		public Backend getBackend() {
			return this.backend;
		}

		public void setBackend(Backend backend) {
			this.backend = backend;
		}

		public Redis getRedis() {
			return this.redis;
		}

		public Keys getKeys() {
			return this.keys;
		}

		public Map<String, Plan> getPlans() {
			return this.plans;
		}

		public void setPlans(Map<String, Plan> plans) {
			this.plans = plans;
		}
	}

	/**
	 * One plan of a keyed bucket (contract revision 3, "Plans"): the settings of the keys on it. What it
	 * does not set comes from the bucket.
	 */
	public static class Plan {

		/**
		 * Tokens (hybrid: operations) per period for keys on this plan; > 0, fractions allowed. Default:
		 * the bucket's.
		 */
		private @Nullable BigDecimal rate;

		/**
		 * Period of the plan's rate. Default: the bucket's.
		 */
		private @Nullable Duration period;

		/**
		 * Most tokens a key on this plan banks (hybrid: its active pool; quota: its tokens per calendar
		 * period). Default: the bucket's when the plan keeps the bucket's rate, else one period of the
		 * plan's rate.
		 */
		private @Nullable Long limit;

		/**
		 * Longest a call of a key on this plan waits for tokens; 0 never waits. Default: the bucket's.
		 */
		private @Nullable Duration maxWait;

		/**
		 * Hybrid only: how fast a key on this plan catches up while behind schedule, >= 1.0. Default: the
		 * bucket's.
		 */
		private @Nullable Double burstRatio;

		/**
		 * Shared only: whether tokens return only when guarded calls complete, for keys whose bucket is made
		 * on this plan; on a Redis token bucket, the bucket's for every plan. Default: the bucket's.
		 */
		private @Nullable Boolean cappedRelease;

		/**
		 * Hybrid only: the most schedule time a key's pacer made on this plan catches up. Default: the
		 * bucket's.
		 */
		private @Nullable Duration maxBacklog;

		/**
		 * Quota only: the calendar period of quotas made on this plan. Default: the bucket's.
		 */
		private QuotaCalendar.@Nullable Unit calendar;

		/**
		 * Quota only: the time zone of the calendar of quotas made on this plan. Default: the bucket's.
		 */
		private @Nullable ZoneId zone;

		/**
		 * shadow: calls of keys on this plan are decided but never held back (as a bucket in shadow mode);
		 * enforce (or unset): the bucket's mode.
		 */
		private @Nullable BucketMode mode;

		/**
		 * Redis settings of keys' buckets made on this plan; each unset one is the bucket's.
		 */
		private final PlanRedis redis = new PlanRedis();

		public @Nullable Boolean getCappedRelease() {
			return this.cappedRelease;
		}

		public void setCappedRelease(@Nullable Boolean cappedRelease) {
			this.cappedRelease = cappedRelease;
		}

		public @Nullable Duration getMaxBacklog() {
			return this.maxBacklog;
		}

		public void setMaxBacklog(@Nullable Duration maxBacklog) {
			this.maxBacklog = maxBacklog;
		}

		public QuotaCalendar.@Nullable Unit getCalendar() {
			return this.calendar;
		}

		public void setCalendar(QuotaCalendar.@Nullable Unit calendar) {
			this.calendar = calendar;
		}

		public @Nullable ZoneId getZone() {
			return this.zone;
		}

		public void setZone(@Nullable ZoneId zone) {
			this.zone = zone;
		}

		public @Nullable BucketMode getMode() {
			return this.mode;
		}

		public void setMode(@Nullable BucketMode mode) {
			this.mode = mode;
		}

		public PlanRedis getRedis() {
			return this.redis;
		}

		public @Nullable BigDecimal getRate() {
			return this.rate;
		}

		public void setRate(@Nullable BigDecimal rate) {
			this.rate = rate;
		}

		public @Nullable Duration getPeriod() {
			return this.period;
		}

		public void setPeriod(@Nullable Duration period) {
			this.period = period;
		}

		public @Nullable Long getLimit() {
			return this.limit;
		}

		public void setLimit(@Nullable Long limit) {
			this.limit = limit;
		}

		public @Nullable Duration getMaxWait() {
			return this.maxWait;
		}

		public void setMaxWait(@Nullable Duration maxWait) {
			this.maxWait = maxWait;
		}

		public @Nullable Double getBurstRatio() {
			return this.burstRatio;
		}

		public void setBurstRatio(@Nullable Double burstRatio) {
			this.burstRatio = burstRatio;
		}
	}

	/**
	 * Per-key buckets made from a bucket used with a key.
	 */
	public static class Keys {

		/**
		 * Most keys with a bucket of their own at once (revision 2); beyond it, new keys share one
		 * overflow bucket until a key's bucket is full again and can be dropped. Not set by default: the
		 * memory alone bounds the keys, and no bucket is shared.
		 */
		private @Nullable Integer max;

		/**
		 * Most memory the keys' buckets take, from 1MB to 64MB; a live key is charged 700 bytes plus
		 * 2 per character (at most 64: a longer key is held by its digest), a forgotten one 16 bytes.
		 */
		private DataSize memory = DataSize.ofMegabytes(64);

		public @Nullable Integer getMax() {
			return this.max;
		}

		public void setMax(@Nullable Integer max) {
			this.max = max;
		}

		public DataSize getMemory() {
			return this.memory;
		}

		public void setMemory(DataSize memory) {
			this.memory = memory;
		}
	}

	/**
	 * Redis settings of a plan: each one it does not set is the bucket's.
	 */
	public static class PlanRedis {

		/**
		 * Prefix of the keys' hashes made on this plan (a quota's); on a Redis token bucket, the bucket's for
		 * every plan (a key keeps one hash, so an upgrade keeps its tokens). Default: the bucket's.
		 */
		private @Nullable String keyPrefix;

		/**
		 * Longest a call of a key on this plan waits for Redis. Default: the bucket's.
		 */
		private @Nullable Duration timeout;

		/**
		 * What a call of a key on this plan does when Redis does not answer: allow, deny or local.
		 * Default: the bucket's.
		 */
		private @Nullable OnFailure onFailure;

		/**
		 * Capped release: the longest a call's tokens are held, for keys on this plan. Default: the bucket's.
		 */
		private @Nullable Duration lease;

		public @Nullable String getKeyPrefix() {
			return this.keyPrefix;
		}

		public void setKeyPrefix(@Nullable String keyPrefix) {
			this.keyPrefix = keyPrefix;
		}

		public @Nullable Duration getTimeout() {
			return this.timeout;
		}

		public void setTimeout(@Nullable Duration timeout) {
			this.timeout = timeout;
		}

		public @Nullable OnFailure getOnFailure() {
			return this.onFailure;
		}

		public void setOnFailure(@Nullable OnFailure onFailure) {
			this.onFailure = onFailure;
		}

		public @Nullable Duration getLease() {
			return this.lease;
		}

		public void setLease(@Nullable Duration lease) {
			this.lease = lease;
		}
	}

	/**
	 * Settings of a bucket on Redis.
	 */
	public static class Redis {

		/**
		 * Prefix of every key the bucket writes; the key is the prefix then {bucket-name}.
		 */
		private String keyPrefix = "ratelimit:";

		/**
		 * Longest a call waits for Redis, connecting included, before the on-failure policy applies.
		 */
		private Duration timeout = Duration.ofMillis(100);

		/**
		 * What a call does when Redis does not answer in time: allow (let it through), deny (refuse it)
		 * or local (limit it with an in-memory bucket of the same rate and limit).
		 */
		private OnFailure onFailure = OnFailure.LOCAL;

		/**
		 * Capped release: the longest a call's tokens are held. Tokens not released within it (the
		 * instance died, the release was lost) come back, and a release after that changes nothing.
		 */
		private Duration lease = Duration.ofMinutes(1);

		/**
		 * Batches: none (one Redis call per grant), auto (as many tokens at a time as this instance's callers
		 * took in the last batch-hold, at least 1, at most half the limit) or a whole number from 1 to the limit
		 * of tokens taken from Redis at a time and granted here.
		 */
		private String batch = "none";

		/**
		 * The longest this instance keeps tokens of a batch unused before it gives them back to Redis.
		 */
		private Duration batchHold = Duration.ofMillis(100);

		public String getBatch() {
			return this.batch;
		}

		public void setBatch(String batch) {
			this.batch = batch;
		}

		public Duration getBatchHold() {
			return this.batchHold;
		}

		public void setBatchHold(Duration batchHold) {
			this.batchHold = batchHold;
		}

		public Duration getLease() {
			return this.lease;
		}

		public void setLease(Duration lease) {
			this.lease = lease;
		}

		public String getKeyPrefix() {
			return this.keyPrefix;
		}

		public void setKeyPrefix(String keyPrefix) {
			this.keyPrefix = keyPrefix;
		}

		public Duration getTimeout() {
			return this.timeout;
		}

		public void setTimeout(Duration timeout) {
			this.timeout = timeout;
		}

		public OnFailure getOnFailure() {
			return this.onFailure;
		}

		public void setOnFailure(OnFailure onFailure) {
			this.onFailure = onFailure;
		}
	}
}
