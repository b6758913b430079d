// ScheduledJob alerts: the pure decisions (is this Job / CronJob worth an alert, was it already
// alerted), webhook delivery with retries, and the watcher that ties them to informers.

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "tfk8s/scheduledjob.hpp"
#include "workloads/cleanup.hpp"
#include "workloads/common.hpp"
#include "workloads/cron.hpp"
#include "workloads/kinds.hpp"
#include "workloads/scheduledjob_internal.hpp"
#include "workloads/server_shape.hpp"
#include "workloads/tfcluster_internal.hpp"

namespace tfk8s {

using internal::SysSeconds;
using namespace internal::kinds;

namespace internal {

namespace {

std::optional<SysSeconds> AnnotationTime(const Json& object, const char* key) {
  return ParseTimestamp(AnnotationOf(object, key));
}

std::string LabelOr(const Json& object, const char* key, const std::string& fallback) {
  std::string v =
      object.value("metadata", Json::object()).value("labels", Json::object()).value(key, "");
  return v.empty() ? fallback : v;
}

}  // namespace

JobAlertDecision DecideJobAlert(const Json& job, SysSeconds now,
                                const ScheduledJobWatcherOptions& options) {
  JobAlertDecision d;
  JobRun run = RunOf(job);
  if (run.result != RunResult::kFailed && run.result != RunResult::kTimedOut) return d;
  d.kind = run.result == RunResult::kTimedOut ? AlertKind::kTimeout : AlertKind::kFailure;
  if (!run.alerted.empty()) {
    // Already claimed: only a claim whose owner died mid-delivery is taken over.
    if (AnnotationOf(job, kAlertStateAnnotation) != "sending") return d;
    auto deadline = AnnotationTime(job, kAlertDeadlineAnnotation);
    if (!deadline) return d;
    if (now < *deadline) {
      d.recheck_at = *deadline;
      return d;
    }
    d.kind = run.alerted == "timeout" ? AlertKind::kTimeout : AlertKind::kFailure;
    d.alert = true;
    d.reclaim = true;
    return d;
  }
  bool enabled =
      d.kind == AlertKind::kTimeout ? options.alert_on_timeout : options.alert_on_failure;
  if (!enabled) return d;
  SysSeconds failed_at = run.end_time ? ToSysSeconds(*run.end_time) : now;
  if (now - failed_at > options.max_alert_age) return d;
  d.alert = true;
  return d;
}

MissedScheduleCheck CheckMissedSchedule(const Json& cronjob, SysSeconds now,
                                        std::chrono::seconds grace) {
  MissedScheduleCheck check;
  const Json& spec = cronjob.value("spec", Json::object());
  if (spec.value("suspend", false)) return check;
  std::optional<CronSchedule> cron;
  TimeZone zone;
  try {
    cron = CronSchedule::Parse(spec.value("schedule", ""));
    zone = TimeZone::Load(spec.value("timeZone", ""));
  } catch (const ValidationError& e) {
    check.error = e.what();
    return check;
  }
  // Runs are expected after the latest of: the last scheduled run, the creation, a resume.
  std::optional<SysSeconds> base = TimeAt(cronjob, Json::json_pointer("/status/lastScheduleTime"));
  for (auto t : {TimeAt(cronjob, Json::json_pointer("/metadata/creationTimestamp")),
                 AnnotationTime(cronjob, kResumedAtAnnotation)}) {
    if (t && (!base || *t > *base)) base = t;
  }
  if (!base) base = now;
  std::chrono::seconds slack = grace;
  if (spec.contains("startingDeadlineSeconds") && spec["startingDeadlineSeconds"].is_number()) {
    slack += std::chrono::seconds(spec["startingDeadlineSeconds"].get<std::int64_t>());
  }
  SysSeconds limit = now - slack;

  SysSeconds alerted_up_to = *base;
  auto recorded = AnnotationTime(cronjob, kMissedAlertedAnnotation);
  if (recorded) {
    if (AnnotationOf(cronjob, kMissedStateAnnotation) == "sending") {
      auto deadline = AnnotationTime(cronjob, kMissedDeadlineAnnotation);
      if (deadline && now >= *deadline && *recorded > *base) {
        check.missed_time = recorded;
        check.missed_runs = static_cast<int>(cron->Between(*base, *recorded, 1000, zone).size());
        check.reclaim = true;
        return check;
      }
      if (deadline && now < *deadline) check.recheck_at = deadline;
    }
    alerted_up_to = std::max(alerted_up_to, *recorded);
  }
  auto latest = cron->Previous(limit, zone);
  if (latest && *latest > alerted_up_to) {
    check.missed_time = latest;
    check.missed_runs = static_cast<int>(cron->Between(*base, limit, 1000, zone).size());
    return check;
  }
  // Nothing missed yet: the next time something could be is the first run due after what has
  // been settled, plus the slack.
  if (auto next = cron->Next(std::max(alerted_up_to, limit), zone)) {
    SysSeconds at = *next + slack;
    if (!check.recheck_at || at < *check.recheck_at) check.recheck_at = at;
  }
  return check;
}

ScheduledJobAlert AlertForJob(const Json& job, AlertKind kind, SysSeconds now) {
  JobRun run = RunOf(job);
  ScheduledJobAlert a;
  a.kind = kind;
  a.namespace_name = run.namespace_name;
  a.scheduled_job = run.scheduled_job;
  a.job = run.name;
  a.job_uid = run.uid;
  a.reason = !run.reason.empty()           ? run.reason
             : kind == AlertKind::kTimeout ? "DeadlineExceeded"
                                           : "Failed";
  a.attempts = run.attempts;
  a.start_time = run.start_time;
  a.end_time = run.end_time;
  a.scheduled_time = run.scheduled_time;
  a.time = ToTimePoint(now);
  std::string what = kind == AlertKind::kTimeout ? "timed out" : "failed";
  a.message =
      fmt::format("run {} of {}/{} {} after {} attempt{}: {}{}{}", run.name, run.namespace_name,
                  run.scheduled_job, what, run.attempts, run.attempts == 1 ? "" : "s", a.reason,
                  run.message.empty() ? "" : ": ", run.message);
  return a;
}

ScheduledJobAlert AlertForMissedSchedule(const Json& cronjob, const MissedScheduleCheck& check,
                                         SysSeconds now) {
  const Json& meta = cronjob.value("metadata", Json::object());
  const Json& spec = cronjob.value("spec", Json::object());
  ScheduledJobAlert a;
  a.kind = AlertKind::kMissedSchedule;
  a.namespace_name = meta.value("namespace", "");
  a.scheduled_job = LabelOr(cronjob, kScheduledJobLabel, meta.value("name", ""));
  a.reason = "MissedSchedule";
  if (check.missed_time) a.scheduled_time = ToTimePoint(*check.missed_time);
  a.missed_runs = check.missed_runs;
  a.time = ToTimePoint(now);
  auto last = TimeAt(cronjob, Json::json_pointer("/status/lastScheduleTime"));
  std::size_t active =
      cronjob.value("status", Json::object()).value("active", Json::array()).size();
  std::string why;
  if (active > 0 && spec.value("concurrencyPolicy", "") == "Forbid") {
    why = fmt::format("; {} earlier run{} still active and concurrencyPolicy is Forbid", active,
                      active == 1 ? " is" : "s are");
  }
  a.message = fmt::format(
      "scheduled run of {}/{} at {} did not start ({} missed since {}; schedule \"{}\"){}",
      a.namespace_name, a.scheduled_job,
      check.missed_time ? FormatTimestamp(*check.missed_time) : "?", check.missed_runs,
      last ? "the last run at " + FormatTimestamp(*last) : "its creation",
      spec.value("schedule", ""), why);
  return a;
}

std::chrono::seconds ClaimDuration(const std::optional<AlertWebhook>& webhook) {
  auto total = std::chrono::milliseconds(30'000);  // margin, and the callback's own time
  if (webhook) {
    auto backoff = webhook->retry_backoff;
    for (int i = 0; i < std::max(1, webhook->attempts); ++i) {
      total += webhook->timeout + backoff;
      backoff *= 2;
    }
  }
  return std::chrono::ceil<std::chrono::seconds>(total);
}

namespace {

// Where a URL's authority ("user:password@host:port") starts and ends: after "://" (or at 0)
// up to the first of "/?#".
std::pair<std::size_t, std::size_t> AuthorityBounds(std::string_view url) {
  const auto scheme_end = url.find("://");
  const std::size_t start = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  const std::size_t end = std::min(url.find_first_of("/?#", start), url.size());
  return {start, end};
}

}  // namespace

std::string RedactedWebhookUrl(std::string_view url) {
  const auto [host_start, host_end] = AuthorityBounds(url);
  std::string_view authority = url.substr(host_start, host_end - host_start);
  authority.remove_prefix(UserInfoOf(url).size());  // user:password@
  std::string out = std::string(url.substr(0, host_start)) + std::string(authority);
  // Path, query and fragment often carry the hook's token (Slack, Teams, …).
  if (host_end < url.size() && url.substr(host_end) != "/") out += "/…";
  return out;
}

std::string_view UserInfoOf(std::string_view url) {
  const auto [host_start, host_end] = AuthorityBounds(url);
  const std::string_view authority = url.substr(host_start, host_end - host_start);
  const auto at = authority.rfind('@');
  return at == std::string_view::npos ? std::string_view() : authority.substr(0, at + 1);
}

WebhookDelivery DeliverWebhook(HttpTransport& transport, const AlertWebhook& webhook,
                               const std::string& body, const std::atomic<bool>* stop) {
  WebhookDelivery result;
  HttpRequest req;
  req.method = "POST";
  req.url = webhook.url;
  // "Expect:" stops curl from waiting for a "100 Continue" that small receivers never send.
  req.headers = {"Content-Type: application/json", "User-Agent: tfk8s-scheduledjob-watcher",
                 "Expect:"};
  for (const auto& [k, v] : webhook.headers)
    req.headers.push_back(std::string(k).append(": ").append(v));
  req.body = body;
  // Only the status counts: a receiver that answers with an endless (or huge, or compressed)
  // body is cut after 64 KiB instead of holding memory and the attempt's whole timeout.
  req.max_body_bytes = kWebhookMaxResponseBytes;
  req.truncate_body = true;
  req.timeout = webhook.timeout;
  req.connect_timeout = std::min<std::chrono::milliseconds>(webhook.timeout, req.connect_timeout);
  if (webhook.insecure_skip_verify || !webhook.ca_pem.empty()) {
    auto tls = std::make_shared<TlsSettings>();
    tls->insecure_skip_verify = webhook.insecure_skip_verify;
    tls->ca_pem = webhook.ca_pem;
    req.tls = tls;
  }
  auto backoff = webhook.retry_backoff;
  const int attempts = std::max(1, webhook.attempts);
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    ++result.attempts;
    bool retryable = true;
    try {
      HttpResponse resp = transport.Send(req).get();
      result.status = resp.status;
      if (resp.status >= 200 && resp.status < 300) {
        result.delivered = true;
        result.error.clear();
        return result;
      }
      result.error = fmt::format("HTTP {}", resp.status);
      // A 4xx other than timeout / rate limiting will not change by asking again.
      retryable = resp.status >= 500 || resp.status == 408 || resp.status == 429;
    } catch (const std::exception& e) {
      result.status = 0;
      result.error = e.what();
    }
    if (!retryable || attempt == attempts) break;
    auto until = std::chrono::steady_clock::now() + backoff;
    while (std::chrono::steady_clock::now() < until) {
      if (stop && *stop) return result;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    backoff *= 2;
  }
  return result;
}

}  // namespace internal

void ValidateWebhook(const AlertWebhook& webhook) {
  const std::string& url = webhook.url;
  const bool http = url.rfind("http://", 0) == 0;
  if (!http && url.rfind("https://", 0) != 0) {
    throw ValidationError("webhook.url", internal::RedactedWebhookUrl(url),
                          "must start with http:// or https://");
  }
  if (webhook.timeout.count() <= 0) {
    throw ValidationError("webhook.timeout", std::to_string(webhook.timeout.count()),
                          "must be positive");
  }
  if (!http || webhook.allow_insecure_headers) return;
  // The same rule as ClientConfig's for a token over http:// (allow_token_over_http).
  if (!internal::UserInfoOf(url).empty()) {
    throw ValidationError("webhook.url", internal::RedactedWebhookUrl(url),
                          "is http:// with user info (user:password@): the basic-auth "
                          "credentials would travel in clear text; use https://, or set "
                          "allow_insecure_headers to send them anyway");
  }
  if (!webhook.headers.empty()) {
    std::string names;  // the names only: the values are the receiver's tokens
    for (const auto& [name, value] : webhook.headers) names += (names.empty() ? "" : ", ") + name;
    throw ValidationError("webhook.headers", names,
                          fmt::format("webhook.url {} is http://: these headers (usually the "
                                      "receiver's token) would travel in clear text; use "
                                      "https://, or set allow_insecure_headers to send them "
                                      "anyway",
                                      internal::RedactedWebhookUrl(url)));
  }
}

WebhookDelivery SendWebhookAlert(const AlertWebhook& webhook, const ScheduledJobAlert& alert) {
  ValidateWebhook(webhook);
  auto transport = internal::MakeCurlTransport();
  return internal::DeliverWebhook(*transport, webhook, alert.ToJson().dump(), nullptr);
}

// ---- the watcher ----------------------------------------------------------------------------

namespace {

std::string Key(const Json& o) {
  const Json& m = o.value("metadata", Json::object());
  return m.value("namespace", "") + "/" + m.value("name", "");
}

// namespace/task of a run or CronJob.
std::string TaskKey(const Json& o) {
  return o.value("metadata", Json::object()).value("namespace", "") + "/" +
         internal::LabelOf(o, internal::kScheduledJobLabel);
}

std::string DefaultIdentity() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
  return fmt::format("{}/{}", host[0] ? host : "unknown-host", static_cast<long>(getpid()));
}

}  // namespace

struct ScheduledJobWatcher::Impl {
  // One alert on its way out, and where to record the outcome.
  struct Delivery {
    ScheduledJobAlert alert;
    ResourceType type;
    std::string ns;
    std::string name;
    std::string flight_key;        // in `in_flight` until recorded
    const char* state_annotation;  // kAlertStateAnnotation or kMissedStateAnnotation
  };

