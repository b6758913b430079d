// The tfk8s controller (tfk8s/controller.hpp, docs/controller.md).
#include "tfk8s/controller.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "controller/http_endpoint.hpp"
#include "controller/metrics.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/fleet.hpp"
#include "tfk8s/validation.hpp"

namespace tfk8s {
namespace {

using internal::HttpAnswer;
using internal::HttpEndpoint;
namespace metrics = internal::metrics;

using SteadyClock = std::chrono::steady_clock;

const ResourceType kPods{"", "v1", "Pod", "pods", true};

// Metric names (docs/controller.md, "Metrics").
constexpr const char* kLeader = "tfk8s_controller_leader";
constexpr const char* kSynced = "tfk8s_controller_synced";
constexpr const char* kWorkloads = "tfk8s_workloads";
constexpr const char* kGpus = "tfk8s_requested_gpus";
constexpr const char* kCpu = "tfk8s_requested_cpu_cores";
constexpr const char* kMemory = "tfk8s_requested_memory_bytes";
constexpr const char* kGpuHours = "tfk8s_gpu_hours_total";
constexpr const char* kCpuHours = "tfk8s_cpu_hours_total";
constexpr const char* kAlerts = "tfk8s_alerts_total";
constexpr const char* kAlertsSent = "tfk8s_alerts_sent_total";
constexpr const char* kAlertsFailed = "tfk8s_alerts_failed_total";
constexpr const char* kCleanups = "tfk8s_cleanup_actions_total";
constexpr const char* kCulls = "tfk8s_cull_decisions_total";
constexpr const char* kApiLatency = "tfk8s_api_request_duration_seconds";
constexpr const char* kWatchRestarts = "tfk8s_watch_restarts_total";

// Sleeps up to `d`, returning early once `flag` turns true.
void SleepUnless(std::chrono::milliseconds d, const std::atomic<bool>& flag) {
  const auto end = SteadyClock::now() + d;
  while (!flag.load() && SteadyClock::now() < end) {
    std::this_thread::sleep_for(
        std::min<SteadyClock::duration>(std::chrono::milliseconds(50), end - SteadyClock::now()));
  }
}

std::string Now3339() {
  const auto now = std::chrono::system_clock::now();
  const auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  return fmt::format("{:%Y-%m-%dT%H:%M:%S}.{:03d}Z",
                     fmt::gmtime(std::chrono::system_clock::to_time_t(now)), ms);
}

std::string Scope(const std::string& ns) { return ns.empty() ? "every namespace" : ns; }

std::string ErrorText(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

// Structured logs: one JSON object per line, {"time", "level", "msg", …fields}. Thread-safe.
class JsonLog {
 public:
  explicit JsonLog(std::ostream& out) : out_(out) {}
  void Info(const std::string& msg, const Json& fields = Json::object()) {
    Write("info", msg, fields);
  }
  void Warn(const std::string& msg, const Json& fields = Json::object()) {
    Write("warn", msg, fields);
  }
  void Error(const std::string& msg, const Json& fields = Json::object()) {
    Write("error", msg, fields);
  }

 private:
  void Write(const std::string& level, const std::string& msg, const Json& fields) {
    // time, level and msg first, then the fields in their own order.
    nlohmann::ordered_json line = {{"time", Now3339()}, {"level", level}, {"msg", msg}};
    for (const auto& [k, v] : fields.items()) line[k] = v;
    const std::string text =
        line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    std::lock_guard lock(mu_);
    out_ << text << '\n';
    out_.flush();
  }
  std::mutex mu_;
  std::ostream& out_;
};

}  // namespace

struct Controller::Impl {
  Impl(ClientConfig config, ControllerOptions options, std::ostream& log);
  ~Impl();
  void Run(const std::atomic<bool>& stop);
  HttpAnswer Healthz() const;
  HttpAnswer Readyz() const;
  HttpAnswer Metrics();
  void DeclareMetrics();
  void Lead(const std::atomic<bool>& lost);
  void CullPass();
  void IntegrateUsage(std::chrono::steady_clock::time_point now);
  void SetWorkloadMetrics();
  void LabelOwnPod(bool leader);
  void UnlabelOtherLeaders();
  ScheduledJobWatcherOptions WatcherOptions(const std::string& ns);
  std::vector<FleetEntry> AllEntries() const;
  // The watched namespaces; {""} for every namespace.
  std::vector<std::string> Scopes() const;

