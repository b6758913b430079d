#pragma once
// Internal: runs independent blocking calls (requests) at the same time, so their round trips
// overlap instead of adding up.

#include <cstddef>
#include <functional>

namespace tfk8s::internal {

/// Calls fn(i) for every i in [0, n) on up to `max_threads` threads at once (one thread for
/// n == 1: the call runs on the caller's thread) and returns when every call has returned.
/// If calls throw, the exception of the lowest index is rethrown after all of them finished.
void ForEachConcurrently(std::size_t n, const std::function<void(std::size_t)>& fn,
                         std::size_t max_threads = 16);

}  // namespace tfk8s::internal
