// ScheduledJob: spec validation, JSON round trip, the container command, rendering of Jobs and
// CronJobs, and the run model. Pure: no I/O (apart from reading the time zone database).

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "http/crypto.hpp"
#include "tfk8s/quantity.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/validation.hpp"
#include "workloads/common.hpp"
#include "workloads/cron.hpp"
#include "workloads/identity.hpp"
#include "workloads/pod.hpp"
#include "workloads/scheduledjob_internal.hpp"
#include "workloads/spec_json.hpp"

namespace tfk8s {

using internal::CronSchedule;
using internal::Field;
using internal::OptionalField;
using internal::SysSeconds;
using internal::TimeZone;

// ---- enums ----------------------------------------------------------------------------------

std::string ToString(ConcurrencyPolicy policy) {
  switch (policy) {
    case ConcurrencyPolicy::kAllow:
      return "Allow";
    case ConcurrencyPolicy::kForbid:
      return "Forbid";
    case ConcurrencyPolicy::kReplace:
      return "Replace";
  }
  return "Forbid";
}

ConcurrencyPolicy ParseConcurrencyPolicy(std::string_view text) {
  if (text == "Allow") return ConcurrencyPolicy::kAllow;
  if (text == "Forbid") return ConcurrencyPolicy::kForbid;
  if (text == "Replace") return ConcurrencyPolicy::kReplace;
  throw ValidationError("concurrencyPolicy", std::string(text), "must be Allow, Forbid or Replace");
}

std::string ToString(RunResult result) {
  switch (result) {
    case RunResult::kPending:
      return "Pending";
    case RunResult::kRunning:
      return "Running";
    case RunResult::kSucceeded:
      return "Succeeded";
    case RunResult::kFailed:
      return "Failed";
    case RunResult::kTimedOut:
      return "TimedOut";
    case RunResult::kUnknown:
      break;
  }
  return "Unknown";
}

std::string ToString(RunTrigger trigger) {
  switch (trigger) {
    case RunTrigger::kOnDemand:
      return "on-demand";
    case RunTrigger::kScheduled:
      return "scheduled";
    case RunTrigger::kManual:
      return "manual";
  }
  return "on-demand";
}

std::string ToString(AlertKind kind) {
  switch (kind) {
    case AlertKind::kFailure:
      return "failure";
    case AlertKind::kTimeout:
      return "timeout";
    case AlertKind::kMissedSchedule:
      return "missed-schedule";
    case AlertKind::kCleanup:
      return "cleanup";
  }
  return "failure";
}

// ---- shell quoting --------------------------------------------------------------------------

std::string ShellQuote(std::string_view word) {
  // Inside single quotes a POSIX shell takes every byte literally except the closing quote, so
  // a quote is written as: close, an escaped quote, reopen. Nothing else needs care.
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += "'";
  return out;
}

// ---- helpers shared with the lifecycle ------------------------------------------------------

namespace internal {

Json CommonLabels(const ScheduledJobSpec& spec) {
  Json labels = Json::object();
  for (const auto& [k, v] : spec.labels) labels[k] = v;
  if (!spec.owner.empty()) labels[kOwnerLabel] = spec.owner;
  labels[kManagedBy] = kManagedByValue;
  labels[kScheduledJobLabel] = spec.name;
  return labels;
}

std::chrono::system_clock::time_point ToTimePoint(SysSeconds t) {
  // Timestamps come from objects whoever may edit them can set (the culler's last-activity
  // annotation, say): a year such as 9999 is clamped to what the clock holds, not overflowed.
  using Clock = std::chrono::system_clock;
  constexpr auto kMax = std::chrono::duration_cast<std::chrono::seconds>(Clock::duration::max());
  constexpr auto kMin = std::chrono::duration_cast<std::chrono::seconds>(Clock::duration::min());
  if (t.time_since_epoch() > kMax) return Clock::time_point::max();
  if (t.time_since_epoch() < kMin) return Clock::time_point::min();
  return std::chrono::time_point_cast<Clock::duration>(t);
}

SysSeconds ToSysSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::floor<std::chrono::seconds>(t);
}

std::string AnnotationOf(const Json& object, const char* key) {
  auto m = object.find("metadata");
  if (m == object.end() || !m->is_object()) return {};
  auto a = m->find("annotations");
  if (a == m->end() || !a->is_object()) return {};
  auto v = a->find(key);
  return v != a->end() && v->is_string() ? v->get<std::string>() : std::string();
}

std::optional<SysSeconds> TimeAt(const Json& object, const Json::json_pointer& pointer) {
  if (!object.contains(pointer)) return std::nullopt;
  const Json& v = object.at(pointer);
  if (!v.is_string()) return std::nullopt;
  return ParseTimestamp(v.get<std::string>());
}

}  // namespace internal

