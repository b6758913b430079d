#pragma once
/// @file
/// Retry and client-side rate limiting policies (documented defaults, client-go compatible).

#include <chrono>
#include <optional>

namespace tfk8s {

/// When and how long to wait before repeating a request (client-go's rules, `rest/with_retry.go`).
///
/// - A 429 or 5xx answer is repeated, for every verb, **only** when the server sent an integer
///   `Retry-After: N`; the wait is then N seconds exactly (not capped: the call's own deadline,
///   ClientConfig::request_timeout, bounds it, and a wait that would overrun the deadline ends
///   the call at once with the server's error). Without Retry-After the error is returned.
/// - No response at all (reset, EOF, timeout): only idempotent requests (GET, list, watch, log)
///   are repeated, after initial_backoff doubling up to max_backoff with ±jitter; a write is
///   never sent twice. A connection that was refused, or a name that did not resolve, is not
///   repeated either (client-go: "connection refused" is never retried).
/// - Every repeated attempt goes through the client's rate limiter again.
/// - The final error is the last attempt's, with Error::attempts() set (and "(after N attempts)"
///   at the end of its message).
struct RetryPolicy {
  /// Total attempts including the first; 1 disables retries (client-go: maxRetries 10).
  int max_attempts = 11;
  /// First wait after a read got no response (client-go waits 1 s).
  std::chrono::milliseconds initial_backoff{1000};
  /// Upper bound of the no-response backoff (a server's Retry-After is not capped by it).
  std::chrono::milliseconds max_backoff{10'000};
  /// Relative jitter in [0, 1) of the no-response backoff: the wait is multiplied by a factor
  /// in [1 - jitter, 1 + jitter].
  double jitter = 0.2;

  /// What happened on one attempt (input of Decide()).
  struct Attempt {
    int number = 1;                          ///< 1 for the first attempt.
    bool idempotent = false;                 ///< GET/HEAD/list/watch/log.
    int http_code = 0;                       ///< 0 when no response was received.
    bool request_may_have_been_sent = true;  ///< For transport errors (false: refused, DNS).
    std::optional<int> retry_after_seconds;  ///< Server's Retry-After.
    /// Time left before the call's deadline; nullopt when the call has none.
    std::optional<std::chrono::milliseconds> time_left;
  };
  /// The wait before the next attempt, or nullopt to stop and report the error.
  /// `random01` is a uniform number in [0,1) used for jitter (injectable for tests).
  [[nodiscard]] std::optional<std::chrono::milliseconds> Decide(const Attempt& attempt,
                                                                double random01) const;
};

/// Token-bucket rate limit applied to every request a Client sends (watches and log streams
/// only when they are (re)opened). qps <= 0 disables it.
///
/// Defaults: 50 QPS, burst 100 (client-go's 5/10 would stretch the bring-up of the seed's
/// 70-object TFCluster over 12 s; the server's API Priority and Fairness, on since 1.20, is what
/// protects it from busy clients, and this bucket still stops a runaway loop).
struct RateLimit {
  double qps = 50.0;  ///< Sustained requests per second; <= 0 disables limiting.
  int burst = 100;    ///< Bucket size (requests that may go at once).
};

}  // namespace tfk8s
