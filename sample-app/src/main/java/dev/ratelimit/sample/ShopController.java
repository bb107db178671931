package dev.ratelimit.sample;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

import dev.ratelimit.annotation.RateLimited;

import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;

/**
 * The shop's HTTP API. {@code /api/quote} is guarded directly by the {@code public-api} bucket with no
 * waiting: callers that press too hard get HTTP 429 with a {@code Retry-After} header. A request that
 * could never be granted (a batch larger than the capped {@code db-writes} bucket's limit) is the
 * client's mistake, not a server error and not a 429 to retry: it gets HTTP 400 with the bucket's
 * message.
 */
@RestController
public class ShopController {

	private final OrderWriter orders;

	private final PartnerApiClient partner;

	private final ReportService reports;

	private final LoginService logins;

	private final SearchService search;

	public ShopController(OrderWriter orders, PartnerApiClient partner, ReportService reports, LoginService logins,
			SearchService search) {
		this.orders = orders;
		this.partner = partner;
		this.reports = reports;
		this.logins = logins;
		this.search = search;
	}

	/**
	 * A login: 200 with {@code ok} true or false; after 5 failures for one user in 15 minutes, 429.
	 */
	@PostMapping("/login")
	public LoginService.LoginResult login(@RequestParam String user, @RequestParam String password) {
		return this.logins.login(user, password);
	}

	@GetMapping("/api/search")
	public List<String> search(@RequestParam String q) {
		return this.search.search(q);
	}

	@PostMapping("/orders")
	public Map<String, Object> order(@RequestParam String item) {
		return Map.of("stored", this.orders.write(item));
	}

	@PostMapping("/orders/batch")
	public Map<String, Object> orders(@RequestBody List<String> items) {
		return Map.of("written", this.orders.writeAll(items));
	}

	/**
	 * A cost the bucket can never grant (or a key that is {@code null}): 400, naming the bucket and what
	 * it accepts, where it would otherwise be a 500.
	 */
	@ExceptionHandler(IllegalArgumentException.class)
	ProblemDetail cannotBeGranted(IllegalArgumentException ex) {
		return ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST, ex.getMessage());
	}

	@GetMapping("/orders/count")
	public Map<String, Object> count() {
		return Map.of("orders", this.orders.count());
	}

	@GetMapping("/shipping/{destination}")
	public Map<String, Object> shipping(@PathVariable String destination) {
		return Map.of("destination", destination, "cents", this.partner.shippingQuote(destination));
	}

	@GetMapping("/reports/{name}")
	public CompletableFuture<String> report(@PathVariable String name) {
		return this.reports.render(name);
	}

	@GetMapping("/api/quote")
	@RateLimited(value = "public-api", maxWait = "0")
	public Map<String, Object> quote(@RequestParam(defaultValue = "DE") String destination) {
		return Map.of("destination", destination, "cents", 990);
	}

	/**
	 * A quote per user: each user has a budget of their own, made from the {@code per-user} bucket.
	 */
	@GetMapping("/api/users/{id}/quote")
	@RateLimited(value = "per-user", key = "#id")
	public Map<String, Object> userQuote(@PathVariable String id) {
		return Map.of("user", id, "cents", 990);
	}
}