  Client client;
  ScheduledJobWatcherOptions options;
  std::string identity;

  std::atomic<bool> stop{false};
  std::mutex mu;
  std::condition_variable cv;
  // What an informer watches: tasks' runs, their CronJobs, clusters' roots, clusters' Jobs.
  enum class Source { kRun, kCronJob, kRoot, kClusterJob };
  std::deque<std::pair<Source, WatchEvent>> events;
  std::deque<Delivery> outbox;
  std::set<std::string> in_flight;  // Job UIDs / CronJob UID+time being delivered here
  std::set<std::string> reported_errors;
  std::vector<Informer*> informers;
  std::exception_ptr error;

  std::shared_ptr<internal::HttpTransport> transport;
  std::atomic<int> sent{0};
  std::atomic<int> failed{0};
  std::thread background;
  std::exception_ptr background_error;

  Impl(Client c, ScheduledJobWatcherOptions o) : client(std::move(c)), options(std::move(o)) {
    identity = options.identity.empty() ? DefaultIdentity() : options.identity;
  }

  void ReportError(const std::string& message) {
    if (!options.on_error) return;
    try {
      options.on_error(message);
    } catch (...) {
      // A broken error callback must not take the watcher down with it.
    }
  }

  // Reports a message once per key (schedules that cannot be evaluated, say).
  void ReportOnce(const std::string& key, const std::string& message) {
    {
      std::lock_guard lock(mu);
      if (!reported_errors.insert(key).second) return;
    }
    ReportError(message);
  }

