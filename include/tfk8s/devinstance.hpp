#pragma once
/// @file
/// DevInstance: a per-user development container (Jupyter Lab, SSH, code-server, TensorBoard and
/// custom ports) used like a cloud host, as one typed object. The spec renders (purely) to a
/// StatefulSet with one replica, a headless Service, a Secret holding the credentials and, for
/// the NodePort backend, a NodePort Service; the DevInstance class creates, starts, stops,
/// restarts, exposes, reports on and deletes it through a Client.
///
/// Security model: every start draws a fresh 192-bit password from OpenSSL's CSPRNG. The
/// plaintext lives only in the instance's Secret and in the one result returned to the caller;
/// the StatefulSet references the Secret (secretKeyRef and a file volume) and never contains the
/// password or its hashes. Jupyter gets a salted hash (token disabled), code-server the password
/// through `PASSWORD` from the Secret, sshd a SHA-512 crypt hash applied with `chpasswd -e` at
/// start. Pods get no service-account token unless asked.

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/pod.hpp"
#include "tfk8s/workload.hpp"

namespace tfk8s {

/// An extra port served by the container (a web app, a debugger, …).
struct DevPort {
  std::string name;  ///< IANA service name: ≤ 15 chars, lower-case letters, digits, '-'.
  int port = 0;      ///< Container port, 1..65535.
};

/// Which tools the container runs, and on which ports. Every enabled port is in the Service.
struct DevTools {
  bool jupyter = true;          ///< Jupyter Lab (hashed password, token disabled).
  int jupyter_port = 8888;      ///< Jupyter's port.
  bool ssh = true;              ///< sshd (root login, as in GoblinLab).
  int ssh_port = 22;            ///< sshd's port.
  bool code_server = true;      ///< code-server (VS Code in the browser).
  int code_server_port = 8080;  ///< code-server's port.
  bool tensorboard = true;      ///< TensorBoard (no authentication of its own).
  int tensorboard_port = 6006;  ///< TensorBoard's port.
  std::string tensorboard_log_dir = "/root/logs";  ///< --logdir.
  std::vector<DevPort> custom_ports;               ///< Extra ports (names must be unique).
};

/// The user's default volume: the PVC `<owner>-home`, created on first use, never owned by an
/// instance (it survives deletes unless asked), shared by all of the user's instances in the
/// namespace.
struct DevHomeVolume {
  bool enabled = true;        ///< Mount it (GoblinLab always does).
  std::string size = "10Gi";  ///< For the first creation only.
  std::string storage_class;  ///< For the first creation; empty = cluster default.
  std::vector<std::string> access_modes{"ReadWriteOnce"};  ///< For the first creation.
  std::string mount_path = "/root";                        ///< Where the container sees it.
};

/// An RBAC subject (rbac.authorization.k8s.io/v1 Subject): who a RoleBinding grants to.
struct RbacSubject {
  std::string kind;            ///< "User", "Group" or "ServiceAccount".
  std::string name;            ///< The user, group or service account name.
  std::string namespace_name;  ///< ServiceAccount only; empty = the instance's namespace.
  bool operator==(const RbacSubject&) const = default;
};

/// SSH login modes, and who may read the credentials.
struct DevSecurity {
  bool ssh_password_login = true;                ///< Allow SSH with the generated password.
  std::vector<std::string> ssh_authorized_keys;  ///< Public keys allowed to log in as root.
  /// With a `command` (an image's own start script): also give it the password as the
  /// environment variable PASSWORD (by reference to the Secret), as GoblinLab's images expect.
  /// Off by default: the script reads the root-only file named by TFK8S_PASSWORD_FILE, because
  /// a process's environment stays readable in /proc/<pid>/environ for its whole life.
  bool password_env = false;
  /// Per-user credential isolation: a Role `<name>-credentials-reader` allowing `get` on this
  /// instance's Secret `<name>-credentials` only (resourceNames), bound to these subjects (the
  /// instance's user), owned by the instance. In a team namespace, members then get no read
  /// access to Secrets otherwise, and each reads only their own instance's password (see
  /// docs/devinstance.md, "Credentials in a team namespace"). Empty: no Role.
  std::vector<RbacSubject> credential_readers;
};

/// How ports are reached from outside the cluster.
enum class DevExposure {
  kNone,        ///< Only inside the cluster (the headless Service).
  kIngressTcp,  ///< ingress-nginx's tcp-services ConfigMap (as GoblinLab does).
  kNodePort,    ///< A NodePort Service `<name>-nodeport` (ingress-nginx is retired upstream).
};
/// "none", "ingress-tcp", "node-port".
std::string ToString(DevExposure e);

/// Exposure settings.
struct DevExposeSpec {
  DevExposure backend = DevExposure::kNone;  ///< Which mechanism (none by default).
  /// Tools to expose ("jupyter", "ssh", "code-server", "tensorboard" or a custom port's name).
  /// Empty: the authenticated tools that are enabled (Jupyter, SSH, code-server) — TensorBoard
  /// and custom ports have no authentication of tfk8s's, so they are exposed only when listed.
  std::vector<std::string> tools;
  std::string configmap_namespace = "kube-system";  ///< Where tcp-services lives (GoblinLab).
  std::string configmap_name = "tcp-services";      ///< ingress-nginx --tcp-services-configmap.
  int port_min = 20000;                             ///< First external port to hand out.
  int port_max = 29999;                             ///< Last external port to hand out.
  bool create_configmap = false;  ///< Create the ConfigMap when missing (else NotFound).
  /// Host name users connect to (the ingress controller's or a node's public address). Empty
  /// with kNodePort: the address of the node running the pod.
  std::string external_host;
};

/// What the culler does with an instance idle longer than the policy allows.
enum class DevIdleAction {
  kStop,    ///< Stop it: the pod goes, the volumes stay; a start gives a new password.
  kReport,  ///< Only report it (a dry run: nothing is written, not even the last activity).
};
/// "stop", "report".
std::string ToString(DevIdleAction action);

/// An instance's own idle policy (spec key `idle`): once no one has used it for `after`, a
/// culler (CullIdleDevInstances, `tfk8s dev cull`) applies `action`. Rendered on the
/// StatefulSet as the annotations `tfk8s.io/idle-after` and `tfk8s.io/idle-action`.
struct DevIdlePolicy {
  /// `after`: a duration written like "2h", "90m" or "45s" (whole seconds, positive).
  std::chrono::seconds after{0};
  /// `action`: only "stop" in a spec (kReport is the culler's dry run, not a policy).
  DevIdleAction action = DevIdleAction::kStop;
  /// `after` as the spec writes it: "2h", "90m" or "45s" (the largest whole unit).
  [[nodiscard]] std::string AfterText() const;
};

/// The whole instance. Validate() checks everything before any request is sent.
struct DevInstanceSpec {
  std::string owner;                          ///< The user (DNS-1123 label).
  std::string name;                           ///< Instance name (≤ 52: a StatefulSet).
  std::string namespace_name = "default";     ///< The team's queue.
  std::map<std::string, std::string> labels;  ///< Added to every object.
  std::string image = "tensorflow/tensorflow:2.4.0-jupyter";  ///< Any image (CPU or GPU).
  /// Pull policy and secrets, service account, security context (tfk8s/pod.hpp). The defaults
  /// follow JupyterHub's: no API token in the pod, the runtime's default seccomp profile.
  PodOptions pod = DefaultPodOptions();
  /// Empty: the tfk8s start script (starts each enabled tool found in the image). Otherwise
  /// this command runs instead, e.g. the image's own start script of a GoblinLab-style image,
  /// which reads PASSWORD (from the Secret) itself.
  std::vector<std::string> command;
  /// Pass `$(VAR)` references in `command` to Kubernetes, which expands them from the
  /// container's environment (and turns `$$` into `$`). Off by default: the command reaches
  /// the process exactly as written.
  bool expand_variable_references = false;
  Resources resources;       ///< cpu and memory (required, positive) and GPUs.
  std::string notebook_tag;  ///< NOTEBOOK_TAG; empty = the instance name.
  std::string hadoop_user;   ///< HADOOP_USER; empty = the owner.
  std::vector<EnvVar> env;   ///< Extra environment (no secrets).
  std::map<std::string, std::string> pod_annotations;  ///< Added to the pod.
  DevTools tools;                                      ///< Which tools run, on which ports.
  DevHomeVolume home;                                  ///< The owner's default volume at /root.
  /// Extra claims. Each must belong to the instance's owner (label `tfk8s.io/owner`) or be
  /// shared with them (annotation `tfk8s.io/shared-with`): read-only mounts need an "ro" or
  /// "rw" grant, read-write mounts an "rw" grant.
  std::vector<VolumeMount> mounts;
  /// The container's time zone, as `TZ`: an IANA name such as "Europe/Berlin"; "" = the
  /// image's (usually UTC). What GoblinLab got by mounting the node's /etc/localtime.
  std::string time_zone;
  /// Mount the node's /etc/localtime, as GoblinLab does: a hostPath volume, which Pod Security
  /// "baseline" refuses, so it is off by default (use time_zone).
  bool host_localtime = false;
  /// In-cluster launching: the instance gets its own ServiceAccount `<name>`, a Role
  /// `<name>-workloads` allowing exactly what tfk8s workloads need in the namespace
  /// (DevInstanceWorkloadRules()) and a RoleBinding, all owned by the instance; the pod runs as
  /// that account with its token mounted, so `tfk8s.Client()` inside it (in-cluster config)
  /// can launch TFClusters, ScheduledJobs and DevInstances without an administrator's
  /// kubeconfig. Excludes `serviceAccount`; the token is mounted (the default pod options do
  /// not mount one). Allowed only in a namespace personal to `owner` (labelled
  /// tfk8s.io/owner=<owner>, as a Quota's members' namespaces are): create, apply and start
  /// refuse it elsewhere with a ValidationError on "launchWorkloads", before anything is sent,
  /// because an account that may create pods can mount every Secret and volume of its namespace.
  bool launch_workloads = false;
  Placement placement;   ///< Node labels the pod requires.
  DevSecurity security;  ///< SSH login modes.
  DevExposeSpec expose;  ///< Exposure outside the cluster.
  /// Its own idle policy; empty: the culler's default (DevCullOptions::idle_after) applies.
  std::optional<DevIdlePolicy> idle;

