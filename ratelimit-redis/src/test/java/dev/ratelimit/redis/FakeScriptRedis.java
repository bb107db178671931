package dev.ratelimit.redis;

import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;

import io.lettuce.core.RedisFuture;
import io.lettuce.core.api.StatefulConnection;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;

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
	static RedisTokenBucket.Builder aliceOf(TemplateTune tune, ScriptConnection connection) {
		return RedisTokenBucket.builder()
			.name("t")
			.rate(10, Duration.ofSeconds(1))
			.limit(3)
			.timeout(Duration.ofHours(1))
			.connection(connection)
			.tune(tune)
			.perKey("alice");
	}

	@SuppressWarnings("unchecked")
	ScriptConnection connection() {
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
		return new ScriptConnection(() -> (StatefulConnection<String, String>) connection, () -> {
			throw new UnsupportedOperationException("no pub/sub here");
		}, "a fake Redis");
	}

	private static RedisFuture<List<Object>> future(CompletableFuture<List<Object>> reply) {
		@SuppressWarnings("unchecked")
		RedisFuture<List<Object>> future = (RedisFuture<List<Object>>) Proxy.newProxyInstance(
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
