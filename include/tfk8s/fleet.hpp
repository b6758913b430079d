#pragma once
/// @file
/// Fleet: a platform's live view of every tfk8s workload (TFCluster, DevInstance,
/// ScheduledJob), kept in memory by one shared set of informers and answered from memory:
/// listing, looking up and summarising workloads sends no request. See docs/fleet.md.

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/client.hpp"

namespace tfk8s {

/// Which workload an entry is.
enum class FleetKind { kTFCluster, kDevInstance, kScheduledJob };
/// "TFCluster", "DevInstance", "ScheduledJob".
std::string ToString(FleetKind kind);
/// Parses "TFCluster" / "DevInstance" / "ScheduledJob"; throws ValidationError("kind").
FleetKind ParseFleetKind(std::string_view text);

/// What a workload's pods request together: every pod template times its replicas (a
/// ScheduledJob: one run; a stopped DevInstance: nothing). Scheduling requests, as the
/// scheduler reserves them on nodes (containers summed, init containers at their maximum).
struct FleetResources {
  std::int64_t gpus = 0;          ///< nvidia.com/gpu.
  std::int64_t cpu_milli = 0;     ///< CPU in thousandths of a core.
  std::int64_t memory_bytes = 0;  ///< Memory.
  bool operator==(const FleetResources&) const = default;
  /// {"gpus", "cpu" (cores, a number), "cpu_milli", "memory_bytes"}.
  [[nodiscard]] Json ToJson() const;
};

/// One workload as the Fleet sees it.
struct FleetEntry {
  FleetKind kind = FleetKind::kTFCluster;
  std::string namespace_name;  ///< The team's namespace.
  std::string name;            ///< The workload's name.
  std::string owner;           ///< The user (label tfk8s.io/owner), "" when none.
  /// The workload's own phase: TFCluster Pending/Running/Succeeded/Failed/Unknown; DevInstance
  /// Stopped/Pending/Running/Failed/Unknown; ScheduledJob Running (a run is active), Scheduled,
  /// Suspended, or (no schedule) its newest run's result (Pending, Succeeded, Failed, TimedOut).
  std::string phase;
  std::string message;  ///< One line: why, or progress.
  /// When the workload's root object (TFCluster root ConfigMap, DevInstance StatefulSet,
  /// ScheduledJob CronJob or oldest run) was created.
  std::chrono::system_clock::time_point created{};
  FleetResources requested;  ///< What its pods request together.
  /// A DevInstance's last activity, as the idle culler records it on its StatefulSet
  /// (annotation `tfk8s.io/last-activity`, RFC 3339; see CullIdleDevInstances); nullopt when
  /// none is recorded (never probed, or not a DevInstance).
  std::optional<std::chrono::system_clock::time_point> last_activity;
  bool operator==(const FleetEntry&) const = default;
  /// now - created.
  [[nodiscard]] std::chrono::seconds Age(
      std::chrono::system_clock::time_point now = std::chrono::system_clock::now()) const;
  /// The fields as JSON with snake_case keys ("namespace", "created" in seconds since the
  /// epoch, "age_seconds" — both null when the creation time is unknown —, "requested" and
  /// "last_activity", seconds since the epoch or null):
  /// what the Python bindings return.
  [[nodiscard]] Json ToJson() const;
};

/// What happened to an entry.
enum class FleetChangeType { kAdded, kModified, kRemoved };
/// "ADDED", "MODIFIED", "REMOVED".
std::string ToString(FleetChangeType type);

/// One change of the Fleet's entries.
struct FleetChange {
  FleetChangeType type = FleetChangeType::kAdded;
  FleetEntry entry;  ///< The new entry; for kRemoved, the last one known.
  /// {"type", "entry"}.
  [[nodiscard]] Json ToJson() const;
};

/// A failure of one of the Fleet's informers (Fleet::OnError, Fleet::last_error()).
struct FleetError {
  /// The kind of object the failing informer watches: "ConfigMap" (TFCluster roots),
  /// "StatefulSet", "Job", "Pod" or "CronJob".
  std::string source;
  /// The failure. `failure.fatal`: the informer has given up (Informer::Next()), the entries it
  /// feeds are no longer updated and Fleet::error() returns `failure.error`; otherwise it is
  /// backing off and retrying.
  InformerFailure failure;
  /// InformerFailure::ToJson() with "source" added.
  [[nodiscard]] Json ToJson() const;
};

/// What a Fleet watches.
struct FleetOptions {
  std::string namespace_name;  ///< One namespace; "" = every namespace (needs cluster-wide list).
  /// Narrows every watch (a Kubernetes label selector, e.g. "team=vision"); added to tfk8s's
  /// own managed-by selector.
  std::string label_selector;
};

/// A live, in-memory view of every tfk8s workload. Starts its informers (ConfigMaps of the
/// TFCluster roots, StatefulSets, Jobs, CronJobs and Pods managed by tfk8s) at construction;
/// each survives watch expiry (410) and API server restarts (tfk8s::Informer). Every query
/// answers from memory. It keeps one copy of each object, cut as it is decoded to the fields
/// its entries read (Informer::set_transform). Thread-safe; Stop() or destruction ends the
/// threads.
class Fleet {
 public:
  /// Starts watching. Resolves the server's CronJob version first (one discovery request,
  /// cached); a server without CronJobs is watched without them.
  Fleet(Client client, FleetOptions options = {});
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;
  ~Fleet();

  /// Waits until every informer has listed once, its watch is open (a change the server
  /// accepts from then on reaches OnChange), and the entries reflect those lists. False
  /// on timeout, or at once after Stop() when not synced by then. Throws the error that
  /// stopped an informer (Forbidden, …).
  bool WaitForSync(std::chrono::milliseconds timeout);
  /// True once WaitForSync would return true at once.
  [[nodiscard]] bool synced() const;

  /// Every entry, sorted by kind, namespace, name.
  [[nodiscard]] std::vector<FleetEntry> Entries() const;
  /// One entry, or nullopt.
  [[nodiscard]] std::optional<FleetEntry> Get(FleetKind kind, std::string_view ns,
                                              std::string_view name) const;
  /// The entries of one owner (in every namespace watched).
  [[nodiscard]] std::vector<FleetEntry> ByOwner(std::string_view owner) const;
  /// The entries of one namespace.
  [[nodiscard]] std::vector<FleetEntry> ByNamespace(std::string_view ns) const;

  /// Calls `callback` for every later change of an entry (added, changed, removed), on the
  /// Fleet's own thread, one change at a time, in order. Entries already known when it is
  /// registered are not replayed (read Entries() after registering). The callback must not
  /// block for long and must not call Stop() or destroy the Fleet.
  void OnChange(std::function<void(const FleetChange&)> callback);

  /// Calls `callback` for every failure of an informer (each list or watch that failed, see
  /// Informer::Next()), on the Fleet's own thread, one at a time, in order, like OnChange: so a
  /// Fleet that cannot reach or read the server says so instead of going quiet. A failure with
  /// `failure.fatal` set stopped its informer (error() then returns it). Failures before it is
  /// registered are not replayed (read last_error()). The same rules as OnChange apply.
  void OnError(std::function<void(const FleetError&)> callback);
  /// The most recent failure of any informer, nullopt when none has failed. Thread-safe.
  [[nodiscard]] std::optional<FleetError> last_error() const;

  /// Stops every informer and joins the threads; entries stay readable. Idempotent.
  void Stop();
  /// The error that stopped an informer, if any (the Fleet keeps its last entries; the other
  /// informers go on).
  [[nodiscard]] std::exception_ptr error() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tfk8s
