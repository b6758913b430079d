#include "tfk8s/retry.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tfk8s {

std::optional<std::chrono::milliseconds> RetryPolicy::Decide(const Attempt& attempt,
                                                             double random01) const {
  if (attempt.number >= max_attempts) return std::nullopt;

  std::chrono::milliseconds wait{0};
  if (attempt.http_code == 429 || attempt.http_code >= 500) {
    // The server said when to come back: only then is any verb repeated (a 5xx without it may
    // have been applied; a 429 without it gives no pacing). HTTP-date forms are not parsed.
    if (!attempt.retry_after_seconds || *attempt.retry_after_seconds < 0) return std::nullopt;
    wait = std::chrono::seconds(*attempt.retry_after_seconds);
  } else if (attempt.http_code == 0) {
    // No response. A write may have been applied, so it is never repeated; a read is, unless
    // nothing was ever sent (refused, DNS), which retrying right away rarely heals.
    if (!attempt.idempotent || !attempt.request_may_have_been_sent) return std::nullopt;
    double base = static_cast<double>(initial_backoff.count()) *
                  std::pow(2.0, std::min(30, std::max(0, attempt.number - 1)));
    double j = std::clamp(jitter, 0.0, 0.99);
    double factor = 1.0 - j + 2.0 * j * std::clamp(random01, 0.0, 1.0);
    double capped = std::min(base * factor, static_cast<double>(max_backoff.count()));
    wait = std::chrono::milliseconds(static_cast<std::int64_t>(capped));
  } else {
    return std::nullopt;
  }
  // Waiting past the caller's deadline only to fail then: report the error now.
  if (attempt.time_left && wait > *attempt.time_left) return std::nullopt;
  return wait;
}

}  // namespace tfk8s