  std::string Selector() const {
    return WithUserSelector(options.scheduled_job.empty()
                                ? std::string(internal::kScheduledJobLabel)
                                : std::string(internal::kScheduledJobLabel) + "=" +
                                      options.scheduled_job);
  }

  // `selector` narrowed by the options' label selector, when there is one.
  std::string WithUserSelector(std::string selector) const {
    if (!options.label_selector.empty()) selector += "," + options.label_selector;
    return selector;
  }

  // Records the claim with an optimistic-concurrency patch (metadata.resourceVersion in a merge
  // patch is a precondition): of several watchers, or a watcher and its restarted self, only
  // one wins. Returns false when someone else changed the object first.
  bool Claim(const ResourceType& type, const Json& object, const Json& annotations) {
    const Json& meta = object.value("metadata", Json::object());
    Json patch = {
        {"metadata",
         {{"resourceVersion", meta.value("resourceVersion", "")}, {"annotations", annotations}}}};
    WriteOptions write;
    write.field_manager = internal::kStateFieldManager;
    try {
      client.Patch(type, meta.value("namespace", ""), meta.value("name", ""), PatchType::kMerge,
                   patch, write);
      return true;
    } catch (const Conflict&) {
      return false;  // the newer version arrives as a watch event and is judged again
    } catch (const NotFound&) {
      return false;
    } catch (const Error& e) {
      // Reported once per object: a missing permission would otherwise repeat on every sweep.
      ReportOnce(meta.value("uid", "") + "/claim",
                 fmt::format("could not record the alert on {} {} (not sent; retried on changes "
                             "and every 30 s): {}",
                             type.kind, Key(object), e.what()));
      return false;
    }
  }

