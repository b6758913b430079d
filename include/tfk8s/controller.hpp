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
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/config.hpp"
#include "tfk8s/leader_election.hpp"
#include "tfk8s/scheduledjob.hpp"

namespace tfk8s {

/// What the controller is told (the flags of `tfk8s controller run`).
struct ControllerOptions {
  std::vector<std::string> namespaces;  ///< Watched namespaces; empty = every namespace.
  /// Only workloads with these labels (a Kubernetes label selector, e.g. "team=vision"; a
  /// workload's `labels` go on all its objects): its Fleets, alerts, clean-ups, history and
  /// culling all see just those. "" = every tfk8s workload in the namespaces.
  std::string label_selector;
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
  /// retrying cannot fix: the port cannot be bound, an informer gave up before the first sync
  /// (e.g. Forbidden; after it, a Fleet that stops turns /healthz to 500), after logging it
  /// as its last line.
  void Run(const std::atomic<bool>& stop);
  /// The port once Run() has bound it (0 before).
  [[nodiscard]] int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// What `tfk8s controller manifests` installs (RenderControllerManifests). Field names are the ones
/// ValidationError names.
struct ControllerManifestOptions {
  /// Where the controller runs: its Namespace (labelled Pod Security "restricted" for enforce,
  /// audit and warn), ServiceAccount, Lease, Deployment and Service.
  std::string namespace_name = "tfk8s-system";
  /// The namespaces whose workloads it looks after. Empty: every namespace (ClusterRole +
  /// ClusterRoleBinding); else a Role + RoleBinding in each, and `--watch-namespaces`.
  std::vector<std::string> watch_namespaces;
  /// Only workloads with these labels (`tfk8s -l SELECTOR controller run`); "" = all.
  std::string label_selector;
  /// The runtime image (required), e.g. "tfk8s.local/runtime:1"; it ships the CLI as
  /// /usr/local/bin/tfk8s.
  std::string image;
  /// Always, IfNotPresent or Never; "" leaves it to Kubernetes' default.
  std::string image_pull_policy;
  /// Candidates for the leadership (one leads, the others stand by); at least 1.
  int replicas = 2;
  /// The port of /healthz, /readyz and /metrics (1024..65535: the container drops every
  /// capability, NET_BIND_SERVICE included).
  int port = 8080;
  /// Set: the metrics Service is a NodePort Service on this node port; else ClusterIP.
  std::optional<int> metrics_node_port;
  /// Also render the PriorityClasses tfk8s-scheduled and tfk8s-dev.
  bool priority_classes = false;
  /// The controller container's memory request and limit. The leader keeps the Fleet's caches
  /// and its loops' own (about twice the Fleet alone: some 380 MB at 2,000 DevInstances and 200
  /// TFClusters, docs/benchmarks.md scenario 7): raise the limit with the fleet.
  std::string memory_request = "128Mi";
  std::string memory_limit = "1Gi";
  /// The controller pods' nodeSelector (label key → value), e.g. to keep them on system nodes;
  /// empty: any node.
  std::map<std::string, std::string> node_selector;
  /// Where alerts go (`--webhook-url`), http:// or https://; "" = no webhook. Readable by
  /// anyone who can read the Deployment: credentials belong in `webhook_secret`.
  std::string webhook_url;
  /// A Secret in `namespace_name` whose key "authorization" becomes the webhook's
  /// Authorization header, through env TFK8S_WEBHOOK_AUTHORIZATION (a secretKeyRef: the value
  /// never appears in the manifests). Needs an https:// `webhook_url` (or
  /// "--webhook-allow-insecure-headers" in `extra_args`).
  std::string webhook_secret;
  /// Appended to the controller's arguments (`tfk8s controller run --help`), except the flags
  /// the options above set.
  std::vector<std::string> extra_args;

  /// Throws ValidationError(field, value, reason) naming the first bad field: namespace names,
  /// a missing or malformed image, pull policy, replicas, ports, the webhook's URL (scheme,
  /// credentials in it, credentials over http://) and Secret name, flags set twice.
  void Validate() const;
};

/// The objects `kubectl apply -f -` installs the controller with, in apply order: Namespace
/// (Pod Security "restricted"); ServiceAccount; the leader Role (its Lease, its own pods'
/// leader label) and RoleBinding; the workload ClusterRole and ClusterRoleBinding (or a Role
/// and RoleBinding per watched namespace); the PriorityClasses when asked for; the Deployment;
/// the metrics Service (selecting the leader). Least privilege: docs/controller.md, "RBAC".
/// Validates `options` first (ValidationError). Pure and deterministic.
std::vector<Json> RenderControllerManifests(const ControllerManifestOptions& options);

}  // namespace tfk8s
