#pragma once
/// @file
/// TFCluster: a distributed TensorFlow cluster (ps / worker / chief / evaluator, an optional
/// Jupyter+SSH session and TensorBoard, shared storage) as one typed object. The spec renders
/// (purely) to ordinary Kubernetes objects; the TFCluster class applies, waits, reports, streams
/// logs, scales and deletes through a Client. No operator is needed.

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/pod.hpp"
#include "tfk8s/workload.hpp"

namespace tfk8s {

/// How the TensorFlow program distributes work (decides which roles are allowed).
enum class TFStrategy {
  kParameterServer,      ///< ps + workers, optional chief
                         ///< (tf.distribute.experimental.ParameterServerStrategy).
  kMultiWorkerMirrored,  ///< workers, optional chief, no ps (MultiWorkerMirroredStrategy).
};

/// How replicas are rendered.
enum class TFTopology {
  /// Default. One single-replica Job per replica, named `<cluster>-<role>-<index>` (TFJob's
  /// naming), all created concurrently, and one headless Service per role; each pod gets
  /// `hostname <cluster>-<role>-<index>` and `subdomain <cluster>-<role>`, so its address is
  /// `<cluster>-<role>-<index>.<cluster>-<role>` (as in the StatefulSet topology) and never
  /// changes when the pod is replaced. Jobs give each replica a restart policy and a completion
  /// state (the cluster succeeds when the chief's Job completes).
  kPerReplica,
  /// The seed's first design: one StatefulSet per role with podManagementPolicy Parallel (so the
  /// ordered start-up timeout cannot happen) and a governing headless Service; addresses are
  /// `<cluster>-<role>-<i>.<cluster>-<role>`, the task index is the pod's ordinal.
  kStatefulSet,
};

/// "parameter-server" / "multi-worker-mirrored".
std::string ToString(TFStrategy s);
/// "per-replica" / "statefulset".
std::string ToString(TFTopology t);

/// One TensorFlow role (ps, worker, chief or evaluator).
struct TFRoleSpec {
  int replicas = 0;   ///< 0 disables the role (chief and evaluator: 0 or 1).
  std::string image;  ///< Empty: the cluster's gpu_image when gpus > 0, else cpu_image.
  /// The program (empty: the launcher's default for the role — see TFLauncherSpec — or, with
  /// the launcher off, the image's entrypoint).
  std::vector<std::string> command;
  std::vector<std::string> args;  ///< Its arguments.
  std::string script;             ///< Alternative to command: run with `/bin/sh -c`.
  std::vector<EnvVar> env;        ///< Extra environment (after the TF variables).
  std::map<std::string, std::string> pod_annotations;  ///< Added to the replicas' pods.
  Resources resources;
  int port = 2222;                           ///< gRPC port.
  std::string restart_policy = "OnFailure";  ///< OnFailure or Never (per-replica topology).
  int backoff_limit = 3;                     ///< Retries of a replica's Job (per-replica topology).
  std::string cputype;  ///< placement.cputype for this role ("" = the cluster's).
  std::string gputype;  ///< placement.gputype for this role ("" = the cluster's).
};

/// Shared storage mounted in every pod.
struct TFStorageSpec {
  std::string existing_claim;  ///< Mount this PVC; empty: create `<cluster>-data`.
  std::string size = "10Gi";   ///< For a created PVC.
  std::string storage_class;   ///< For a created PVC; empty = cluster default.
  std::vector<std::string> access_modes{"ReadWriteMany"};  ///< For a created PVC.
  std::string mount_path = "/data";                        ///< Where every pod sees it.
};

/// The seed's client: a Job running Jupyter and sshd with two Services. Without a command it
/// runs the DevInstance start script (the same code): Jupyter with a salted hash of
/// a random password, sshd with root password login, both reading the hashes from the Secret
/// `<cluster>-session-credentials` (created by Apply, never printed; TFCluster::Session() tells
/// the password and the addresses). The image needs Jupyter and sshd (e.g. tfk8s.local/dev:1);
/// without Jupyter the session stops at once with the reason, which Wait reports.
struct TFSessionSpec {
  std::string image;  ///< Empty: the cluster's cpu_image.
  /// Empty: tfk8s's start script (above). Given: run as written (for images with their own
  /// start script, as in the seed), with the password in the root-only file named by
  /// TFK8S_PASSWORD_FILE (from the credentials Secret).
  std::vector<std::string> command;
  std::vector<std::string> args;
  Resources resources;
  int jupyter_port = 8888;
  int ssh_port = 22;
  std::string service_type = "ClusterIP";  ///< ClusterIP or NodePort (the seed used NodePort).
  /// With a `command`: also set PASSWORD (by reference to the Secret), as the seed's images
  /// expect. Off by default (an environment stays readable in /proc/<pid>/environ).
  bool password_env = false;
};

/// TensorBoard: a Deployment (or ReplicaSet, as in the seed) plus a Service.
struct TFTensorBoardSpec {
  std::string image;             ///< Empty: the cluster's cpu_image.
  std::string log_dir = "logs";  ///< Relative to the storage mount path (or absolute).
  int port = 6006;
  std::string service_type = "ClusterIP";
  bool use_replicaset = false;  ///< Render a ReplicaSet like the seed instead of a Deployment.
  Resources resources;
};

/// How the launcher reaches a replica (JSON `launcher.delivery`). Either way the replica runs it
/// as /var/run/tfk8s/launcher/tfk8s-launcher, from a volume mounted read-only there.
enum class TFLauncherDelivery {
  /// "image" (default): an init container of `TFLauncherSpec::image` copies the image's
  /// /opt/tfk8s/bin/tfk8s-launcher into an emptyDir (`tfk8s-launcher --install`), so nothing of
  /// the launcher is stored in etcd; the nodes must be able to pull that image.
  kImage,
  /// "configmap": the library's own build of the launcher, stored in the cluster's root
  /// ConfigMap as binaryData (~150 KB per cluster in etcd) and mounted from there: for clusters
  /// whose nodes cannot pull the launcher's image. `image` is not used.
  kConfigMap,
};
/// "image", "configmap".
std::string ToString(TFLauncherDelivery delivery);
/// Parses ToString()'s names; throws ValidationError(field "launcher.delivery").
TFLauncherDelivery ParseTFLauncherDelivery(std::string_view text);

/// The default `TFLauncherSpec::image`: the tfk8s runtime image of this tfk8s version
/// (images/README.md), whose launcher matches the commands this library renders.
inline constexpr const char* kDefaultLauncherImage = "tfk8s/runtime:0.1.0";

/// The tfk8s launcher every replica starts through (src/launcher/tfk8s_launcher.c, a small
/// static C program, delivered to every replica from the tfk8s runtime image or the cluster's
/// root ConfigMap (see TFLauncherDelivery), so it runs in any image of the replicas, with or
/// without Python). It reads TF_CONFIG (or TF_CLUSTER / the seed's
/// CLUSTER_SPEC with the index from the hostname), waits until every peer address resolves and
/// accepts a TCP connection, then runs the role's program; ps (and workers under the
/// parameter-server strategy) get a TensorFlow server when they have no program. A barrier that
/// times out ends the container with a "tfk8s: " termination message naming the unreachable
/// peers, and Wait fails with it.
struct TFLauncherSpec {
  /// Off: the container runs the role's command as written (the image's entrypoint when there
  /// is none) and nothing waits for peers, as in the seed's manifests.
  bool enabled = true;
  /// How long the start-up barrier waits for every peer (0: no barrier).
  int barrier_timeout_seconds = 600;
  /// The image's Python 3 interpreter that runs the default TensorFlow server (looked up in
  /// PATH unless it is a path). Needed only by replicas that run that default (a ps, or a worker
  /// under the parameter-server strategy, with no command, args or script); they get it as
  /// `--python`, and Validate() rejects an empty one only then.
  std::string python = "python3";
  /// How the launcher reaches the replicas (see TFLauncherDelivery).
  TFLauncherDelivery delivery = TFLauncherDelivery::kImage;
  /// With the "image" delivery: the image the launcher is copied from, which must carry it at
  /// /opt/tfk8s/bin/tfk8s-launcher (the tfk8s runtime and dev images do). Pulled with the
  /// pods' `imagePullPolicy` when the spec sets one, else IfNotPresent (Always for an untagged
  /// or `:latest` image). Naming the replicas' own image, when it is a tfk8s runtime image,
  /// spares the nodes a second pull.
  std::string image = kDefaultLauncherImage;
};

/// What happens once the cluster has finished: its chief (worker 0 without a chief) Succeeded
/// or Failed. The ps replicas never finish by themselves, so without a policy they run (and
/// hold their CPUs, memory and GPUs) until someone deletes the cluster. The policy is carried
/// out by the library's watcher (ScheduledJobWatcher with `clean_up_tf_clusters`, in
/// tfk8s/scheduledjob.hpp), like Kubernetes' TTL-after-finished controller but per role.
/// A cluster whose chief still runs is never touched, even when another replica failed.
/// Needs the per-replica topology (StatefulSet replicas never finish). JSON `cleanup`.
enum class TFCleanupPolicy {
  kNone,  ///< "none" (default): nothing is deleted.
  /// "delete-all": the whole cluster, as TFCluster::Delete() does (the root, cascading to
  /// every object it owns, a storage claim it created included).
  kDeleteAll,
  /// "keep-session": stops every replica that has not finished (the ps, workers still
  /// serving, …) and deletes the TensorFlow roles' Services. The session, TensorBoard,
  /// storage, the root and the finished replicas' Jobs (their pods, so their logs) stay.
  kKeepSession,
  /// "keep-logs": keep-session, and also deletes the session (its Job, Services and Secret)
  /// and TensorBoard. What stays: the root (Status(), Logs(), Delete() keep working), storage
  /// and the finished replicas' Jobs with their Succeeded / Failed pods, which hold no CPU,
  /// memory or GPU and keep their logs readable until the cluster is deleted.
  kKeepLogs,
};
/// "none", "delete-all", "keep-session", "keep-logs".
std::string ToString(TFCleanupPolicy policy);
/// Parses ToString()'s names; throws ValidationError(field "cleanup").
TFCleanupPolicy ParseTFCleanupPolicy(std::string_view text);

/// How a role's replicas are spread over nodes (JSON `spread`): a pod anti-affinity over
/// `kubernetes.io/hostname` between the pods of one role of one cluster, added to every ps,
/// worker, chief and evaluator pod (not the session's or TensorBoard's), next to the
/// placement's node affinity.
enum class TFSpread {
  kNone,  ///< "none" (default): the scheduler places replicas where it likes.
  /// "preferred": spread when the nodes allow it (a preferred anti-affinity, weight 100); a
  /// replica recreated after its node was lost may land on any node, next to a peer. What a run
  /// that must survive losing a node wants.
  kPreferred,
  /// "required": at most one replica of a role per node. A replica lost with its node can only
  /// be recreated on a node holding no replica of its role: with as many nodes as replicas it
  /// stays Pending until the node returns. The pre-flight refuses a role with more replicas than
  /// nodes that could take its pod.
  kRequired,
};
/// "none", "preferred", "required".
std::string ToString(TFSpread spread);
/// Parses ToString()'s names; throws ValidationError(field "spread").
TFSpread ParseTFSpread(std::string_view text);

/// The whole cluster. Validate() checks everything before any request is sent.
struct TFClusterSpec {
  std::string name;
  std::string namespace_name = "default";
  /// The user the cluster belongs to (a DNS-1123 label; "" for none): the label
  /// `tfk8s.io/owner` on every object, so ListRefs(client, "", owner) finds a user's clusters
  /// in every namespace.
  std::string owner;
  std::map<std::string, std::string> labels;  ///< Added to every object.
  TFStrategy strategy = TFStrategy::kParameterServer;
  TFTopology topology = TFTopology::kPerReplica;
  std::string cpu_image = "tensorflow/tensorflow:2.4.0";
  std::string gpu_image = "tensorflow/tensorflow:2.4.0-gpu";
  TFRoleSpec ps;
  TFRoleSpec worker;
  TFRoleSpec chief;
  TFRoleSpec evaluator;
  std::optional<TFSessionSpec> session;
  std::optional<TFTensorBoardSpec> tensorboard;
  std::optional<TFStorageSpec> storage;
  /// Pass `$(VAR)` references in commands, args and scripts to Kubernetes, which expands them
  /// from the container's environment (and turns `$$` into `$`). Off by default: every
  /// command, arg and script reaches the process exactly as written.
  bool expand_variable_references = false;
  /// Node labels every pod requires (cputype applies to pods without GPUs, gputype to pods with
  /// them; a role's own cputype / gputype replaces the cluster's).
  Placement placement;
  /// Pull policy and secrets, service account, security context of every pod (tfk8s/pod.hpp).
  PodOptions pod;
  /// The Pod Security Standards level the replicas' and TensorBoard's pods meet (JSON
  /// `podSecurity`: "restricted", "baseline" or "privileged"). Restricted, the default, fills
  /// every security field `pod` leaves unset from RestrictedSecurityContext(); a lower level
  /// leaves them to the image (e.g. an image that must run as root). Rendering checks the pods
  /// against the level (CheckPodSecurity) and refuses, naming the field, pods that break it. The
  /// session runs sshd as root, so its pod is held to at most "baseline".
  PodSecurityLevel pod_security = PodSecurityLevel::kRestricted;
  /// The start-up launcher of every ps / worker / chief / evaluator replica.
  TFLauncherSpec launcher;
  /// What the library's watcher does once the chief has finished (see TFCleanupPolicy).
  TFCleanupPolicy cleanup = TFCleanupPolicy::kNone;
  /// How each role's replicas are spread over nodes (see TFSpread).
  TFSpread spread = TFSpread::kNone;