  ControllerOptions options_;
  JsonLog log_;
  std::shared_ptr<metrics::Registry> registry_;
  std::optional<Client> client_;
  std::vector<std::unique_ptr<Fleet>> fleets_;  // set once, before synced_ turns true
  std::unique_ptr<LeaderElector> elector_;
  std::atomic<int> port_{0};
  std::atomic<bool> synced_{false};
  std::atomic<bool> leading_{false};
  std::optional<std::chrono::steady_clock::time_point> usage_at_;  // Lead()'s thread only
};

Controller::Controller(ClientConfig config, ControllerOptions options, std::ostream& log)
    : impl_(std::make_unique<Impl>(std::move(config), std::move(options), log)) {}
Controller::~Controller() = default;
void Controller::Run(const std::atomic<bool>& stop) {
  try {
    impl_->Run(stop);
  } catch (const std::exception& e) {
    // The last line says why, as a log line like the others (a restarted pod shows it in
    // `kubectl logs --previous`).
    std::string why = e.what();
    std::replace(why.begin(), why.end(), '\n', ' ');
    impl_->log_.Error("stopped: " + why);
    throw;
  }
}
int Controller::port() const { return impl_->port_.load(); }

void ControllerOptions::Validate() const {
  for (const auto& ns : namespaces) validation::RequireDns1123Label("--watch-namespaces", ns);
  if (port < 0 || port > 65535) {
    throw ValidationError("--listen", std::to_string(port), "a port is 0..65535");
  }
  election.Validate();
  if (cull_interval.count() <= 0) {
    throw ValidationError("--cull-interval", std::to_string(cull_interval.count()) + "s",
                          "must be positive");
  }
  if (idle_after.count() <= 0) {
    throw ValidationError("--idle-after", std::to_string(idle_after.count()) + "s",
                          "must be positive");
  }
  if (missed_schedule_grace.count() < 0) {
    throw ValidationError("--missed-schedule-grace",
                          std::to_string(missed_schedule_grace.count()) + "s",
                          "must not be negative");
  }
  if (usage_interval.count() <= 0) {
    throw ValidationError("usage_interval", std::to_string(usage_interval.count()) + "ms",
                          "must be positive");
  }
  if (webhook) ValidateWebhook(*webhook);
  if (pod_name.empty() != pod_namespace.empty()) {
    throw ValidationError("POD_NAME/POD_NAMESPACE", pod_name.empty() ? pod_namespace : pod_name,
                          "both or neither must be set");
  }
}

Controller::Impl::Impl(ClientConfig config, ControllerOptions options, std::ostream& log)
    : options_(std::move(options)), log_(log), registry_(std::make_shared<metrics::Registry>()) {
  options_.Validate();
  DeclareMetrics();
  // The histogram is fed by every request of every loop (the registry outlives the client).
  std::weak_ptr<metrics::Registry> weak = registry_;
  config.on_request = [weak](const RequestObservation& o) {
    if (auto r = weak.lock()) {
      r->Observe(kApiLatency, {o.stream ? std::string("WATCH") : std::string(o.method)},
                 std::chrono::duration<double>(o.latency).count());
    }
  };
  client_.emplace(std::move(config));
  elector_ = std::make_unique<LeaderElector>(*client_, options_.election);
}

Controller::Impl::~Impl() {
  for (auto& f : fleets_) f->Stop();
}

void Controller::Impl::DeclareMetrics() {
  using metrics::Type;
  auto& r = *registry_;
  r.Declare(kLeader, "1 while this replica holds the Lease and runs the loops, else 0.",
            Type::kGauge, {});
  r.Declare(kSynced, "1 once every informer of this replica has listed and watches.", Type::kGauge,
            {});
  r.Declare(kWorkloads, "tfk8s workloads by kind, namespace, owner and phase (leader only).",
            Type::kGauge, {"kind", "namespace", "owner", "phase"});
  r.Declare(kGpus, "GPUs (nvidia.com/gpu) the workloads' pods request (leader only).", Type::kGauge,
            {"namespace", "owner"});
  r.Declare(kCpu, "CPU cores the workloads' pods request (leader only).", Type::kGauge,
            {"namespace", "owner"});
  r.Declare(kMemory, "Memory bytes the workloads' pods request (leader only).", Type::kGauge,
            {"namespace", "owner"});
  r.Declare(kGpuHours,
            "GPU-hours requested by Running workloads, integrated over this replica's current term "
            "as leader.",
            Type::kCounter, {"namespace", "owner"});
  r.Declare(
      kCpuHours,
      "CPU core-hours requested by Running workloads, over this replica's current term as leader.",
      Type::kCounter, {"namespace", "owner"});
  r.Declare(kAlerts, "Alerts raised (claimed on their object), by kind.", Type::kCounter, {"kind"});
  r.Declare(kAlertsSent, "Alerts delivered (logged and, with a webhook, answered 2xx).",
            Type::kCounter, {});
  r.Declare(kAlertsFailed, "Alerts whose webhook delivery failed after every retry.",
            Type::kCounter, {});
  r.Declare(kCleanups,
            "Clean-up actions: a finished TFCluster's replicas (target tfcluster) or a run "
            "beyond its task's history limits (target history) deleted.",
            Type::kCounter, {"namespace", "target"});
  r.Declare(kCulls, "Idle culler decisions, by outcome (stopped, active, skipped, unknown).",
            Type::kCounter, {"outcome"});
  r.Declare(kApiLatency,
            "Kubernetes API request latency per attempt, by HTTP method (WATCH: to the "
            "headers of a watch or followed log).",
            Type::kHistogram, {"verb"},
            {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60});
  r.Declare(kWatchRestarts,
            "Failures of the Fleets' lists and watches, by source (each is retried unless it "
            "is fatal, which /healthz then reports).",
            Type::kCounter, {"source"});
  r.Set(kLeader, {}, 0);
  r.Set(kSynced, {}, 0);
}

std::vector<std::string> Controller::Impl::Scopes() const {
  return options_.namespaces.empty() ? std::vector<std::string>{""} : options_.namespaces;
}

HttpAnswer Controller::Impl::Healthz() const {
  if (synced_.load()) {
    for (const auto& f : fleets_) {
      if (f->error()) return {500, "text/plain; charset=utf-8", "an informer stopped\n"};
    }
  }
  return {200, "text/plain; charset=utf-8", "ok\n"};
}

HttpAnswer Controller::Impl::Readyz() const {
  if (!synced_.load()) return {503, "text/plain; charset=utf-8", "not synced\n"};
  if (leading_.load() && !elector_->IsLeader()) {
    return {503, "text/plain; charset=utf-8", "leading without a renewed Lease\n"};
  }
  return {200, "text/plain; charset=utf-8", "ok\n"};
}

HttpAnswer Controller::Impl::Metrics() {
  const bool leading = leading_.load() && elector_->IsLeader();
  registry_->Set(kLeader, {}, leading ? 1 : 0);
  registry_->Set(kSynced, {}, synced_.load() ? 1 : 0);
  if (leading) {
    SetWorkloadMetrics();
  } else {
    for (const char* name : {kWorkloads, kGpus, kCpu, kMemory}) registry_->Reset(name);
  }
  return {200, "text/plain; version=0.0.4; charset=utf-8", registry_->Expose()};
}

std::vector<FleetEntry> Controller::Impl::AllEntries() const {
  std::vector<FleetEntry> all;
  if (!synced_.load()) return all;
  for (const auto& f : fleets_) {
    auto e = f->Entries();
    all.insert(all.end(), std::make_move_iterator(e.begin()), std::make_move_iterator(e.end()));
  }
  return all;
}

void Controller::Impl::SetWorkloadMetrics() {
  std::map<std::vector<std::string>, double> workloads;
  std::map<std::vector<std::string>, FleetResources> requested;
  for (const auto& e : AllEntries()) {
    workloads[{ToString(e.kind), e.namespace_name, e.owner, e.phase}] += 1;
    auto& r = requested[{e.namespace_name, e.owner}];
    r.gpus += e.requested.gpus;
    r.cpu_milli += e.requested.cpu_milli;
    r.memory_bytes += e.requested.memory_bytes;
  }
  for (const char* name : {kWorkloads, kGpus, kCpu, kMemory}) registry_->Reset(name);
  for (const auto& [labels, n] : workloads) registry_->Set(kWorkloads, labels, n);
  for (const auto& [labels, r] : requested) {
    registry_->Set(kGpus, labels, static_cast<double>(r.gpus));
    registry_->Set(kCpu, labels, static_cast<double>(r.cpu_milli) / 1000.0);
    registry_->Set(kMemory, labels, static_cast<double>(r.memory_bytes));
  }
}

void Controller::Impl::IntegrateUsage(SteadyClock::time_point now) {
  if (!usage_at_) {
    usage_at_ = now;
    return;
  }
  const double hours = std::chrono::duration<double, std::ratio<3600>>(now - *usage_at_).count();
  usage_at_ = now;
  for (const auto& e : AllEntries()) {
    if (e.phase != "Running") continue;  // Pending pods hold nothing yet; finished ones no more
    if (e.requested.gpus > 0) {
      registry_->Add(kGpuHours, {e.namespace_name, e.owner},
                     static_cast<double>(e.requested.gpus) * hours);
    }
    if (e.requested.cpu_milli > 0) {
      registry_->Add(kCpuHours, {e.namespace_name, e.owner},
                     static_cast<double>(e.requested.cpu_milli) / 1000.0 * hours);
    }
  }
}

ScheduledJobWatcherOptions Controller::Impl::WatcherOptions(const std::string& ns) {
  ScheduledJobWatcherOptions o;
  o.namespace_name = ns;
  o.label_selector = options_.label_selector;
  o.identity = options_.election.identity;
  o.webhook = options_.webhook;
  o.alert_on_failure = options_.alerts;
  o.alert_on_timeout = options_.alerts;
  o.alert_on_missed_schedule = options_.alerts;
  o.missed_schedule_grace = options_.missed_schedule_grace;
  o.clean_up_tf_clusters = options_.cleanup;
  o.bound_history = options_.history;
  o.on_alert = [this](const ScheduledJobAlert& a) {
    registry_->Add(kAlerts, {ToString(a.kind)});
    if (a.kind == AlertKind::kCleanup) {
      registry_->Add(kCleanups, {a.namespace_name, a.tf_cluster.empty() ? "history" : "tfcluster"});
    }
    log_.Info("alert", {{"alert", a.ToJson()}});
  };
  o.on_error = [this, ns](const std::string& e) {
    log_.Warn(e, {{"loop", "scheduledjob-watcher"}, {"scope", Scope(ns)}});
  };
  return o;
}

void Controller::Impl::CullPass() {
  for (const auto& ns : Scopes()) {
    DevCullOptions o;
    o.namespace_name = ns;
    o.label_selector = options_.label_selector;
    o.idle_after = options_.idle_after;
    o.policy_only = options_.cull_policy_only;
    try {
      for (const auto& d : CullIdleDevInstances(*client_, o)) {
        registry_->Add(kCulls, {d.outcome});
        if (d.outcome == "stopped" || d.outcome == "unknown") {
          log_.Info("cull", {{"decision", d.ToJson()}});
        }
      }
    } catch (const std::exception& e) {
      log_.Warn(std::string("culling pass failed: ") + e.what(),
                {{"loop", "culler"}, {"scope", Scope(ns)}});
    }
  }
}

void Controller::Impl::LabelOwnPod(bool leader) {
  if (options_.pod_name.empty()) return;
  Json patch = {{"metadata", {{"labels", {{kControllerLeaderLabel, leader ? "true" : "false"}}}}}};
  try {
    client_->Patch(kPods, options_.pod_namespace, options_.pod_name, PatchType::kMerge, patch);
  } catch (const std::exception& e) {
    log_.Warn(std::string("could not label this pod: ") + e.what(),
              {{"pod", options_.pod_name}, {"leader", leader}});
  }
}

// A leader killed with -9 keeps its label until its container restarts: the new leader takes
// it away so the metrics Service selects one pod.
void Controller::Impl::UnlabelOtherLeaders() {
  if (options_.pod_name.empty()) return;
  try {
    ListOptions lo;
    lo.label_selector = std::string(kControllerLeaderLabel) + "=true";
    Json pods = client_->List(kPods, options_.pod_namespace, lo);
    for (const auto& p : pods.value("items", Json::array())) {
      const std::string name = p["metadata"].value("name", "");
      if (name.empty() || name == options_.pod_name) continue;
      Json patch = {{"metadata", {{"labels", {{kControllerLeaderLabel, "false"}}}}}};
      client_->Patch(kPods, options_.pod_namespace, name, PatchType::kMerge, patch);
      log_.Info("took the leader label from a former leader's pod", {{"pod", name}});
    }
  } catch (const std::exception& e) {
    log_.Warn(std::string("could not check the other replicas' labels: ") + e.what());
  }
}

void Controller::Impl::Lead(const std::atomic<bool>& lost) {
  // The counters of what the leader does start from zero with each term: the metrics Service
  // follows whichever replica leads, and a replica leading again must not go on from its old
  // values (a jump Prometheus would count as work done); a drop reads as a counter reset.
  for (const char* name :
       {kGpuHours, kCpuHours, kAlerts, kAlertsSent, kAlertsFailed, kCleanups, kCulls}) {
    registry_->Reset(name);
  }
  leading_.store(true);
  log_.Info("leading", {{"identity", options_.election.identity}});
  LabelOwnPod(true);
  UnlabelOtherLeaders();
  // One watcher per scope; its delivery counts since it started, as counters of our own.
  struct Loop {
    std::string ns;
    std::unique_ptr<ScheduledJobWatcher> watcher;
    int sent_seen = 0;
    int failed_seen = 0;
    SteadyClock::time_point restart_at{};
  };
  std::vector<Loop> loops;
  if (options_.alerts || options_.cleanup || options_.history) {
    for (const auto& ns : Scopes()) loops.push_back(Loop{ns, nullptr, 0, 0, {}});
  }
  auto count_deliveries = [this](Loop& l) {
    const int sent = l.watcher->alerts_sent();
    const int failed = l.watcher->alerts_failed();
    if (sent > l.sent_seen) registry_->Add(kAlertsSent, {}, sent - l.sent_seen);
    if (failed > l.failed_seen) registry_->Add(kAlertsFailed, {}, failed - l.failed_seen);
    l.sent_seen = sent;
    l.failed_seen = failed;
  };
  std::optional<SteadyClock::time_point> next_cull;
  if (options_.cull) next_cull = SteadyClock::now();
  usage_at_.reset();
  while (!lost.load()) {
    const auto now = SteadyClock::now();
    for (auto& l : loops) {
      if (l.watcher) {
        count_deliveries(l);
        if (std::exception_ptr error = l.watcher->error()) {
          log_.Error(
              "the scheduled job watcher stopped; restarting it in 10 s: " + ErrorText(error),
              {{"scope", Scope(l.ns)}});
          l.watcher.reset();
          l.restart_at = now + std::chrono::seconds(10);
        }
      }
      if (!l.watcher && now >= l.restart_at) {
        l.watcher = std::make_unique<ScheduledJobWatcher>(*client_, WatcherOptions(l.ns));
        l.sent_seen = 0;
        l.failed_seen = 0;
        l.watcher->Start();
      }
    }
    if (!usage_at_ || now - *usage_at_ >= options_.usage_interval) IntegrateUsage(now);
    if (next_cull && now >= *next_cull) {
      CullPass();  // a pass under way finishes (stopping an instance is idempotent)
      next_cull = SteadyClock::now() + options_.cull_interval;
    }
    SleepUnless(std::chrono::milliseconds(500), lost);
  }
  for (auto& l : loops) {
    if (l.watcher) {
      l.watcher->Stop();
      count_deliveries(l);
    }
  }
  loops.clear();
  leading_.store(false);
  LabelOwnPod(false);
  log_.Info("stopped leading", {{"identity", options_.election.identity}});
}

void Controller::Impl::Run(const std::atomic<bool>& stop) {
  HttpEndpoint endpoint(options_.listen_address, options_.port,
                        {{"/healthz", [this] { return Healthz(); }},
                         {"/readyz", [this] { return Readyz(); }},
                         {"/metrics", [this] { return Metrics(); }}});
  port_.store(endpoint.port());
  log_.Info("serving /healthz, /readyz and /metrics",
            {{"address", options_.listen_address}, {"port", endpoint.port()}});
  LabelOwnPod(false);  // a restarted former leader's container

  // One Fleet per scope; its constructor asks the server once (discovery), retried until up.
  const std::vector<std::string> scopes = Scopes();
  std::vector<std::unique_ptr<Fleet>> fleets;
  for (const auto& ns : scopes) {
    while (!stop.load()) {
      try {
        FleetOptions fo;
        fo.namespace_name = ns;
        fo.label_selector = options_.label_selector;
        fleets.push_back(std::make_unique<Fleet>(*client_, fo));
        break;
      } catch (const std::exception& e) {
        log_.Warn(std::string("cannot start watching yet, retrying in 5 s: ") + e.what(),
                  {{"scope", Scope(ns)}});
        SleepUnless(std::chrono::seconds(5), stop);
      }
    }
  }
  if (stop.load()) return;
  for (std::size_t i = 0; i < fleets.size(); ++i) {
    fleets[i]->OnError([this, ns = scopes[i]](const FleetError& e) {
      registry_->Add(kWatchRestarts, {e.source});
      log_.Warn(e.failure.message,
                {{"loop", "fleet"}, {"scope", Scope(ns)}, {"failure", e.ToJson()}});
    });
  }
  const auto sync_start = SteadyClock::now();
  for (auto& f : fleets) {
    while (!stop.load() && !f->WaitForSync(std::chrono::milliseconds(500))) {
    }
  }
  if (stop.load()) return;
  fleets_ = std::move(fleets);
  synced_.store(true);
  log_.Info("synced",
            {{"seconds", std::chrono::duration<double>(SteadyClock::now() - sync_start).count()},
             {"workloads", AllEntries().size()}});

  LeaderElector::Callbacks callbacks;
  callbacks.started = [this](const std::atomic<bool>& lost) { Lead(lost); };
  callbacks.new_leader = [this](const std::string& leader) {
    log_.Info("leader observed", {{"leader", leader}});
  };
  while (!stop.load()) {
    elector_->Run(stop, callbacks, [this](const std::string& e) {
      log_.Warn(std::string("leader election: ") + e, {{"lease", options_.election.lease_name}});
    });
  }
  log_.Info("stopping: the Lease is released", {{"identity", options_.election.identity}});
  endpoint.Stop();
}

}  // namespace tfk8s
