#pragma once
// Internal: the pure part of the Fleet: which workload an observed object belongs to, and a
// workload's entry from its observed objects (shared by fleet.cpp and the unit tests).

#include <array>
#include <chrono>
#include <compare>
#include <optional>
#include <string>
#include <vector>

#include "tfk8s/fleet.hpp"

namespace tfk8s::internal {

/// The kinds the Fleet watches, one informer each.
enum class FleetSource { kRootConfigMaps, kStatefulSets, kJobs, kCronJobs, kPods };
inline constexpr std::size_t kFleetSourceCount = 5;

/// A workload's identity.
struct FleetKey {
  FleetKind kind = FleetKind::kTFCluster;
  std::string namespace_name;
  std::string name;
  // NOLINTNEXTLINE(modernize-use-nullptr): a false positive on a defaulted <=> (clang-tidy 14)
  auto operator<=>(const FleetKey&) const = default;
  bool operator==(const FleetKey&) const = default;
};

/// The workload an object of `source` belongs to, from its labels (tfk8s.io/cluster first,
/// then tfk8s.io/instance, then tfk8s.io/scheduledjob); nullopt when the Fleet has no use for
/// it (a ScheduledJob's pods: a run's state is its Job's).
std::optional<FleetKey> FleetKeyOf(FleetSource source, const Json& object);

/// Cuts an object of `source` in place to what FleetKeyOf and ComputeFleetEntry read: the
/// metadata they use (name, namespace, uid, labels, the annotations read, ownerReferences,
/// creationTimestamp, resourceVersion, deletionTimestamp), a workload's scalar spec fields and
/// its pod template's containers' names and resources, a pod's node and status, a Job's status,
/// a root ConfigMap's stored spec. The Fleet's informers apply it as they decode. Pure.
void TrimForFleet(FleetSource source, Json& object);

/// The objects of one workload, as the Fleet holds them.
struct FleetObserved {
  std::array<std::vector<const Json*>, kFleetSourceCount> by_source;
  /// The objects of one source.
  [[nodiscard]] const std::vector<const Json*>& of(FleetSource s) const {
    return by_source[static_cast<std::size_t>(s)];
  }
};

/// The entry of `key` from its objects, or nullopt when the workload does not exist (a
/// TFCluster without its root ConfigMap, a DevInstance without its StatefulSet, a
/// ScheduledJob with neither CronJob nor run). Pure.
std::optional<FleetEntry> ComputeFleetEntry(const FleetKey& key, const FleetObserved& seen);

/// What the pods of `objects` request together (PodGroupsOf: pods, controllers × replicas,
/// Jobs and CronJobs × parallelism), as the scheduler counts one pod. Pure.
FleetResources RequestedResources(const std::vector<Json>& objects);

}  // namespace tfk8s::internal
