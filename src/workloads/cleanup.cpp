// Automatic clean-up: a finished TFCluster's policy and a task's history limits, as pure
// decisions, plus the deletions the watcher makes once it has claimed the work.

#include "workloads/cleanup.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "tfk8s/error.hpp"
#include "workloads/common.hpp"
#include "workloads/identity.hpp"
#include "workloads/kinds.hpp"
#include "workloads/scheduledjob_internal.hpp"
#include "workloads/tfcluster_internal.hpp"

namespace tfk8s {

using namespace internal::kinds;

std::string ToString(TFCleanupPolicy policy) {
  switch (policy) {
    case TFCleanupPolicy::kNone:
      return "none";
    case TFCleanupPolicy::kDeleteAll:
      return "delete-all";
    case TFCleanupPolicy::kKeepSession:
      return "keep-session";
    case TFCleanupPolicy::kKeepLogs:
      return "keep-logs";
  }
  return "none";
}

TFCleanupPolicy ParseTFCleanupPolicy(std::string_view text) {
  for (auto p : {TFCleanupPolicy::kNone, TFCleanupPolicy::kDeleteAll, TFCleanupPolicy::kKeepSession,
                 TFCleanupPolicy::kKeepLogs}) {
    if (text == ToString(p)) return p;
  }
  throw ValidationError("cleanup", std::string(text),
                        "must be none, delete-all, keep-session or keep-logs");
}

namespace internal {

namespace {

const Json& Meta(const Json& object) {
  static const Json kEmpty = Json::object();
  auto m = object.find("metadata");
  return m != object.end() && m->is_object() ? *m : kEmpty;
}

std::string UidOf(const Json& object) { return Meta(object).value("uid", ""); }

bool BeingDeleted(const Json& object) { return Meta(object).contains("deletionTimestamp"); }

// "Complete" or "Failed" when the Job has that condition, else "".
std::string JobEnd(const Json& job) {
  auto s = job.find("status");
  if (s == job.end() || !s->is_object()) return {};
  for (const auto& c : s->value("conditions", Json::array())) {
    if (!c.is_object() || c.value("status", "") != "True") continue;
    std::string type = c.value("type", "");
    if (type == "Complete" || type == "Failed") return type;
  }
  return {};
}

// A claim recorded by the clean-up annotations: expired (take it over), live (wait for it,
// until `*recheck_at`), or settled.
enum class ClaimState { kNone, kLive, kExpired, kSettled };

ClaimState CleanupClaim(const Json& object, SysSeconds now, std::optional<SysSeconds>* recheck) {
  std::string state = AnnotationOf(object, kCleanupStateAnnotation);
  if (state.empty()) return ClaimState::kNone;
  if (state != "sending") return ClaimState::kSettled;
  auto deadline = ParseTimestamp(AnnotationOf(object, kCleanupDeadlineAnnotation));
  if (deadline && now < *deadline) {
    if (!*recheck || *deadline < **recheck) *recheck = deadline;
    return ClaimState::kLive;
  }
  return ClaimState::kExpired;
}

// Deletion order: what holds resources first, then what only routes or stores.
int Rank(const ResourceType* type) {
  if (type == &kJobs || type == &kStatefulSets) return 0;
  if (type == &kDeployments || type == &kReplicaSets) return 1;
  if (type == &kServices) return 2;
  return 3;
}

std::optional<SysSeconds> RunTime(const Json& job) {
  if (auto t = TimeAt(job, Json::json_pointer("/status/startTime"))) return t;
  return TimeAt(job, Json::json_pointer("/metadata/creationTimestamp"));
}

}  // namespace

TFCleanupDecision DecideTFCleanup(const Json& root, const std::vector<Json>& jobs, SysSeconds now) {
  TFCleanupDecision d;
  if (BeingDeleted(root)) return d;
  TFClusterSpec spec = TFSpecFromRoot(root);
  d.policy = spec.cleanup;
  if (d.policy == TFCleanupPolicy::kNone) return d;
  // TensorFlow's convention, as in Status(): the chief, or worker 0 without one, decides.
  const std::string role = spec.chief.replicas > 0 ? "chief" : "worker";
  const std::string job_name = ReplicaName(spec, role, 0);
  const std::string root_uid = UidOf(root);
  const Json* decider = nullptr;
  for (const auto& job : jobs) {
    if (NameOf(job) == job_name && OwnedBy(job, root_uid)) decider = &job;
  }
  if (!decider) return d;
  std::string end = JobEnd(*decider);
  if (end.empty()) return d;
  // Already done for this run of the chief, unless the claim expired before the alert went.
  if (AnnotationOf(root, kCleanupOfAnnotation) == UidOf(*decider)) {
    if (CleanupClaim(root, now, &d.recheck_at) != ClaimState::kExpired) return d;
    d.reclaim = true;
  }
  d.act = true;
  d.decider = role + "-0";
  d.result = end == "Complete" ? "Succeeded" : "Failed";
  d.decider_job = *decider;
  return d;
}

std::vector<const ResourceType*> TFCleanupKinds(TFCleanupPolicy policy) {
  switch (policy) {
    case TFCleanupPolicy::kKeepSession:
      return {&kJobs, &kServices};
    case TFCleanupPolicy::kKeepLogs:
      return {&kJobs, &kDeployments, &kReplicaSets, &kServices, &kSecrets};
    case TFCleanupPolicy::kNone:
    case TFCleanupPolicy::kDeleteAll:
      break;
  }
  return {};
}

std::vector<CleanupTarget> PlanTFCleanup(const Json& root, TFCleanupPolicy policy,
                                         const std::vector<OwnedObject>& objects) {
  std::vector<CleanupTarget> out;
  if (policy == TFCleanupPolicy::kNone) return out;
  const std::string root_uid = UidOf(root);
  if (policy == TFCleanupPolicy::kDeleteAll) {
    out.push_back({&kConfigMaps, NameOf(root), root_uid});
    return out;
  }
  for (const auto& o : objects) {
    if (!o.type || !OwnedBy(o.object, root_uid) || BeingDeleted(o.object)) continue;
    std::string component = LabelOf(o.object, kComponentLabel);
    bool remove = false;
    if (component == "tensorflow") {
      // A finished replica's Job keeps its pod, and so its log; it holds nothing any more.
      remove = !(o.type == &kJobs && !JobEnd(o.object).empty());
    } else if (component == "session" || component == "tensorboard") {
      remove = policy == TFCleanupPolicy::kKeepLogs;
    }
    if (remove) out.push_back({o.type, NameOf(o.object), UidOf(o.object)});
  }
  std::stable_sort(out.begin(), out.end(), [](const CleanupTarget& a, const CleanupTarget& b) {
    return Rank(a.type) < Rank(b.type);
  });
  return out;
}

ScheduledJobAlert AlertForTFCleanup(const Json& root, const TFCleanupDecision& decision,
                                    const std::vector<std::string>& deleted, SysSeconds now) {
  ScheduledJobAlert a;
  a.kind = AlertKind::kCleanup;
  a.namespace_name = Meta(root).value("namespace", "");
  a.tf_cluster = LabelOf(root, kClusterLabel);
  if (a.tf_cluster.empty()) a.tf_cluster = NameOf(root);
  a.job = NameOf(decision.decider_job);
  a.job_uid = UidOf(decision.decider_job);
  a.reason = "TFCluster" + decision.result;
  if (auto t = TimeAt(decision.decider_job, Json::json_pointer("/status/startTime"))) {
    a.start_time = ToTimePoint(*t);
  }
  if (auto t = TimeAt(decision.decider_job, Json::json_pointer("/status/completionTime"))) {
    a.end_time = ToTimePoint(*t);
  }
  a.deleted = deleted;
  a.time = ToTimePoint(now);
  std::string what = deleted.empty() ? "nothing left to delete"
                                     : fmt::format("deleted {}", fmt::join(deleted, ", "));
  a.message = fmt::format("TFCluster {}/{}: {} {}; cleanup {}: {}", a.namespace_name, a.tf_cluster,
                          decision.decider, decision.result, ToString(decision.policy), what);
  return a;
}

HistoryLimits HistoryLimitsOf(const Json& spec) {
  HistoryLimits l;
  if (!spec.is_object()) return l;
  auto read = [&](const char* key, int* out) {
    auto v = spec.find(key);
    if (v != spec.end() && v->is_number_integer() && v->get<int>() >= 0) *out = v->get<int>();
  };
  read("successfulJobsHistoryLimit", &l.successful);
  read("failedJobsHistoryLimit", &l.failed);
  return l;
}

HistoryLimits TaskHistoryLimits(const Json* cronjob, const std::vector<Json>& runs) {
  if (cronjob) return HistoryLimitsOf(cronjob->value("spec", Json::object()));
  // The newest run's stored spec that really is this task's (identity checked: a run's owner
  // may rewrite it; a forged or unreadable one is passed over).
  std::vector<const Json*> newest_first;
  newest_first.reserve(runs.size());
  for (const auto& run : runs) newest_first.push_back(&run);
  std::stable_sort(newest_first.begin(), newest_first.end(), [](const Json* a, const Json* b) {
    return Meta(*a).value("creationTimestamp", "") > Meta(*b).value("creationTimestamp", "");
  });
  for (const Json* run : newest_first) {
    try {
      if (auto spec = ScheduledJobSpecFromObject(*run, false)) {
        return HistoryLimitsOf(spec->ToJson());
      }
    } catch (const Error&) {
    }
  }
  return {};
}

HistoryPlan PlanHistoryPrune(const std::vector<Json>& runs, HistoryLimits limits, SysSeconds now,
                             const ScheduledJobWatcherOptions& options) {
  HistoryPlan plan;
  struct Ranked {
    const Json* job;
    JobRun run;
    std::optional<SysSeconds> at;
  };
  std::vector<Ranked> succeeded, failed;
  for (const auto& job : runs) {
    JobRun run = RunOf(job);
    if (!run.finished()) continue;  // an active run is never pruned, nor counted
    (run.result == RunResult::kSucceeded ? succeeded : failed).push_back({&job, run, RunTime(job)});
  }
  auto consider = [&](std::vector<Ranked>& group, int limit, const char* result) {
    // Newest first; a run without a time counts as newest (it was just created).
    std::sort(group.begin(), group.end(), [](const Ranked& a, const Ranked& b) {
      if (a.at != b.at) return !a.at || (b.at && *a.at > *b.at);
      return a.run.name > b.run.name;
    });
    for (std::size_t i = static_cast<std::size_t>(std::max(limit, 0)); i < group.size(); ++i) {
      const Ranked& r = group[i];
      if (r.run.trigger == RunTrigger::kScheduled || BeingDeleted(*r.job)) continue;
      ClaimState claim = CleanupClaim(*r.job, now, &plan.recheck_at);
      if (claim == ClaimState::kLive || claim == ClaimState::kSettled) continue;
      if (r.run.result != RunResult::kSucceeded) {
        // Its failure alert first: pruning must not swallow it.
        JobAlertDecision alert = DecideJobAlert(*r.job, now, options);
        if (alert.recheck_at && (!plan.recheck_at || *alert.recheck_at < *plan.recheck_at)) {
          plan.recheck_at = alert.recheck_at;
        }
        if (alert.alert || AnnotationOf(*r.job, kAlertStateAnnotation) == "sending") continue;
      }
      plan.prune.push_back(
          {*r.job, fmt::format("run {} of {}/{} ({}, {}) pruned: {} newer {} run{} (history "
                               "limit {})",
                               r.run.name, r.run.namespace_name, r.run.scheduled_job,
                               ToString(r.run.trigger), ToString(r.run.result), i, result,
                               i == 1 ? "" : "s", limit)});
    }
  };
  consider(succeeded, limits.successful, "successful");
  consider(failed, limits.failed, "failed");
  return plan;
}

ScheduledJobAlert AlertForPrunedRun(const PrunedRun& pruned, SysSeconds now) {
  // A failure alert's fields (the run, its attempts and times), with the clean-up's reason.
  ScheduledJobAlert a = AlertForJob(pruned.job, AlertKind::kCleanup, now);
  a.reason = "HistoryLimit";
  a.message = pruned.message;
  a.deleted = {"Job/" + a.job};
  return a;
}

std::vector<std::string> DeleteTargets(Client& client, const std::string& ns,
                                       const std::vector<CleanupTarget>& targets) {
  std::vector<std::string> deleted;
  for (const auto& t : targets) {
    DeleteOptions del;
    del.propagation_policy = "Background";
    del.precondition_uid = t.uid;
    try {
      client.Delete(*t.type, ns, t.name, del);
      deleted.push_back(t.type->kind + "/" + t.name);
    } catch (const NotFound&) {
      // Gone already (another watcher's earlier attempt, the garbage collector, a user).
    } catch (const Conflict&) {
      // The UID precondition failed: a new object took the name; it is not ours to delete.
    }
  }
  return deleted;
}

}  // namespace internal
}  // namespace tfk8s