  /// A DevInstance's default pod options: image pull policy IfNotPresent, no service account
  /// token, seccomp profile RuntimeDefault.
  static PodOptions DefaultPodOptions();

  /// Throws ValidationError naming the field, the value and the rule.
  void Validate() const;
  /// The spec as JSON (stored on the StatefulSet, so an instance can be loaded back).
  [[nodiscard]] Json ToJson() const;
  /// Inverse of ToJson(); throws ValidationError naming the field on bad input, and on a
  /// member it does not know ("is not a field of …": a misspelt key is refused, not ignored).
  static DevInstanceSpec FromJson(const Json& json);
};

/// Name of a user's default volume: `<owner>-home`.
std::string HomeClaimName(const std::string& owner);

/// The credential material of one start. Printing it shows REDACTED for every field.
struct DevCredentials {
  std::string password;  ///< Plaintext (192 bits, base64url).
  /// `argon2:$argon2id$v=19$m=10240,t=10,p=8$<salt>$<hash>` for Jupyter (jupyter_server's
  /// format); the part after `argon2:` is code-server's hashed password.
  std::string jupyter_hash;
  /// `sha512:<salt>:<hex>`, for a Jupyter that cannot verify argon2 (no argon2-cffi in the
  /// image). Empty in Secrets written before tfk8s used argon2 (their jupyter_hash is this form).
  std::string jupyter_fallback_hash;
  std::string ssh_hash;  ///< `$6$<salt>$<hash>` for chpasswd -e.
  /// Fresh credentials from the CSPRNG (new password, new salts).
  static DevCredentials Generate();
  /// "DevCredentials{password=REDACTED, …}".
  [[nodiscard]] std::string ToString() const;
};

/// The rules of the Role a DevInstance with `launch_workloads` gets: read, create, change and
/// delete what tfk8s workloads are made of in the namespace (ConfigMaps, Services, PVCs, Jobs,
/// CronJobs, StatefulSets, Deployments, ReplicaSets); get, create, update and delete Secrets
/// by name (the namespace is personal to the owner, so they are all the owner's), no list or
/// watch; read pods, their logs, events, quotas and limit ranges; nothing cluster-scoped, no
/// RBAC objects, no exec or port-forward.
Json DevInstanceWorkloadRules();

/// Extra inputs of rendering that come from the server or the lifecycle.
struct DevRenderOptions {
  std::string root_uid;  ///< UID of the StatefulSet; empty renders no ownerReferences.
  bool running = true;   ///< replicas 1 (running) or 0 (stopped).
  /// When set, the Secret is rendered with this material; otherwise no Secret is rendered.
  std::optional<DevCredentials> credentials;
};

/// Renders the instance: StatefulSet (the root), headless Service, the NodePort Service (with
/// that backend), the Secret (when credentials are given), and the home PVC (when enabled; it
/// has no owner). Pure: validates, then builds JSON.
std::vector<Json> RenderDevInstance(const DevInstanceSpec& spec,
                                    const DevRenderOptions& options = {});

/// The instance's phase.
enum class DevPhase { kStopped, kPending, kRunning, kFailed, kUnknown };
/// "Stopped", "Pending", "Running", "Failed", "Unknown".
std::string ToString(DevPhase phase);

/// Where and how one tool is reached.
struct DevEndpoint {
  std::string tool;              ///< "jupyter", "ssh", "code-server", "tensorboard" or a name.
  int port = 0;                  ///< Container (and Service) port.
  std::string cluster_address;   ///< `<name>.<ns>.svc:<port>` (inside the cluster).
  int external_port = 0;         ///< tcp-services or node port; 0 when not exposed.
  std::string external_address;  ///< `<host>:<external_port>`; empty when not exposed or the
                                 ///< host is unknown.
  /// How to connect: `http://…/` for web tools, `ssh -p <port> root@<host>` for SSH (the
  /// external address when there is one, else the cluster address).
  std::string connect;
};

/// Access information for every tool (never contains the password).
struct DevAccess {
  std::string user = "root";           ///< Login for SSH.
  std::vector<DevEndpoint> endpoints;  ///< One per enabled port, in Service order.
  /// The endpoint of `tool`, if enabled.
  [[nodiscard]] std::optional<DevEndpoint> Find(const std::string& tool) const;
  /// An aligned text table.
  [[nodiscard]] std::string Table() const;
  /// The fields and the text table ("table") as JSON with snake_case keys (what the Python
  /// bindings return).
  [[nodiscard]] Json ToJson() const;
};

/// What Create/Start/Restart return: the new password (the only copy outside the Secret) and
/// the access information.
struct DevStartResult {
  std::string password;  ///< Plaintext; the caller's only copy (not logged by ToString()).
  DevAccess access;      ///< Where to connect.
  /// Access table with the password REDACTED (safe to log).
  [[nodiscard]] std::string ToString() const;
};

/// Status of an instance (fields: TFK8S_DEV_INSTANCE_STATUS_FIELDS). `ready_tools`: tools whose
/// port accepts connections: the pod is Ready, and its readiness probe checks every enabled
/// tool's port (custom ports are the user's own and never listed).
#define TFK8S_DEV_INSTANCE_STATUS_FIELDS(X)                                                   \
  X(DevPhase, phase, "phase", = DevPhase::kUnknown) /* Stopped, Pending, Running, … */      \
  X(std::string, pod, "pod", )                      /* `<name>-0` when it exists. */          \
  X(std::string, node, "node", )                    /* Where it runs. */                      \
  X(int, restarts, "restarts", = 0)                 /* Container restarts. */                 \
  /* When the pod started (its status.startTime); none without a pod. */                      \
  X(std::optional<std::chrono::system_clock::time_point>, started_at, "started_at", )         \
  X(std::vector<std::string>, ready_tools, "ready_tools", )                                   \
  X(std::string, reason, "reason", )   /* Why it is not running (Unschedulable: …, …). */ \
  X(std::string, message, "message", ) /* One-line summary. */
struct DevInstanceStatus {
  TFK8S_FIELDS(TFK8S_DEV_INSTANCE_STATUS_FIELDS)
  /// A short text table.
  [[nodiscard]] std::string Table() const;
  /// The fields (FieldsToJson, times in seconds since the epoch) and the text table ("table"):
  /// what the Python bindings return.
  [[nodiscard]] Json ToJson() const;
};

/// One row of DevInstance::List.
struct DevInstanceSummary {
  std::string namespace_name;  ///< The team's queue.
  std::string name;            ///< Instance name.
  std::string owner;           ///< The user.
  std::string image;           ///< Container image.
  bool running = false;        ///< Desired replicas is 1.
  bool ready = false;          ///< The pod is Ready.
  std::string created;         ///< The StatefulSet's creationTimestamp (RFC 3339; "" when unknown).
};

/// Options of DevInstance::Create.
struct DevCreateOptions {
  bool start = true;      ///< Start the pod at once (else create stopped).
  bool preflight = true;  ///< Quota and placement pre-flight (mount grants are always checked).
  /// The pre-flight against the namespace's Pod Security labels (refuse, or warn).
  PodSecurityPreflight pod_security;
};

/// Options of DevInstance::Start and Restart.
struct DevStartOptions {
  /// Quota and placement pre-flight for its pod (mount grants are always checked); false
  /// starts it whatever the nodes look like now (the scheduler places it when it can).
  bool preflight = true;
};

/// Options of DevInstance::Stop.
struct DevStopOptions {
  bool keep_ports = false;  ///< Keep the external ports (tcp-services entries) while stopped.
};

/// Options of DevInstance::Delete.
struct DevDeleteOptions {
  /// Also delete the owner's home PVC (refused while another instance of the owner mounts it).
  bool delete_home_volume = false;
  std::optional<std::chrono::milliseconds> wait;  ///< Wait until the pod and objects are gone.
};

/// What an instance's user was last seen doing, read inside its running pod
/// (DevInstance::Activity()). Times are the pod's clock.
struct DevActivity {
  std::string namespace_name;  ///< The instance's namespace.
  std::string name;            ///< The instance.
  /// Jupyter's own last activity (what its /api/status reports: API requests, kernel activity,
  /// terminals; at least its start), written every 10 s by a server extension tfk8s's start
  /// script loads. Empty when Jupyter is not running under tfk8s's start script.
  std::optional<std::chrono::system_clock::time_point> jupyter_last_activity;
  int jupyter_kernels = 0;      ///< Kernels running (a running kernel counts as active).
  int jupyter_connections = 0;  ///< Clients connected to those kernels.
  int ssh_sessions = 0;         ///< Open SSH sessions (each counts as active).
  /// code-server's heartbeat file, which it touches while someone is connected.
  std::optional<std::chrono::system_clock::time_point> code_server_heartbeat;
  /// When the pod's container started (the floor of every "idle since").
  std::optional<std::chrono::system_clock::time_point> started;
  /// The last activity a culler recorded on the StatefulSet (annotation
  /// `tfk8s.io/last-activity`): what an earlier probe saw, e.g. an SSH session since closed.
  std::optional<std::chrono::system_clock::time_point> recorded;
  std::chrono::system_clock::time_point probed_at;  ///< The pod's clock at the probe.
  /// A kernel running or an SSH session open: in use now, whatever the times say.
  [[nodiscard]] bool ActiveNow() const;
  /// The latest sign of use: `probed_at` when ActiveNow(), else the newest of the times above
  /// (at most `probed_at`).
  [[nodiscard]] std::chrono::system_clock::time_point LastActivity() const;
  /// probed_at - LastActivity() (0 when active now).
  [[nodiscard]] std::chrono::seconds Idle() const;
  /// The fields (times as RFC 3339, "idle_seconds", "active_now") as JSON with snake_case keys.
  [[nodiscard]] Json ToJson() const;
};

/// Options of CullIdleDevInstances.
struct DevCullOptions {
  std::string namespace_name;  ///< "" = every namespace (needs cluster-wide list).
  std::string owner;           ///< "" = every user's instances; else one user's.
  /// Only instances whose StatefulSet has these labels (a Kubernetes label selector; "" = all).
  std::string label_selector;
  /// The default policy: an instance without its own (DevInstanceSpec::idle) idle at least
  /// this long is acted on. An instance's own policy replaces it.
  std::chrono::seconds idle_after{2 * 3600};
  /// No default: only instances with their own idle policy are probed and culled; the others
  /// are reported "skipped" (idle_after is not used).
  bool policy_only = false;
  /// kStop: act as the policies say; kReport: a dry run whatever the policies say.
  DevIdleAction action = DevIdleAction::kStop;
  /// Bounds the probe of one instance (an exec into its pod).
  std::chrono::milliseconds probe_timeout{20000};
};

/// What the culler decided for one running instance.
struct DevCullDecision {
  std::string namespace_name;
  std::string name;
  std::string owner;
  /// "stopped", "would-stop" (kReport), "active" (idle less than the policy's `after`),
  /// "skipped" (no policy of its own with DevCullOptions::policy_only: not probed) or
  /// "unknown" (the probe failed: never acted on).
  std::string outcome;
  std::optional<DevActivity> activity;  ///< What the probe saw (empty when it failed).
  /// Why, in one line; when idle time was weighed, the policy that applied: "its own policy
  /// (idle.after 2h)" or "the culler's default (2h)".
  std::string reason;
  /// The fields (activity as DevActivity::ToJson()) as JSON with snake_case keys.
  [[nodiscard]] Json ToJson() const;
};

/// Probes every running DevInstance in scope (DevInstance::Activity()), records the last
/// activity on its StatefulSet (annotation `tfk8s.io/last-activity`, RFC 3339; a later probe
/// never moves it back, so an SSH session seen once counts until it is older than the policy),
/// and stops (or reports) those idle at least their own policy's `after` (DevInstanceSpec::idle)
/// or, without one, `idle_after` (unless `policy_only`). An instance whose probe fails is
/// kept and reported "unknown". Stopped instances are skipped. One pass; a platform runs it
/// periodically (`tfk8s dev cull --idle 2h`). Needs pods/exec and patch on StatefulSets.
std::vector<DevCullDecision> CullIdleDevInstances(Client client, const DevCullOptions& options);

/// A text table of decisions (NAMESPACE, NAME, OWNER, OUTCOME, IDLE, REASON).
std::string FormatCullTable(const std::vector<DevCullDecision>& decisions);

class DevInstance;

/// The DevInstance kind: its class, spec and status types (see Workload).
struct DevInstanceKind {
  using Object = DevInstance;
  using Spec = DevInstanceSpec;
  using Status = DevInstanceStatus;
  static constexpr const char* kName = "DevInstance";
  static constexpr bool kWaitsForStatus = true;
};

extern template class Workload<DevInstanceKind>;

/// A live development instance: the spec plus a client. Construction, spec(), set_spec(),
/// ListRefs(), Status() (phase, node, ready tools and the reason when not running; NotFound if
/// absent), Render() and ToYaml() come from Workload. Preflight() first checks the mount
/// grants (reads PVCs; ValidationError for a claim that is missing or not shared with the
/// owner), then the quota headroom for what does not exist yet and node placement; it sends no
/// writes. Render() is the StatefulSet, Services and the home PVC when it is created, never the
/// Secret, which holds the credentials of a start. Wait() waits until the tools are ready
/// (`options.until` is always kReady) and fails fast (DevInstanceFailed) when the pod cannot
/// start (no node could ever take it; one no node can take *yet* is waited for; image pull
/// failure, crash loop, configuration error,
/// pods refused by quota) or the instance is stopped.
class DevInstance : public Workload<DevInstanceKind> {
 public:
  using Workload::Workload;
  /// Instances in `ns` ("" = every namespace: a user's instances across teams), optionally only
  /// those of `owner` (a team's instances: ns set, owner empty), and of `label_selector` (a
  /// Kubernetes label selector, "" = all). Sorted by namespace and name.
  static std::vector<DevInstanceSummary> List(Client client, const std::string& ns,
                                              const std::string& owner = "",
                                              const std::string& label_selector = "");