using internal::CommonLabels;

// ---- validation -----------------------------------------------------------------------------

namespace {

bool HasNul(std::string_view s) { return s.find('\0') != std::string_view::npos; }

// A path made of plain components: no "..", no empty or "." components, no NUL.
void CheckCleanPath(const std::string& field, const std::string& path, bool absolute) {
  if (path.empty()) throw ValidationError(field, path, "must not be empty");
  if (HasNul(path) || path.find('\n') != std::string::npos) {
    throw ValidationError(field, path, "must not contain NUL or newline characters");
  }
  if (absolute && path.front() != '/') {
    throw ValidationError(field, path, "must be an absolute path");
  }
  if (!absolute && path.front() == '/') throw ValidationError(field, path, "must be relative");
  std::size_t start = absolute ? 1 : 0;
  if (absolute && path == "/") return;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (part == "..") throw ValidationError(field, path, "must not contain \"..\"");
    if (part.empty() || part == ".") {
      throw ValidationError(field, path, "must not contain empty or \".\" components");
    }
    start = end + 1;
  }
}

std::string JoinPath(const std::string& dir, const std::string& rel) {
  if (rel.empty()) return dir;
  return dir == "/" ? "/" + rel : dir + "/" + rel;
}

// The entry path relative to home_path ("" when it is not under it).
std::string EntryRelative(const ScheduledJobSpec& spec) {
  const std::string& e = spec.entry_path;
  if (e.empty() || e.front() != '/') return e;
  std::string prefix = spec.home_path == "/" ? "/" : spec.home_path + "/";
  return e.rfind(prefix, 0) == 0 ? e.substr(prefix.size()) : std::string();
}

}  // namespace