  /// Throws ValidationError naming the field, the value and the rule.
  void Validate() const;
  /// The spec as JSON (stored in the root object, so a cluster can be loaded back).
  [[nodiscard]] Json ToJson() const;
  /// Inverse of ToJson(); throws ValidationError naming the field on bad input, and on a
  /// member it does not know ("is not a field of …": a misspelt key is refused, not ignored).
  static TFClusterSpec FromJson(const Json& json);
};

/// The roles in TF_CONFIG order.
inline constexpr const char* kTFRoles[] = {"chief", "ps", "worker", "evaluator"};
/// The most replicas a TFCluster has in all roles together: every replica's TF_CONFIG lists
/// every address, so larger clusters make objects the API server will not store.
inline constexpr int kMaxTFReplicas = 1000;

/// TF_CONFIG's "cluster" object: role → addresses (evaluator excluded, as TensorFlow wants).
Json TFClusterAddresses(const TFClusterSpec& spec);
/// The full TF_CONFIG of one replica.
Json TFConfigFor(const TFClusterSpec& spec, const std::string& role, int index);
/// CLUSTER_SPEC in the seed's format: `ps|h:2222;h:2222,worker|h:2222;…` (chief appended).
std::string SeedClusterSpec(const TFClusterSpec& spec);

/// Extra inputs of rendering that come from the server.
struct TFRenderOptions {
  std::string root_uid;  ///< UID of the root object; empty renders no ownerReferences.
  /// With a session: render its credentials Secret with this material (Apply does; Render()
  /// and ToYaml() never include it).
  std::optional<DevCredentials> session_credentials;
};

/// Renders every object of the cluster, root ConfigMap first. Pure: validates, then builds JSON.
std::vector<Json> RenderTFCluster(const TFClusterSpec& spec, const TFRenderOptions& options = {});

/// One replica's row of the status table (fields: TFK8S_TF_REPLICA_STATUS_FIELDS).
#define TFK8S_TF_REPLICA_STATUS_FIELDS(X)                                                   \
  X(std::string, role, "role", )                                                            \
  X(int, index, "index", = 0)                                                               \
  X(std::string, pod, "pod", )     /* Empty while no pod exists. */                         \
  X(std::string, phase, "phase", ) /* Pending, Running, Succeeded, Failed, or "Missing". */ \
  X(std::string, node, "node", )                                                            \
  X(int, restarts, "restarts", = 0)                                                         \
  X(std::string, reason, "reason", ) /* Why it is not running (Unschedulable: …, …). */
struct TFReplicaStatus {
  TFK8S_FIELDS(TFK8S_TF_REPLICA_STATUS_FIELDS)
};

/// The cluster's condition.
enum class TFClusterPhase { kPending, kRunning, kSucceeded, kFailed, kUnknown };
/// "Pending", "Running", …
std::string ToString(TFClusterPhase phase);

/// Status of the whole cluster (fields: TFK8S_TF_CLUSTER_STATUS_FIELDS). `session`: with a
/// session, where Jupyter and SSH are reached and the SSH login, as a DevInstance's access.
/// Cluster addresses always; with `service_type` NodePort, Status() also reads the node ports
/// (Wait's progress does not). Never the password: TFCluster::Session() tells it.
/// `events`: replicas lost with their node, in words ("worker-1 lost with node n2 at
/// 12:01:07Z; recreated on n3 at 12:01:41Z"), while the lost pod's object remains (until its
/// node is back or removed); a Wait keeps them until it returns.
#define TFK8S_TF_CLUSTER_STATUS_FIELDS(X)                                                 \
  X(std::string, name, "name", )                                                          \
  X(std::string, namespace_name, "namespace", )                                           \
  X(TFClusterPhase, phase, "phase", = TFClusterPhase::kUnknown)                           \
  X(std::string, message, "message", ) /* Why (first failing replica, or progress). */    \
  X(std::vector<TFReplicaStatus>, replicas, "replicas", ) /* ps, worker, …, session. */ \
  X(std::optional<DevAccess>, session, "session", )                                       \
  X(std::vector<std::string>, events, "events", )
struct TFClusterStatus {
  TFK8S_FIELDS(TFK8S_TF_CLUSTER_STATUS_FIELDS)
  /// A fixed-width text table (then the session's addresses, with one).
  [[nodiscard]] std::string Table() const;
  /// Replicas not Running (or not Succeeded).
  [[nodiscard]] int NotReady() const;
  /// The fields (FieldsToJson), "not_ready" and the text table ("table"): what the Python
  /// bindings return.
  [[nodiscard]] Json ToJson() const;
};

/// Options of TFCluster::Apply.
struct TFApplyOptions {
  bool dry_run = false;   ///< Server-side dry run of every object; nothing is stored.
  bool preflight = true;  ///< Check quota and node placement before creating anything.
  bool prune = true;      ///< Delete objects of the cluster no longer rendered (scale down).
  /// The pre-flight against the namespace's Pod Security labels (refuse, or warn).
  PodSecurityPreflight pod_security;
};

/// Options of TFCluster::Delete.
struct TFDeleteOptions {
  bool foreground = false;    ///< Foreground cascading (the root goes last) instead of background.
  bool keep_storage = false;  ///< Keep the created PVC (it is released from the cluster first).
  std::optional<std::chrono::milliseconds> wait;  ///< Wait until every object is gone.
};

class TFCluster;

/// The TFCluster kind: its class, spec and status types (see Workload).
struct TFClusterKind {
  using Object = TFCluster;
  using Spec = TFClusterSpec;
  using Status = TFClusterStatus;
  static constexpr const char* kName = "TFCluster";
  static constexpr bool kWaitsForStatus = true;
};

extern template class Workload<TFClusterKind>;

/// A live cluster: the spec plus a client. Construction, spec(), set_spec(), List(),
/// ListRefs(), Preflight() (quota headroom, node placement, the namespace's Pod Security),
/// Status() (the status table and condition: one list of pods, Jobs and events), Render() and
/// ToYaml() (every object, root ConfigMap first) come from Workload. Wait() waits until
/// `options.until` holds: kReady, every replica Running (or already Succeeded); kFinished, the
/// cluster Succeeded. It fails fast (throws TFClusterFailed) when a replica cannot start
/// (unschedulable with no node that could ever fit — a pod no node can take *yet*, the
/// nodes NotReady, cordoned, full or not there at all, is waited for —, image pull failure,
/// crash loop, OOMKilled,
/// pods refused by quota) or the cluster failed. Example:
/// `cluster.Wait({.until = WaitUntil::kFinished, .timeout = std::chrono::minutes(5)})`.
class TFCluster : public Workload<TFClusterKind> {
 public:
  using Workload::Workload;

