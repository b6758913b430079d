#pragma once
// Internal: small helpers shared by workload lifecycles (reading lists safely, pod problems,
// watch-driven waiting), used by every workload.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/pod_security.hpp"
#include "tfk8s/quota.hpp"
#include "tfk8s/workload.hpp"
#include "workloads/kinds.hpp"

namespace tfk8s::internal {

/// Checks the name (with the workload's own rule, e.g. validation::RequireDns1035Label) and the
/// namespace ("" = the client's default) of a workload before any request: the name also goes
/// into label selectors, where a value such as "a,b" would widen the selection.
void RequireWorkloadName(std::string_view ns, std::string_view name,
                         void (*rule)(std::string_view field, std::string_view value));

/// Adds the verdict of CheckNamespacePodSecurity on `objects` to a pre-flight's `fit`: the
/// enforce level's violations as problems (kRefuse) or as notes passed to `on_warning` (kWarn);
/// warn/audit violations as notes passed to `on_warning`; unchecked reasons as notes.
void AddNamespacePodSecurity(Client& client, const std::string& ns,
                             const std::vector<Json>& objects, const PodSecurityPreflight& options,
                             FitResult* fit);

/// The items of a list, by value, each checked as the list's kind (CheckServerObject: a field
/// of the wrong type is a DecodeError naming it). By value: `for (x : client.ListAll(...)
/// ["items"])` would iterate over a destroyed temporary.
std::vector<Json> Items(Json list);

/// Every item of a list (all pages), decoded without the fields named in `dropped`: keys of
/// an item's own metadata, spec or status (e.g. "managedFields", "containers", "template").
/// For status reads of many objects: the dropped parts are never built in memory, which is
/// most of the decoding cost (a 32-pod list is ~300 KB, two thirds managedFields and
/// containers). A malformed page is a DecodeError as in Client::ListAll.
std::vector<Json> ListItemsWithout(Client& client, const ResourceType& type, const std::string& ns,
                                   const ListOptions& options,
                                   const std::vector<std::string_view>& dropped);

/// object[key] without inserting: null when absent or when `object` is not an object.
const Json& At(const Json& object, std::string_view key);
/// At(object, key) when it is a string, else "".
std::string StringAt(const Json& object, std::string_view key);
using tfk8s::FormatTextTable;  // public (tfk8s/workload.hpp)

// ---- listings -------------------------------------------------------------------------------
/// Throws ValidationError("namespace") when `ns` is "": a listing of names needs one namespace
/// (names alone are ambiguous across namespaces); `instead` names the call that lists all.
void RequireOneNamespace(const std::string& ns, std::string_view instead);
/// The names of `refs`, in order.
std::vector<std::string> Names(const std::vector<WorkloadRef>& refs);
/// Sorts by namespace, then name.
void SortRefs(std::vector<WorkloadRef>* refs);
/// `selector` narrowed to `owner`'s objects (`,tfk8s.io/owner=<owner>`) when `owner` is set
/// (validated first: it becomes part of a label selector).
std::string WithOwner(std::string selector, const std::string& owner);

/// metadata.name ("" when absent).
std::string NameOf(const Json& object);
/// metadata.labels[key] ("" when absent).
std::string LabelOf(const Json& object, const std::string& key);
/// metadata.annotations[key] ("" when absent).
std::string AnnotationOf(const Json& object, const std::string& key);

/// Why a pod is not running, from its conditions and container states; "" when nothing is
/// wrong. `*fatal` is set for states that waiting will not heal (image pull failures, crash
/// loops, configuration errors, OOMKilled).
std::string PodProblem(const Json& pod, bool* fatal);
/// Sum of the containers' restart counts.
int PodRestarts(const Json& pod);
/// True when the pod's Ready condition is True.
bool PodReady(const Json& pod);

/// Runs an Informer on its own thread, counting changes and waking a shared condition variable,
/// so a wait can react to any of several watches without polling.
class WatchTracker {
 public:
  WatchTracker(Client client, const ResourceType& type, const std::string& ns,
               ListOptions selectors, std::mutex* mu, std::condition_variable* cv,
               std::atomic<int>* changes);
  WatchTracker(const WatchTracker&) = delete;
  WatchTracker& operator=(const WatchTracker&) = delete;
  ~WatchTracker();
  /// The objects currently known, their shape checked (CheckServerObject: DecodeError).
  [[nodiscard]] std::vector<Json> Snapshot() const;
  /// The error that stopped the informer, if any (read under the shared mutex).
  [[nodiscard]] std::exception_ptr error() const { return error_; }
  /// True once the first list is done: from then on Snapshot() reflects the server.
  [[nodiscard]] bool synced() const { return synced_; }

 private:
  Informer informer_;
  std::string kind_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> synced_{false};
  std::exception_ptr error_;
  std::thread thread_;
};

/// Writes a credentials Secret whole: created; or, when it exists and `replace`, read and
/// replaced (PUT) in place with the read metadata.resourceVersion as a precondition, up to 3
/// rounds when another writer or a delete gets in between (then the Conflict or NotFound
/// stands). Never deleted and created again: a replace that fails leaves the old Secret
/// whole, with its UID. tfk8s never patches and never lists Secrets (patch answers with the
/// object, a list with everyone's); replacing needs get and update on Secrets (the in-cluster
/// launching Role, DevInstanceWorkloadRules, grants them, in its owner's personal namespace
/// only). Returns true when this call wrote it (created or replaced); false when it existed and
/// `replace` was false (then it is left as it is). `dry_run` sends the create with dryRun=All
/// and nothing else. Errors never hold the Secret's data.
bool WriteSecretWhole(Client& client, const Json& secret, bool replace, bool dry_run = false);

/// GET one object, its shape checked as `type.kind` (CheckServerObject: DecodeError).
Json GetChecked(Client client, const ResourceType& type, std::string_view ns,
                std::string_view name);
/// GetChecked, or nullopt when the object does not exist.
std::optional<Json> GetOptional(Client client, const ResourceType& type, std::string_view ns,
                                std::string_view name);

/// An Informer's snapshot, every object's shape checked as `kind` (CheckServerObject).
std::vector<Json> CheckedSnapshot(const Informer& informer, const std::string& kind);

/// Waits for a condition on one object, driven by a watch on it (field selector on its name):
/// returns true once `done(object or nullptr-when-absent)` holds, false at the deadline.
bool WaitForObject(Client client, const ResourceType& type, const std::string& ns,
                   const std::string& name, std::chrono::milliseconds timeout,
                   const std::function<bool(const Json* object)>& done);

/// Opens the log of one pod for `who` (a replica "worker-1", an attempt, an instance's pod):
/// the server's refusals become a BadRequest in those terms: `previous` of a container that
/// never restarted ("worker-1 has no previous container: it has not restarted"), a container
/// still waiting ("worker-1 has not started: ContainerCreating") or a pod not scheduled yet
/// ("worker-1 has not started: not scheduled on a node yet").
LogStream OpenPodLogs(Client& client, const std::string& ns, const std::string& pod,
                      const LogOptions& options, const std::string& who);

}  // namespace tfk8s::internal

/// What a source that reads server objects brings in with one
/// `using namespace internal::reading;`: the resource types and labels (kinds.hpp) and the JSON
/// accessors At, StringAt and Items.
namespace tfk8s::internal::reading {
using namespace kinds;
using internal::At;
using internal::Items;
using internal::StringAt;
}  // namespace tfk8s::internal::reading