  /// Creates the instance: mount grants, pre-flight (throws QuotaExceeded or DevInstanceFailed;
  /// nothing is created), the home PVC if missing, the StatefulSet, its Secret and Services,
  /// the external ports, then starts it. Throws AlreadyExists if it exists. On a failure after
  /// the first write everything created (except the home PVC) is removed again.
  DevStartResult Create(const DevCreateOptions& options = {});
  /// Converges an existing instance to the spec (resources, image, tools, mounts, exposure);
  /// keeps its password and running state. A changed pod template restarts the pod.
  void Apply();
  /// Starts a stopped instance (replicas 1) with a fresh password, after a quota and placement
  /// pre-flight for its pod (unless `options.preflight` is false); exposes its ports. On a
  /// running instance it rotates the password and restarts.
  DevStartResult Start(const DevStartOptions& options = {});
  /// Stops the instance (replicas 0); volumes are kept, ports released unless kept.
  void Stop(const DevStopOptions& options = {});
  /// A fresh password and a new pod (the old one is deleted; the StatefulSet recreates it),
  /// after the pre-flight Start() runs.
  DevStartResult Restart(const DevStartOptions& options = {});
  /// Deletes the StatefulSet (cascading to the pod, Services and Secret) and releases the
  /// external ports. PVCs are kept unless asked.
  void Delete(const DevDeleteOptions& options = {});
  /// The instance's container log as a pull stream of lines whose source is the pod's name
  /// (`follow` follows it). `options.source` is "" or the pod's name (else ValidationError).
  [[nodiscard]] WorkloadLogStream StreamLogs(WorkloadLogOptions options = {}) const;
  /// The address of every tool (reads the Service and the tcp-services ConfigMap).
  DevAccess Access();
  /// What the user was last seen doing: runs a small read-only probe in the running pod
  /// (Client::Exec, so pods/exec is needed; `/bin/sh` in the image) reading Jupyter's activity
  /// file, the open SSH sessions and code-server's heartbeat. Throws DevInstanceFailed when the
  /// instance is not running or the probe's answer cannot be read.
  DevActivity Activity(std::chrono::milliseconds timeout = std::chrono::seconds(20));

