#pragma once
// Internal: names, annotations and the pure decisions of ScheduledJob's lifecycle and watcher,
// shared by the .cpp files and the unit tests.

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "http/transport.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "workloads/cron.hpp"
#include "workloads/kinds.hpp"

namespace tfk8s::internal {

/// On every object of a task: the task's name.
inline constexpr const char* kScheduledJobLabel = "tfk8s.io/scheduledjob";
using kinds::kManagedBy;
/// The spec as JSON, on the CronJob and on on-demand runs (ScheduledJob::Load reads it).
inline constexpr const char* kSpecAnnotation = "tfk8s.io/spec";

struct RootIdentity;
/// The spec stored on a task's CronJob, or on one of its runs (a Job), its identity checked
/// against the object's (identity.hpp: the task's name is the tfk8s.io/scheduledjob label, its
/// namespace the object's): nullopt when the object holds no stored spec; ValidationError when
/// it is not JSON, is invalid, or names another task, namespace or owner. `*identity`
/// (optional) gets the object's identity.
std::optional<ScheduledJobSpec> ScheduledJobSpecFromObject(const Json& object, bool is_cronjob,
                                                           RootIdentity* identity = nullptr);
/// kubectl's marker of a Job created from a CronJob by hand.
inline constexpr const char* kInstantiateAnnotation = "cronjob.kubernetes.io/instantiate";
/// Set by ≥ 1.28 controllers on scheduled Jobs.
inline constexpr const char* kScheduledTimestampAnnotation =
    "batch.kubernetes.io/cronjob-scheduled-timestamp";
/// When Resume() was called: runs due while suspended are not "missed".
inline constexpr const char* kResumedAtAnnotation = "tfk8s.io/resumed-at";

/// Alert bookkeeping on a Job: the kind alerted ("failure" / "timeout"), the delivery state
/// ("sending", "delivered", "failed"), when a "sending" claim expires, and who claimed it.
inline constexpr const char* kAlertedAnnotation = "tfk8s.io/alerted";
inline constexpr const char* kAlertStateAnnotation = "tfk8s.io/alert-state";
inline constexpr const char* kAlertDeadlineAnnotation = "tfk8s.io/alert-deadline";
inline constexpr const char* kAlertedByAnnotation = "tfk8s.io/alerted-by";
/// The same on a CronJob for missed schedules; the value of kMissedAlertedAnnotation is the
/// scheduled time (RFC 3339) of the latest missed run alerted.
inline constexpr const char* kMissedAlertedAnnotation = "tfk8s.io/missed-alerted";
inline constexpr const char* kMissedStateAnnotation = "tfk8s.io/missed-alert-state";
inline constexpr const char* kMissedDeadlineAnnotation = "tfk8s.io/missed-alert-deadline";
inline constexpr const char* kMissedByAnnotation = "tfk8s.io/missed-alerted-by";

/// Field manager of the watcher's and Resume()'s patches (never "tfk8s": server-side apply of
/// the spec must not remove what they record).
inline constexpr const char* kStateFieldManager = "tfk8s-scheduledjob-state";

/// Labels on every object of the task (user labels, managed-by, the task label).
Json CommonLabels(const ScheduledJobSpec& spec);

std::chrono::system_clock::time_point ToTimePoint(SysSeconds t);
SysSeconds ToSysSeconds(std::chrono::system_clock::time_point t);
/// "" when absent or malformed.
std::string AnnotationOf(const Json& object, const char* key);
/// A time field of an object (RFC 3339), nullopt when absent or malformed.
std::optional<SysSeconds> TimeAt(const Json& object, const Json::json_pointer& pointer);

/// What the watcher should do about one Job.
struct JobAlertDecision {
  bool alert = false;  ///< Claim and deliver an alert of `kind`.
  AlertKind kind = AlertKind::kFailure;
  bool reclaim = false;  ///< An earlier claim expired without delivery: deliver again.
  /// When to look at the Job again (a claim by someone else that may expire).
  std::optional<SysSeconds> recheck_at;
};
/// Decides from the Job alone (its status and alert annotations). Pure.
JobAlertDecision DecideJobAlert(const Json& job, SysSeconds now,
                                const ScheduledJobWatcherOptions& options);

/// What the watcher should do about one CronJob.
struct MissedScheduleCheck {
  std::optional<SysSeconds> missed_time;  ///< Alert: the latest scheduled time that was missed.
  int missed_runs = 0;                    ///< Missed times since the last run (capped at 1000).
  bool reclaim = false;                   ///< An earlier claim expired without delivery.
  std::optional<SysSeconds> recheck_at;   ///< When a new miss could first be detected.
  std::string error;                      ///< The stored schedule cannot be evaluated.
};
/// Decides from the CronJob alone (spec.schedule, timeZone, suspend, startingDeadlineSeconds,
/// status.lastScheduleTime, creationTimestamp and the tfk8s annotations). Pure apart from
/// reading the time zone database.
MissedScheduleCheck CheckMissedSchedule(const Json& cronjob, SysSeconds now,
                                        std::chrono::seconds grace);

/// The alert for a failed Job (kind from the decision). Pure.
ScheduledJobAlert AlertForJob(const Json& job, AlertKind kind, SysSeconds now);
/// The alert for a missed schedule. Pure.
ScheduledJobAlert AlertForMissedSchedule(const Json& cronjob, const MissedScheduleCheck& check,
                                         SysSeconds now);

/// How long a delivery claim lasts: every attempt's timeout and backoff, plus a margin.
std::chrono::seconds ClaimDuration(const std::optional<AlertWebhook>& webhook);

/// `url` safe to print: scheme and host[:port] only; user info, path, query and fragment (where
/// webhook tokens live) become "/…".
std::string RedactedWebhookUrl(std::string_view url);

/// The URL's user info ("user:password@" before the host), "" when it has none.
std::string_view UserInfoOf(std::string_view url);

/// Delivers one alert over `transport` (retries per the webhook's settings); `stop` (may be
/// null) cuts the backoff waits short.
WebhookDelivery DeliverWebhook(HttpTransport& transport, const AlertWebhook& webhook,
                               const std::string& body, const std::atomic<bool>* stop);

}  // namespace tfk8s::internal
