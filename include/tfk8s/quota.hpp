#pragma once
/// @file
/// Team queues (a namespace with a ResourceQuota), quota usage, pre-flight checks that any
/// workload calls before creating anything, and node placement checks.
///
/// The pre-flight functions work on *rendered objects* (what a workload would send), so every
/// workload — TFCluster, DevInstance, ScheduledJob, or raw objects — shares one arithmetic.
/// The arithmetic follows the apiserver's quota evaluators (k8s.io/kubernetes/pkg/quota/v1/
/// evaluator/core), so a pre-flight answer agrees with what admission later decides.

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/quantity.hpp"
#include "tfk8s/workload.hpp"

namespace tfk8s {

/// Amounts keyed by quota resource name: "requests.cpu", "limits.memory",
/// "requests.nvidia.com/gpu", "requests.storage", "pods", "services",
/// "persistentvolumeclaims", and the short forms "cpu"/"memory" (= requests.*).
using ResourceList = std::map<std::string, Quantity>;

/// Adds every amount of `b` to `a` (keys missing in `a` start at zero).
void AddTo(ResourceList& a, const ResourceList& b);
/// "pods=3, requests.cpu=6, requests.memory=12Gi" (sorted by key); "" for an empty list.
std::string ToString(const ResourceList& list);
/// Parses a {"name": "quantity"} map (strings or JSON numbers); a bad quantity throws
/// ValidationError naming `field`[name] and the value.
ResourceList ParseResourceList(const Json& object, std::string_view field);

/// What admission does to pods and claims before the quota sees them, for demand computations
/// that must agree with the apiserver in a namespace that has LimitRanges or a default class.
struct DemandContext {
  /// LimitRange objects of the namespace: their Container `defaultRequest` / `default` fill in
  /// what containers leave out, as the LimitRanger admission plugin does.
  std::vector<Json> limit_ranges;
  /// StorageClass given to claims without one (the DefaultStorageClass admission plugin); ""
  /// when the cluster has no default class.
  std::string default_storage_class;
};

/// What creating `objects` would add to a namespace's quota usage: pods of Pods, Deployments,
/// ReplicaSets, StatefulSets, Jobs (parallelism) and CronJobs (one run) × replicas, with
/// Kubernetes' rules for init containers (max of init vs sum of app containers); Services;
/// PersistentVolumeClaims and their requested storage. Pure.
///
/// Details, all as the apiserver counts them: container requests default to their limits when
/// only limits are given; extended resources (nvidia.com/gpu) count only as
/// "requests.<name>"; a Job runs min(parallelism, completions) pods at once; suspended CronJobs
/// and terminated Pods add no compute; a StatefulSet's volumeClaimTemplates add one claim per
/// replica; object counts ("count/deployments.apps", "configmaps", …) are included; NodePort and
/// LoadBalancer Services add "services.nodeports" (one per port) and "services.loadbalancers".
/// DaemonSets are not counted (their pod count depends on the nodes). Malformed objects throw
/// ValidationError naming the field.
ResourceList QuotaDemandOf(const std::vector<Json>& objects);
/// As above, with the namespace's admission defaults (LimitRanges, default StorageClass).
ResourceList QuotaDemandOf(const std::vector<Json>& objects, const DemandContext& context);
/// Quota demand of `replicas` pods made from `pod_template`: a PodTemplateSpec
/// ({metadata, spec}), a bare PodSpec ({containers: …}) or a whole Pod.
ResourceList PodDemandOf(const Json& pod_template, std::int64_t replicas,
                         const DemandContext& context = {});

/// Checks `objects` against every ResourceQuota of namespace `ns` (hard - used vs demand).
/// A namespace without quota always fits. Reads from the server; sends no writes.
///
/// A team's quota (annotated kTeamNamespacesAnnotation) is also checked against the team's
/// total: its hard limits against the sum of the same-named quota's usage over every namespace
/// the annotation names. A namespace whose quota cannot be read adds a note, not a shortfall.
///
/// Applies the namespace's LimitRange defaults first (LimitRanger runs before the quota), honours
/// quota scopes (Terminating, NotTerminating, BestEffort, NotBestEffort, PriorityClass), and
/// reports as a problem a pod that the server would refuse with "failed quota: must specify
/// limits.cpu" (a quota on cpu/memory requires every container to state them). Objects that
/// already exist are counted again: call it before the first create, not on a re-apply.
FitResult CheckQuota(Client& client, const std::string& ns, const std::vector<Json>& objects);

/// CheckQuota for `replicas` pods made from `pod_template` (PodTemplateSpec, PodSpec or Pod).
FitResult CheckQuotaForPods(Client& client, const std::string& ns, const Json& pod_template,
                            std::int64_t replicas);

/// The pure core of CheckQuota: `quotas` are ResourceQuota objects as the server returns them
/// (spec.hard, status.used). Usage missing from a status counts as zero.
FitResult EvaluateQuota(const std::vector<Json>& objects, const std::vector<Json>& quotas,
                        const DemandContext& context = {});

/// What the placement check holds against a node besides its labels and allocatable.
enum class PlacementScope {
  /// The pre-flight: the nodes as they are now. A NotReady node (condition Ready not True), a
  /// cordoned one (spec.unschedulable) and every NoSchedule/NoExecute taint the pod does not
  /// tolerate (the node lifecycle's node.kubernetes.io/not-ready, unreachable, … included) keep
  /// the pod off it, as the scheduler's NodeUnschedulable and TaintToleration filters do (a
  /// pod tolerating node.kubernetes.io/unschedulable:NoSchedule may go to a cordoned node, one
  /// tolerating not-ready and unreachable NoSchedule to a NotReady one). A cluster without any
  /// node fits, with a note: one that adds nodes on demand (a cluster autoscaler scaling from
  /// zero) places the pods once it has them.
  kNow,
  /// Could a node of the cluster *ever* take the pod, whatever state it is in now: only what
  /// the spec decides counts (labels, allocatable, taints other than node.kubernetes.io/*);
  /// NotReady and cordoned nodes count as they would be once back. No nodes: fits. What a
  /// wait asks before it gives up on an unschedulable pod.
  kEver,
};

/// Checks that every pod the objects would create could be placed on some node (`scope`: as
/// the nodes are now, or ever): a node whose labels satisfy the pod's nodeSelector / required
/// node affinity, whose taints the pod tolerates (and, kNow, that is Ready and not cordoned),
/// and whose allocatable cpu, memory and extended resources (nvidia.com/gpu) are at least the
/// pod's requests. Pods that a required pod anti-affinity over kubernetes.io/hostname keeps
/// apart (a selector that selects the pod itself, as TFClusterSpec::spread "required" renders)
/// need a node each: more of them than nodes that could take one is a problem too. Problems
/// name the pod template (or the TFCluster role) and the unmatched label, the resource and the
/// numbers, or each matching node and why it cannot take the pod ("node n1: NotReady",
/// "node n2: cordoned", "node n3: taint gpu=yes:NoSchedule not tolerated").
///
/// Pods that name a `priorityClassName`: a class the server does not have is a problem
/// (`priorityClassName "x": no PriorityClass named x on the server`: the server would refuse
/// every such pod). When the class may preempt (its preemptionPolicy is not Never) and the
/// pods do not all fit on the nodes' free capacity but would once pods of lower priority are
/// evicted (PlanPreemption), a note says so and names those pods (namespace/name, priority,
/// node); it does not change `fits`. Credentials that cannot read PriorityClasses, nodes or
/// pods add a note instead. Like CheckQuota, running pods of the workload itself take room:
/// call it before the first create.
///
/// Reads nodes; with a priority class also the class and (when it may preempt) the pods bound
/// to nodes, one list; sends no writes.
FitResult CheckPlacement(Client& client, const std::vector<Json>& objects,
                         PlacementScope scope = PlacementScope::kNow);

/// The pure core of CheckPlacement over the given Node objects.
FitResult EvaluatePlacement(const std::vector<Json>& objects, const std::vector<Json>& nodes,
                            PlacementScope scope = PlacementScope::kNow);

/// Pod Security admission ahead of the server: checks the pod (template) of every object that
/// carries one (Pod, StatefulSet, Deployment, ReplicaSet, Job, CronJob, …) with
/// CheckPodSecurity against the levels of namespace `ns`'s labels. A v1.23+ server refuses
/// pods that break `pod-security.kubernetes.io/enforce` when they are created — for a workload,
/// after its other objects were made, with its controller failing on every retry.
/// - each violation of the `enforce` level is a problem (fits = false), naming the object, the
///   check, the field and the rule;
/// - each violation of the `warn` or `audit` level is a note (the server would only warn or
///   record it), as are reasons the labels could not be read (credentials that cannot get the
///   Namespace) and an unknown level value;
/// - an `enforce-version` other than "latest" is named in the messages: the checker knows the
///   latest definitions only.
/// Reads the Namespace (NotFound: nothing to check); sends no writes.
FitResult CheckNamespacePodSecurity(Client& client, const std::string& ns,
                                    const std::vector<Json>& objects);

/// The pure core of CheckNamespacePodSecurity over the given Namespace object.
FitResult EvaluateNamespacePodSecurity(const Json& namespace_object,
                                       const std::vector<Json>& objects);

// ---- team queues ---------------------------------------------------------------------------

/// Label on a queue's Namespace ("true") and on its ResourceQuota / LimitRange (the queue name).
inline constexpr std::string_view kQueueLabel = "tfk8s.io/queue";
/// Label on a team's Namespaces and their ResourceQuotas (the team's queue name), when the queue
/// has members.
inline constexpr std::string_view kTeamLabel = "tfk8s.io/team";
/// Annotation on a team's ResourceQuotas: the comma-separated namespaces whose usage adds up to
/// the team's total (the queue's namespace first, then each member's). The quota pre-flight reads
/// it; a namespaced account can read a ResourceQuota but not list Namespaces.
inline constexpr std::string_view kTeamNamespacesAnnotation = "tfk8s.io/team-namespaces";
/// Name of the Role (and RoleBinding) in each of a team's namespaces that lets the service
/// accounts of all the team's namespaces read its ResourceQuotas (the team-wide pre-flight).
inline constexpr std::string_view kTeamQuotaReaderName = "tfk8s-team-quota-reader";

/// Optional per-container defaults and bounds for a queue (a LimitRange of type Container), so
/// pods that state no resources are still admitted in a namespace whose quota limits cpu/memory.
/// Keys are container resource names ("cpu", "memory", "ephemeral-storage", "nvidia.com/gpu").
struct LimitRangeSpec {
  std::map<std::string, std::string> default_requests;  ///< e.g. {"cpu": "500m"}.
  std::map<std::string, std::string> default_limits;    ///< e.g. {"cpu": "1", "memory": "2Gi"}.
  std::map<std::string, std::string> max;               ///< Per-container maximum (optional).
  std::map<std::string, std::string> min;               ///< Per-container minimum (optional).
};

/// A team's queue: a namespace, its ResourceQuota and an optional LimitRange, all named `name`.
struct QuotaSpec {
  std::string name;                                ///< Namespace (= queue) name, DNS-1123 label.
  std::map<std::string, std::string> labels;       ///< Extra Namespace labels.
  std::map<std::string, std::string> annotations;  ///< Namespace annotations.
  /// Hard limits, e.g. {"requests.cpu": "32", "requests.nvidia.com/gpu": "4"}. Known keys:
  /// requests./limits. cpu, memory, ephemeral-storage; cpu, memory; requests.<extended>;
  /// requests.storage, <class>.storageclass.storage.k8s.io/requests.storage|
  /// persistentvolumeclaims; object counts (pods, services, persistentvolumeclaims, secrets,
  /// configmaps, replicationcontrollers, resourcequotas, services.nodeports,
  /// services.loadbalancers, count/<resource>[.<group>]). "limits.nvidia.com/gpu" is refused:
  /// extended resources can only be limited through "requests.".
  std::map<std::string, std::string> hard;
  std::optional<LimitRangeSpec> limit_range;  ///< Container defaults, when set.
  /// Owners who each get a namespace personal to them, `<name>-<member>`, labelled
  /// tfk8s.io/owner=<member> and tfk8s.io/team=<name> (and Pod Security `baseline` unless
  /// `labels` say otherwise), with the same ResourceQuota and LimitRange. Only there may a
  /// DevInstance of that owner use `launch_workloads` (docs/devinstance.md); the team's total
  /// over all these namespaces is checked by the quota pre-flight, each namespace's own quota by
  /// the server (docs/quota.md "Personal namespaces").
  std::vector<std::string> members;

