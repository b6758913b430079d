#pragma once
// Internal: the one wait engine of every workload (TFCluster::Wait, DevInstance::Wait,
// ScheduledJob::WaitForRun). A workload says what to watch and how to judge what the watches
// hold; the engine opens the watches, re-judges on every change (and at least once a second),
// reports each new status once (repeats dropped), asks `cancelled`, surfaces a watch's error and
// turns the deadline into a Timeout that names the whole duration and the last status.

#include <any>
#include <chrono>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/workload.hpp"

namespace tfk8s::internal {

/// One watch of a wait: a resource type in the workload's namespace, with selectors.
struct WaitWatch {
  const ResourceType* type;
  ListOptions selectors;
};

/// List options selecting by label (`selector`), and by field.
inline ListOptions ByLabel(std::string selector) {
  ListOptions o;
  o.label_selector = std::move(selector);
  return o;
}
inline ListOptions ByField(std::string selector) {
  ListOptions o;
  o.field_selector = std::move(selector);
  return o;
}

/// What the watches hold at one moment, in the order of the WaitWatch list.
struct WaitSnapshot {
  std::vector<std::vector<Json>> objects;
  /// True once every watch's first list is done (before, an empty list means "not known yet").
  /// Read before the objects are taken: when true the objects reflect the server; when false
  /// they may already hold some (judge them as not known yet).
  bool synced = false;
};

/// A judgement of one snapshot.
struct WaitVerdict {
  bool done = false;  ///< The wait is over: the engine returns.
  /// The workload failed or cannot start (its own typed error): thrown after the status was
  /// reported.
  std::exception_ptr failure;
  bool report = true;    ///< Hand this status to on_progress (when new); false: not yet known.
  std::string progress;  ///< What identifies the status for "repeats dropped" (its table).
  std::string message;   ///< The status in a few words, for the Timeout's message.
};

/// The type-erased engine. `what` names the workload ("TFCluster ns/name"), `goal` what it waits
/// for ("ready", "finished"). `judge` runs on the waiting thread; `report` is called with each
/// new verdict whose `report` is set.
void RunWait(const Client& client, const std::string& ns, const std::vector<WaitWatch>& watches,
             const std::string& what, const std::string& goal, std::chrono::milliseconds timeout,
             const std::function<bool()>& cancelled,
             const std::function<WaitVerdict(const WaitSnapshot&)>& judge,
             const std::function<void()>& report);

/// The messages of the `events` in which the quota refused to let one of the objects `uids`
/// create pods ("exceeded quota"), each "<object> cannot create <what>: <message>"; with `since`
/// (RFC 3339), only events from that second on (the server's clock on both sides).
std::vector<std::string> QuotaRefusals(const std::vector<Json>& events,
                                       const std::set<std::string>& uids, std::string_view what,
                                       const std::string& since = "");

/// The Timeout of a Delete that waited `waited` for the workload's objects to go, in vain.
[[noreturn]] void ThrowStillDeleting(std::string_view kind, const std::string& ns,
                                     const std::string& name, std::chrono::milliseconds waited);

/// Why no node could ever take the pods of `objects` (the placement check with
/// PlacementScope::kEver: NotReady and cordoned nodes, condition taints, and a cluster without
/// any node, which may add some, are no reason), or nullopt when some node could. `cache`
/// holds the check's result, so that one wait checks once.
std::optional<std::string> NeverPlaced(Client& client, std::optional<FitResult>* cache,
                                       const std::function<std::vector<Json>()>& objects);

/// A pod's reason (PodProblem) as a wait that goes on waiting tells it: "Unschedulable: <the
/// scheduler's message>" becomes "Unschedulable: no node can take it yet: <message>"; any
/// other reason is returned as it is.
std::string UnschedulableYet(const std::string& reason);

/// What a kind's judge (KindOps<Kind>::Judge) is given besides the snapshot: the client, the
/// spec, what is waited for and the workload's name for messages ("TFCluster ns/name").
template <typename Spec>
class JudgeContext {
 public:
  JudgeContext(Client& client, const Spec& spec, WaitUntil until, std::string what)
      : client(client), spec(spec), until(until), what(std::move(what)) {}
  Client& client;
  const Spec& spec;
  WaitUntil until;
  std::string what;
  /// An unschedulable pod fails a wait only when no node could ever take it (else capacity may
  /// free up): why not, from the placement check of `objects`, made once per wait.
  std::optional<std::string> NeverPlaced(const std::function<std::vector<Json>()>& objects) {
    return internal::NeverPlaced(client, &placement_, objects);
  }
  /// State a judge keeps across the snapshots of one wait, by name (empty on first use).
  template <typename T>
  T& Memory(const std::string& name) {
    std::any& slot = memory_[name];
    if (!slot.has_value()) slot = T{};
    return std::any_cast<T&>(slot);
  }

 private:
  std::optional<FitResult> placement_;
  std::map<std::string, std::any> memory_;
};

/// A judge's answer: `status` and `verdict`, whose progress is the status's table and whose
/// message is the status's message unless the judge set them.
template <typename Status>
std::pair<Status, WaitVerdict> Judged(Status status, WaitVerdict verdict) {
  if (verdict.progress.empty()) verdict.progress = status.Table();
  if (verdict.message.empty()) verdict.message = status.message;
  return {std::move(status), std::move(verdict)};
}

/// The typed wait: `judge` returns the status and its verdict; the status of the verdict that
/// ended the wait is returned, and options.on_progress sees every new one.
template <typename Status>
Status Wait(const Client& client, const std::string& ns, const std::vector<WaitWatch>& watches,
            const std::string& what, const WaitOptions<Status>& options,
            const std::function<std::pair<Status, WaitVerdict>(const WaitSnapshot&)>& judge) {
  Status last{};
  const std::string goal = options.until == WaitUntil::kFinished ? "finished" : "ready";
  RunWait(
      client, ns, watches, what, goal, options.timeout, options.cancelled,
      [&](const WaitSnapshot& snapshot) {
        auto [status, verdict] = judge(snapshot);
        last = std::move(status);
        return verdict;
      },
      [&] {
        if (options.on_progress) options.on_progress(last);
      });
  return last;
}

}  // namespace tfk8s::internal
