package dev.ratelimit.spring.client;

import dev.ratelimit.spring.RegisteredBucket;
import org.jspecify.annotations.Nullable;

/**
 * Where the servers' word about a bucket's outbound calls is kept when the bucket's state is shared by
 * several instances (contract revision 3: "on a Redis bucket the pause and the lowering are written to
 * the bucket's hash, so every instance's next call after the answer sees them"). A backend module
 * defines one as a bean; the outbound rules ask it once per bucket, and once per key of a keyed bucket.
 * Without one, or for a bucket it does not keep, the gate is this JVM's ({@link ServerGate}).
 *
 * <pre>{@code
 * @Bean
 * SharedGates gates() {
 *     return (bucket, key) -> bucket.backend().equals("redis") ? new MyStoredGate(bucket.name(), key) : null;
 * }
 * }</pre>
 */
@FunctionalInterface
public interface SharedGates {

	/**
	 * The gate of a bucket, or of one key's bucket.
	 *
	 * @param bucket the bucket a rule takes from
	 * @param key the call's key, or {@code null} for the bucket itself
	 * @return the gate kept with the bucket, or {@code null} to keep it in this JVM
	 */
	@Nullable Gate gate(RegisteredBucket bucket, @Nullable Object key);
}
