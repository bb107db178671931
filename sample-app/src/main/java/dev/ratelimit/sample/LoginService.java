package dev.ratelimit.sample;

import dev.ratelimit.annotation.RateLimited;

import org.springframework.stereotype.Service;

/**
 * Logins, where only failures count: each user may fail 5 times per 15 minutes
 * ({@code login-failures}, one bucket per user name), and a successful login gives its token back
 * ({@code refundIf}), so a user who types their password right is never locked out by their own
 * successes.
 */
@Service
public class LoginService {

	/**
	 * The outcome of a login.
	 *
	 * @param user the user name
	 * @param ok whether the password was right
	 */
	public record LoginResult(String user, boolean ok) {
	}

	/**
	 * Checks a password (the sample's only password is {@code secret}).
	 *
	 * @param user the user name
	 * @param password the password
	 * @return the outcome
	 */
	@RateLimited(value = "login-failures", key = "#user", refundIf = "#result.ok()")
	public LoginResult login(String user, String password) {
		return new LoginResult(user, "secret".equals(password));
	}
}
