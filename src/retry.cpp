#include "tfk8s/retry.hpp"

#include <algorithm>
#include <cmath>

namespace tfk8s {

std::optional<std::chrono::milliseconds> RetryPolicy::Decide(const Attempt& attempt,
                                                             double random01) const {
  if (attempt.number >= max_attempts) return std::nullopt;

  bool retryable = false;
  if (attempt.http_code == 429) {
    // Refused by priority-and-fairness / max-in-flight before any processing: safe for writes.
    retryable = true;
  } else if (attempt.http_code >= 500) {
    // A 5xx on a write may have been applied (e.g. a 504 after the write reached etcd), so only
    // reads are repeated.
    retryable = attempt.idempotent;
  } else if (attempt.http_code == 0) {
    // No response: reads are repeated; a write only when it provably never left this process
    // (connection refused, DNS failure), so the server cannot have applied it.
    retryable = attempt.idempotent || !attempt.request_may_have_been_sent;
  }
  if (!retryable) return std::nullopt;

  std::chrono::milliseconds wait;
  if (attempt.retry_after_seconds && *attempt.retry_after_seconds >= 0) {
    wait = std::chrono::seconds(*attempt.retry_after_seconds);
  } else {
    double base = static_cast<double>(initial_backoff.count()) *
                  std::pow(2.0, std::max(0, attempt.number - 1));
    double j = std::clamp(jitter, 0.0, 0.99);
    double factor = 1.0 - j + 2.0 * j * std::clamp(random01, 0.0, 1.0);
    wait = std::chrono::milliseconds(static_cast<std::int64_t>(base * factor));
  }
  return std::min(wait, max_backoff);
}

}  // namespace tfk8s
