#pragma once
/// @file
/// What every workload's lifecycle shares: the labels tfk8s puts on what it manages, a
/// pre-flight's verdict (FitResult: quota and placement), the options of a wait (driven by watches,
/// no polling; reports progress; can be cancelled from another thread), a log pull stream, and the
/// reference a listing across namespaces returns.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/fields.hpp"
#include "tfk8s/quantity.hpp"

namespace tfk8s {

/// Label naming the user a workload (every object of it) or a PVC belongs to; listings filter
/// on it across namespaces.
inline constexpr const char* kOwnerLabel = "tfk8s.io/owner";

/// Label on every object tfk8s manages.
inline constexpr std::string_view kManagedByLabel = "app.kubernetes.io/managed-by";
/// The value of kManagedByLabel on every object tfk8s manages.
inline constexpr std::string_view kManagedByValue = "tfk8s";

/// One resource that does not fit.
struct Shortfall {
  std::string resource;  ///< e.g. "requests.nvidia.com/gpu".
  std::string quota;     ///< The ResourceQuota that limits it.
  Quantity requested;    ///< What the objects need.
  Quantity used;         ///< Already used in the namespace.
  Quantity hard;         ///< The quota's hard limit.
  Quantity remaining;    ///< hard - used (may be negative when over-committed).
};

/// Result of a pre-flight check.
struct FitResult {
  bool fits = true;
  std::vector<Shortfall> shortfalls;  ///< Empty when it fits.
  std::vector<std::string> problems;  ///< Other reasons (e.g. node placement), human readable.
  /// What could not be checked and why (e.g. nodes a namespaced Role cannot read), and what
  /// the server would only warn about or do on the side (e.g. the pods a PriorityClass would
  /// preempt); does not change `fits`.
  std::vector<std::string> notes;
  /// One line per shortfall/problem, e.g.
  /// "requests.nvidia.com/gpu: requested 8, remaining 4 (hard 4, used 0) in quota team-a".
  [[nodiscard]] std::string Message() const;
  /// Appends `other`'s shortfalls and problems (fits becomes false if `other` does not fit).
  void Merge(const FitResult& other);
  /// The fields and the message as JSON with snake_case keys (what the Python bindings return).
  [[nodiscard]] Json ToJson() const;
};

/// One workload found by a listing: where it is and whose it is. Listing every namespace
/// returns these (names alone would be ambiguous).
struct WorkloadRef {
  std::string namespace_name;  ///< The team's namespace.
  std::string name;            ///< The workload's name in it.
  std::string owner;           ///< The user it belongs to ("" when the workload has none).
  /// When it was created: the oldest of its roots' metadata.creationTimestamp (RFC 3339, as
  /// the server wrote it; "" when unknown). What `tfk8s list` prints as AGE.
  std::string created;
  /// Two refs are equal when they name the same workload (namespace, name, owner); `created`
  /// describes it and is not compared.
  bool operator==(const WorkloadRef& other) const {
    return namespace_name == other.namespace_name && name == other.name && owner == other.owner;
  }
  /// {"namespace", "name", "owner", "created" (null when unknown)}.
  [[nodiscard]] Json ToJson() const;
};

/// Rows as a fixed-width text table: columns padded to their widest cell and two spaces apart,
/// no trailing spaces, one line per row (the first row is the header). Every Table() of the
/// workloads and the `tfk8s` command's listings use it.
std::string FormatTextTable(const std::vector<std::vector<std::string>>& rows);

/// What a wait waits for.
enum class WaitUntil {
  kReady,     ///< Running and ready (a TFCluster: every replica; a DevInstance: its tools).
  kFinished,  ///< Done, successfully or not (a TFCluster's chief; a ScheduledJob's run).
};

/// Options of a workload's wait (TFCluster::Wait, DevInstance::Wait,
/// ScheduledJob::WaitForRun). `Status` is the workload's status type.
template <typename Status>
struct WaitOptions {
  /// What to wait for (a ScheduledJob run always waits until it finished).
  WaitUntil until = WaitUntil::kReady;
  /// How long at most; the Timeout error then names this whole duration.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  /// Called with each new status (repeats dropped), from the waiting thread.
  std::function<void(const Status&)> on_progress{};
  /// Asked at least once a second; returning true ends the wait with CancelledError. The
  /// watches stay open for the whole wait.
  std::function<bool()> cancelled{};
};

/// Options of a workload's logs (TFCluster::Logs and StreamLogs, DevInstance::StreamLogs,
/// ScheduledJob::Logs, FollowLogs and StreamLogs): one shape for every kind.
struct WorkloadLogOptions {
  /// Whose logs. A TFCluster: "" every replica, a role ("worker") or one replica ("worker-1").
  /// A ScheduledJob: a run (its Job's name), "" the newest. A DevInstance has one source, its
  /// pod: "" (or the pod's name).
  std::string source{};
  bool follow = false;  ///< Keep reading until the workload ends (or the stream is cancelled).
  std::optional<std::int64_t> tail_lines{};     ///< Only the last N lines (of each container).
  std::optional<std::int64_t> since_seconds{};  ///< Only lines this recent.
  bool timestamps = false;                      ///< RFC 3339 timestamp before each line.
  /// The previous container of each source (the one before its last restart, as `kubectl logs
  /// --previous`); a source that never restarted is a BadRequest saying so.
  bool previous = false;
  /// How long a followed source may wait for its pod to start. A source that has not started
  /// says so at once (a line "(not started: Pending — ContainerCreating…)"); without follow it
  /// is not waited for, and a workload none of whose sources started is an error.
  std::chrono::milliseconds pending_wait = std::chrono::minutes(2);
  /// Asked at least every 200 ms; returning true ends the reading promptly (used to close a
  /// followed stream from another thread, e.g. a Python iterator).
  std::function<bool()> cancelled{};