  void Enqueue(Delivery d) {
    {
      std::lock_guard lock(mu);
      outbox.push_back(std::move(d));
    }
    cv.notify_all();
  }

  std::optional<SysSeconds> HandleJob(const Json& job) {
    std::string uid = job.value("metadata", Json::object()).value("uid", "");
    {
      std::lock_guard lock(mu);
      if (in_flight.count(uid)) return std::nullopt;
    }
    SysSeconds now = internal::ToSysSeconds(std::chrono::system_clock::now());
    internal::JobAlertDecision d = internal::DecideJobAlert(job, now, options);
    if (!d.alert) return d.recheck_at;
    SysSeconds deadline = now + internal::ClaimDuration(options.webhook);
    Json annotations = {{internal::kAlertedAnnotation, ToString(d.kind)},
                        {internal::kAlertStateAnnotation, "sending"},
                        {internal::kAlertDeadlineAnnotation, internal::FormatTimestamp(deadline)},
                        {internal::kAlertedByAnnotation, identity}};
    if (!Claim(kJobs, job, annotations)) return std::nullopt;
    {
      std::lock_guard lock(mu);
      in_flight.insert(uid);
    }
    const Json& meta = job["metadata"];
    Enqueue({internal::AlertForJob(job, d.kind, now), kJobs, meta.value("namespace", ""),
             meta.value("name", ""), uid, internal::kAlertStateAnnotation});
    return std::nullopt;
  }