void ScheduledJobSpec::Validate() const {
  validation::RequireDns1123Label("name", name);
  // The 1.20 CronJob controller names runs "<name>-<10 digits>", which must stay a 63-character
  // label; the apiserver limits CronJob names to 52 for that reason.
  if (name.size() > 52) {
    throw ValidationError("name", name,
                          fmt::format("must be at most 52 characters (has {}): runs are named "
                                      "\"<name>-<timestamp>\"",
                                      name.size()));
  }
  validation::RequireDns1123Label("namespace", namespace_name);
  internal::ValidateOwner(owner, labels);
  for (const auto& [k, v] : labels) {
    validation::RequireLabelKey("labels", k);
    validation::RequireLabelValue("labels[" + k + "]", v);
    if (k == internal::kScheduledJobLabel || k == internal::kManagedBy || k == "job-name" ||
        k == "controller-uid") {
      throw ValidationError("labels", k, "is set by tfk8s or the job controller");
    }
  }
  if (image.empty()) throw ValidationError("image", "", "must not be empty");
  if (std::any_of(image.begin(), image.end(),
                  [](char c) { return std::isspace(static_cast<unsigned char>(c)) || c == 0; })) {
    throw ValidationError("image", image, "must not contain whitespace");
  }
  validation::ValidatePodOptions("", pod);

  // Volumes.
  CheckCleanPath("homePath", home_path, /*absolute=*/true);
  std::set<std::string> mount_paths;
  if (!home_claim.empty()) {
    validation::RequireDns1123Subdomain("homeClaim", home_claim);
    mount_paths.insert(home_path);
  }
  for (std::size_t i = 0; i < volumes.size(); ++i) {
    const VolumeMount& v = volumes[i];
    std::string f = fmt::format("volumes[{}]", i);
    validation::RequireDns1123Subdomain(f + ".claimName", v.claim);
    CheckCleanPath(f + ".mountPath", v.mount_path, /*absolute=*/true);
    if (!v.sub_path.empty()) CheckCleanPath(f + ".subPath", v.sub_path, /*absolute=*/false);
    if (!mount_paths.insert(v.mount_path).second) {
      throw ValidationError(f + ".mountPath", v.mount_path, "is already mounted");
    }
  }

  // The command.
  if (!working_dir.empty()) {
    CheckCleanPath("workingDir", working_dir, /*absolute=*/working_dir.front() == '/');
  }
  if (HasNul(exec_command)) {
    throw ValidationError("execCommand", exec_command, "must not contain NUL characters");
  }
  if (std::any_of(exec_command.begin(), exec_command.end(),
                  [](char c) { return std::isspace(static_cast<unsigned char>(c)); })) {
    throw ValidationError("execCommand", exec_command,
                          "must be one program (no shell is used): put its options in execArgs, "
                          "e.g. execCommand \"python3\", execArgs [\"-u\"]");
  }
  if (exec_command.empty() && !exec_args.empty()) {
    throw ValidationError("execArgs", exec_args.front(), "need an execCommand");
  }
  for (std::size_t i = 0; i < exec_args.size(); ++i) {
    if (HasNul(exec_args[i])) {
      throw ValidationError(fmt::format("execArgs[{}]", i), "…", "must not contain NUL characters");
    }
  }
  if (entry_path.empty()) {
    throw ValidationError("entryPath", "",
                          "must name the program to run, relative to homePath (" + home_path + ")");
  }
  std::string relative = EntryRelative(*this);
  if (relative.empty()) {
    throw ValidationError("entryPath", entry_path, "must be under homePath (" + home_path + ")");
  }
  CheckCleanPath("entryPath", relative, /*absolute=*/false);
  for (std::size_t i = 0; i < args.size(); ++i) {
    // Every byte but NUL can travel in an argv element; NUL would truncate it in execve().
    if (HasNul(args[i])) {
      throw ValidationError(fmt::format("args[{}]", i), "…", "must not contain NUL characters");
    }
  }
  validation::ValidateEnv("env", env);

  validation::ValidateResources("resources", resources);
  validation::ValidatePlacement("placement", placement);
  // One pod: a GPU node type without GPUs can never match (GPU nodes take only GPU pods).
  const Placement& p = placement;
  const Resources& r = resources;
  if (!p.gputype.empty() && r.gpus == 0) {
    throw ValidationError("placement.gputype", p.gputype,
                          "selects GPU nodes, which only take pods requesting GPUs: set "
                          "resources.gpus");
  }
  for (const auto& [k, v] : pod_annotations) validation::RequireLabelKey("podAnnotations", k);

  // Retries and time limits.
  if (backoff_limit < 0) {
    throw ValidationError("backoffLimit", std::to_string(backoff_limit), "must be >= 0");
  }
  if (active_deadline_seconds && *active_deadline_seconds <= 0) {
    throw ValidationError("activeDeadlineSeconds", std::to_string(*active_deadline_seconds),
                          "must be > 0");
  }
  if (ttl_seconds_after_finished && *ttl_seconds_after_finished < 0) {
    throw ValidationError("ttlSecondsAfterFinished", std::to_string(*ttl_seconds_after_finished),
                          "must be >= 0");
  }

  // Schedule.
  if (schedule.empty()) {
    if (!time_zone.empty()) {
      throw ValidationError("timeZone", time_zone, "applies to a schedule; set schedule too");
    }
    return;
  }
  ValidateCronSchedule(schedule, time_zone);
  if (starting_deadline_seconds && *starting_deadline_seconds < 10) {
    throw ValidationError("startingDeadlineSeconds", std::to_string(*starting_deadline_seconds),
                          "must be at least 10: the CronJob controller checks every 10 seconds, "
                          "so a shorter deadline can skip runs");
  }
  if (successful_jobs_history_limit < 0) {
    throw ValidationError("successfulJobsHistoryLimit",
                          std::to_string(successful_jobs_history_limit), "must be >= 0");
  }
  if (failed_jobs_history_limit < 0) {
    throw ValidationError("failedJobsHistoryLimit", std::to_string(failed_jobs_history_limit),
                          "must be >= 0");
  }
}

void ValidateCronSchedule(const std::string& schedule, const std::string& time_zone) {
  CronSchedule cron = CronSchedule::Parse(schedule, "schedule");
  TimeZone zone = TimeZone::Load(time_zone, "timeZone");
  // A valid expression can still never fire ("0 0 30 2 *"): almost certainly a mistake.
  auto now = internal::ToSysSeconds(std::chrono::system_clock::now());
  if (!cron.Next(now, zone)) {
    throw ValidationError("schedule", schedule, "never fires (no matching date within 5 years)");
  }
}