  /// The request for one container of one pod: `container`, and follow, tail_lines,
  /// since_seconds, timestamps and previous as these options say.
  [[nodiscard]] LogOptions ForPod(std::string container = "") const {
    LogOptions o;
    o.container = std::move(container);
    o.follow = follow;
    o.tail_lines = tail_lines;
    o.since_seconds = since_seconds;
    o.timestamps = timestamps;
    o.previous = previous;
    return o;
  }
};

/// One line of a workload's logs.
struct WorkloadLogLine {
  std::string source;  ///< Who wrote it: a replica ("worker-1"), a run's attempt ("attempt-2")…
  std::string line;    ///< The text, without '\n'.
  /// "[source] line".
  [[nodiscard]] std::string Prefixed() const { return "[" + source + "] " + line; }
};

/// A workload's logs as a pull stream (TFCluster::StreamLogs, DevInstance::StreamLogs,
/// ScheduledJob::StreamLogs): lines are read on a background thread into a bounded queue, which
/// pauses the reading when the consumer falls `capacity` lines behind. Move-only. Cancel() (from
/// any thread) or destruction stops the reading and joins the thread.
class WorkloadLogStream {
 public:
  /// Hands one line to the stream; false when the stream was cancelled (stop producing).
  using Emit = std::function<bool(WorkloadLogLine line)>;
  /// Produces the lines: calls emit() for each, returns at the end of the logs, and returns
  /// promptly (within about a second) once cancelled() is true. Its exception is the stream's.
  using Producer = std::function<void(const Emit& emit, const std::function<bool()>& cancelled)>;

  /// Produces the lines from a workload's log options (see WithOptions).
  using OptionsProducer = std::function<void(const WorkloadLogOptions& options, const Emit& emit)>;

  /// Starts `producer` on its own thread.
  explicit WorkloadLogStream(Producer producer, std::size_t capacity = 1024);
  /// Starts `producer` on its own thread with `options` whose `cancelled` is widened: true once
  /// the stream is cancelled or the caller's own callback says so (what a kind's StreamLogs
  /// hands to its pull and follow readers).
  static WorkloadLogStream WithOptions(WorkloadLogOptions options, OptionsProducer producer);
  WorkloadLogStream(WorkloadLogStream&&) noexcept;
  WorkloadLogStream& operator=(WorkloadLogStream&&) noexcept;
  WorkloadLogStream(const WorkloadLogStream&) = delete;
  WorkloadLogStream& operator=(const WorkloadLogStream&) = delete;
  ~WorkloadLogStream();

  /// The next line; nullopt when none came within `timeout`, or at the end (then ended() is
  /// true and the producer's error, if any, is thrown once).
  std::optional<WorkloadLogLine> Next(std::chrono::milliseconds timeout = std::chrono::seconds(30));
  /// True once every line was read and the producer finished, or after Cancel().
  [[nodiscard]] bool ended() const;
  /// Stops the reading; Next() then returns nullopt. Thread-safe, idempotent.
  void Cancel();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace tfk8s

namespace tfk8s {

namespace internal {
/// A kind's pure parts (rendering, identity, watches and judge); specialised in src/workloads,
/// never seen by users. See docs/adr/0002-workload-spine.md.
template <typename Kind>
struct KindOps;
}  // namespace internal

/// The life every workload shares, written once: construction (the spec validated, nothing
/// sent), the spec and its identity-preserving replacement, loading from the root object,
/// listing, pre-flight, status, the watch-driven wait, rendering and YAML. `Kind` is a tag
/// naming the kind's `Spec`, `Status` and `Object` (derived class) types (TFClusterKind,
/// DevInstanceKind, ScheduledJobKind); TFCluster, DevInstance and ScheduledJob derive from their
/// instantiation and add their own verbs (Scale, Stop, RunNow…). The members are compiled once, in
/// the library (explicit instantiation): users compile no implementation.
template <typename Kind>
class Workload {
 public:
  using KindType = Kind;
  using SpecType = typename Kind::Spec;
  using StatusType = typename Kind::Status;
  using ObjectType = typename Kind::Object;  ///< The derived class (TFCluster, …).

