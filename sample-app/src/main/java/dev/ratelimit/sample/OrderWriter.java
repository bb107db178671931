package dev.ratelimit.sample;

import java.util.List;

import dev.ratelimit.annotation.RateLimited;

import org.springframework.jdbc.core.simple.JdbcClient;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/**
 * Writes orders to the database, guarded by the {@code db-writes} bucket. The bucket has capped
 * release: a write's tokens come back only when its transaction has completed (the rate limit
 * interceptor runs outside {@code @Transactional} by default), so the writes in flight never exceed
 * the bucket's limit, however slow the database gets.
 */
@Service
public class OrderWriter {

	private final JdbcClient jdbc;

	public OrderWriter(JdbcClient jdbc) {
		this.jdbc = jdbc;
	}

	/**
	 * Writes one order: one token.
	 *
	 * @param item what was ordered
	 * @return the number of orders stored so far
	 */
	@RateLimited("db-writes")
	@Transactional
	public long write(String item) {
		this.jdbc.sql("INSERT INTO orders (item) VALUES (?)").param(item).update();
		return count();
	}

	/**
	 * Writes a batch of orders: one token per order.
	 *
	 * @param items what was ordered
	 * @return how many were written
	 */
	@RateLimited(value = "db-writes", cost = "#items.size()")
	@Transactional
	public int writeAll(List<String> items) {
		for (String item : items) {
			this.jdbc.sql("INSERT INTO orders (item) VALUES (?)").param(item).update();
		}
		return items.size();
	}

	/**
	 * Counts the stored orders (not throttled).
	 *
	 * @return the count
	 */
	public long count() {
		return this.jdbc.sql("SELECT COUNT(*) FROM orders").query(Long.class).single();
	}
}
