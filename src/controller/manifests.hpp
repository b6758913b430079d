#pragma once
// Internal: what `tfk8s controller manifests | kubectl apply -f -` installs (issue #38, ADR
// 0003): the controller's Namespace, ServiceAccount, least-privilege RBAC, optional
// PriorityClasses, Deployment and metrics Service. Pure: the same options give the same objects,
// in the order they must be applied; nothing is sent.
//
// The RBAC rules are derived from what the loops the controller runs actually send (the Fleet's
// informers, ScheduledJobWatcher with clean-up and history bounding, CullIdleDevInstances,
// LeaderElector); manifests.cpp names the code behind each rule, docs/controller.md tabulates
// them. A change to what those loops request must change the rules with it.

#include <optional>
#include <string>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/controller.hpp"

namespace tfk8s::controller {

/// The name of the ServiceAccount, the Deployment, the workload (Cluster)Role and its binding.
inline constexpr const char* kControllerName = "tfk8s-controller";
/// The Role (and RoleBinding) for the leader election's Lease, in the controller's namespace.
inline constexpr const char* kLeaderRoleName = "tfk8s-controller-leader";
/// With watched namespaces: the Role on ingress-nginx's tcp-services ConfigMap, in its
/// namespace (kube-system, DevExposeSpec's default), is this prefix and the controller's
/// namespace (two installs must not share it).
inline constexpr const char* kTcpServicesRolePrefix = "tfk8s-controller-tcp-services-";
/// The Service in front of the leader's /metrics (it selects tfk8s.io/controller-leader=true).
inline constexpr const char* kMetricsServiceName = "tfk8s-controller-metrics";
/// The PriorityClass of scheduled training runs (may preempt dev instances).
inline constexpr const char* kScheduledPriorityClass = "tfk8s-scheduled";
/// The PriorityClass of dev instances (queue ahead of unprioritised pods, never preempt).
inline constexpr const char* kDevPriorityClass = "tfk8s-dev";
/// The key of the webhook Secret whose value becomes the webhook's Authorization header.
inline constexpr const char* kWebhookSecretKey = "authorization";
/// The environment variable the controller reads the Authorization header from.
inline constexpr const char* kWebhookAuthorizationEnv = "TFK8S_WEBHOOK_AUTHORIZATION";
/// Where the runtime image ships the CLI.
inline constexpr const char* kControllerBinary = "/usr/local/bin/tfk8s";

/// What RenderControllerManifests installs (tfk8s/controller.hpp).
using ManifestOptions = ControllerManifestOptions;

/// The objects to apply, in apply order: Namespace; ServiceAccount; the leader Role and
/// RoleBinding; the workload ClusterRole and ClusterRoleBinding (or a Role and RoleBinding per
/// watched namespace, sorted by namespace); the PriorityClasses when asked for; the Deployment;
/// the metrics Service. Validates `options` first (ValidationError). Pure and deterministic.
std::vector<Json> RenderManifests(const ManifestOptions& options);

}  // namespace tfk8s::controller
