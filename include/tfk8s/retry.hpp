#pragma once
/// @file
/// Retry and client-side rate limiting policies (documented defaults, client-go compatible).

#include <chrono>
#include <optional>

namespace tfk8s {

/// When and how long to wait before repeating a request.
///
/// Defaults: up to 5 attempts in all; 429 (Too Many Requests) is retried for every request,
/// since the server refused it before doing anything; 5xx responses and connection failures are
/// retried only for idempotent requests (GET, list, watch, log; apply/replace/delete/patch are
/// *not* treated as
/// idempotent), except that a write whose connection failed before anything was sent (refused,
/// DNS) is retried: a write is never delivered twice by the library. The wait is the server's
/// `Retry-After` when given (capped at max_backoff), else exponential backoff from
/// initial_backoff, doubling, capped at max_backoff, with ±jitter.
struct RetryPolicy {
  /// Total attempts including the first; 1 disables retries.
  int max_attempts = 5;
  /// First backoff when the server gave no Retry-After.
  std::chrono::milliseconds initial_backoff{250};
  /// Upper bound of any single wait (also caps Retry-After).
  std::chrono::milliseconds max_backoff{10'000};
  /// Relative jitter in [0, 1): the wait is multiplied by a factor in [1 - jitter, 1 + jitter].
  double jitter = 0.2;

  /// What happened on one attempt (input of Decide()).
  struct Attempt {
    int number = 1;                        ///< 1 for the first attempt.
    bool idempotent = false;               ///< GET/HEAD/list/watch/log.
    int http_code = 0;                     ///< 0 when no response was received.
    bool request_may_have_been_sent = true;///< For transport errors.
    std::optional<int> retry_after_seconds;///< Server's Retry-After.
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