  /// Validates the spec (throws ValidationError); sends nothing.
  Workload(Client client, SpecType spec);

  /// Loads the workload `name` in `ns` from its root object (a TFCluster's root ConfigMap, a
  /// DevInstance's StatefulSet, a ScheduledJob's CronJob or, without a schedule, its newest
  /// run), the name checked first. The workload's name, namespace and owner are the root's own
  /// (its metadata and labels): a stored spec that says otherwise is refused with a
  /// ValidationError naming the field and both values, and nothing is sent. The root's UID is
  /// remembered: every later write of it carries it as a precondition, so a root deleted and
  /// re-created meanwhile is refused (Conflict), never overwritten. NotFound when absent.
  static ObjectType Load(Client client, const std::string& ns, const std::string& name);

  /// The spec.
  [[nodiscard]] const SpecType& spec() const { return spec_; }
  /// Replaces the spec (validated). The name, namespace and owner are the workload's identity:
  /// a spec naming others is refused (ValidationError); delete and create instead. Nothing is
  /// sent: Apply() converges the workload to it.
  void set_spec(SpecType spec);

  /// Names of the workloads of this kind in namespace `ns` (required: names alone would be
  /// ambiguous across namespaces; ListRefs lists every namespace).
  static std::vector<std::string> List(Client client, const std::string& ns);
  /// The workloads of this kind in namespace `ns`, or in every namespace when `ns` is "",
  /// of `owner` only when given, and of `label_selector` (a Kubernetes label selector on the
  /// roots' labels, which hold the spec's labels; "" = all) only when given, sorted by namespace
  /// then name. Read from the objects' labels (what the API server vouches for), one list call
  /// per root resource type, the selection made by the server.
  static std::vector<WorkloadRef> ListRefs(Client client, const std::string& ns = "",
                                           const std::string& owner = "",
                                           const std::string& label_selector = "");

  /// Pre-flight checks without creating anything: quota headroom, node placement and the
  /// kind's own (mount grants, Pod Security).
  FitResult Preflight();
  /// The workload's state as the server holds it now.
  StatusType Status();
  /// Waits, driven by watches, until `options.until` holds; fails fast with the kind's own
  /// error when it cannot get there (see the kind's class). on_progress sees each new status
  /// once; `cancelled` (asked at least once a second) ends the wait with CancelledError;
  /// Timeout after `options.timeout`.
  StatusType Wait(const WaitOptions<StatusType>& options) requires Kind::kWaitsForStatus;

  /// Every object Apply() sends, as it sends them. Pure but for discovery (cached) where the
  /// kind's objects depend on the server's API versions (a ScheduledJob's CronJob).
  [[nodiscard]] std::vector<Json> Render() const;
  /// Render() as a multi-document YAML stream for `kubectl apply -f`.
  [[nodiscard]] std::string ToYaml() const;
  /// What `kubectl apply` should get for this workload (`tfk8s render` prints it): Render(),
  /// and, where the root already exists on the server (one GET, checked as Load() checks it,
  /// and refused with a ValidationError when it is another owner's), every other object with
  /// an ownerReference to it, so that `kubectl delete` of the root cascades to them as it does
  /// for what Apply() creates. Objects rendered before the root existed have no owner; Delete()
  /// removes those too (by their rendered names, labels and absence of any owner). An on-demand
  /// task's run gets a fixed name from its content ("<name>-<10 hex>") instead of a generated
  /// one, which `kubectl apply` cannot take: the same spec applied again is the same run.
  [[nodiscard]] std::vector<Json> RenderForApply() const;

 protected:
  Client client_;
  SpecType spec_;
  /// The UID of the root this object loaded or applied ("" before): the precondition of every
  /// later write of it.
  std::string root_uid_;

 private:
  static SpecType LoadSpec(Client& client, const std::string& ns, const std::string& name,
                           std::string* uid);
};

}  // namespace tfk8s