  std::optional<SysSeconds> HandleCronJob(const ResourceType& type, const Json& cronjob) {
    const Json& meta = cronjob.value("metadata", Json::object());
    std::string uid = meta.value("uid", "");
    SysSeconds now = internal::ToSysSeconds(std::chrono::system_clock::now());
    internal::MissedScheduleCheck check =
        internal::CheckMissedSchedule(cronjob, now, options.missed_schedule_grace);
    if (!check.error.empty()) {
      ReportOnce(uid + "/schedule", fmt::format("cannot check the schedule of CronJob {}: {}",
                                                Key(cronjob), check.error));
      return std::nullopt;
    }
    if (!check.missed_time) return check.recheck_at;
    std::string flight_key = uid + "@" + internal::FormatTimestamp(*check.missed_time);
    {
      std::lock_guard lock(mu);
      if (in_flight.count(flight_key)) return check.recheck_at;
    }
    SysSeconds deadline = now + internal::ClaimDuration(options.webhook);
    Json annotations = {
        {internal::kMissedAlertedAnnotation, internal::FormatTimestamp(*check.missed_time)},
        {internal::kMissedStateAnnotation, "sending"},
        {internal::kMissedDeadlineAnnotation, internal::FormatTimestamp(deadline)},
        {internal::kMissedByAnnotation, identity}};
    if (!Claim(type, cronjob, annotations)) return std::nullopt;
    {
      std::lock_guard lock(mu);
      in_flight.insert(flight_key);
    }
    Enqueue({internal::AlertForMissedSchedule(cronjob, check, now), type,
             meta.value("namespace", ""), meta.value("name", ""), flight_key,
             internal::kMissedStateAnnotation});
    return std::nullopt;
  }

  Json CleanupClaimAnnotations(const std::string& what, SysSeconds deadline) const {
    return {{internal::kCleanedUpAnnotation, what},
            {internal::kCleanupStateAnnotation, "sending"},
            {internal::kCleanupDeadlineAnnotation, internal::FormatTimestamp(deadline)},
            {internal::kCleanedUpByAnnotation, identity}};
  }

  // Claims `flight_key` here and on `object`; false when someone else holds it.
  bool ClaimCleanup(const ResourceType& type, const Json& object, const std::string& flight_key,
                    const Json& annotations) {
    {
      std::lock_guard lock(mu);
      if (in_flight.count(flight_key)) return false;
    }
    if (!Claim(type, object, annotations)) return false;
    std::lock_guard lock(mu);
    return in_flight.insert(flight_key).second;
  }

  void Release(const std::string& flight_key) {
    std::lock_guard lock(mu);
    in_flight.erase(flight_key);
  }

  // A finished cluster's policy: claim on the root, delete, then alert (SendLoop records it).
  std::optional<SysSeconds> HandleCluster(const Json& root, const std::vector<Json>& jobs) {
    SysSeconds now = internal::ToSysSeconds(std::chrono::system_clock::now());
    const std::string uid = root.value("metadata", Json::object()).value("uid", "");
    internal::TFCleanupDecision d;
    try {
      d = internal::DecideTFCleanup(root, jobs, now);
    } catch (const Error& e) {  // a stored spec that is unreadable or names another cluster
      ReportOnce(uid + "/cleanup",
                 fmt::format("cannot read the spec of TFCluster {}: {}", Key(root), e.what()));
      return std::nullopt;
    }
    if (!d.act) return d.recheck_at;
    const std::string flight_key =
        uid + "@" + d.decider_job["metadata"].value("uid", "") + "/cleanup";
    SysSeconds deadline = now + internal::ClaimDuration(options.webhook);
    Json annotations = CleanupClaimAnnotations(ToString(d.policy), deadline);
    annotations[internal::kCleanupOfAnnotation] = d.decider_job["metadata"].value("uid", "");
    if (!ClaimCleanup(kConfigMaps, root, flight_key, annotations)) return std::nullopt;
    const std::string ns = root["metadata"].value("namespace", "");
    const std::string name = root["metadata"].value("name", "");
    std::vector<std::string> deleted;
    try {
      std::vector<internal::OwnedObject> owned;
      ListOptions sel;
      sel.label_selector = std::string(kClusterLabel) + "=" + name;
      for (const ResourceType* type : internal::TFCleanupKinds(d.policy)) {
        Json list;
        try {
          list = client.ListAll(*type, ns, sel);
        } catch (const Forbidden&) {
          // The controller's role may not read Secrets (a list returns their data): the
          // session Secret then stays until the cluster is deleted; everything else goes.
          if (type->kind != "Secret") throw;
          ReportError(
              fmt::format("clean-up of TFCluster {} leaves its session Secret: no "
                          "permission to list Secrets (it goes with the cluster)",
                          Key(root)));
          continue;
        }
        for (auto& o : internal::Items(std::move(list))) owned.push_back({type, std::move(o)});
      }
      deleted = internal::DeleteTargets(client, ns, internal::PlanTFCleanup(root, d.policy, owned));
    } catch (const std::exception& e) {
      ReportError(
          fmt::format("clean-up of TFCluster {} stopped (taken up again when its claim "
                      "expires): {}",
                      Key(root), e.what()));
      Release(flight_key);
      return deadline;
    }
    Enqueue({internal::AlertForTFCleanup(root, d, deleted, now), kConfigMaps, ns, name, flight_key,
             internal::kCleanupStateAnnotation});
    return std::nullopt;
  }

