#pragma once
/// @file
/// The tfk8s controller (`tfk8s controller run`, docs/controller.md): the platform's loops —
/// ScheduledJob alerts, TFCluster clean-up, history bounding, DevInstance idle culling — run by
/// one leader among replicas (LeaderElector on a Lease), with /healthz, /readyz and /metrics
/// (Prometheus text format) on one port and structured JSON logs.
///
/// Every replica keeps a Fleet per watched namespace (a standby is synced when it takes over)
/// and serves the port; only the leader runs the loops and exports the workload metrics (a
/// standby's would repeat them, and sums over replicas would double). The loops claim each
/// action on its object before acting (ScheduledJobWatcher), so a new leader skips what the
/// old one did.

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tfk8s/config.hpp"
#include "tfk8s/leader_election.hpp"
#include "tfk8s/scheduledjob.hpp"

namespace tfk8s {

/// What the controller is told (the flags of `tfk8s controller run`).
struct ControllerOptions {
  std::vector<std::string> namespaces;     ///< Watched namespaces; empty = every namespace.
  std::string listen_address = "0.0.0.0";  ///< Where /healthz, /readyz, /metrics are served.
  int port = 8080;                         ///< 0: a free port (see Controller::port()).
  /// The Lease: namespace, name, identity, durations (client-go's 15/10/2 s by default).
  LeaderElectionConfig election;
  bool alerts = true;                   ///< Failure, timeout and missed-schedule alerts.
  bool cleanup = true;                  ///< Finished TFClusters' clean-up policies.
  bool history = true;                  ///< Bound every task's history by its limits.
  bool cull = true;                     ///< Idle culling of DevInstances.
  std::optional<AlertWebhook> webhook;  ///< Where alerts are POSTed (none: logged only).
  std::chrono::seconds missed_schedule_grace{60};
  std::chrono::seconds cull_interval{300};          ///< Between culling passes.
  std::chrono::seconds idle_after{2 * 3600};        ///< The culler's default policy.
  bool cull_policy_only = false;                    ///< Cull only instances with a policy.
  std::chrono::milliseconds usage_interval{15000};  ///< GPU/CPU-hours integration step.
  /// The controller's own Pod (downward API): the leader labels it
  /// (kControllerLeaderLabel=true, the others false) so that the metrics Service selects the
  /// leader only. Empty: not in a pod, nothing is labelled.
  std::string pod_name;
  std::string pod_namespace;
  /// Throws ValidationError naming the flag (--watch-namespaces, --listen, --cull-interval …).
  void Validate() const;
};

/// The label the leader puts on its own Pod ("true"; "false" on the other replicas).
inline constexpr const char* kControllerLeaderLabel = "tfk8s.io/controller-leader";

class Controller {
 public:
  /// Validates `options` (ValidationError); `config.on_request` is replaced by the
  /// controller's API latency histogram. Logs go to `log`, one JSON object per line
  /// ({"time", "level", "msg", …}). Sends nothing.
  Controller(ClientConfig config, ControllerOptions options, std::ostream& log);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  /// Serves the port, syncs the Fleets, then campaigns and, while leading, runs the loops;
  /// until `stop` turns true (then the loops stop and the Lease is released). Throws what
  /// retrying cannot fix: the port cannot be bound, an informer gave up (e.g. Forbidden).
  void Run(const std::atomic<bool>& stop);
  /// The port once Run() has bound it (0 before).
  [[nodiscard]] int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfk8s
