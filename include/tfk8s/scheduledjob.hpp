#pragma once
/// @file
/// ScheduledJob: a training task run once or on a schedule (the GoblinLab "scheduled tasks"),
/// with retries, a timeout, history, logs, and alerts on failure, timeout and missed schedules.
///
/// The spec renders (purely) to a batch/v1 Job for a run and to a CronJob (batch/v1, or
/// batch/v1beta1 on servers that lack it) for a schedule. The ScheduledJob class applies, runs,
/// suspends, inspects and deletes through a Client; the ScheduledJobWatcher watches the runs and
/// schedules it manages and calls a callback and/or POSTs to a webhook — something no Kubernetes
/// controller does. See docs/scheduledjob.md.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/pod.hpp"
#include "tfk8s/workload.hpp"

namespace tfk8s {

/// What the CronJob controller does when a run is due while the previous one still runs.
enum class ConcurrencyPolicy {
  kAllow,    ///< Start it anyway (runs overlap).
  kForbid,   ///< Skip it (reported as a missed schedule by the watcher).
  kReplace,  ///< Delete the running one and start the new one.
};
/// "Allow", "Forbid" or "Replace".
std::string ToString(ConcurrencyPolicy policy);
/// Parses "Allow" / "Forbid" / "Replace"; throws ValidationError(field "concurrencyPolicy").
ConcurrencyPolicy ParseConcurrencyPolicy(std::string_view text);

/// A task, run on demand or on a schedule. Validate() checks everything before any request.
///
/// The container runs `exec_command exec_args... <home_path>/<entry_path> args...` as an argv
/// array (no shell: an argument containing `;`, quotes, `$(...)`, spaces or newlines arrives as
/// one literal argument) in `working_dir`. The seed's equivalent is
/// `cd <workDir> && <execCommand> /root/<entryPath> <runArgs>`; CommandLine() prints that form,
/// correctly quoted, for people and logs.
struct ScheduledJobSpec {
  std::string name;                        ///< DNS label of at most 52 characters.
  std::string namespace_name = "default";  ///< The team's namespace (queue).
  /// The user the task belongs to (a DNS-1123 label; "" for none): the label `tfk8s.io/owner`
  /// on the CronJob, its Jobs and pods, so ListRefs(client, "", owner) finds a user's tasks.
  std::string owner;
  std::map<std::string, std::string> labels;  ///< Added to the CronJob, its Jobs and pods.
  std::string image;                          ///< Container image (required).
  /// Pull policy and secrets, service account, security context (tfk8s/pod.hpp).
  PodOptions pod;
  /// The Pod Security Standards level of the runs' pods (JSON `podSecurity`), as for
  /// TFClusterSpec::pod_security: "restricted" by default, filling unset security fields from
  /// RestrictedSecurityContext(); rendering refuses pods that break the level.
  PodSecurityLevel pod_security = PodSecurityLevel::kRestricted;

  std::string home_claim;            ///< The user's PVC mounted at home_path ("" = none).
  std::string home_path = "/root";   ///< Where home_claim is mounted; entry_path is under it.
  bool home_read_only = false;       ///< Mount the home claim read-only.
  std::vector<VolumeMount> volumes;  ///< More claims (any claim, any path).

  std::string working_dir;             ///< Relative to home_path, or absolute; "" = home_path.
  std::string exec_command;            ///< Interpreter or executable, e.g. "python3" ("" = run
                                       ///< the entry itself).
  std::vector<std::string> exec_args;  ///< Interpreter options before the entry, e.g. {"-u"}.
  std::string entry_path;              ///< The program, relative to home_path (required).
  std::vector<std::string> args;       ///< Program arguments, each passed literally.
  /// Pass `$(VAR)` references in the command and args to Kubernetes, which expands them from
  /// the container's environment (and turns `$$` into `$`). Off by default: every word reaches
  /// execve() exactly as written.
  bool expand_variable_references = false;
  std::vector<EnvVar> env;  ///< Environment variables.
  Resources resources;      ///< cpu, memory, nvidia.com/gpu.
  Placement placement;      ///< Node labels (gputype needs resources.gpus > 0).
  std::map<std::string, std::string> pod_annotations;  ///< Added to every run's pod.

