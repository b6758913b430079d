#pragma once
// Internal: names and labels shared by TFCluster's rendering and lifecycle code.

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tfk8s/tfcluster.hpp"

namespace tfk8s {

inline constexpr const char* kClusterLabel = "tfk8s.io/cluster";
inline constexpr const char* kRoleLabel = "tfk8s.io/role";
inline constexpr const char* kIndexLabel = "tfk8s.io/index";
inline constexpr const char* kComponentLabel = "tfk8s.io/component";
inline constexpr const char* kSpecKey = "spec.json";
/// The launcher's file name in a replica's launcher volume, and its key in the root ConfigMap's
/// binaryData with the "configmap" delivery (src/launcher/tfk8s_launcher.c built).
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

/// One replica: its role and index ("session", 0 for the session).
struct ReplicaKey {
  std::string role;
  int index;
};

/// Index of a pod within its role: the label (per-replica) or the StatefulSet ordinal.
int PodIndex(const Json& pod);

/// A node as a status sees it.
struct NodeReadiness {
  bool ready = true;
  std::string since;  ///< The Ready condition's lastTransitionTime, when not Ready.
};

/// What a status computation looks at.
struct TFObserved {
  std::vector<Json> pods;                     ///< Pods labelled with the cluster.
  std::vector<Json> jobs;                     ///< Jobs labelled with the cluster.
  std::vector<std::string> quota_rejections;  ///< FailedCreate events of our controllers.
  std::vector<Json> services;  ///< A NodePort session's Services (their node ports), if read.
  /// The nodes of pods being deleted, by name: whether each is Ready, and when it stopped
  /// being Ready (a node that no longer exists: not Ready, since unknown).
  std::map<std::string, NodeReadiness> nodes;
};

/// The nodes `nodes` lacks of `pods` being deleted (what a status needs to tell a pod lost with
/// its node from one deleted on purpose).
std::set<std::string> NodesToRead(const std::vector<Json>& pods,
                                  const std::map<std::string, NodeReadiness>& nodes);
/// Reads those nodes (one GET each) into `nodes`; a node the caller may not read is left out.
void ReadNodes(Client& client, const std::set<std::string>& names,
               std::map<std::string, NodeReadiness>* nodes);
/// Every pod of `seen` lost with its node (being deleted, its node not Ready), in words, with
/// the replica's next pod ("worker-1 lost with node n2 at 12:01:07Z; recreated on n3 at
/// 12:01:41Z"), oldest loss of each replica first (pure).
std::vector<std::pair<ReplicaKey, std::string>> LossEvents(const TFClusterSpec& spec,
                                                           const TFObserved& seen);

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