 private:
  DevStartResult Launch(const DevStartOptions& options);
  // What a start returns: `password` and where to connect (the base addresses when the
  // exposure cannot be read back: the password must reach the caller).
  DevStartResult Started(std::string password);
  void SyncExposure(const DevInstanceSpec& spec, bool running);
  Json ApplyObjects(bool running, const std::optional<DevCredentials>& credentials);
  // The StatefulSet as just read, refused (Conflict) when it is not the one loaded or made.
  Json GetRoot();
};

/// Thrown by DevInstance::Wait (and a refused pre-flight); carries the status.
class DevInstanceFailed : public Error {
 public:
  /// @param status the status when the failure was detected.
  DevInstanceFailed(std::string what, DevInstanceStatus status);
  /// The status when the failure was detected.
  [[nodiscard]] const DevInstanceStatus& status() const noexcept { return status_; }

 private:
  DevInstanceStatus status_;
};

// ---- volumes and sharing ------------------------------------------------------------------

/// Access granted to another user.
enum class DevShareMode { kReadOnly, kReadWrite };
/// "ro" / "rw".
std::string ToString(DevShareMode mode);

/// Annotation holding the grants of a PVC: `{"bob": "ro", "carol": "rw"}` (JSON).
inline constexpr const char* kSharedWithAnnotation = "tfk8s.io/shared-with";

/// A user's extra volume.
struct DevVolumeSpec {
  std::string owner;                       ///< The user who owns (and may share) it.
  std::string name;                        ///< PVC name.
  std::string namespace_name = "default";  ///< Namespace (claims are namespaced).
  std::string size = "10Gi";               ///< Requested storage.
  std::string storage_class;               ///< Empty: the cluster default.
  std::vector<std::string> access_modes{"ReadWriteMany"};  ///< Sharing usually needs RWX.
};

/// Creates a PVC owned by `spec.owner` (label tfk8s.io/owner). Returns the created object.
Json CreateVolume(Client& client, const DevVolumeSpec& spec);
/// Records a grant on `owner`'s PVC (read-modify-write with resourceVersion, retried on
/// Conflict). Throws ValidationError when the PVC is not `owner`'s.
void ShareVolume(Client& client, const std::string& ns, const std::string& claim,
                 const std::string& owner, const std::string& grantee, DevShareMode mode);
/// Removes `grantee`'s grant (absent grants are fine).
void UnshareVolume(Client& client, const std::string& ns, const std::string& claim,
                   const std::string& owner, const std::string& grantee);
/// The grants recorded on a PVC object (user → mode). Malformed annotations give no grants.
std::map<std::string, DevShareMode> VolumeGrants(const Json& pvc);
/// Why `user` may not mount `pvc` (read-only or not); empty when allowed. Pure.
std::string MountRefusal(const Json& pvc, const std::string& user, bool read_only);

}  // namespace tfk8s
