package dev.ratelimit.redis;

import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;

import io.lettuce.core.RedisFuture;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import io.lettuce.core.pubsub.api.async.RedisPubSubAsyncCommands;

/**
 * A Redis for tests that decide when each call of the bucket script is answered, or that it never is:
 * the real {@link ScriptConnection} over a Lettuce connection made of JDK proxies. Every call is kept
 * with its arguments; {@code tune}, {@code acquire} and {@code peek} calls wait for the test's answer,
 * {@code switch} too; the others (refund, leave, release...) are answered at once with zeros.
 */
final class FakeScriptRedis {

	/** One call of the script: its arguments and its reply, kept together (a test reads them while calls come). */
	private record Called(String[] arguments, CompletableFuture<List<Object>> reply) {
	}

	private final List<Called> calls = new CopyOnWriteArrayList<>();

	/** The channels the connection for wake-ups is subscribed to now ({@link #connectionWithPubSub()}). */
	private final Set<String> subscribed = ConcurrentHashMap.newKeySet();

	/** @return the channels subscribed to now, on the connection of {@link #connectionWithPubSub()} */
	Set<String> subscribed() {
		return this.subscribed;
	}

	/** A reply with {@code code} and zeros. */
	static List<Object> reply(long code) {
		return List.of(code, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L, 0L);
	}

	/** The replies to the calls in {@code mode}, in the order they were made. */
	List<CompletableFuture<List<Object>>> of(BucketScript.Mode mode) {
		List<CompletableFuture<List<Object>>> found = new ArrayList<>();
		for (Called call : this.calls) {
			if (call.arguments()[6].equals(mode.argument)) {
				found.add(call.reply());
			}
		}
		return found;
	}

	/** The arguments of the calls in {@code mode}, in the order they were made. */
	List<String[]> arguments(BucketScript.Mode mode) {
		return this.calls.stream().map(Called::arguments).filter((a) -> a[6].equals(mode.argument)).toList();
	}

	/**
	 * The bucket of key {@code alice} of template {@code t} (10 per second, limit 3, a timeout of an hour:
	 * only the tests answer), sharing {@code tune}, on {@code connection}.
	 */
	static RedisTokenBucketBuilder aliceOf(TemplateTune tune, ScriptConnection connection) {
		return RedisTokenBucket.builder()
			.name("t")
			.rate(10, Duration.ofSeconds(1))
			.limit(3)
			.timeout(Duration.ofHours(1))
			.connection(connection)
			.tune(tune)
			.perKey("alice");
	}

	ScriptConnection connection() {
		return connection(false);
	}

	/** A connection whose connection for wake-ups keeps the channels subscribed to in {@link #subscribed()}. */
	ScriptConnection connectionWithPubSub() {
		return connection(true);
	}

	@SuppressWarnings("unchecked")
	private ScriptConnection connection(boolean pubSub) {
		RedisAsyncCommands<String, String> commands = (RedisAsyncCommands<String, String>) Proxy.newProxyInstance(
				getClass().getClassLoader(), new Class<?>[] { RedisAsyncCommands.class }, (proxy, method, args) -> {
					if (method.getName().equals("evalsha")) {
						String[] called = (String[]) args[3];
						CompletableFuture<List<Object>> reply = new CompletableFuture<>();
						this.calls.add(new Called(called, reply));
						String mode = called[6];
						if (!mode.equals(BucketScript.Mode.TUNE.argument) && !mode.equals(BucketScript.Mode.ACQUIRE.argument)
								&& !mode.equals(BucketScript.Mode.PEEK.argument)
								&& !mode.equals(BucketScript.Mode.SWITCH.argument)) {
							reply.complete(reply(3));
						}
						return future(reply);
					}
					return defaultFor(proxy, method.getName(), method.getReturnType(), args);
				});
		StatefulRedisConnection<String, String> connection = (StatefulRedisConnection<String, String>) Proxy
			.newProxyInstance(getClass().getClassLoader(), new Class<?>[] { StatefulRedisConnection.class },
					(proxy, method, args) -> method.getName().equals("async") ? commands
							: defaultFor(proxy, method.getName(), method.getReturnType(), args));
		if (pubSub) {
			return new ScriptConnection(() -> (StatefulConnection<String, String>) connection, this::pubSub,
					"a fake Redis");
		}
		return new ScriptConnection(() -> (StatefulConnection<String, String>) connection, () -> {
			throw new UnsupportedOperationException("no pub/sub here");
		}, "a fake Redis");
	}

	@SuppressWarnings("unchecked")
	private StatefulRedisPubSubConnection<String, String> pubSub() {
		RedisPubSubAsyncCommands<String, String> commands = (RedisPubSubAsyncCommands<String, String>) Proxy
			.newProxyInstance(getClass().getClassLoader(), new Class<?>[] { RedisPubSubAsyncCommands.class },
					(proxy, method, args) -> {
						if (method.getName().equals("subscribe")) {
							this.subscribed.addAll(List.of((String[]) args[0]));
							return future(new CompletableFuture<>());
						}
						if (method.getName().equals("unsubscribe")) {
							List.of((String[]) args[0]).forEach(this.subscribed::remove);
							return future(new CompletableFuture<>());
						}
						return defaultFor(proxy, method.getName(), method.getReturnType(), args);
					});
		return (StatefulRedisPubSubConnection<String, String>) Proxy.newProxyInstance(getClass().getClassLoader(),
				new Class<?>[] { StatefulRedisPubSubConnection.class },
				(proxy, method, args) -> method.getName().equals("async") ? commands
						: defaultFor(proxy, method.getName(), method.getReturnType(), args));
	}

	private static <T> RedisFuture<T> future(CompletableFuture<T> reply) {
		@SuppressWarnings("unchecked")
		RedisFuture<T> future = (RedisFuture<T>) Proxy.newProxyInstance(
				FakeScriptRedis.class.getClassLoader(), new Class<?>[] { RedisFuture.class },
				(proxy, method, args) -> method.getName().equals("toCompletableFuture") ? reply
						: method.invoke(reply, args));
		return future;
	}

	static Object defaultFor(Object proxy, String name, Class<?> type, Object[] args) {
		return switch (name) {
			case "equals" -> proxy == args[0];
			case "hashCode" -> System.identityHashCode(proxy);
			case "toString" -> "fake";
			default -> (type == boolean.class) ? false : (type == long.class || type == int.class) ? 0 : null;
		};
	}
}