  int backoff_limit = 0;  ///< Retries after a failed attempt (the seed's 0: fail at once).
  std::optional<std::int64_t> active_deadline_seconds;     ///< Timeout of a run (all attempts).
  std::optional<std::int32_t> ttl_seconds_after_finished;  ///< Delete finished runs after this.

  /// Cron expression ("0 3 * * *", "*/15 * * * MON-FRI", "@daily"); "" = run only on demand.
  /// Validated client-side (see docs/scheduledjob.md for the accepted language).
  std::string schedule;
  /// IANA time zone of the schedule ("Europe/Berlin"); "" = the controller's zone (UTC on
  /// practically every cluster). Needs Kubernetes ≥ 1.25 (CronJob spec.timeZone); applying a
  /// schedule with a zone other than UTC to an older server is refused with a clear error.
  std::string time_zone;
  /// Overlapping runs. Forbid by default (not Kubernetes' Allow): two runs of one training task
  /// would write the same files on the same claim.
  ConcurrencyPolicy concurrency_policy = ConcurrencyPolicy::kForbid;
  /// A run that cannot start within this many seconds of its time is skipped (and counted as
  /// missed); unset = start late rather than never.
  std::optional<std::int64_t> starting_deadline_seconds;
  int successful_jobs_history_limit = 3;  ///< Finished successful runs kept by the controller.
  int failed_jobs_history_limit = 1;      ///< Finished failed runs kept by the controller.
  bool suspend = false;                   ///< No new scheduled runs while true.

