// ScheduledJob lifecycle: apply the schedule, run now, suspend/resume, delete, status, history,
// waiting for a run (watch driven) and logs. All I/O goes through the generic Client.

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/validation.hpp"
#include "tfk8s/yaml.hpp"
#include "workloads/common.hpp"
#include "workloads/cron.hpp"
#include "workloads/identity.hpp"
#include "workloads/scheduledjob_internal.hpp"
#include "workloads/wait.hpp"
#include "workloads/workload_impl.hpp"

namespace tfk8s {

using internal::Items;
using internal::SysSeconds;
using namespace internal::kinds;

namespace {

std::string Name(const Json& o) { return o.value("metadata", Json::object()).value("name", ""); }

std::string Created(const Json& o) {
  return o.value("metadata", Json::object()).value("creationTimestamp", "");
}

// Oldest first; creation timestamps have one-second resolution, so names break ties.
void SortByCreation(std::vector<Json>& objects) {
  std::sort(objects.begin(), objects.end(), [](const Json& a, const Json& b) {
    return std::make_pair(Created(a), Name(a)) < std::make_pair(Created(b), Name(b));
  });
}

std::string TaskSelector(const std::string& name) {
  return std::string(internal::kScheduledJobLabel) + "=" + name;
}

// Whether the server knows CronJob spec.timeZone (Kubernetes ≥ 1.25).
bool ServerHasCronJobTimeZone(Client& client) {
  Json v = client.ServerVersion();
  auto number = [](const std::string& s) {
    int n = 0;
    for (char c : s) {
      if (c < '0' || c > '9') break;
      n = n * 10 + (c - '0');
    }
    return n;
  };
  int major = number(v.value("major", "0"));
  int minor = number(v.value("minor", "0"));
  return major > 1 || (major == 1 && minor >= 25);
}

// The CronJob type the server serves (discovery, cached by the client).
ResourceType CronJobTypeOf(Client& client) {
  return client.ResolvePreferred("batch", "CronJob", {"v1", "v1beta1"});
}

// Render options for this client's server (CronJob version, time zone support).
ScheduledJobRenderOptions ServerRenderOptionsOf(Client& client, const ScheduledJobSpec& spec) {
  ScheduledJobRenderOptions ro;
  if (!spec.scheduled()) return ro;  // a Job: batch/v1 on every server
  ro.cronjob_api_version = CronJobTypeOf(client).ApiVersion();
  bool utc = spec.time_zone.empty() || spec.time_zone == "UTC" || spec.time_zone == "Etc/UTC";
  ro.time_zone_supported = utc || ServerHasCronJobTimeZone(client);
  return ro;
}

[[noreturn]] void ThrowDoesNotFit(const std::string& what, const FitResult& fit) {
  std::vector<std::string> resources;
  for (const auto& s : fit.shortfalls) resources.push_back(s.resource);
  std::string message =
      fmt::format("{} does not fit; nothing was created: {}", what, fit.Message());
  if (!fit.shortfalls.empty()) {
    throw QuotaExceeded(message, "Forbidden", fit.Message(), {}, resources);
  }
  throw Error(ErrorKind::kWorkloadFailed, message);
}

FitResult CheckRun(Client& client, const std::string& ns, const Json& job,
                   const PodSecurityPreflight& pod_security = {}) {
  FitResult fit = CheckQuota(client, ns, {job});
  fit.Merge(CheckPlacement(client, {job}));
  internal::AddNamespacePodSecurity(client, ns, {job}, pod_security, &fit);
  return fit;
}

std::optional<int> ExitCodeOf(const Json& pod) {
  for (const auto& cs :
       pod.value("status", Json::object()).value("containerStatuses", Json::array())) {
    const Json& state = cs.value("state", Json::object());
    if (auto t = state.find("terminated"); t != state.end()) return t->value("exitCode", 0);
  }
  return std::nullopt;
}

bool ContainerStarted(const Json& pod) {
  std::string phase = pod.value("status", Json::object()).value("phase", "");
  if (phase == "Succeeded" || phase == "Failed") return true;
  for (const auto& cs :
       pod.value("status", Json::object()).value("containerStatuses", Json::array())) {
    const Json& state = cs.value("state", Json::object());
    if (state.contains("running") || state.contains("terminated")) return true;
  }
  return false;
}

}  // namespace

// ---- the server's CronJob version -----------------------------------------------------------

ResourceType ScheduledJob::CronJobType() {
  if (!cronjob_type_) cronjob_type_ = CronJobTypeOf(client_);
  return *cronjob_type_;
}

// ---- schedule -------------------------------------------------------------------------------

Json ScheduledJob::Apply(const ApplyScheduleOptions& options) {
  spec_.Validate();
  if (!spec_.scheduled()) {
    throw ValidationError("schedule", "",
                          "no schedule to apply: set one, or start on-demand runs with RunNow()");
  }
  // Throws for a time zone the server cannot honour.
  Json cronjob = RenderCronJob(spec_, ServerRenderOptions());
  if (options.preflight) {
    FitResult fit =
        CheckRun(client_, spec_.namespace_name, RenderRunJob(spec_), options.pod_security);
    if (!fit.fits) {
      ThrowDoesNotFit(fmt::format("ScheduledJob {}/{}", spec_.namespace_name, spec_.name), fit);
    }
  }
  ApplyOptions apply;
  apply.force = true;  // tfk8s owns these fields
  apply.dry_run = options.dry_run;
  // The loaded CronJob only (its UID): one re-created under its name meanwhile is refused.
  Json applied = client_.Apply(internal::WithUidPrecondition(std::move(cronjob), root_uid_), apply);
  if (!options.dry_run) root_uid_ = internal::StringAt(internal::At(applied, "metadata"), "uid");
  return applied;
}

JobRun ScheduledJob::RunNow(const RunOptions& options) {
  Json job;
  if (spec_.scheduled()) {
    Json cronjob;
    try {
      cronjob = internal::GetChecked(client_, CronJobType(), spec_.namespace_name, spec_.name);
    } catch (const NotFound&) {
      throw NotFound(ErrorKind::kNotFound,
                     fmt::format("ScheduledJob {}/{} has a schedule but its CronJob does not "
                                 "exist: Apply() it first",
                                 spec_.namespace_name, spec_.name),
                     404, "NotFound");
    }
    // A run of the loaded CronJob only, not of one re-created under its name since.
    internal::RequireSameObject(cronjob, root_uid_, "ScheduledJob", spec_.namespace_name,
                                spec_.name);
    if (!cronjob.contains("apiVersion")) cronjob["apiVersion"] = CronJobType().ApiVersion();
    job = RenderManualRun(cronjob, options.job_name, options.pod_annotations);
  } else {
    ScheduledJobRenderOptions ro;
    ro.job_name = options.job_name;
    job = RenderRunJob(spec_, ro);
    for (const auto& [k, v] : options.pod_annotations) {
      validation::RequireLabelKey("podAnnotations", k);
      job["spec"]["template"]["metadata"]["annotations"][k] = v;
    }
  }
  if (options.preflight) {
    FitResult fit = CheckRun(client_, spec_.namespace_name, job, options.pod_security);
    if (!fit.fits) {
      ThrowDoesNotFit(fmt::format("run of ScheduledJob {}/{}", spec_.namespace_name, spec_.name),
                      fit);
    }
  }
  WriteOptions write;
  write.dry_run = options.dry_run;
  write.field_manager = "tfk8s";
  return RunOf(client_.Create(kJobs, spec_.namespace_name, job, write));
}

namespace {

// Suspend() and Resume() act on a schedule: a task without one is refused (nothing changes)
// rather than reported done.
void RequireSchedule(const ScheduledJobSpec& spec, std::string_view verb) {
  if (spec.scheduled()) return;
  throw ValidationError(
      "schedule", "",
      fmt::format("ScheduledJob {}/{} runs on demand: it has no schedule to {} (each run is "
                  "started by RunNow() and ends by itself)",
                  spec.namespace_name, spec.name, verb));
}

}  // namespace

void ScheduledJob::Suspend() {
  RequireSchedule(spec_, "suspend");
  ScheduledJobSpec next = spec_;
  next.suspend = true;
  set_spec(std::move(next));
  ApplyScheduleOptions options;
  options.preflight = false;  // suspending never needs room
  Apply(options);
}

void ScheduledJob::Resume() {
  RequireSchedule(spec_, "resume");
  ScheduledJobSpec next = spec_;
  next.suspend = false;
  set_spec(std::move(next));
  // Record the resumption before unsuspending: a watcher that sees the CronJob running again
  // must already know that the times it slept through were not missed.
  Json patch = {
      {"metadata",
       {{"annotations",
         {{internal::kResumedAtAnnotation, internal::FormatTimestamp(internal::ToSysSeconds(
                                               std::chrono::system_clock::now()))}}}}}};
  if (!root_uid_.empty()) patch["metadata"]["uid"] = root_uid_;  // the loaded CronJob only
  WriteOptions write;
  write.field_manager = internal::kStateFieldManager;
  client_.Patch(CronJobType(), spec_.namespace_name, spec_.name, PatchType::kMerge, patch, write);
  ApplyScheduleOptions options;
  options.preflight = false;
  Apply(options);
}

void ScheduledJob::Delete(const ScheduledJobDeleteOptions& options) {
  const std::string& ns = spec_.namespace_name;
  DeleteOptions del;
  if (options.keep_runs) {
    del.propagation_policy = "Orphan";
  } else {
    del.propagation_policy = options.foreground || options.wait ? "Foreground" : "Background";
  }
  del.precondition_uid = root_uid_;  // the loaded CronJob only ("" when not loaded)
  std::optional<ResourceType> cronjobs;
  try {
    cronjobs = CronJobType();
    client_.Delete(*cronjobs, ns, spec_.name, del);
  } catch (const NotFound&) {
  }
  root_uid_.clear();  // a later Apply makes a new CronJob
  ListOptions sel;
  sel.label_selector = TaskSelector(spec_.name);
  if (!options.keep_runs) {
    // On-demand runs have no owner; scheduled and manual ones go with the CronJob anyway, and
    // deleting them here too just gets there sooner.
    DeleteOptions run_del;
    run_del.propagation_policy = "Background";  // their pods go as well
    for (const auto& job : Items(client_.ListAll(kJobs, ns, sel))) {
      run_del.precondition_uid = internal::StringAt(internal::At(job, "metadata"), "uid");
      try {
        client_.Delete(kJobs, ns, Name(job), run_del);
      } catch (const NotFound&) {
      } catch (const Conflict&) {
        // Re-created under its name meanwhile: not the run that was listed.
      }
    }
  }
  if (!options.wait) return;
  auto deadline = std::chrono::steady_clock::now() + *options.wait;
  auto wait_gone = [&](const ResourceType& type, const ListOptions& selector) {
    Informer informer(client_, type, ns, selector);
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        internal::ThrowStillDeleting("ScheduledJob", ns, spec_.name, *options.wait);
      }
      informer.Next(std::min(left, std::chrono::milliseconds(500)));
      // The first Next() lists, so an empty snapshot afterwards means nothing is left.
      if (informer.Snapshot().empty()) return;
    }
  };
  if (!options.keep_runs) wait_gone(kJobs, sel);
  if (cronjobs) {
    ListOptions by_name;
    by_name.field_selector = "metadata.name=" + spec_.name;
    wait_gone(*cronjobs, by_name);
  }
}