std::vector<std::chrono::system_clock::time_point> NextScheduleTimes(
    const std::string& schedule, const std::string& time_zone,
    std::chrono::system_clock::time_point after, int count) {
  CronSchedule cron = CronSchedule::Parse(schedule, "schedule");
  TimeZone zone = TimeZone::Load(time_zone, "timeZone");
  std::vector<std::chrono::system_clock::time_point> out;
  SysSeconds t = internal::ToSysSeconds(after);
  for (int i = 0; i < count; ++i) {
    auto n = cron.Next(t, zone);
    if (!n) break;
    out.push_back(internal::ToTimePoint(*n));
    t = *n;
  }
  return out;
}

// ---- command --------------------------------------------------------------------------------

std::vector<std::string> ScheduledJobSpec::Command() const {
  std::vector<std::string> argv;
  if (!exec_command.empty()) argv.push_back(exec_command);
  argv.insert(argv.end(), exec_args.begin(), exec_args.end());
  argv.push_back(JoinPath(home_path, EntryRelative(*this)));
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

std::string ScheduledJobSpec::WorkingDirectory() const {
  if (working_dir.empty()) return home_path;
  if (working_dir.front() == '/') return working_dir;
  return JoinPath(home_path, working_dir);
}

std::string ScheduledJobSpec::CommandLine() const {
  std::string out = "cd " + ShellQuote(WorkingDirectory()) + " &&";
  for (const auto& word : Command()) out += " " + ShellQuote(word);
  return out;
}

// ---- JSON round trip ------------------------------------------------------------------------

Json ScheduledJobSpec::ToJson() const {
  Json volumes_json = Json::array();
  for (const auto& v : volumes) {
    volumes_json.push_back({{"claimName", v.claim},
                            {"mountPath", v.mount_path},
                            {"readOnly", v.read_only},
                            {"subPath", v.sub_path}});
  }
  Json j = {{"name", name},
            {"namespace", namespace_name},
            {"labels", labels},
            {"image", image},
            {"homeClaim", home_claim},
            {"homePath", home_path},
            {"homeReadOnly", home_read_only},
            {"volumes", volumes_json},
            {"workingDir", working_dir},
            {"execCommand", exec_command},
            {"execArgs", exec_args},
            {"entryPath", entry_path},
            {"args", args},
            {"env", internal::ToSpecJson(env)},
            {"resources", internal::ToSpecJson(resources)},
            {"placement", internal::ToSpecJson(placement)},
            {"podAnnotations", pod_annotations},
            {"backoffLimit", backoff_limit},
            {"activeDeadlineSeconds", nullptr},
            {"ttlSecondsAfterFinished", nullptr},
            {"schedule", schedule},
            {"timeZone", time_zone},
            {"concurrencyPolicy", ToString(concurrency_policy)},
            {"startingDeadlineSeconds", nullptr},
            {"successfulJobsHistoryLimit", successful_jobs_history_limit},
            {"failedJobsHistoryLimit", failed_jobs_history_limit},
            {"suspend", suspend}};
  if (active_deadline_seconds) j["activeDeadlineSeconds"] = *active_deadline_seconds;
  if (ttl_seconds_after_finished) j["ttlSecondsAfterFinished"] = *ttl_seconds_after_finished;
  if (starting_deadline_seconds) j["startingDeadlineSeconds"] = *starting_deadline_seconds;
  // Written only when set, so specs stored before the option existed read back unchanged.
  if (expand_variable_references) j["expandVariableReferences"] = true;
  internal::AddToSpecJson(&j, pod);
  if (pod_security != PodSecurityLevel::kRestricted) j["podSecurity"] = ToString(pod_security);
  if (!owner.empty()) j["owner"] = owner;
  return j;
}

ScheduledJobSpec ScheduledJobSpec::FromJson(const Json& j) {
  if (!j.is_object()) throw ValidationError("spec", j.dump(), "must be a JSON object");
  ScheduledJobSpec s;
  const std::string root;
  s.name = Field<std::string>(j, "name", root, "");
  s.namespace_name = Field<std::string>(j, "namespace", root, "default");
  s.owner = Field<std::string>(j, "owner", root, "");
  s.labels = Field<std::map<std::string, std::string>>(j, "labels", root, {});
  s.image = Field<std::string>(j, "image", root, "");
  s.pod = internal::PodOptionsFromSpecJson(j, root);
  s.pod_security = internal::PodSecurityFromSpecJson(j, root);
  s.home_claim = Field<std::string>(j, "homeClaim", root, "");
  s.home_path = Field<std::string>(j, "homePath", root, "/root");
  s.home_read_only = Field<bool>(j, "homeReadOnly", root, false);
  if (auto v = j.find("volumes"); v != j.end() && v->is_array()) {
    for (std::size_t i = 0; i < v->size(); ++i) {
      const Json& e = (*v)[i];
      std::string path = fmt::format("volumes[{}].", i);
      if (!e.is_object()) throw ValidationError(path, e.dump(), "must be an object");
      s.volumes.push_back({Field<std::string>(e, "claimName", path, ""),
                           Field<std::string>(e, "mountPath", path, ""),
                           Field<bool>(e, "readOnly", path, false),
                           Field<std::string>(e, "subPath", path, "")});
    }
  }
  s.working_dir = Field<std::string>(j, "workingDir", root, "");
  s.exec_command = Field<std::string>(j, "execCommand", root, "");
  s.exec_args = Field<std::vector<std::string>>(j, "execArgs", root, {});
  s.entry_path = Field<std::string>(j, "entryPath", root, "");
  s.args = Field<std::vector<std::string>>(j, "args", root, {});
  s.expand_variable_references = Field<bool>(j, "expandVariableReferences", root, false);
  if (auto e = j.find("env"); e != j.end()) s.env = internal::EnvFromSpecJson(*e, "env");
  if (auto r = j.find("resources"); r != j.end() && r->is_object()) {
    s.resources = internal::ResourcesFromSpecJson(*r, "resources.");
  }
  if (auto p = j.find("placement"); p != j.end() && p->is_object()) {
    s.placement = internal::PlacementFromSpecJson(*p, "placement.");
  }
  s.pod_annotations = Field<std::map<std::string, std::string>>(j, "podAnnotations", root, {});
  s.backoff_limit = Field<int>(j, "backoffLimit", root, 0);
  s.active_deadline_seconds = OptionalField<std::int64_t>(j, "activeDeadlineSeconds", root);
  s.ttl_seconds_after_finished = OptionalField<std::int32_t>(j, "ttlSecondsAfterFinished", root);
  s.schedule = Field<std::string>(j, "schedule", root, "");
  s.time_zone = Field<std::string>(j, "timeZone", root, "");
  s.concurrency_policy =
      ParseConcurrencyPolicy(Field<std::string>(j, "concurrencyPolicy", root, "Forbid"));
  s.starting_deadline_seconds = OptionalField<std::int64_t>(j, "startingDeadlineSeconds", root);
  s.successful_jobs_history_limit = Field<int>(j, "successfulJobsHistoryLimit", root, 3);
  s.failed_jobs_history_limit = Field<int>(j, "failedJobsHistoryLimit", root, 1);
  s.suspend = Field<bool>(j, "suspend", root, false);
  Json understood = s.ToJson();
  understood.emplace("podSecurity", "restricted");  // left out of ToJson at its default
  internal::RefuseUnknownFields(j, understood, "ScheduledJob");
  return s;
}

// ---- rendering ------------------------------------------------------------------------------

namespace {

Json PodTemplate(const ScheduledJobSpec& spec) {
  Json container = {
      {"name", "task"},
      {"image", spec.image},
      {"command", internal::KubeletArgv(spec.Command(), spec.expand_variable_references)},
      {"workingDir", spec.WorkingDirectory()}};
  if (!spec.env.empty()) container["env"] = internal::EnvJson(spec.env);
  Json res = internal::ResourcesJson(spec.resources);
  if (!res.empty()) container["resources"] = res;
  Json mounts = Json::array();
  Json volumes = Json::array();
  if (!spec.home_claim.empty()) {
    Json m = {{"name", "home"}, {"mountPath", spec.home_path}};
    if (spec.home_read_only) m["readOnly"] = true;
    mounts.push_back(m);
    Json claim = {{"claimName", spec.home_claim}};
    if (spec.home_read_only) claim["readOnly"] = true;
    volumes.push_back({{"name", "home"}, {"persistentVolumeClaim", claim}});
  }
  internal::ClaimVolumes claims = internal::ClaimVolumesJson(spec.volumes);
  for (auto& m : claims.mounts) mounts.push_back(std::move(m));
  for (auto& v : claims.volumes) volumes.push_back(std::move(v));
  if (!mounts.empty()) container["volumeMounts"] = mounts;
  const PodOptions options = internal::WithSecurityDefaults(spec.pod, spec.pod_security);
  internal::AddContainerOptions(&container, options);

  // Never: every attempt is a new pod, so attempts, logs and exit codes of each stay visible and
  // backoffLimit counts them (OnFailure would restart in place and hide the failed attempts).
  Json pod = {{"restartPolicy", "Never"}};
  internal::AddPlacement(&pod, spec.placement, spec.resources.gpus > 0);
  internal::AddPodOptions(&pod, options);
  pod["containers"] = Json::array({container});
  if (!volumes.empty()) pod["volumes"] = volumes;

  Json metadata = {{"labels", CommonLabels(spec)}};
  if (!spec.pod_annotations.empty()) metadata["annotations"] = spec.pod_annotations;
  // Every run's pod comes from here: nothing is sent when it would break the declared level.
  internal::RequirePodSecurity({{"kind", "Pod"}, {"metadata", metadata}, {"spec", pod}},
                               spec.pod_security);
  return {{"metadata", metadata}, {"spec", pod}};
}

Json JobSpec(const ScheduledJobSpec& spec) {
  Json j = {{"backoffLimit", spec.backoff_limit}};
  if (spec.active_deadline_seconds) j["activeDeadlineSeconds"] = *spec.active_deadline_seconds;
  if (spec.ttl_seconds_after_finished) {
    j["ttlSecondsAfterFinished"] = *spec.ttl_seconds_after_finished;
  }
  j["template"] = PodTemplate(spec);
  return j;
}

bool IsUtc(const std::string& zone) { return zone.empty() || zone == "UTC" || zone == "Etc/UTC"; }

}  // namespace

Json RenderRunJob(const ScheduledJobSpec& spec, const ScheduledJobRenderOptions& options) {
  spec.Validate();
  Json metadata = Json::object();
  if (options.job_name.empty()) {
    metadata["generateName"] = spec.name + "-";
  } else {
    validation::RequireDns1123Label("jobName", options.job_name);
    metadata["name"] = options.job_name;
  }
  metadata["namespace"] = spec.namespace_name;
  metadata["labels"] = CommonLabels(spec);
  metadata["annotations"] = {{internal::kSpecAnnotation, spec.ToJson().dump()}};
  Json job = {
      {"apiVersion", "batch/v1"}, {"kind", "Job"}, {"metadata", metadata}, {"spec", JobSpec(spec)}};
  if (options.job_name.empty() && options.fixed_run_name) {
    // Named from everything else it holds: the same spec is the same run.
    std::string digest = internal::HexEncode(internal::Digest("sha256", job.dump()));
    job["metadata"].erase("generateName");
    job["metadata"]["name"] = spec.name + "-" + digest.substr(0, 10);
  }
  return job;
}

Json RenderCronJob(const ScheduledJobSpec& spec, const ScheduledJobRenderOptions& options) {
  spec.Validate();
  if (!spec.scheduled()) {
    throw ValidationError("schedule", "", "a CronJob needs a schedule (cron expression)");
  }
  const std::string& version = options.cronjob_api_version;
  if (version != "batch/v1" && version != "batch/v1beta1") {
    throw ValidationError("cronjobApiVersion", version, "must be batch/v1 or batch/v1beta1");
  }
  bool zone_field = !IsUtc(spec.time_zone);
  if (zone_field && (!options.time_zone_supported || version != "batch/v1")) {
    throw ValidationError(
        "timeZone", spec.time_zone,
        "this server cannot run a CronJob in a time zone (spec.timeZone needs Kubernetes >= 1.25 "
        "and batch/v1): leave timeZone empty and write the schedule in UTC");
  }
  Json cron_spec = {{"schedule", spec.schedule}};
  if (zone_field) cron_spec["timeZone"] = spec.time_zone;
  cron_spec["concurrencyPolicy"] = ToString(spec.concurrency_policy);
  cron_spec["suspend"] = spec.suspend;
  if (spec.starting_deadline_seconds) {
    cron_spec["startingDeadlineSeconds"] = *spec.starting_deadline_seconds;
  }
  cron_spec["successfulJobsHistoryLimit"] = spec.successful_jobs_history_limit;
  cron_spec["failedJobsHistoryLimit"] = spec.failed_jobs_history_limit;
  cron_spec["jobTemplate"] = {{"metadata", {{"labels", CommonLabels(spec)}}},
                              {"spec", JobSpec(spec)}};
  return {{"apiVersion", version},
          {"kind", "CronJob"},
          {"metadata",
           {{"name", spec.name},
            {"namespace", spec.namespace_name},
            {"labels", CommonLabels(spec)},
            {"annotations", {{internal::kSpecAnnotation, spec.ToJson().dump()}}}}},
          {"spec", cron_spec}};
}

Json RenderManualRun(const Json& cronjob, const std::string& job_name,
                     const std::map<std::string, std::string>& pod_annotations) {
  const Json& meta = cronjob.value("metadata", Json::object());
  std::string name = meta.value("name", "");
  std::string uid = meta.value("uid", "");
  if (name.empty() || uid.empty()) {
    throw ValidationError("cronjob", name, "needs metadata.name and metadata.uid (as served)");
  }
  Json tmpl = cronjob.value("spec", Json::object()).value("jobTemplate", Json::object());
  Json tmeta = tmpl.value("metadata", Json::object());
  Json metadata = Json::object();
  if (job_name.empty()) {
    metadata["generateName"] = name + "-";
  } else {
    validation::RequireDns1123Label("jobName", job_name);
    metadata["name"] = job_name;
  }
  metadata["namespace"] = meta.value("namespace", "");
  metadata["labels"] = tmeta.value("labels", Json::object());
  Json annotations = tmeta.value("annotations", Json::object());
  annotations[internal::kInstantiateAnnotation] = "manual";
  metadata["annotations"] = annotations;
  metadata["ownerReferences"] = Json::array({{{"apiVersion", cronjob.value("apiVersion", "")},
                                              {"kind", "CronJob"},
                                              {"name", name},
                                              {"uid", uid},
                                              {"controller", true},
                                              {"blockOwnerDeletion", true}}});
  Json spec = tmpl.value("spec", Json::object());
  if (!pod_annotations.empty()) {
    Json& pod_meta = spec["template"]["metadata"];
    if (!pod_meta.is_object()) pod_meta = Json::object();
    for (const auto& [k, v] : pod_annotations) {
      validation::RequireLabelKey("podAnnotations", k);
      pod_meta["annotations"][k] = v;
    }
  }
  return {{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"metadata", metadata}, {"spec", spec}};
}

std::vector<Json> RenderScheduledJob(const ScheduledJobSpec& spec,
                                     const ScheduledJobRenderOptions& options) {
  if (spec.scheduled()) return {RenderCronJob(spec, options)};
  return {RenderRunJob(spec, options)};
}

// ---- runs -----------------------------------------------------------------------------------

bool JobRun::finished() const {
  return result == RunResult::kSucceeded || result == RunResult::kFailed ||
         result == RunResult::kTimedOut;
}

Json JobRun::ToJson() const {
  Json out = FieldsToJson(*this);
  out["finished"] = finished();
  return out;
}

JobRun RunOf(const Json& job) {
  using internal::TimeAt;
  JobRun run;
  const Json& meta = job.value("metadata", Json::object());
  run.name = meta.value("name", "");
  run.uid = meta.value("uid", "");
  run.namespace_name = meta.value("namespace", "");
  run.scheduled_job = meta.value("labels", Json::object()).value(internal::kScheduledJobLabel, "");
  bool owned_by_cronjob = false;
  for (const auto& o : meta.value("ownerReferences", Json::array())) {
    if (o.value("kind", "") == "CronJob") {
      owned_by_cronjob = true;
      if (run.scheduled_job.empty()) run.scheduled_job = o.value("name", "");
    }
  }
  if (internal::AnnotationOf(job, internal::kInstantiateAnnotation) == "manual") {
    run.trigger = RunTrigger::kManual;
  } else if (owned_by_cronjob) {
    run.trigger = RunTrigger::kScheduled;
    std::string stamp = internal::AnnotationOf(job, internal::kScheduledTimestampAnnotation);
    if (auto t = internal::ParseTimestamp(stamp)) {
      run.scheduled_time = internal::ToTimePoint(*t);
    } else if (auto dash = run.name.rfind('-'); dash != std::string::npos) {
      // Controllers name scheduled runs "<cronjob>-<time>": Unix seconds up to 1.20, minutes
      // from 1.21 (the v2 controller).
      std::string digits = run.name.substr(dash + 1);
      if (!digits.empty() && digits.size() <= 12 &&
          std::all_of(digits.begin(), digits.end(),
                      [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
        std::int64_t n = std::stoll(digits);
        std::int64_t secs = n >= 1'000'000'000 ? n : n * 60;
        run.scheduled_time = internal::ToTimePoint(SysSeconds(std::chrono::seconds(secs)));
      }
    }
  }
  const Json& status = job.value("status", Json::object());
  run.active = status.value("active", 0);
  run.succeeded = status.value("succeeded", 0);
  run.failed = status.value("failed", 0);
  run.attempts = run.active + run.succeeded + run.failed;
  if (auto t = TimeAt(job, Json::json_pointer("/status/startTime"))) {
    run.start_time = internal::ToTimePoint(*t);
  }
  run.result = run.active > 0 ? RunResult::kRunning : RunResult::kPending;
  for (const auto& c : status.value("conditions", Json::array())) {
    if (c.value("status", "") != "True") continue;
    std::string type = c.value("type", "");
    if (type != "Complete" && type != "Failed") continue;
    run.reason = c.value("reason", "");
    run.message = c.value("message", "");
    if (type == "Complete") {
      run.result = RunResult::kSucceeded;
    } else {
      run.result = run.reason == "DeadlineExceeded" ? RunResult::kTimedOut : RunResult::kFailed;
    }
    std::optional<SysSeconds> end = TimeAt(job, Json::json_pointer("/status/completionTime"));
    if (!end && c.contains("lastTransitionTime") && c["lastTransitionTime"].is_string()) {
      end = internal::ParseTimestamp(c["lastTransitionTime"].get<std::string>());
    }
    if (end) run.end_time = internal::ToTimePoint(*end);
    break;
  }
  if (run.start_time && run.end_time) {
    run.duration =
        std::chrono::duration_cast<std::chrono::seconds>(*run.end_time - *run.start_time);
  }
  run.alerted = internal::AnnotationOf(job, internal::kAlertedAnnotation);
  return run;
}

namespace {

std::string FormatTime(const std::optional<std::chrono::system_clock::time_point>& t) {
  return t ? internal::FormatTimestamp(internal::ToSysSeconds(*t)) : "-";
}

std::string FormatDuration(std::chrono::seconds d) {
  auto s = d.count();
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{}s", s / 60, s % 60);
  return fmt::format("{}h{}m", s / 3600, (s % 3600) / 60);
}

}  // namespace

std::vector<std::vector<std::string>> RunRows(const std::vector<JobRun>& runs) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "TRIGGER", "RESULT", "START", "END", "DURATION", "ATTEMPTS", "REASON"}};
  for (const auto& r : runs) {
    rows.push_back({r.name, ToString(r.trigger), ToString(r.result), FormatTime(r.start_time),
                    FormatTime(r.end_time), r.duration ? FormatDuration(*r.duration) : "-",
                    std::to_string(r.attempts), r.reason});
  }
  return rows;
}