  /// Throws ValidationError(field, value, why) naming the field, e.g. "schedule", "args[2]".
  void Validate() const;
  /// The spec as JSON (camelCase keys; stored on the objects so Load() can recover it).
  [[nodiscard]] Json ToJson() const;
  /// Inverse of ToJson(); throws ValidationError naming the field on bad input, and on a
  /// member it does not know ("is not a field of …": a misspelt key is refused, not ignored).
  static ScheduledJobSpec FromJson(const Json& json);
  /// The container's argv: exec_command, exec_args, the entry's full path, args.
  [[nodiscard]] std::vector<std::string> Command() const;
  /// The container's working directory (absolute).
  [[nodiscard]] std::string WorkingDirectory() const;
  /// The seed's shell form, `cd '<dir>' && '<exec>' '<entry>' '<arg>'…`, every word quoted with
  /// ShellQuote(): for display and logs (the container does not use a shell). It is exactly
  /// what the process receives, unless expand_variable_references lets Kubernetes expand
  /// `$(VAR)` references in it first.
  [[nodiscard]] std::string CommandLine() const;
  /// Whether a schedule is set.
  [[nodiscard]] bool scheduled() const { return !schedule.empty(); }
};

/// Quotes one word for a POSIX shell: the result, pasted into `sh -c`, is exactly `word` as one
/// argument whatever it contains (`'` becomes `'\''`). "" gives `''`.
std::string ShellQuote(std::string_view word);

/// Validates a cron expression (and time zone, "" = UTC) without a spec; throws
/// ValidationError(field "schedule" or "timeZone", the bad part, why).
void ValidateCronSchedule(const std::string& schedule, const std::string& time_zone = "");

/// The next `count` times `schedule` fires strictly after `after`, in `time_zone` ("" = UTC).
/// Fewer when the schedule ends (never within five years). Throws ValidationError.
std::vector<std::chrono::system_clock::time_point> NextScheduleTimes(
    const std::string& schedule, const std::string& time_zone,
    std::chrono::system_clock::time_point after, int count);

/// Inputs of rendering that come from the server.
struct ScheduledJobRenderOptions {
  /// The CronJob API the server serves: "batch/v1" or "batch/v1beta1" (discovery decides at
  /// apply time).
  std::string cronjob_api_version = "batch/v1";
  /// Whether the server knows CronJob spec.timeZone (Kubernetes ≥ 1.25). When false, a
  /// time_zone other than "" / "UTC" is refused (ValidationError, field "timeZone").
  bool time_zone_supported = true;
  /// Name of a one-off run's Job; "" = generateName "<name>-" (the server adds 5 characters),
  /// or with fixed_run_name a name from the Job's content.
  std::string job_name;
  /// With no job_name: name the run "<name>-<first 10 hex digits of the SHA-256 of the rest of
  /// the rendered Job>" instead of generateName, which `kubectl apply` cannot take; the same
  /// spec renders the same run (what ScheduledJob::RenderForApply() and `tfk8s job render` do).
  bool fixed_run_name = false;
};

/// Renders one run of the task as a batch/v1 Job (no CronJob involved). Validates first. Pure.
Json RenderRunJob(const ScheduledJobSpec& spec, const ScheduledJobRenderOptions& options = {});
/// Renders the schedule as a CronJob of options.cronjob_api_version. Throws ValidationError
/// when the spec has no schedule. Pure.
Json RenderCronJob(const ScheduledJobSpec& spec, const ScheduledJobRenderOptions& options = {});
/// What `kubectl create job --from=cronjob/<name>` creates: a Job from the CronJob's jobTemplate
/// (as the server returned it, with metadata.uid), annotated
/// `cronjob.kubernetes.io/instantiate: manual`, owned (controller reference) by the CronJob.
/// `job_name` "" = generateName "<cronjob>-". `pod_annotations` are added to the pod template.
/// Pure.
Json RenderManualRun(const Json& cronjob, const std::string& job_name = "",
                     const std::map<std::string, std::string>& pod_annotations = {});
/// The CronJob when the spec has a schedule, else the one-off Job: what `kubectl apply -f`
/// would need. Pure.
std::vector<Json> RenderScheduledJob(const ScheduledJobSpec& spec,
                                     const ScheduledJobRenderOptions& options = {});

/// The state of one run.
enum class RunResult {
  kPending,    ///< Created, no pod running yet.
  kRunning,    ///< An attempt is running.
  kSucceeded,  ///< Completed.
  kFailed,     ///< Failed (backoff limit reached, …).
  kTimedOut,   ///< Failed because activeDeadlineSeconds passed (DeadlineExceeded).
  kUnknown,    ///< Unrecognised status.
};
/// "Pending", "Running", "Succeeded", "Failed", "TimedOut", "Unknown".
std::string ToString(RunResult result);

/// What started a run.
enum class RunTrigger {
  kOnDemand,   ///< RunNow() of a task without a schedule (a standalone Job).
  kScheduled,  ///< The CronJob controller, at a scheduled time.
  kManual,     ///< RunNow() of a scheduled task (`kubectl create job --from=cronjob`).
};
/// "on-demand", "scheduled", "manual".
std::string ToString(RunTrigger trigger);

/// One run (one Job) of a task (fields: TFK8S_JOB_RUN_FIELDS).
#define TFK8S_JOB_RUN_FIELDS(X)                                                               \
  X(std::string, name, "name", ) /* Job name. */                                              \
  X(std::string, uid, "uid", )   /* Job UID. */                                               \
  X(std::string, namespace_name, "namespace", )                                               \
  X(std::string, scheduled_job, "scheduled_job", ) /* The task's name. */                     \
  X(RunTrigger, trigger, "trigger", = RunTrigger::kOnDemand)                                  \
  X(std::optional<std::chrono::system_clock::time_point>, scheduled_time,                     \
    "scheduled_time", ) /* When the schedule asked for the run (scheduled runs only). */      \
  X(std::optional<std::chrono::system_clock::time_point>, start_time, "start_time", )         \
  X(std::optional<std::chrono::system_clock::time_point>, end_time, "end_time", )             \
  X(std::optional<std::chrono::seconds>, duration, "duration", ) /* end - start, finished. */ \
  X(RunResult, result, "result", = RunResult::kUnknown)                                       \
  X(std::string, reason, "reason", )   /* e.g. "BackoffLimitExceeded", "DeadlineExceeded". */ \
  X(std::string, message, "message", ) /* The Job condition's message. */                     \
  X(int, attempts, "attempts", = 0)    /* Pods started: failed + succeeded + active. */       \
  X(int, active, "active", = 0)        /* Attempts running now. */                            \
  X(int, succeeded, "succeeded", = 0)                                                         \
  X(int, failed, "failed", = 0)                                                               \
  X(std::string, alerted, "alerted", ) /* The alert sent for it ("failure", "timeout"). */
struct JobRun {
  TFK8S_FIELDS(TFK8S_JOB_RUN_FIELDS)
  /// Succeeded, failed or timed out.
  [[nodiscard]] bool finished() const;
  /// The fields (FieldsToJson: times in seconds since the epoch, null when unknown) and
  /// "finished": what the Python bindings return.
  [[nodiscard]] Json ToJson() const;
};

/// The run described by a Job object. Pure.
JobRun RunOf(const Json& job);
/// Table rows (header first: NAME, TRIGGER, RESULT, START, END, DURATION, ATTEMPTS, REASON).
std::vector<std::vector<std::string>> RunRows(const std::vector<JobRun>& runs);
/// The rows as an aligned text table.
std::string FormatRunTable(const std::vector<JobRun>& runs);

/// The schedule's state on the server (fields: TFK8S_SCHEDULE_STATUS_FIELDS).
/// `last_successful_time` is known from Kubernetes 1.21; `next_schedule_time` is computed here.
#define TFK8S_SCHEDULE_STATUS_FIELDS(X)                                             \
  X(bool, exists, "exists", = false)           /* The CronJob exists. */            \
  X(std::string, api_version, "api_version", ) /* "batch/v1" or "batch/v1beta1". */ \
  X(bool, suspended, "suspended", = false)                                          \
  X(std::string, schedule, "schedule", ) /* As stored. */                           \
  X(std::optional<std::chrono::system_clock::time_point>, last_schedule_time,       \
    "last_schedule_time", )                                                         \
  X(std::optional<std::chrono::system_clock::time_point>, last_successful_time,     \
    "last_successful_time", )                                                       \
  X(std::optional<std::chrono::system_clock::time_point>, next_schedule_time,       \
    "next_schedule_time", )                                                         \
  X(std::vector<std::string>, active, "active", ) /* Runs the controller sees running. */
struct ScheduleStatus {
  TFK8S_FIELDS(TFK8S_SCHEDULE_STATUS_FIELDS)
  /// The fields as JSON (FieldsToJson: times in seconds since the epoch, null when unknown):
  /// what the Python bindings return.
  [[nodiscard]] Json ToJson() const { return FieldsToJson(*this); }
};

/// The log of one attempt (pod) of a run.
struct AttemptLog {
  int attempt = 0;  ///< 1 for the first pod, by creation time.
  std::string pod;
  std::string phase;             ///< Pod phase.
  std::optional<int> exit_code;  ///< When the container terminated.
  std::string text;              ///< The log ("" when the pod never started).
};

/// Options of ScheduledJob::RunNow.
struct RunOptions {
  std::string job_name;  ///< "" = generated ("<name>-xxxxx").
  /// Added to the run's pod template (e.g. for a run-specific tag).
  std::map<std::string, std::string> pod_annotations;
  bool preflight = true;  ///< Check quota and node placement first (nothing is created if not).
  bool dry_run = false;   ///< Server-side dry run: validated and admitted, not stored.
  /// The pre-flight against the namespace's Pod Security labels (refuse, or warn).
  PodSecurityPreflight pod_security;
};

/// Options of ScheduledJob::Apply.
struct ApplyScheduleOptions {
  bool preflight = true;  ///< Check that one run fits the quota and some node.
  bool dry_run = false;   ///< Server-side dry run.
  /// The pre-flight against the namespace's Pod Security labels (refuse, or warn).
  PodSecurityPreflight pod_security;
};

/// Options of ScheduledJob::Delete.
struct ScheduledJobDeleteOptions {
  bool foreground = false;                        ///< Foreground cascading (the CronJob goes last).
  bool keep_runs = false;                         ///< Keep finished and running Jobs (orphan them).
  std::optional<std::chrono::milliseconds> wait;  ///< Wait until everything is gone.
};

class ScheduledJob;

/// The ScheduledJob kind: its class, spec and status types (see Workload). Its waits are for a run
/// (ScheduledJob::WaitForRun), not for the schedule's status.
struct ScheduledJobKind {
  using Object = ScheduledJob;
  using Spec = ScheduledJobSpec;
  using Status = ScheduleStatus;
  static constexpr const char* kName = "ScheduledJob";
  static constexpr bool kWaitsForStatus = false;
};

extern template class Workload<ScheduledJobKind>;

/// A task bound to a client: applies the schedule, runs, suspends, inspects, deletes.
/// Construction, spec(), set_spec(), List() and ListRefs() (CronJobs and on-demand runs managed
/// by tfk8s), Status() (the schedule's state; exists = false for on-demand tasks), Preflight()
/// (one run against the namespace's quota headroom and the nodes: a gputype no node has, a run
/// bigger than any node), Render() and ToYaml() come from Workload. Render() is what Apply()
/// (a schedule: the CronJob) or RunNow() (an on-demand task: its Job) sends, in the API
/// versions the client's server serves: CronJob batch/v1, or batch/v1beta1 where the server
/// has no batch/v1 CronJob (Kubernetes < 1.21); it sends at most discovery requests (cached);
/// use RenderScheduledJob() to render for another server without one. The `root_uid_` of an
/// on-demand task stays "" (its runs are its roots).
class ScheduledJob : public Workload<ScheduledJobKind> {
 public:
  using Workload::Workload;
  /// Creates or updates the CronJob (server-side apply) in the API version the server serves.
  /// Throws ValidationError without a schedule (or for a time zone the server cannot honour),
  /// QuotaExceeded when one run would not fit (nothing is created). Returns the CronJob.
  Json Apply(const ApplyScheduleOptions& options = {});
  /// Starts a run now. Scheduled tasks: a Job from the CronJob's template, like `kubectl create
  /// job --from=cronjob` (the CronJob must exist: Apply() first); else a Job from the spec.
  /// Pre-flight first (QuotaExceeded). Returns the new run.
  JobRun RunNow(const RunOptions& options = {});
  /// Stops new scheduled runs (running ones continue). Throws ValidationError (field
  /// "schedule"; nothing changes, nothing is sent) for an on-demand task: it has no schedule.
  void Suspend();
  /// Resumes scheduled runs; the watcher does not report runs missed while suspended. Throws
  /// ValidationError like Suspend() for an on-demand task.
  void Resume();
  /// Deletes the CronJob and every run (cascading to their pods).
  void Delete(const ScheduledJobDeleteOptions& options = {});