// ---- runs -----------------------------------------------------------------------------------

std::vector<JobRun> ScheduledJob::History() {
  ListOptions sel;
  sel.label_selector = TaskSelector(spec_.name);
  std::vector<Json> jobs = Items(client_.ListAll(kJobs, spec_.namespace_name, sel));
  SortByCreation(jobs);
  std::vector<JobRun> runs;
  runs.reserve(jobs.size());
  for (const auto& j : jobs) runs.push_back(RunOf(j));
  return runs;
}

JobRun ScheduledJob::GetRun(const std::string& job_name) {
  Json job = internal::GetChecked(client_, kJobs, spec_.namespace_name, job_name);
  JobRun run = RunOf(job);
  if (run.scheduled_job != spec_.name) {
    throw NotFound(ErrorKind::kNotFound,
                   fmt::format("job {}/{} is not a run of ScheduledJob {}", spec_.namespace_name,
                               job_name, spec_.name),
                   404, "NotFound");
  }
  return run;
}

JobRun ScheduledJob::WaitForRun(const std::string& job_name, const WaitOptions<JobRun>& options) {
  const std::string& ns = spec_.namespace_name;
  GetRun(job_name);  // NotFound for a wrong name, before any watch
  ListOptions sel;
  sel.field_selector = "metadata.name=" + job_name;
  const std::string what = fmt::format("run {}/{}", ns, job_name);
  // A run is always waited for until it finished.
  WaitOptions<JobRun> finished = options;
  finished.until = WaitUntil::kFinished;
  return internal::Wait<JobRun>(
      client_, ns, {{&kJobs, sel}}, what, finished, [&](const internal::WaitSnapshot& snapshot) {
        internal::WaitVerdict verdict;
        verdict.report = snapshot.synced;
        if (!snapshot.synced) return std::pair{JobRun{}, std::move(verdict)};
        if (snapshot.objects[0].empty()) {
          throw NotFound(ErrorKind::kNotFound,
                         fmt::format("{} was deleted before it finished", what), 404, "NotFound");
        }
        JobRun run = RunOf(snapshot.objects[0].front());
        verdict.done = run.finished();
        verdict.progress = run.ToJson().dump();
        verdict.message = fmt::format("{}, {} attempts", ToString(run.result), run.attempts);
        return std::pair{std::move(run), std::move(verdict)};
      });
}