std::string FormatRunTable(const std::vector<JobRun>& runs) {
  return internal::FormatTextTable(RunRows(runs));
}

// ---- alerts ---------------------------------------------------------------------------------

Json ScheduledJobAlert::ToJson() const {
  auto time_or_null = [](const std::optional<std::chrono::system_clock::time_point>& t) -> Json {
    if (!t) return nullptr;
    return internal::FormatTimestamp(internal::ToSysSeconds(*t));
  };
  return {{"source", "tfk8s"},
          {"kind", ToString(kind)},
          {"namespace", namespace_name},
          {"scheduledJob", scheduled_job},
          {"job", job},
          {"jobUid", job_uid},
          {"reason", reason},
          {"message", message},
          {"attempts", attempts},
          {"startTime", time_or_null(start_time)},
          {"endTime", time_or_null(end_time)},
          {"scheduledTime", time_or_null(scheduled_time)},
          {"missedRuns", missed_runs},
          {"tfCluster", tf_cluster},
          {"deleted", deleted},
          {"time", internal::FormatTimestamp(internal::ToSysSeconds(time))}};
}

// ---- the spec stored on its CronJob or run ----

namespace internal {

std::optional<ScheduledJobSpec> ScheduledJobSpecFromObject(const Json& object, bool is_cronjob,
                                                           RootIdentity* identity) {
  std::string text = AnnotationOf(object, kSpecAnnotation);
  if (text.empty()) return std::nullopt;
  RootIdentity id = IdentityOf(object, is_cronjob ? "CronJob" : "Job", "ScheduledJob",
                               kScheduledJobLabel, is_cronjob);
  const std::string field = std::string("metadata.annotations[") + kSpecAnnotation + "]";
  return StoredSpec<ScheduledJobSpec>(std::move(id), text, field, identity);
}

}  // namespace internal

}  // namespace tfk8s