  /// The spec as JSON: {name, labels, annotations, hard, limit_range: {default_requests,
  /// default_limits, max, min}, members} (the keys the Python layer and `tfk8s quota apply`
  /// read).
  [[nodiscard]] Json ToJson() const;
  /// Inverse of ToJson() (numbers are accepted where quantities belong); throws
  /// ValidationError naming the field on bad input and on a member it does not know. Does not
  /// Validate().
  static QuotaSpec FromJson(const Json& json);
};

/// Checks a spec without sending anything; throws ValidationError(field, value, why), e.g.
/// field "hard[limits.nvidia.com/gpu]".
void ValidateQuotaSpec(const QuotaSpec& spec);

/// A copy of `spec` over-committed by `ratio` (>= 1, up to 1/1000 precision): limits.cpu and
/// limits.memory become requests.* × ratio, and the LimitRange's default limits become its
/// default requests × ratio (for cpu and memory). Keys without a requests.* value are left alone.
QuotaSpec OverCommitted(QuotaSpec spec, double ratio);

/// The objects of a queue, in apply order: Namespace (labelled tfk8s.io/queue=true and
/// app.kubernetes.io/managed-by=tfk8s), ResourceQuota, and the LimitRange when requested; with
/// `members`, the same for each member's personal namespace, and in every namespace of the team
/// a Role and RoleBinding (kTeamQuotaReaderName) letting the team's service accounts read the
/// ResourceQuotas. Validates first. Pure.
std::vector<Json> RenderQuota(const QuotaSpec& spec);

/// The spec of a queue as its objects on the server say (the inverse of RenderQuota for the
/// queue's own namespace; pure): `name` from the Namespace; `labels` and `annotations` are the
/// Namespace's but those tfk8s or the server add (managed-by, tfk8s.io/queue, tfk8s.io/team,
/// kubernetes.io/metadata.name, kubectl's last-applied-configuration); `hard` from the
/// ResourceQuota's spec; `limit_range` from the LimitRange's Container item; `members` from the
/// ResourceQuota's kTeamNamespacesAnnotation (`<name>-<member>` after the queue's own). A null
/// `resource_quota` or `limit_range` is one the queue does not have. Throws DecodeError on an
/// object of another shape.
QuotaSpec QuotaSpecOf(const Json& namespace_object, const Json& resource_quota,
                      const Json& limit_range);

/// The spec of queue `name` as it stands on the server (QuotaSpecOf of its Namespace,
/// ResourceQuota and LimitRange, all named `name`): what `tfk8s quota get -o yaml` prints and
/// ApplyQuota takes back. NotFound ("quota/NAME not found") when the namespace has neither a
/// ResourceQuota nor a LimitRange of that name. A member is kept only when its namespace
/// `<name>-<member>` is the one ApplyQuota made (managed by tfk8s, labelled with the team and
/// the member): the annotation that lists them is not trusted alone. A team queue without hard
/// limits carries no record of its members: they are then not in the result.
QuotaSpec GetQuotaSpec(Client& client, const std::string& name);

/// Options of ApplyQuota.
struct ApplyQuotaOptions {
  bool wait_ready = true;  ///< Wait until the quota controller has computed usage.
  std::chrono::milliseconds ready_timeout{std::chrono::seconds(30)};  ///< Bound of the wait.
  bool force = false;  ///< Take over fields owned by other field managers.
};

/// Usage of one resource of one quota.
struct ResourceUsage {
  std::string resource;  ///< e.g. "requests.cpu".
  Quantity hard;         ///< Limit.
  Quantity used;         ///< Current usage (status.used; zero when not computed yet).
  Quantity remaining;    ///< hard - used (negative when over-committed).
  /// used / hard (0 when hard is zero), for bars and percentages.
  [[nodiscard]] double Fraction() const;
};

/// Usage of one ResourceQuota.
struct QuotaUsage {
  std::string ns;                        ///< Namespace (the queue).
  std::string name;                      ///< ResourceQuota name.
  std::vector<ResourceUsage> resources;  ///< Sorted by resource name.
  bool ready = false;  ///< The quota controller computed usage for every hard resource.
  /// The entry for `resource`, if the quota limits it.
  [[nodiscard]] std::optional<ResourceUsage> Find(std::string_view resource) const;
  /// The fields as JSON with snake_case keys (what the Python bindings return).
  [[nodiscard]] Json ToJson() const;
};

/// Server-side applies the queue (Namespace first, then ResourceQuota and LimitRange; a
/// LimitRange left from an earlier spec is deleted when the spec has none), then waits until the
/// quota has usage (see WaitForQuotaReady). With `members`, each member's namespace likewise (a
/// member removed from the spec keeps their namespace: it holds their home). Returns the usage of
/// the quota in the queue's own namespace. A namespace that exists without the managed-by label
/// keeps it that way (tfk8s did not create it).
QuotaUsage ApplyQuota(Client& client, const QuotaSpec& spec, const ApplyQuotaOptions& options = {});

/// Deletes the queue's ResourceQuota and LimitRange, or the whole namespace (and everything in
/// it) when `delete_namespace`: only a namespace tfk8s created (labelled kManagedByLabel =
/// kManagedByValue; else ValidationError, nothing deleted), with its UID as a precondition (a
/// namespace re-created meanwhile: Conflict). Missing objects are not an error (clean-up code
/// may call it again): the result says whether there was anything to delete — false when
/// neither the ResourceQuota nor the LimitRange exists (with `delete_namespace`: when the
/// namespace does not exist; one already being deleted counts as deleted). Members' namespaces
/// are left alone (they hold the members' homes): delete each with its own name,
/// `<name>-<member>`.
bool DeleteQuota(Client& client, const std::string& name, bool delete_namespace = false);

/// Hard, used and remaining of one ResourceQuota object. Pure.
QuotaUsage UsageOf(const Json& resource_quota);
/// Usage of every ResourceQuota in `ns`.
std::vector<QuotaUsage> GetQuotaUsage(Client& client, const std::string& ns);
/// Usage of every tfk8s queue in the cluster, in one list call (ResourceQuotas labelled
/// tfk8s.io/queue, all namespaces), sorted by namespace.
std::vector<QuotaUsage> ListQueues(Client& client);

/// Table rows: a header ("NAMESPACE", "QUOTA", "RESOURCE", "USED", "HARD", "REMAINING",
/// "USE%") then one row per resource, amounts in Kubernetes' notation as kubectl describe quota
/// prints them (Quantity::ToString: 2700m, 16Gi). (Jupyter's HTML tables use human units.)
std::vector<std::vector<std::string>> UsageRows(const std::vector<QuotaUsage>& usages);
/// The rows as an aligned text table.
std::string FormatUsageTable(const std::vector<QuotaUsage>& usages);

/// Waits until every ResourceQuota in `ns` has status for each hard resource and its status.hard
/// equals spec.hard (the quota controller has caught up), driven by a watch. Until then the
/// apiserver refuses quota'd creates with 403 "status unknown for quota". Throws Timeout.
void WaitForQuotaReady(Client& client, const std::string& ns, std::chrono::milliseconds timeout);

/// True for the apiserver's transient 403 "status unknown for quota: <name>" (a quota was just
/// created or changed and the controller has not computed its usage yet).
bool IsQuotaStatusUnknown(const std::exception& error);

/// Runs `write` and retries it while it fails with IsQuotaStatusUnknown, for at most `budget`
/// (short backoff from 50 ms); any other error, or the last one, is rethrown.
Json RetryWhileQuotaUnknown(const std::function<Json()>& write,
                            std::chrono::milliseconds budget = std::chrono::seconds(10));

}  // namespace tfk8s
