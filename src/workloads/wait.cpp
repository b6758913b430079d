// The one wait engine (wait.hpp): watches, change counting, cancellation, deadline.

#include "workloads/wait.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "tfk8s/error.hpp"
#include "tfk8s/quota.hpp"
#include "workloads/common.hpp"

namespace tfk8s::internal {

std::vector<std::string> QuotaRefusals(const std::vector<Json>& events,
                                       const std::set<std::string>& uids, std::string_view what,
                                       const std::string& since) {
  const std::string from = since.substr(0, 19);  // to the second
  std::vector<std::string> out;
  for (const auto& e : events) {
    const Json& involved = e.value("involvedObject", Json::object());
    std::string message = e.value("message", "");
    if (!uids.count(involved.value("uid", "")) ||
        message.find("exceeded quota") == std::string::npos) {
      continue;
    }
    if (!from.empty()) {
      std::string when = e.value("lastTimestamp", "");
      if (when.empty() || !e["lastTimestamp"].is_string()) when = e.value("eventTime", "");
      if (when.substr(0, 19) < from) continue;
    }
    out.push_back(
        fmt::format("{} cannot create {}: {}", involved.value("name", ""), what, message));
  }
  return out;
}

void ThrowStillDeleting(std::string_view kind, const std::string& ns, const std::string& name,
                        std::chrono::milliseconds waited) {
  throw Timeout(ErrorKind::kTimeout, fmt::format("{} {}/{} still being deleted after {} ms", kind,
                                                 ns, name, waited.count()));
}

std::optional<std::string> NeverPlaced(Client& client, std::optional<FitResult>* cache,
                                       const std::function<std::vector<Json>()>& objects) {
  // Ever, not now: a NotReady or cordoned node, or none at all (a cluster that scales from
  // zero), may take the pod later; only what the spec rules out is final.
  if (!*cache) *cache = CheckPlacement(client, objects(), PlacementScope::kEver);
  if ((*cache)->fits) return std::nullopt;
  return (*cache)->Message();
}

std::string UnschedulableYet(const std::string& reason) {
  constexpr std::string_view kPrefix = "Unschedulable: ";
  if (reason.rfind(kPrefix, 0) != 0) return reason;
  return fmt::format("{}no node can take it yet: {}", kPrefix, reason.substr(kPrefix.size()));
}

void RunWait(const Client& client, const std::string& ns, const std::vector<WaitWatch>& watches,
             const std::string& what, const std::string& goal, std::chrono::milliseconds timeout,
             const std::function<bool()>& cancelled,
             const std::function<WaitVerdict(const WaitSnapshot&)>& judge,
             const std::function<void()>& report) {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> changes{0};
  std::vector<std::unique_ptr<WatchTracker>> trackers;
  trackers.reserve(watches.size());
  for (const auto& w : watches) {
    trackers.push_back(
        std::make_unique<WatchTracker>(client, *w.type, ns, w.selectors, &mu, &cv, &changes));
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last_reported;
  bool reported_any = false;
  while (true) {
    // Counted before the snapshots are taken: a change that lands while the judge runs wakes
    // the wait below at once instead of being lost until the next tick.
    const int seen_changes = changes;
    WaitSnapshot snapshot;
    snapshot.synced =
        std::all_of(trackers.begin(), trackers.end(), [](const auto& t) { return t->synced(); });
    for (const auto& t : trackers) snapshot.objects.push_back(t->Snapshot());
    WaitVerdict verdict = judge(snapshot);
    if (verdict.report && (!reported_any || verdict.progress != last_reported)) {
      report();
      last_reported = verdict.progress;
      reported_any = true;
    }
    if (verdict.failure) std::rethrow_exception(verdict.failure);
    if (verdict.done) return;
    if (cancelled && cancelled()) {
      throw CancelledError(fmt::format("waiting for {} was cancelled", what));
    }
    std::unique_lock lock(mu);
    for (const auto& t : trackers) {
      if (auto e = t->error()) std::rethrow_exception(e);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw Timeout(ErrorKind::kTimeout, fmt::format("{}: not {} after {} ms: {}", what, goal,
                                                     timeout.count(), verdict.message));
    }
    // Woken by any watch event; the bounded wait re-checks the deadline and `cancelled`.
    cv.wait_until(lock,
                  std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(1)),
                  [&] { return changes != seen_changes; });
  }
}

}  // namespace tfk8s::internal