  // A task's runs past its history limits: claim each on the run, delete it, alert.
  std::optional<SysSeconds> HandleHistory(const std::vector<Json>& runs,
                                          internal::HistoryLimits limits) {
    SysSeconds now = internal::ToSysSeconds(std::chrono::system_clock::now());
    internal::HistoryPlan plan = internal::PlanHistoryPrune(runs, limits, now, options);
    for (const auto& p : plan.prune) {
      const Json& meta = p.job["metadata"];
      const std::string uid = meta.value("uid", "");
      const std::string ns = meta.value("namespace", "");
      const std::string name = meta.value("name", "");
      const std::string flight_key = uid + "/prune";
      SysSeconds deadline = now + internal::ClaimDuration(options.webhook);
      if (!ClaimCleanup(kJobs, p.job, flight_key, CleanupClaimAnnotations("history", deadline))) {
        continue;
      }
      std::vector<std::string> deleted;
      try {
        deleted = internal::DeleteTargets(client, ns, {{&kJobs, name, uid}});
      } catch (const std::exception& e) {
        ReportError(
            fmt::format("could not prune run {}/{} (taken up again when its claim "
                        "expires): {}",
                        ns, name, e.what()));
        if (!plan.recheck_at || deadline < *plan.recheck_at) plan.recheck_at = deadline;
      }
      if (deleted.empty()) {
        Release(flight_key);  // failed, or someone else deleted it first: nothing to report
        continue;
      }
      Enqueue({internal::AlertForPrunedRun(p, now), kJobs, ns, name, flight_key,
               internal::kCleanupStateAnnotation});
    }
    return plan.recheck_at;
  }

  // The clusters named in `only` (every cluster when null), from the informers' caches.
  template <typename Consider>
  void HandleClusters(Informer& roots, Informer& cluster_jobs, const std::set<std::string>* only,
                      const Consider& consider) {
    std::map<std::string, std::vector<Json>> jobs_of;
    for (auto& job : internal::CheckedSnapshot(cluster_jobs, "Job")) {
      std::string key =
          job["metadata"].value("namespace", "") + "/" + internal::LabelOf(job, kClusterLabel);
      jobs_of[key].push_back(std::move(job));
    }
    for (const auto& root : internal::CheckedSnapshot(roots, "ConfigMap")) {
      std::string key = Key(root);
      if (only && !only->count(key)) continue;
      consider(HandleCluster(root, jobs_of[key]));
    }
  }

  // The tasks named in `only` (every task when null), from the informers' caches.
  template <typename Consider>
  void HandleTasks(Informer& jobs, Informer* cronjobs, const std::set<std::string>* only,
                   const Consider& consider) {
    std::map<std::string, std::vector<Json>> runs_of;
    for (auto& job : internal::CheckedSnapshot(jobs, "Job")) {
      std::string key = TaskKey(job);
      if (!only || only->count(key)) runs_of[key].push_back(std::move(job));
    }
    std::map<std::string, Json> cronjob_of;
    if (cronjobs) {
      for (auto& cj : internal::CheckedSnapshot(*cronjobs, "CronJob")) {
        std::string key = TaskKey(cj);
        cronjob_of[key] = std::move(cj);
      }
    }
    for (const auto& [key, runs] : runs_of) {
      auto cj = cronjob_of.find(key);
      consider(HandleHistory(
          runs, internal::TaskHistoryLimits(cj == cronjob_of.end() ? nullptr : &cj->second, runs)));
    }
  }