  /// Every run still on the server, oldest first.
  std::vector<JobRun> History();
  /// One run by Job name. Throws NotFound.
  JobRun GetRun(const std::string& job_name);
  /// Waits (watch driven) until the run finished (`options.until` is always kFinished);
  /// returns it whatever the result (check `result`). on_progress sees each new state of the
  /// run once; `cancelled` ends the wait with CancelledError. Throws Timeout, or NotFound if
  /// the run is deleted.
  JobRun WaitForRun(const std::string& job_name, const WaitOptions<JobRun>& options);
  /// The newest run's name (by start time). Throws NotFound when the task has no run.
  std::string NewestRun();
  /// Logs of every attempt of the run `options.source` ("" the newest), oldest first
  /// (`tail_lines`, `timestamps` apply to each attempt).
  std::vector<AttemptLog> Logs(const WorkloadLogOptions& options = {});
  /// Follows the output of the run `options.source` ("" the newest) across attempts (a retry's
  /// pod is followed when it starts) until the run finishes, `on_line` returns false or
  /// `options.cancelled` says so; each line's source is its attempt ("attempt-2", pods counted
  /// by creation time). Waits up to `options.pending_wait` for a pod to start.
  void FollowLogs(const WorkloadLogOptions& options,
                  const std::function<bool(const WorkloadLogLine&)>& on_line);
  /// A run's logs as a pull stream of lines whose source is the attempt ("attempt-2"): with
  /// `follow`, FollowLogs() (until the run finished); without, what Logs() returns, in order.
  [[nodiscard]] WorkloadLogStream StreamLogs(WorkloadLogOptions options = {});

