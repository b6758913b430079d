#pragma once
// Internal: the one wait engine of every workload (TFCluster::Wait, DevInstance::Wait,
// ScheduledJob::WaitForRun). A workload says what to watch and how to judge what the watches
// hold; the engine opens the watches, re-judges on every change (and at least once a second),
// reports each new status once (repeats dropped), asks `cancelled`, surfaces a watch's error and
// turns the deadline into a Timeout that names the whole duration and the last status.

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <string>
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

/// What every kind's wait judge starts from (KindOps<Kind>::Judge derives from it): the client,
/// the spec, what is waited for, the workload's name for messages ("TFCluster ns/name"), and
/// the placement verdict, which a judge computes once per wait (an unschedulable pod fails the
/// wait only when no node could ever take it, else capacity may free up).
template <typename Spec>
struct KindJudge {
  KindJudge(Client& client, const Spec& spec, WaitUntil until, std::string what)
      : client(client), spec(spec), until(until), what(std::move(what)) {}
  Client& client;
  const Spec& spec;
  WaitUntil until;
  std::string what;
  std::optional<FitResult> placement;
};

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
