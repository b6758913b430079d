#pragma once
/// @file
/// Node placement: the seed documents' node labels (nodetype, cputype, gputype, pooltype,
/// privatename), an inventory of nodes with allocatable and requested resources grouped by
/// GPU type, CPU type and pool, and "where does this pod fit right now?".
///
/// Resource names here are *node* resource names ("cpu", "memory", "nvidia.com/gpu", "pods"),
/// not quota names; a "requests." prefix is accepted and stripped where requests are taken.
/// The pre-flight CheckPlacement (could a pod *ever* be placed; a named PriorityClass exists;
/// what it would preempt) is declared in quota.hpp.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/quota.hpp"

namespace tfk8s {

/// "tensorflow" on nodes that may run TensorFlow pods.
inline constexpr std::string_view kNodeTypeLabel = "nodetype";
/// CPU model, e.g. "xeon-gold".
inline constexpr std::string_view kCpuTypeLabel = "cputype";
/// GPU model, e.g. "v100".
inline constexpr std::string_view kGpuTypeLabel = "gputype";
/// "shared" (any team) or "unshared" (reserved to privatename).
inline constexpr std::string_view kPoolTypeLabel = "pooltype";
/// The owner (user or cluster) of an unshared node.
inline constexpr std::string_view kPrivateNameLabel = "privatename";

/// Checks a node's *resulting* label set against the seed rules: label key/value syntax;
/// pooltype is "shared" or "unshared"; privatename is set exactly when pooltype is unshared.
/// Throws ValidationError naming the label and value.
void ValidateNodeLabels(const std::map<std::string, std::string>& labels);

/// Sets labels on a node (merge patch, conditional on the node's resourceVersion so a concurrent
/// change is not lost; retried once on Conflict). The node's labels after the change must pass
/// ValidateNodeLabels (e.g. setting pooltype=unshared needs privatename in the same call or
/// already on the node). Returns the updated node.
Json SetNodeLabels(Client& client, const std::string& node,
                   const std::map<std::string, std::string>& labels);

/// Removes labels from a node (absent ones are ignored); same validation and patching as
/// SetNodeLabels (removing privatename from an unshared node is refused). Returns the node.
Json RemoveNodeLabels(Client& client, const std::string& node,
                      const std::vector<std::string>& keys);

/// Sets `set` and removes `remove` in one patch, for changes that are only valid together
/// (returning an unshared node to the shared pool: set pooltype=shared, remove privatename).
/// A key in both is an error. Same validation and patching as SetNodeLabels.
Json UpdateNodeLabels(Client& client, const std::string& node,
                      const std::map<std::string, std::string>& set,
                      const std::vector<std::string>& remove);

/// A taint of a node.
struct Taint {
  std::string key;     ///< e.g. "nvidia.com/gpu".
  std::string value;   ///< e.g. "present" (may be empty).
  std::string effect;  ///< "NoSchedule", "PreferNoSchedule" or "NoExecute".
  /// "key=value:effect" (or "key:effect").
  [[nodiscard]] std::string ToString() const;
};

/// One node as the scheduler sees it.
struct NodeInfo {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string nodetype;  ///< Seed labels ("" when absent).
  std::string cputype;
  std::string gputype;
  std::string pooltype;
  std::string privatename;
  bool ready = false;       ///< Condition Ready is True.
  bool schedulable = true;  ///< Not cordoned (spec.unschedulable).
  std::vector<Taint> taints;
  ResourceList allocatable;  ///< status.allocatable (cpu, memory, nvidia.com/gpu, pods, …).
  ResourceList requested;    ///< Sum of the requests of non-terminated pods on the node, and
                             ///< "pods" = their number.
  ResourceList free;         ///< allocatable - requested, per allocatable resource.
  int pod_count = 0;         ///< Non-terminated pods bound to the node.
};

/// Nodes sharing one value of a grouping label, with summed resources.
struct NodeGroup {
  std::string label;               ///< "gputype", "cputype" or "pool".
  std::string value;               ///< e.g. "v100"; "" for nodes without the label.
  std::vector<std::string> nodes;  ///< Node names, sorted.
  ResourceList allocatable;        ///< Sums over the nodes.
  ResourceList requested;
  ResourceList free;
  /// The fields as JSON with snake_case keys (what the Python bindings return).
  [[nodiscard]] Json ToJson() const;
};

/// Every node, and the nodes grouped three ways.
struct Inventory {
  std::vector<NodeInfo> nodes;        ///< Sorted by name.
  std::vector<NodeGroup> by_gputype;  ///< By the gputype label.
  std::vector<NodeGroup> by_cputype;  ///< By the cputype label.
  /// By pool: "shared", "unshared/<privatename>", or "" for nodes without pooltype.
  std::vector<NodeGroup> by_pool;
  /// The fields and the text report ("text") as JSON with snake_case keys (what the Python
  /// bindings return).
  [[nodiscard]] Json ToJson() const;
};

/// Builds the inventory from Node objects and Pod objects (pods of any namespace; those not
/// bound to a node or terminated are ignored). Pure.
Inventory BuildInventory(const std::vector<Json>& nodes, const std::vector<Json>& pods);

/// Reads nodes and the non-terminated pods bound to them (two list calls, whatever the number
/// of nodes) and builds the inventory.
Inventory GetInventory(Client& client);

/// Requested and allocatable of one node, with a field-selected pod list
/// (spec.nodeName=<node>, non-terminated), as `kubectl describe node` computes them.
NodeInfo GetNodeInfo(Client& client, const std::string& node);

/// What a pod needs, for WhereFits.
struct FitQuery {
  /// Per-pod requests: "cpu", "memory", "nvidia.com/gpu", … ("requests." prefix accepted).
  ResourceList requests;
  /// Labels the node must have (the pod's nodeSelector), e.g. {"gputype": "v100"}.
  std::map<std::string, std::string> node_selector;
  /// Kubernetes tolerations (JSON array of {key, operator, value, effect}).
  Json tolerations = Json::array();
  /// Also tolerate taints whose key is a requested extended resource (nvidia.com/gpu), as the
  /// ExtendedResourceToleration admission plugin and tfk8s GPU workloads do.
  bool tolerate_requested_resource_taints = true;
};

/// Names of the Ready, schedulable nodes where one such pod fits *right now*: labels match,
/// taints (NoSchedule/NoExecute) are tolerated, and free (allocatable - requested) covers the
/// requests plus one pod slot. Sorted by name. Pure.
std::vector<std::string> WhereFits(const Inventory& inventory, const FitQuery& query);

/// WhereFits on a fresh inventory: "where can a 4-GPU worker of type v100 fit right now?" is
/// WhereFits(client, {{"nvidia.com/gpu", Quantity::FromInt(4)}}, {{"gputype", "v100"}}).
std::vector<std::string> WhereFits(Client& client, const ResourceList& requests,
                                   const std::map<std::string, std::string>& node_selector);

/// A pod the scheduler would evict (preempt) to make room for pods of a higher priority.
struct PreemptedPod {
  std::string namespace_name;
  std::string name;
  std::string node;           ///< Where it runs.
  std::int64_t priority = 0;  ///< Its spec.priority (0 when unset).
  bool operator==(const PreemptedPod&) const = default;
  /// "team-b/batch-1 (priority 0, node sim-cpu-1)".
  [[nodiscard]] std::string ToString() const;
};

/// What placing the pods of some objects on the nodes' free capacity right now would take, at
/// one priority (PlanPreemption).
struct PreemptionPlan {
  bool fits_free = true;  ///< Every pod fits on free capacity: nothing is evicted.
  bool fits = true;       ///< Every pod fits, the victims evicted first (true when fits_free).
  /// The pods evicted (empty when fits_free or when not everything fits), sorted by namespace
  /// and name.
  std::vector<PreemptedPod> victims;
};

/// How the scheduler would place every pod the `objects` create (as PodGroups: Pods,
/// controllers' templates × replicas, Jobs × parallelism) on `nodes` (Node objects) beside the
/// running `pods` (Pod objects of any namespace; those not bound to a node or terminated are
/// ignored), when the new pods have priority `priority`. Pure.
///
/// Each new pod goes, in order, to the first Ready, schedulable node (by name) whose labels
/// match its nodeSelector and required node affinity, whose NoSchedule/NoExecute taints it
/// tolerates and whose free capacity (allocatable - requests of its pods) covers its requests
/// and one pod slot; pods that a required anti-affinity over kubernetes.io/hostname keeps apart
/// get a node each. A pod that fits nowhere is placed by preemption, as the v1.20 scheduler
/// chooses: on each matching node, evicting every pod of *lower* priority (spec.priority <
/// `priority`; pods of equal or higher priority are never evicted) and then sparing as many
/// as still leave room, highest priority first; the node with the lowest highest-victim
/// priority, then the fewest victims, wins. `may_preempt` false (a PriorityClass with
/// preemptionPolicy Never) evicts nothing. An estimate: the scheduler's scoring may pick other
/// nodes, and PodDisruptionBudgets and pod affinity to running pods are not considered.
PreemptionPlan PlanPreemption(const std::vector<Json>& objects, const std::vector<Json>& nodes,
                              const std::vector<Json>& pods, std::int64_t priority,
                              bool may_preempt = true);

/// The inventory as text: a table of the nodes (NODE, STATE Ready/Cordoned/NotReady, the seed
/// labels, PODS, then requested/allocatable CPU, memory and GPUs in Kubernetes' notation,
/// Quantity::ToString: 4500m/32, 16Gi/128Gi), then one line per group with what is free.
std::string FormatInventory(const Inventory& inventory);

}  // namespace tfk8s