 private:
  ResourceType CronJobType();
  /// Render options for this client's server (CronJob version, time zone support).
  ScheduledJobRenderOptions ServerRenderOptions();
  std::optional<ResourceType> cronjob_type_;
};

/// What an alert is about.
enum class AlertKind {
  kFailure,         ///< A run failed (backoff limit reached or another failure).
  kTimeout,         ///< A run exceeded activeDeadlineSeconds.
  kMissedSchedule,  ///< A scheduled run did not start (controller down, Forbid overlap, …).
  /// The watcher deleted something: a finished TFCluster's replicas (its `cleanup` policy) or
  /// a run beyond the task's history limits.
  kCleanup,
};
/// "failure", "timeout", "missed-schedule", "cleanup".
std::string ToString(AlertKind kind);

/// One alert, as given to the callback and POSTed (ToJson()) to the webhook.
struct ScheduledJobAlert {
  AlertKind kind = AlertKind::kFailure;
  std::string namespace_name;
  std::string scheduled_job;  ///< The task.
  std::string job;            ///< The run's Job ("" for a missed schedule).
  std::string job_uid;
  std::string reason;   ///< "BackoffLimitExceeded", "DeadlineExceeded", "MissedSchedule".
  std::string message;  ///< Human-readable summary.
  int attempts = 0;     ///< Attempts of the run.
  std::optional<std::chrono::system_clock::time_point> start_time;
  std::optional<std::chrono::system_clock::time_point> end_time;
  /// Missed schedule: the latest scheduled time that did not produce a run.
  std::optional<std::chrono::system_clock::time_point> scheduled_time;
  int missed_runs = 0;  ///< Missed schedule: how many scheduled times were missed.
  /// Clean-up of a cluster: its name ("" otherwise; `job` is then the chief's Job).
  std::string tf_cluster;
  /// Clean-up: what was deleted, as "Kind/name" ("Job/train-ps-0"), in the order deleted.
  std::vector<std::string> deleted;
  std::chrono::system_clock::time_point time;  ///< When the alert was raised.
  /// {"source": "tfk8s", "kind", "namespace", "scheduledJob", "job", "jobUid", "reason",
  /// "message", "attempts", "startTime", "endTime", "scheduledTime", "missedRuns", "tfCluster",
  /// "deleted", "time"}.
  [[nodiscard]] Json ToJson() const;
};

/// A webhook receiving alerts as `POST <url>` with a JSON body (ScheduledJobAlert::ToJson()).
/// Only the status of the answer counts: at most kWebhookMaxResponseBytes of its body are read.
struct AlertWebhook {
  std::string url;                                ///< http:// or https://.
  std::map<std::string, std::string> headers;     ///< e.g. {"Authorization", "Bearer …"}.
  std::chrono::milliseconds timeout{5000};        ///< Per attempt (connect included).
  int attempts = 3;                               ///< Tries before giving up (≥ 1).
  std::chrono::milliseconds retry_backoff{1000};  ///< Wait before the 2nd try; doubles after.
  bool insecure_skip_verify = false;              ///< https without certificate checks.
  std::string ca_pem;                             ///< Trust this CA (PEM) instead of the system's.
  /// Send `headers` and the URL's user info (`user:password@`, which becomes basic auth) to an
  /// `http://` url, in clear text. Off: ValidateWebhook() refuses the combination, as
  /// ClientConfig refuses a token over http://, because such headers usually carry the
  /// receiver's token (a receiver on loopback is the usual reason to turn it on).
  bool allow_insecure_headers = false;
};

/// How much of a webhook's answer is read (64 KiB); the rest is never received.
inline constexpr std::size_t kWebhookMaxResponseBytes = std::size_t{64} * 1024;

/// Throws ValidationError (field "webhook.url", "webhook.headers" or "webhook.timeout"; the
/// value shown never holds a header value, the URL's user info, path or query) for a webhook
/// that must not be used: a scheme other than http/https, a timeout that is not positive, or
/// credentials over http:// without allow_insecure_headers. The watcher and SendWebhookAlert
/// call it before sending anything.
void ValidateWebhook(const AlertWebhook& webhook);

/// The outcome of delivering one alert.
struct WebhookDelivery {
  bool delivered = false;  ///< A 2xx answer was received.
  int attempts = 0;        ///< Requests sent.
  int status = 0;          ///< Last HTTP status (0: no answer).
  std::string error;       ///< Why it was not delivered.
};

/// POSTs one alert with retries (connection failures, timeouts, 429 and 5xx are retried; other
/// 4xx answers are not). Never throws for delivery failures; a webhook ValidateWebhook()
/// refuses is a ValidationError, before anything is sent.
WebhookDelivery SendWebhookAlert(const AlertWebhook& webhook, const ScheduledJobAlert& alert);

/// Options of the watcher.
struct ScheduledJobWatcherOptions {
  std::string namespace_name;  ///< "" = every namespace.
  std::string scheduled_job;   ///< "" = every tfk8s task in scope; else only this one.
  /// Narrows every watch to objects with these labels (a Kubernetes label selector, e.g.
  /// "team=vision": a workload's `labels` go on its CronJob, runs, root and replica Jobs).
  std::string label_selector;
  std::function<void(const ScheduledJobAlert&)> on_alert;  ///< Called once per alert.
  std::optional<AlertWebhook> webhook;                     ///< POSTed once per alert.
  bool alert_on_failure = true;
  bool alert_on_timeout = true;
  bool alert_on_missed_schedule = true;
  /// A scheduled run is missed when it has not started this long after its time (plus the
  /// task's startingDeadlineSeconds, when set). The 1.20 controller checks every 10 s.
  std::chrono::seconds missed_schedule_grace{60};
  /// Failures older than this when first seen are not alerted (a new watcher on a namespace
  /// full of old failures stays quiet).
  std::chrono::seconds max_alert_age{24 * 3600};
  /// Reports problems as they happen (webhook down, a patch refused, callback exceptions, each
  /// list or watch that failed and is retried), and, last, the error that stops the watcher
  /// ("scheduled job watcher stopped: …", see Run()). Called on the watcher's threads.
  std::function<void(const std::string&)> on_error;
  /// Identifies this watcher in the alert annotations ("" = hostname/pid).
  std::string identity;
  /// Carry out the `cleanup` policy of finished TFClusters in scope (TFCleanupPolicy), with a
  /// "cleanup" alert for each. Off by default: it needs more permissions (watch ConfigMaps;
  /// delete Jobs, StatefulSets, Services, Deployments, ReplicaSets, Secrets, ConfigMaps).
  bool clean_up_tf_clusters = false;
  /// Bound every task's history by its spec's successful / failed history limits: finished
  /// manual and on-demand runs (on-demand runs are bounded by nothing else) are deleted oldest
  /// first once that many newer finished runs of the same result exist, with a "cleanup"
  /// alert for each; an active run never, a failed run only once its own alert is settled.
  /// Scheduled runs stay the CronJob controller's. Off by default (deleting runs needs
  /// permission, and changes what History() shows).
  bool bound_history = false;
};

/// Watches the runs and schedules of tfk8s tasks and raises alerts. Each alert is raised once:
/// the watcher records it on the object (annotations `tfk8s.io/alerted`, `tfk8s.io/alert-state`
/// on the Job; `tfk8s.io/missed-alerted` on the CronJob) with an optimistic-concurrency patch
/// *before* delivering, so a restarted watcher, or a second one, does not repeat it; list-then-
/// watch with resume and relist means nothing that happened while it was disconnected or down
/// is missed. If a watcher dies while delivering, another one re-delivers after the claim
/// expires (at-least-once for that rare case, exactly-once otherwise).
///
/// With `clean_up_tf_clusters` / `bound_history` it also deletes what finished workloads leave
/// running (docs/tfcluster.md, "Clean-up"; docs/scheduledjob.md, "History"), claimed the same
/// way (annotations `tfk8s.io/cleanup-*` on the cluster's root ConfigMap or on the run) before
/// anything is deleted, so two watchers never both act; deletions are idempotent, so a claim
/// taken over after its owner died only finishes the work.
class ScheduledJobWatcher {
 public:
  /// Nothing is sent until Run() or Start().
  ScheduledJobWatcher(Client client, ScheduledJobWatcherOptions options);
  ScheduledJobWatcher(const ScheduledJobWatcher&) = delete;
  ScheduledJobWatcher& operator=(const ScheduledJobWatcher&) = delete;
  /// Stops and joins the background thread, if any.
  ~ScheduledJobWatcher();

  /// Watches until Stop() is called (from another thread or a callback). Apiserver restarts and
  /// network errors are retried with backoff (each failure goes to on_error). Throws, after
  /// telling on_error, the error an informer gives up on (Informer::Next()): at once for errors
  /// that retrying cannot fix (e.g. Forbidden), after Informer::kDefaultFailureLimit in a row for
  /// a certificate, an oversized list or an answer it cannot decode.
  void Run();
  /// Runs Run() on a background thread.
  void Start();
  /// Stops Run() / the background thread promptly. Thread-safe, idempotent. Alerts claimed but
  /// not yet delivered are delivered by the next watcher once their claim expires.
  void Stop();
  /// Alerts delivered (callback ran and, with a webhook, it answered 2xx) so far.
  [[nodiscard]] int alerts_sent() const;
  /// Alerts whose webhook delivery failed after every retry.
  [[nodiscard]] int alerts_failed() const;
  /// The error that ended the background thread (what Run() threw), if any.
  [[nodiscard]] std::exception_ptr error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfk8s