  /// Creates or updates every object (server-side apply, concurrently). Throws QuotaExceeded
  /// (pre-flight) or the first object's error; nothing is created when the pre-flight fails.
  /// Returns the applied objects.
  std::vector<Json> Apply(const TFApplyOptions& options = {});
  /// Changes one role's replica count and applies (adds or removes replicas, updates TF_CONFIG)
  /// with `options` (options.preflight false: no quota and placement pre-flight).
  void Scale(const std::string& role, int replicas, const TFApplyOptions& options = {});
  /// The status of the stored cluster `name` without loading it first: its root (the spec),
  /// pods and Jobs are read at the same time, one round trip instead of Load() then Status().
  /// Throws NotFound like Load().
  static TFClusterStatus StatusOf(Client client, const std::string& ns, const std::string& name);
  /// Logs of every replica merged, one role's (`options.source` "worker") or one replica's
  /// ("worker-1"), delivered line by line to `on_line` until it returns false, the logs end, or
  /// (with follow) every replica has finished. A source naming no role of the spec is a
  /// ValidationError (nothing is read).
  void Logs(const WorkloadLogOptions& options,
            const std::function<bool(const WorkloadLogLine&)>& on_line);
  /// Logs() as a pull stream of lines whose source is the replica ("worker-1"); the reading
  /// runs on the stream's thread until the logs end or the stream is cancelled.
  [[nodiscard]] WorkloadLogStream StreamLogs(WorkloadLogOptions options = {}) const;
  /// Deletes the cluster through the root object (cascading).
  void Delete(const TFDeleteOptions& options = {});
  /// After success: deletes the ps/worker/evaluator replicas (TFJob's cleanPodPolicy Running).
  void CleanUpAfterSuccess();
  /// The session's password (from its Secret) and where to reach Jupyter and SSH (the
  /// Services' cluster addresses; node ports with the NodePort type). Throws
  /// ValidationError without a session, NotFound before Apply. With credentials that may not
  /// read Secrets (a DevInstance's launching Role), only the object whose Apply created the
  /// session knows its password; any other throws Forbidden saying so.
  DevStartResult Session();

 private:
  std::vector<Json> Children() const;
  void RecreateJob(const Json& job, const ApplyOptions& apply);
  /// The session's password when this object's Apply created its Secret (for Session() with
  /// credentials that may not read Secrets).
  std::optional<std::string> session_password_;
};

/// Thrown by TFCluster::Wait when the cluster failed or cannot start; carries the status.
class TFClusterFailed : public Error {
 public:
  /// @param status the status at the time of failure.
  TFClusterFailed(std::string what, TFClusterStatus status);
  /// The status when the failure was detected.
  [[nodiscard]] const TFClusterStatus& status() const noexcept { return status_; }

 private:
  TFClusterStatus status_;
};

}  // namespace tfk8s
