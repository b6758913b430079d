#pragma once
/// @file
/// An in-memory Kubernetes API server for unit tests of code that uses tfk8s: no cluster, no
/// network. `FakeCluster::client()` returns an ordinary tfk8s::Client whose requests the fake
/// answers in the API server's own shapes (discovery, objects, lists, watches, typed errors as
/// `Status` objects), so the code under test runs unchanged:
///
/// @code
/// tfk8s::testing::FakeCluster fake;
/// fake.AddNode("gpu-1", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}, "64", "256Gi", 8);
/// tfk8s::Client client = fake.client("team-a");
/// LaunchTraining(client);                                 // the code under test
/// assert(fake.Find("batch/v1", "Job", "team-a", "mnist-worker-0"));
/// @endcode
///
/// What is emulated and what is not is listed in docs/testing.md. In short: storage, metadata
/// (uid, resourceVersion, creationTimestamp, generation), label and field selectors, paging,
/// create / replace / merge, JSON and (simplified) strategic-merge patches, a simplified
/// server-side apply, delete with preconditions and owner-reference cascading, live watches;
/// no controllers, schedulers, admission, validation of object schemas or authorization run.

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tfk8s/client.hpp"
#include "tfk8s/config.hpp"

namespace tfk8s::testing {

/// One request the fake received, as the server saw it.
struct RecordedRequest {
  std::string method;        ///< "GET", "POST", "PUT", "PATCH" or "DELETE".
  std::string path;          ///< Percent-encoded path without the query, e.g. "/api/v1/pods".
  std::string query;         ///< The raw query string without '?', e.g. "watch=true" ("" if none).
  Json body;                 ///< The body decoded as JSON; null when empty or not JSON.
  std::string content_type;  ///< The Content-Type header's value ("" when absent).
  /// The fields as JSON with snake_case keys (what the Python bindings return).
  [[nodiscard]] Json ToJson() const;
};

/// An in-memory API server answering like Kubernetes v1.20.2. Thread-safe: clients made from it
/// may send from any number of threads, and the test may seed and inspect it meanwhile.
/// Clients keep the server alive: they stay usable after the FakeCluster object is destroyed.
class FakeCluster {
 public:
  /// An empty cluster holding the namespaces "default", "kube-system" and "kube-public", and
  /// serving discovery for the kinds tfk8s workloads use: v1 (Namespace, Node, ConfigMap,
  /// Secret, Service, Pod, Event, PersistentVolumeClaim, ResourceQuota, LimitRange,
  /// ServiceAccount), apps/v1 (StatefulSet, Deployment, ReplicaSet), batch/v1 (Job),
  /// batch/v1beta1 (CronJob, which v1.20 serves only there), storage.k8s.io/v1 (StorageClass),
  /// scheduling.k8s.io/v1 (PriorityClass) and rbac.authorization.k8s.io/v1 (Role, RoleBinding).
  FakeCluster();
  ~FakeCluster();
  FakeCluster(const FakeCluster&) = delete;
  FakeCluster& operator=(const FakeCluster&) = delete;

  /// A client of this cluster with `default_namespace`. It neither retries nor rate-limits, so a
  /// FailNext() error reaches the caller at once and tests never sleep.
  [[nodiscard]] Client client(std::string default_namespace = "default") const;
  /// A client of this cluster with the given configuration (retry policy, rate limit, default
  /// namespace, timeouts); its server, TLS and credential fields are replaced by the fake's.
  [[nodiscard]] Client client(const ClientConfig& config) const;

  // ---- seeding ---------------------------------------------------------------------------
  /// Stores `object` as if it had been created (apiVersion, kind and metadata.name required;
  /// a namespaced object without metadata.namespace goes to "default"). metadata.uid and
  /// creationTimestamp are kept when given (so tests can wire ownerReferences) and assigned
  /// otherwise; resourceVersion is always assigned. Status is stored as given, which is how a
  /// test plays the controllers (say, a Pod that is Running). An existing object of the same
  /// name is replaced (watchers see MODIFIED). Throws ValidationError for an object the fake
  /// cannot store (missing fields, a kind it does not serve).
  void Add(Json object);
  /// A schedulable, Ready Node with `labels` and the given allocatable cpu, memory and
  /// nvidia.com/gpu (omitted when 0); capacity equals allocatable, and 110 pods fit.
  void AddNode(const std::string& name, const std::map<std::string, std::string>& labels,
               const std::string& cpu = "32", const std::string& memory = "128Gi", int gpus = 0);
  /// Serves one more kind (a custom resource, say) in discovery and storage. A kind already
  /// served is left as it is.
  void AddResource(const ResourceType& type);
  /// Makes the next request fail with `http_code` and a `Status` carrying `reason` and
  /// `message`, e.g. FailNext(403, "Forbidden", "not allowed") or FailNext(409, "Conflict", …).
  /// Discovery requests (/api, /apis, /version and the group versions) are not affected. Calls
  /// queue up: each one fails one request, in order.
  void FailNext(int http_code, const std::string& reason, const std::string& message);

  // ---- inspection ------------------------------------------------------------------------
  /// The stored object, as a GET would return it; nullopt when absent. `ns` is ignored for
  /// cluster-scoped kinds. Throws ValidationError when the kind is not served.
  [[nodiscard]] std::optional<Json> Find(std::string_view api_version, std::string_view kind,
                                         std::string_view ns, std::string_view name) const;
  /// Every stored object of a kind in `ns` ("" = every namespace), sorted by namespace and name.
  /// Throws ValidationError when the kind is not served.
  [[nodiscard]] std::vector<Json> Objects(std::string_view api_version, std::string_view kind,
                                          std::string_view ns = "") const;
  /// Every request received so far (discovery included), in arrival order.
  [[nodiscard]] std::vector<RecordedRequest> requests() const;
  /// Forgets the recorded requests.
  void ClearRequests();

  class Server;  // The server behind the clients (src/testing/fake_cluster.cpp).

 private:
  std::shared_ptr<Server> server_;
};

}  // namespace tfk8s::testing