  // The delivery thread: callback, then webhook, then the outcome on the object.
  void SendLoop() {
    while (true) {
      Delivery d;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stop || !outbox.empty(); });
        if (stop) return;  // undelivered claims expire and are taken over by the next watcher
        d = std::move(outbox.front());
        outbox.pop_front();
      }
      bool ok = true;
      if (options.on_alert) {
        try {
          options.on_alert(d.alert);
        } catch (const std::exception& e) {
          ok = false;
          ReportError(fmt::format("alert callback failed for {}/{}: {}", d.ns, d.name, e.what()));
        } catch (...) {
          ok = false;
          ReportError(fmt::format("alert callback failed for {}/{}", d.ns, d.name));
        }
      }
      if (options.webhook) {
        WebhookDelivery w =
            internal::DeliverWebhook(*transport, *options.webhook, d.alert.ToJson().dump(), &stop);
        if (!w.delivered) {
          if (stop) return;  // interrupted, not failed: leave the claim to expire
          ok = false;
          ReportError(
              fmt::format("webhook {} did not take the {} alert of {}/{} after {} "
                          "attempt(s): {}",
                          internal::RedactedWebhookUrl(options.webhook->url),
                          ToString(d.alert.kind), d.ns, d.name, w.attempts, w.error));
        }
      }
      (ok ? sent : failed) += 1;
      // "failed" is final too: retrying a webhook that is down on every restart would either
      // flood it later or block the next alerts; the error callback has reported it.
      Json patch = {
          {"metadata", {{"annotations", {{d.state_annotation, ok ? "delivered" : "failed"}}}}}};
      WriteOptions write;
      write.field_manager = internal::kStateFieldManager;
      try {
        client.Patch(d.type, d.ns, d.name, PatchType::kMerge, patch, write);
      } catch (const NotFound&) {
      } catch (const std::exception& e) {
        ReportError(fmt::format("could not record the delivery on {} {}/{}: {}", d.type.kind, d.ns,
                                d.name, e.what()));
      }
      std::lock_guard lock(mu);
      in_flight.erase(d.flight_key);
    }
  }

  void Run() {
    if (stop) return;
    if (options.webhook && !transport) transport = internal::MakeCurlTransport();
    ListOptions sel;
    sel.label_selector = Selector();
    const std::string& ns = options.namespace_name;
    Informer jobs(client, kJobs, ns, sel);
    std::optional<ResourceType> cron_type;
    std::optional<Informer> cronjobs;
    // Clean-up of finished clusters: their roots, and the Jobs of their chief / workers.
    std::optional<Informer> roots;
    std::optional<Informer> cluster_jobs;
    if (options.clean_up_tf_clusters) {
      ListOptions root_sel;
      root_sel.label_selector = WithUserSelector(std::string(kComponentLabel) + "=root," +
                                                 internal::kinds::kManagedBySelector);
      roots.emplace(client, kConfigMaps, ns, root_sel);
      ListOptions job_sel;
      job_sel.label_selector =
          WithUserSelector(std::string(kClusterLabel) + "," + kRoleLabel + " in (chief,worker)");
      cluster_jobs.emplace(client, kJobs, ns, job_sel);
    }
    // Discovery is the one request made outside an informer: retry it like one, so a watcher
    // started while the apiserver restarts waits for it instead of failing.
    const bool want_cronjobs = options.alert_on_missed_schedule || options.bound_history;
    for (int attempt = 0; want_cronjobs && !stop; ++attempt) {
      try {
        cron_type = client.ResolvePreferred("batch", "CronJob", {"v1", "v1beta1"});
        cronjobs.emplace(client, *cron_type, ns, sel);
        break;
      } catch (const NotFound&) {
        ReportError("the server serves no CronJob API: missed schedules are not watched");
        break;
      } catch (const TransportError& e) {
        ReportOnce("discovery", fmt::format("discovery failed, retrying: {}", e.what()));
      } catch (const ServerError& e) {
        ReportOnce("discovery", fmt::format("discovery failed, retrying: {}", e.what()));
      }
      std::unique_lock lock(mu);
      cv.wait_for(lock, std::chrono::seconds(std::min(1 << std::min(attempt, 5), 30)),
                  [&] { return bool(stop); });
    }
    {
      std::lock_guard lock(mu);
      if (stop) return;
      informers = {&jobs};
      if (cronjobs) informers.push_back(&*cronjobs);
      if (roots) informers.push_back(&*roots);
      if (cluster_jobs) informers.push_back(&*cluster_jobs);
    }
    // Every list or watch that fails reaches on_error as it happens (the informers' backoff
    // spaces them out); the failure an informer gives up on stops the watcher (reader, below).
    const std::string scope = ns.empty() ? "all namespaces" : ns;
    auto tell = [this, &scope](const std::string& what) {
      return [this, what = what + " in " + scope](const InformerFailure& f) {
        if (f.fatal) return;
        ReportError(fmt::format(
            "watch {}: failure {} in a row, {}: {}", what, f.consecutive,
            f.transient ? "retrying" : "retrying (the watcher stops if this goes on)", f.message));
      };
    };
    jobs.set_error_handler(tell("Jobs"));
    if (cronjobs) cronjobs->set_error_handler(tell("CronJobs"));
    if (roots) roots->set_error_handler(tell("TFCluster root ConfigMaps"));
    if (cluster_jobs) cluster_jobs->set_error_handler(tell("TFCluster Jobs"));
    auto reader = [&](Informer* informer, Source source) {
      try {
        while (!stop) {
          auto ev = informer->Next(std::chrono::milliseconds(500));
          if (!ev) continue;
          {
            std::lock_guard lock(mu);
            events.emplace_back(source, std::move(*ev));
          }
          cv.notify_all();
        }
      } catch (...) {
        {
          std::lock_guard lock(mu);
          if (!error) error = std::current_exception();
          stop = true;
        }
        cv.notify_all();
        // Alerts stop here: say so, besides error() / what Run() throws.
        ReportError("scheduled job watcher stopped: " +
                    DescribeError(std::current_exception()).second);
      }
    };
    std::vector<std::thread> threads;
    threads.emplace_back(reader, &jobs, Source::kRun);
    if (cronjobs) threads.emplace_back(reader, &*cronjobs, Source::kCronJob);
    if (roots) threads.emplace_back(reader, &*roots, Source::kRoot);
    if (cluster_jobs) threads.emplace_back(reader, &*cluster_jobs, Source::kClusterJob);
    threads.emplace_back([this] { SendLoop(); });

    // Events drive everything; the timer only re-judges what time alone can change (a claim
    // expiring, a scheduled time passing) over the informers' caches — no requests.
    constexpr auto kSweepEvery = std::chrono::seconds(30);
    auto next_sweep = std::chrono::system_clock::now() + kSweepEvery;
    auto consider = [&](const std::optional<SysSeconds>& at) {
      if (at && internal::ToTimePoint(*at) < next_sweep) next_sweep = internal::ToTimePoint(*at);
    };
    while (true) {
      std::deque<std::pair<Source, WatchEvent>> batch;
      {
        std::unique_lock lock(mu);
        cv.wait_until(lock, next_sweep, [&] { return stop || !events.empty(); });
        if (stop) break;
        batch.swap(events);
      }
      try {
        std::set<std::string> clusters;  // touched by this batch: acted on once each
        std::set<std::string> tasks;
        for (auto& [source, ev] : batch) {
          if (ev.type != WatchEventType::kAdded && ev.type != WatchEventType::kModified) continue;
          const bool cron = source == Source::kCronJob;
          internal::CheckServerObject(ev.object,
                                      source == Source::kRoot ? "ConfigMap"
                                      : cron                  ? "CronJob"
                                                              : "Job",
                                      "watch");
          if (source == Source::kRoot) {
            clusters.insert(Key(ev.object));
          } else if (source == Source::kClusterJob) {
            clusters.insert(ev.object["metadata"].value("namespace", "") + "/" +
                            internal::LabelOf(ev.object, kClusterLabel));
          } else {
            if (!cron) consider(HandleJob(ev.object));
            if (cron && options.alert_on_missed_schedule) {
              consider(HandleCronJob(*cron_type, ev.object));
            }
            if (options.bound_history) tasks.insert(TaskKey(ev.object));
          }
        }
        const bool sweep = std::chrono::system_clock::now() >= next_sweep;
        if (sweep) {
          next_sweep = std::chrono::system_clock::now() + kSweepEvery;
          for (const auto& job : internal::CheckedSnapshot(jobs, "Job")) consider(HandleJob(job));
          if (cronjobs && options.alert_on_missed_schedule) {
            for (const auto& cj : internal::CheckedSnapshot(*cronjobs, "CronJob")) {
              consider(HandleCronJob(*cron_type, cj));
            }
          }
        }
        if (roots && (sweep || !clusters.empty())) {
          HandleClusters(*roots, *cluster_jobs, sweep ? nullptr : &clusters, consider);
        }
        if (options.bound_history && (sweep || !tasks.empty())) {
          HandleTasks(jobs, cronjobs ? &*cronjobs : nullptr, sweep ? nullptr : &tasks, consider);
        }
      } catch (const std::exception& e) {
        // A malformed object must not stop alerts for everything else.
        ReportError(fmt::format("scheduled job watcher: {}", e.what()));
      }
    }
    Shutdown(threads);
  }

  void Shutdown(std::vector<std::thread>& threads) {
    stop = true;
    {
      std::lock_guard lock(mu);
      for (Informer* i : informers) i->Cancel();
    }
    cv.notify_all();
    for (auto& t : threads) t.join();
    std::lock_guard lock(mu);
    informers.clear();
    if (error) {
      auto e = error;
      error = nullptr;
      std::rethrow_exception(e);
    }
  }

  void Stop() {
    stop = true;
    {
      std::lock_guard lock(mu);
      for (Informer* i : informers) i->Cancel();
    }
    cv.notify_all();
  }
};

ScheduledJobWatcher::ScheduledJobWatcher(Client client, ScheduledJobWatcherOptions options)
    : impl_(std::make_unique<Impl>(std::move(client), std::move(options))) {
  if (impl_->options.webhook) ValidateWebhook(*impl_->options.webhook);
}

ScheduledJobWatcher::~ScheduledJobWatcher() {
  Stop();
  if (impl_->background.joinable()) impl_->background.join();
}

void ScheduledJobWatcher::Run() { impl_->Run(); }

void ScheduledJobWatcher::Start() {
  if (impl_->background.joinable()) return;
  impl_->background = std::thread([this] {
    try {
      impl_->Run();
    } catch (...) {
      std::lock_guard lock(impl_->mu);
      impl_->background_error = std::current_exception();
    }
  });
}

void ScheduledJobWatcher::Stop() { impl_->Stop(); }

int ScheduledJobWatcher::alerts_sent() const { return impl_->sent; }

int ScheduledJobWatcher::alerts_failed() const { return impl_->failed; }

std::exception_ptr ScheduledJobWatcher::error() const {
  std::lock_guard lock(impl_->mu);
  return impl_->background_error;
}

}  // namespace tfk8s
