#pragma once
// Internal: names and labels shared by TFCluster's rendering and lifecycle code.

#include <string>
#include <vector>

#include "tfk8s/tfcluster.hpp"

namespace tfk8s {

inline constexpr const char* kClusterLabel = "tfk8s.io/cluster";
inline constexpr const char* kRoleLabel = "tfk8s.io/role";
inline constexpr const char* kIndexLabel = "tfk8s.io/index";
inline constexpr const char* kComponentLabel = "tfk8s.io/component";
inline constexpr const char* kSpecKey = "spec.json";
/// The root ConfigMap's copy of the launcher (binaryData: src/launcher/tfk8s_launcher.c built).
inline constexpr const char* kLauncherKey = "tfk8s-launcher";

namespace internal {

/// Whether a launched replica of `role` runs the launcher's default program, a TensorFlow
/// server started with spec.launcher.python: a ps, or a worker under the parameter-server
/// strategy, given no command, args or script.
bool RunsDefaultServer(const TFClusterSpec& spec, const std::string& role);

const TFRoleSpec& RoleOf(const TFClusterSpec& spec, const std::string& role);
TFRoleSpec& MutableRoleOf(TFClusterSpec& spec, const std::string& role);
/// `<cluster>-<role>-<index>`: the per-replica Service/Job name, or a StatefulSet pod name.
std::string ReplicaName(const TFClusterSpec& spec, const std::string& role, int index);
/// `<cluster>-<role>`: the StatefulSet and its governing Service.
std::string RoleName(const TFClusterSpec& spec, const std::string& role);
/// `<cluster>-session-credentials`: the session's password and its hashes.
std::string TFSessionSecretName(const TFClusterSpec& spec);
/// The PVC mounted by every pod ("" without storage).
std::string ClaimName(const TFClusterSpec& spec);
/// Labels on every object of the cluster.
Json CommonLabels(const TFClusterSpec& spec);

/// What a status computation looks at.
struct TFObserved {
  std::vector<Json> pods;                     ///< Pods labelled with the cluster.
  std::vector<Json> jobs;                     ///< Jobs labelled with the cluster.
  std::vector<std::string> quota_rejections;  ///< FailedCreate events of our controllers.
  std::vector<Json> services;  ///< A NodePort session's Services (their node ports), if read.
};

/// Where the session's Jupyter and SSH are reached: cluster addresses, and node ports from the
/// session's Services among `services` (pure; an empty access without a session).
DevAccess SessionAccess(const TFClusterSpec& spec, const std::vector<Json>& services);

/// The replicas' table and the cluster's phase from observed objects (pure); appends reasons
/// that waiting will not heal to `*fatal_reasons` (when not null).
TFClusterStatus ComputeTFStatus(const TFClusterSpec& spec, const TFObserved& seen,
                                std::vector<std::string>* fatal_reasons);

struct RootIdentity;
/// The spec stored in a cluster's root ConfigMap, its identity checked against the object's
/// (identity.hpp): NotFound when `root` is not a tfk8s cluster's root, ValidationError when
/// the stored spec is missing, not JSON, invalid, or names another cluster, namespace or
/// owner. `*identity` (optional) gets the object's identity.
TFClusterSpec TFSpecFromRoot(const Json& root, RootIdentity* identity = nullptr);

}  // namespace internal
}  // namespace tfk8s