std::string ScheduledJob::NewestRun() {
  std::vector<JobRun> runs = History();
  if (runs.empty()) {
    throw NotFound(
        ErrorKind::kNotFound,
        fmt::format("ScheduledJob {}/{} has no run yet", spec_.namespace_name, spec_.name), 404,
        "NotFound");
  }
  auto newest = std::max_element(runs.begin(), runs.end(), [](const JobRun& a, const JobRun& b) {
    return a.start_time.value_or(std::chrono::system_clock::time_point{}) <
           b.start_time.value_or(std::chrono::system_clock::time_point{});
  });
  return newest->name;
}

std::vector<AttemptLog> ScheduledJob::Logs(const WorkloadLogOptions& options) {
  JobRun run = GetRun(options.source.empty() ? NewestRun() : options.source);
  ListOptions sel;
  sel.label_selector = "controller-uid=" + run.uid;
  std::vector<Json> pods = Items(client_.ListAll(kPods, spec_.namespace_name, sel));
  SortByCreation(pods);
  std::vector<AttemptLog> out;
  for (std::size_t i = 0; i < pods.size(); ++i) {
    AttemptLog a;
    a.attempt = static_cast<int>(i) + 1;
    a.pod = Name(pods[i]);
    a.phase = pods[i].value("status", Json::object()).value("phase", "");
    a.exit_code = ExitCodeOf(pods[i]);
    if (ContainerStarted(pods[i])) {
      LogOptions lo = options.ForPod("task");
      lo.follow = false;  // each attempt's log as it is now
      try {
        a.text = client_.ReadLogs(spec_.namespace_name, a.pod, lo);
      } catch (const BadRequest&) {
        // The container has not produced a log yet (still creating): nothing to show.
      } catch (const NotFound&) {
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

void ScheduledJob::FollowLogs(const WorkloadLogOptions& options,
                              const std::function<bool(const WorkloadLogLine&)>& on_line) {
  const std::string job_name = options.source.empty() ? NewestRun() : options.source;
  const std::function<bool()>& cancelled = options.cancelled;
  const std::chrono::milliseconds pending_wait = options.pending_wait;
  JobRun run = GetRun(job_name);
  ListOptions pod_sel;
  pod_sel.label_selector = "controller-uid=" + run.uid;
  ListOptions job_sel;
  job_sel.field_selector = "metadata.name=" + job_name;
  Informer pods(client_, kPods, spec_.namespace_name, pod_sel);
  Informer jobs(client_, kJobs, spec_.namespace_name, job_sel);
  std::set<std::string> followed;
  auto idle_since = std::chrono::steady_clock::now();
  while (true) {
    if (cancelled && cancelled()) return;
    // Drain what the watches have (each Next() is short: both streams must be read).
    pods.Next(std::chrono::milliseconds(200));
    jobs.Next(std::chrono::milliseconds(200));
    std::vector<Json> snapshot = internal::CheckedSnapshot(pods, "Pod");
    SortByCreation(snapshot);
    const Json* next = nullptr;
    int attempt = 0;
    for (std::size_t i = 0; i < snapshot.size(); ++i) {
      if (!followed.count(Name(snapshot[i])) && ContainerStarted(snapshot[i])) {
        next = &snapshot[i];
        attempt = static_cast<int>(i) + 1;
        break;
      }
    }
    if (next) {
      std::string pod = Name(*next);
      followed.insert(pod);
      LogOptions lo = options.ForPod("task");
      lo.follow = true;
      LogStream stream = internal::OpenPodLogs(client_, spec_.namespace_name, pod, lo,
                                               fmt::format("attempt-{}", attempt));
      while (true) {
        if (cancelled && cancelled()) {
          stream.Cancel();
          return;
        }
        auto line = stream.NextLine(std::chrono::milliseconds(500));
        if (!line) {
          if (stream.ended()) break;
          continue;
        }
        if (!on_line({fmt::format("attempt-{}", attempt), std::move(*line)})) {
          stream.Cancel();
          return;
        }
      }
      idle_since = std::chrono::steady_clock::now();
      continue;
    }
    auto job_snapshot = internal::CheckedSnapshot(jobs, "Job");
    bool gone = job_snapshot.empty();  // the first Next() listed: the run was deleted
    bool finished = !gone && RunOf(job_snapshot.front()).finished();
    bool all_followed = true;
    for (const auto& p : snapshot) all_followed = all_followed && followed.count(Name(p));
    if (gone || (finished && all_followed)) return;
    if (std::chrono::steady_clock::now() - idle_since > pending_wait) {
      // A finished run may keep pods that never started (deleted at the deadline, say).
      if (finished) return;
      throw Timeout(ErrorKind::kTimeout,
                    fmt::format("run {}/{}: no attempt started within {} ms", spec_.namespace_name,
                                job_name, pending_wait.count()));
    }
  }
}

WorkloadLogStream ScheduledJob::StreamLogs(WorkloadLogOptions options) {
  return WorkloadLogStream::WithOptions(
      std::move(options),
      [self = *this](const WorkloadLogOptions& o, const WorkloadLogStream::Emit& emit) mutable {
        if (o.follow) {
          self.FollowLogs(o, emit);
          return;
        }
        // An attempt whose container has not started is said at once (a notice line); a run
        // none of whose attempts started is an error saying so, not an empty success.
        std::vector<AttemptLog> attempts = self.Logs(o);
        bool any_started = false;
        for (const AttemptLog& a : attempts) any_started = any_started || a.phase != "Pending";
        if (!any_started) {
          std::string run = o.source.empty() ? self.NewestRun() : o.source;
          throw Error(ErrorKind::kWorkloadFailed,
                      fmt::format("no attempt of run {}/{} has started, so there are no logs yet"
                                  "{} (-f waits for them)",
                                  self.spec().namespace_name, run,
                                  attempts.empty() ? ": it has no pod yet" : ": Pending"));
        }
        for (const AttemptLog& a : attempts) {
          if (a.phase == "Pending") {
            if (!emit({fmt::format("attempt-{}", a.attempt), "(not started: Pending)"})) return;
            continue;
          }
          std::size_t start = 0;
          while (start < a.text.size()) {
            std::size_t end = a.text.find('\n', start);
            if (end == std::string::npos) end = a.text.size();
            if (!emit({fmt::format("attempt-{}", a.attempt), a.text.substr(start, end - start)})) {
              return;
            }
            start = end + 1;
          }
        }
      });
}

ScheduledJobRenderOptions ScheduledJob::ServerRenderOptions() {
  return ServerRenderOptionsOf(client_, spec_);
}

// ---- the kind's parts of the shared life (Workload<ScheduledJobKind>) ------------------------

namespace internal {

template <>
struct KindOps<ScheduledJobKind> {
  // Its roots are a CronJob and, without one, its runs: its own LoadSpec and RefTypes.
  static constexpr KindFacts<ScheduledJobSpec> kFacts{"task", validation::RequireDns1123Label,
                                                      kScheduledJobLabel};

  // The CronJob, or (an on-demand task) its newest run; only a CronJob's UID is remembered
  // (on-demand tasks are their runs: no root to guard).
  static ScheduledJobSpec LoadSpec(Client& client, const std::string& ns, const std::string& name,
                                   std::string* uid) {
    try {
      RootIdentity id;
      if (auto spec = ScheduledJobSpecFromObject(
              GetChecked(client, CronJobTypeOf(client), ns, name), true, &id)) {
        *uid = std::move(id.uid);
        return std::move(*spec);
      }
    } catch (const NotFound&) {
    }
    ListOptions sel;
    sel.label_selector = TaskSelector(name);
    std::vector<Json> jobs = Items(client.ListAll(kJobs, ns, sel));
    SortByCreation(jobs);
    for (auto it = jobs.rbegin(); it != jobs.rend(); ++it) {
      if (auto spec = ScheduledJobSpecFromObject(*it, false)) return std::move(*spec);
    }
    throw NotFound(
        ErrorKind::kNotFound,
        fmt::format("no tfk8s scheduled job {}/{} (no CronJob or run with its spec)", ns, name),
        404, "NotFound");
  }

  // A task's CronJob and its runs carry the same labels.
  static std::vector<ResourceType> RefTypes(Client& client) {
    std::vector<ResourceType> types;
    try {
      types.push_back(CronJobTypeOf(client));
    } catch (const NotFound&) {
    }
    types.push_back(kJobs);
    return types;
  }
  static std::string RefSelector() { return kScheduledJobLabel; }

  // One run is what a schedule or a run-now adds to the namespace's usage.
  static FitResult Preflight(Client& client, const ScheduledJobSpec& spec) {
    return CheckRun(client, spec.namespace_name, RenderRunJob(spec));
  }

  static ScheduleStatus Status(Client& client, const ScheduledJobSpec& task);

  static std::vector<Json> Render(Client client, const ScheduledJobSpec& spec) {
    return RenderScheduledJob(spec, ServerRenderOptionsOf(client, spec));
  }

  // A schedule: its CronJob (its runs are the CronJob controller's, owned by it). An on-demand
  // run: named from its content, so that `kubectl apply` takes it and the same spec applied
  // again is the same run.
  static std::vector<Json> RenderForApply(Client client, const ScheduledJobSpec& spec) {
    ScheduledJobRenderOptions ro = ServerRenderOptionsOf(client, spec);
    ro.fixed_run_name = true;
    return RenderScheduledJob(spec, ro);
  }
};

ScheduleStatus KindOps<ScheduledJobKind>::Status(Client& client, const ScheduledJobSpec& task) {
  ScheduleStatus st;
  if (!task.scheduled()) return st;
  Json cj;
  try {
    cj = internal::GetChecked(client, CronJobTypeOf(client), task.namespace_name, task.name);
  } catch (const NotFound&) {
    return st;
  }
  st.exists = true;
  st.api_version = cj.value("apiVersion", CronJobTypeOf(client).ApiVersion());
  const Json& cronjob = cj.value("spec", Json::object());
  st.suspended = cronjob.value("suspend", false);
  st.schedule = cronjob.value("schedule", "");
  if (auto t = internal::TimeAt(cj, Json::json_pointer("/status/lastScheduleTime"))) {
    st.last_schedule_time = internal::ToTimePoint(*t);
  }
  if (auto t = internal::TimeAt(cj, Json::json_pointer("/status/lastSuccessfulTime"))) {
    st.last_successful_time = internal::ToTimePoint(*t);
  }
  for (const auto& ref : cj.value("status", Json::object()).value("active", Json::array())) {
    st.active.push_back(ref.value("name", ""));
  }
  if (!st.suspended) {
    try {
      auto next = NextScheduleTimes(st.schedule, cronjob.value("timeZone", ""),
                                    std::chrono::system_clock::now(), 1);
      if (!next.empty()) st.next_schedule_time = next.front();
    } catch (const ValidationError&) {
      // Edited by hand into something we do not understand: no prediction.
    }
  }
  return st;
}

}  // namespace internal

template class Workload<ScheduledJobKind>;

}  // namespace tfk8s
