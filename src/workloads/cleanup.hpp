#pragma once
// Internal: automatic clean-up by the library's watcher. The pure decisions (has this cluster
// finished, what does its policy delete, which runs exceed a task's history limits) are here so
// that the unit tests pin them; the watcher (scheduledjob_alerts.cpp) claims, deletes and
// alerts.

#include <optional>
#include <string>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"
#include "workloads/cron.hpp"

namespace tfk8s::internal {

/// Clean-up bookkeeping, on a cluster's root ConfigMap or on a pruned run: what was done
/// (the policy's name, or "history"), the delivery state of its alert ("sending", "delivered",
/// "failed"), when a "sending" claim expires and who claimed it.
inline constexpr const char* kCleanedUpAnnotation = "tfk8s.io/cleaned-up";
inline constexpr const char* kCleanupStateAnnotation = "tfk8s.io/cleanup-state";
inline constexpr const char* kCleanupDeadlineAnnotation = "tfk8s.io/cleanup-deadline";
inline constexpr const char* kCleanedUpByAnnotation = "tfk8s.io/cleaned-up-by";
/// On the root: the UID of the chief's Job whose end was cleaned up after (a cluster run
/// again, with a new chief Job, is cleaned up again).
inline constexpr const char* kCleanupOfAnnotation = "tfk8s.io/cleanup-of";

/// What the watcher should do about one cluster.
struct TFCleanupDecision {
  bool act = false;      ///< Claim, then delete what PlanTFCleanup() names.
  bool reclaim = false;  ///< An earlier claim expired before its alert was delivered.
  TFCleanupPolicy policy = TFCleanupPolicy::kNone;
  std::string decider;                   ///< "chief-0" or "worker-0".
  std::string result;                    ///< "Succeeded" or "Failed".
  Json decider_job;                      ///< The chief's Job (when act).
  std::optional<SysSeconds> recheck_at;  ///< When a claim by someone else expires.
};
/// Decides from the root ConfigMap (the stored spec, the clean-up annotations) and the Jobs
/// labelled with the cluster: act once the chief's Job, owned by this root, is Complete or
/// Failed. Throws ValidationError when the stored spec cannot be read. Pure.
TFCleanupDecision DecideTFCleanup(const Json& root, const std::vector<Json>& jobs, SysSeconds now);

/// An object found with the cluster's label, and its kind.
struct OwnedObject {
  const ResourceType* type = nullptr;
  Json object;
};
/// One DELETE: the kind, name and UID (sent as a precondition).
struct CleanupTarget {
  const ResourceType* type = nullptr;
  std::string name;
  std::string uid;
};
/// The kinds whose objects `policy` may delete (what the watcher lists before PlanTFCleanup);
/// none for kNone and kDeleteAll (the root alone is deleted).
std::vector<const ResourceType*> TFCleanupKinds(TFCleanupPolicy policy);
/// What `policy` deletes of a finished cluster: for delete-all the root alone (cascading);
/// otherwise, among `objects` owned by this root (ownerReferences UID) and not already being
/// deleted, the TensorFlow replicas' Jobs that have not finished, the TensorFlow Services and,
/// for keep-logs, the session's and TensorBoard's objects. Workloads come before Services and
/// Secrets. Pure.
std::vector<CleanupTarget> PlanTFCleanup(const Json& root, TFCleanupPolicy policy,
                                         const std::vector<OwnedObject>& objects);
/// The "cleanup" alert for a cluster (`deleted`: "Kind/name" as done). Pure.
ScheduledJobAlert AlertForTFCleanup(const Json& root, const TFCleanupDecision& decision,
                                    const std::vector<std::string>& deleted, SysSeconds now);

/// A task's history limits.
struct HistoryLimits {
  int successful = 3;
  int failed = 1;
};
/// successfulJobsHistoryLimit / failedJobsHistoryLimit of a CronJob's spec or of a stored
/// ScheduledJobSpec (the same keys); Kubernetes' defaults 3 and 1 when absent.
HistoryLimits HistoryLimitsOf(const Json& spec);
/// A task's limits: its CronJob's spec when it has one, else the spec stored on its newest
/// run that carries one (on-demand runs), else the defaults. Pure.
HistoryLimits TaskHistoryLimits(const Json* cronjob, const std::vector<Json>& runs);

/// One run to delete and why.
struct PrunedRun {
  Json job;
  std::string message;
};
/// The runs of one task past its history limits (runs: its Jobs, any order). Finished runs are
/// ranked newest first (status.startTime, else creation) per result, successful or failed
/// (timed out included); those past the limit are pruned unless scheduled (the CronJob
/// controller prunes those), being deleted, failed with an alert not yet settled (per
/// DecideJobAlert and `options`), or claimed by a live clean-up claim. Pure.
struct HistoryPlan {
  std::vector<PrunedRun> prune;
  std::optional<SysSeconds> recheck_at;  ///< When a claim or an alert may settle.
};
HistoryPlan PlanHistoryPrune(const std::vector<Json>& runs, HistoryLimits limits, SysSeconds now,
                             const ScheduledJobWatcherOptions& options);
/// The "cleanup" alert for a pruned run. Pure.
ScheduledJobAlert AlertForPrunedRun(const PrunedRun& run, SysSeconds now);

/// DELETEs `targets` in order (background propagation, UID precondition). Gone already, or
/// replaced by a new object of the same name (UID mismatch), counts as done and is not listed.
/// Returns "Kind/name" of what this call deleted; throws the first other error.
std::vector<std::string> DeleteTargets(Client& client, const std::string& ns,
                                       const std::vector<CleanupTarget>& targets);

}  // namespace tfk8s::internal
