// TFCluster: addresses, TF_CONFIG and rendering (the spec: tfcluster_spec.cpp). Pure: no I/O.

#include <fmt/format.h>

#include <set>

#include "tfk8s/quantity.hpp"
#include "tfk8s/tfcluster.hpp"
#include "tfk8s/validation.hpp"
#include "util/base64.hpp"
#include "workloads/devinstance_internal.hpp"
#include "workloads/kinds.hpp"
#include "workloads/launcher_binary.hpp"
#include "workloads/pod.hpp"
#include "workloads/spec_json.hpp"
#include "workloads/start_script.hpp"
#include "workloads/tfcluster_internal.hpp"

namespace tfk8s {

std::string ToString(TFStrategy s) {
  return s == TFStrategy::kParameterServer ? "parameter-server" : "multi-worker-mirrored";
}

std::string ToString(TFTopology t) {
  return t == TFTopology::kPerReplica ? "per-replica" : "statefulset";
}

namespace internal {

const TFRoleSpec& RoleOf(const TFClusterSpec& spec, const std::string& role) {
  if (role == "ps") return spec.ps;
  if (role == "worker") return spec.worker;
  if (role == "chief") return spec.chief;
  return spec.evaluator;
}

TFRoleSpec& MutableRoleOf(TFClusterSpec& spec, const std::string& role) {
  if (role == "ps") return spec.ps;
  if (role == "worker") return spec.worker;
  if (role == "chief") return spec.chief;
  if (role == "evaluator") return spec.evaluator;
  throw ValidationError("role", role, "must be one of chief, ps, worker, evaluator");
}

std::string ReplicaName(const TFClusterSpec& spec, const std::string& role, int index) {
  return fmt::format("{}-{}-{}", spec.name, role, index);
}

std::string RoleName(const TFClusterSpec& spec, const std::string& role) {
  return fmt::format("{}-{}", spec.name, role);
}

std::string TFSessionSecretName(const TFClusterSpec& spec) {
  return spec.name + "-session-credentials";
}

std::string ClaimName(const TFClusterSpec& spec) {
  if (!spec.storage) return {};
  return spec.storage->existing_claim.empty() ? spec.name + "-data" : spec.storage->existing_claim;
}

Json CommonLabels(const TFClusterSpec& spec) {
  Json labels = Json::object();
  for (const auto& [k, v] : spec.labels) labels[k] = v;
  if (!spec.owner.empty()) labels[kOwnerLabel] = spec.owner;
  labels[internal::kinds::kManagedBy] = kManagedByValue;
  labels["taskname"] = spec.name;
  labels[kClusterLabel] = spec.name;
  return labels;
}

}  // namespace internal

using internal::ClaimName;
using internal::CommonLabels;
using internal::ReplicaName;
using internal::RoleName;
using internal::RoleOf;
using internal::RunsDefaultServer;

// ---- addresses and TF_CONFIG ------------------------------------------------------------------

namespace {

// `<cluster>-<role>-<i>.<cluster>-<role>:<port>` in both topologies: the pod's hostname under
// its role's headless Service (a StatefulSet's pods get these names; per-replica pods set
// hostname and subdomain).
std::string Address(const TFClusterSpec& spec, const std::string& role, int index) {
  return fmt::format("{}.{}:{}", ReplicaName(spec, role, index), RoleName(spec, role),
                     RoleOf(spec, role).port);
}

std::vector<std::string> Addresses(const TFClusterSpec& spec, const std::string& role) {
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(std::max(0, RoleOf(spec, role).replicas)));
  for (int i = 0; i < RoleOf(spec, role).replicas; ++i) out.push_back(Address(spec, role, i));
  return out;
}

}  // namespace

Json TFClusterAddresses(const TFClusterSpec& spec) {
  Json cluster = Json::object();
  for (const char* role : {"chief", "ps", "worker"}) {
    if (RoleOf(spec, role).replicas > 0) cluster[role] = Addresses(spec, role);
  }
  return cluster;
}

Json TFConfigFor(const TFClusterSpec& spec, const std::string& role, int index) {
  return {{"cluster", TFClusterAddresses(spec)},
          {"task", {{"type", role}, {"index", index}}},
          {"environment", "cloud"}};
}

std::string SeedClusterSpec(const TFClusterSpec& spec) {
  std::string out;
  for (const char* role : {"ps", "worker", "chief"}) {
    auto addresses = Addresses(spec, role);
    if (addresses.empty()) continue;
    if (!out.empty()) out += ",";
    out += fmt::format("{}|{}", role, fmt::join(addresses, ";"));
  }
  return out;
}

// ---- rendering --------------------------------------------------------------------------------

namespace {

Json OwnerRefs(const TFClusterSpec& spec, const TFRenderOptions& o) {
  if (o.root_uid.empty()) return nullptr;
  return Json::array({{{"apiVersion", "v1"},
                       {"kind", "ConfigMap"},
                       {"name", spec.name},
                       {"uid", o.root_uid},
                       {"controller", true},
                       {"blockOwnerDeletion", true}}});
}

Json Metadata(const TFClusterSpec& spec, const TFRenderOptions& o, const std::string& name,
              const Json& extra_labels) {
  Json labels = CommonLabels(spec);
  for (auto it = extra_labels.begin(); it != extra_labels.end(); ++it) labels[it.key()] = *it;
  Json m = {{"name", name}, {"namespace", spec.namespace_name}, {"labels", labels}};
  Json owners = OwnerRefs(spec, o);
  if (!owners.is_null()) m["ownerReferences"] = owners;
  return m;
}

// The cluster's placement with a role's own cputype / gputype, when it has them.
Placement PlacementFor(const TFClusterSpec& spec, const std::string& cputype,
                       const std::string& gputype) {
  Placement p = spec.placement;
  if (!cputype.empty()) p.cputype = cputype;
  if (!gputype.empty()) p.gputype = gputype;
  return p;
}

// The launcher reaches a replica as one executable file of a volume mounted read-only at
// kLauncherDir: an emptyDir an init container copies it into from the launcher's image (the
// "image" delivery), or the root ConfigMap's binaryData ("configmap").
constexpr const char* kLauncherVolume = "tfk8s-launcher";
constexpr const char* kLauncherDir = "/var/run/tfk8s/launcher";
// Where the images of images/README.md carry the launcher.
constexpr const char* kImageLauncher = "/opt/tfk8s/bin/tfk8s-launcher";

// Whether a part's pods run through the launcher (the TensorFlow replicas, not the session or
// TensorBoard).
enum class Launched { kNo, kYes };

Json Volumes(const TFClusterSpec& spec, Launched launched) {
  Json out = Json::array();
  if (spec.storage) {
    out.push_back({{"name", "data"}, {"persistentVolumeClaim", {{"claimName", ClaimName(spec)}}}});
  }
  if (launched == Launched::kYes && spec.launcher.delivery == TFLauncherDelivery::kConfigMap) {
    out.push_back({{"name", kLauncherVolume},
                   {"configMap",
                    {{"name", spec.name},
                     {"items", Json::array({{{"key", kLauncherKey}, {"path", kLauncherKey}}})},
                     {"defaultMode", 0555}}}});
  } else if (launched == Launched::kYes) {
    out.push_back({{"name", kLauncherVolume}, {"emptyDir", Json::object()}});
  }
  return out;
}

// What the kubelet would pull by default: Always for an untagged or `:latest` image, else
// IfNotPresent (a tag or a digest).
std::string DefaultPullPolicy(const std::string& image) {
  if (image.find('@') != std::string::npos) return "IfNotPresent";
  const std::size_t colon = image.rfind(':');
  const std::size_t slash = image.rfind('/');
  if (colon == std::string::npos || (slash != std::string::npos && colon < slash)) return "Always";
  return image.substr(colon + 1) == "latest" ? "Always" : "IfNotPresent";
}

// The installer's cpu and memory: the replica's own (requests and limits), each at most 100m
// and 32Mi. So the pod's requests (the larger of the replica and the init container) and its
// QoS class stay the replica's, and a quota that wants limits finds them; copying ~150 KB
// needs far less. No GPUs.
Json InstallerResources(const Json& replica) {
  Json out = Json::object();
  for (const char* kind : {"requests", "limits"}) {
    const Json& list = replica.value(kind, Json::object());
    for (const auto& [name, cap] : {std::pair{"cpu", "100m"}, std::pair{"memory", "32Mi"}}) {
      auto q = list.find(name);
      if (q == list.end() || !q->is_string()) continue;
      const bool over = Quantity::Parse(q->get<std::string>()) > Quantity::Parse(cap);
      out[kind][name] = over ? std::string(cap) : q->get<std::string>();
    }
  }
  return out;
}

// With the "image" delivery, the replica's init container: `tfk8s-launcher --install` copies
// the launcher image's own copy into the emptyDir (no shell or cp needed in that image). The
// pod's security options apply to it as to the replica.
Json LauncherInstaller(const TFClusterSpec& spec, const PodOptions& options, const Json& replica) {
  Json c = {
      {"name", "tfk8s-launcher"},
      {"image", spec.launcher.image},
      {"command",
       Json::array({kImageLauncher, "--install", std::string(kLauncherDir) + "/" + kLauncherKey})},
      {"volumeMounts", Json::array({{{"name", kLauncherVolume}, {"mountPath", kLauncherDir}}})}};
  Json resources = InstallerResources(replica.value("resources", Json::object()));
  if (!resources.empty()) c["resources"] = resources;
  internal::AddContainerOptions(&c, options);
  if (!c.contains("imagePullPolicy")) c["imagePullPolicy"] = DefaultPullPolicy(spec.launcher.image);
  return c;
}

Json VolumeMounts(const TFClusterSpec& spec, Launched launched) {
  Json out = Json::array();
  if (spec.storage) out.push_back({{"name", "data"}, {"mountPath", spec.storage->mount_path}});
  if (launched == Launched::kYes) {
    out.push_back({{"name", kLauncherVolume}, {"mountPath", kLauncherDir}, {"readOnly", true}});
  }
  return out;
}

Json Env(const std::vector<std::pair<const char*, std::string>>& vars,
         const std::vector<EnvVar>& extra) {
  std::vector<EnvVar> env;
  env.reserve(vars.size() + extra.size());
  for (const auto& [k, v] : vars) env.push_back({k, v});
  env.insert(env.end(), extra.begin(), extra.end());
  return internal::EnvJson(env);
}

// Without the launcher, in the StatefulSet topology the task index is only known at start-up
// (the pod's ordinal), so the container command is wrapped: the wrapper derives TASK_INDEX from
// the hostname, builds TF_CONFIG from TF_CLUSTER, and execs the user's command unchanged. (The
// launcher does the same itself.)
constexpr const char* kOrdinalWrapper =
    "TASK_INDEX=\"${HOSTNAME##*-}\"; export TASK_INDEX; "
    "TF_CONFIG=\"{\\\"cluster\\\":${TF_CLUSTER},\\\"task\\\":{\\\"type\\\":\\\"${RESOURCE_NAME}"
    "\\\","
    "\\\"index\\\":${TASK_INDEX}},\\\"environment\\\":\\\"cloud\\\"}\"; export TF_CONFIG; "
    "exec \"$@\"";

// With storage, where a replica keeps what must outlive it on the shared volume, under
// `<mountPath>/.tfk8s/<cluster>/`: TFK8S_CHECKPOINT_DIR (docs/checkpoints.md) always, and with
// the launcher TFK8S_LOG_DIR, where it keeps each incarnation's output.
void AddStateDirs(const TFClusterSpec& spec,
                  std::vector<std::pair<const char*, std::string>>* env) {
  if (!spec.storage) return;
  std::string mount = spec.storage->mount_path;
  while (mount.size() > 1 && mount.back() == '/') mount.pop_back();
  const std::string dir = fmt::format("{}/.tfk8s/{}", mount == "/" ? "" : mount, spec.name);
  env->emplace_back("TFK8S_CHECKPOINT_DIR", dir + "/checkpoints");
  if (spec.launcher.enabled) env->emplace_back("TFK8S_LOG_DIR", dir + "/logs");
}

Json TFContainer(const TFClusterSpec& spec, const std::string& role, int index) {
  const TFRoleSpec& r = RoleOf(spec, role);
  bool gpu = r.resources.gpus > 0;
  Json c = {{"name", "tensorflow"},
            {"image", !r.image.empty() ? r.image
                      : gpu            ? spec.gpu_image
                                       : spec.cpu_image}};
  std::vector<std::string> command = r.command;
  std::vector<std::string> args = r.args;
  if (!r.script.empty()) {
    command = {"/bin/sh", "-c", r.script};
    args.clear();
  }
  // The kubelet would expand $(VAR) and $$ in what the user wrote.
  command = internal::KubeletArgv(std::move(command), spec.expand_variable_references);
  args = internal::KubeletArgv(std::move(args), spec.expand_variable_references);
  std::vector<std::pair<const char*, std::string>> env;
  if (spec.topology == TFTopology::kPerReplica) {
    env = {{"TF_CONFIG", TFConfigFor(spec, role, index).dump()},
           {"CLUSTER_SPEC", SeedClusterSpec(spec)},
           {"TASK_NAME", spec.name},
           {"RESOURCE_TYPE", "compute"},
           {"RESOURCE_NAME", role},
           {"TASK_INDEX", std::to_string(index)}};
  } else {
    env = {{"TF_CLUSTER", TFClusterAddresses(spec).dump()},
           {"CLUSTER_SPEC", SeedClusterSpec(spec)},
           {"TASK_NAME", spec.name},
           {"RESOURCE_TYPE", "compute"},
           {"RESOURCE_NAME", role}};
  }
  if (spec.launcher.enabled) {
    env.emplace_back("TFK8S_BARRIER_TIMEOUT",
                     std::to_string(spec.launcher.barrier_timeout_seconds));
    env.emplace_back("TFK8S_STRATEGY", ToString(spec.strategy));
    // `tfk8s-launcher [-- program...]`: the launcher runs the program (command, then args)
    // after the barrier, or the role's default without one (with --python: the interpreter of
    // the default TensorFlow server).
    std::vector<std::string> argv = {std::string(kLauncherDir) + "/" + kLauncherKey};
    if (RunsDefaultServer(spec, role)) {
      argv.push_back("--python");
      argv.push_back(spec.launcher.python);
    }
    argv = internal::KubeletArgv(std::move(argv));
    if (!command.empty() || !args.empty()) {
      argv.push_back("--");
      argv.insert(argv.end(), command.begin(), command.end());
      argv.insert(argv.end(), args.begin(), args.end());
    }
    command = std::move(argv);
    args.clear();
  } else if (spec.topology == TFTopology::kStatefulSet) {
    if (!command.empty()) {
      // tfk8s's own script is always passed verbatim.
      std::vector<std::string> wrapped =
          internal::KubeletArgv({"/bin/sh", "-c", kOrdinalWrapper, "tfk8s-start"});
      wrapped.insert(wrapped.end(), command.begin(), command.end());
      wrapped.insert(wrapped.end(), args.begin(), args.end());
      command = wrapped;
      args.clear();
    }
  }
  AddStateDirs(spec, &env);
  c["env"] = Env(env, r.env);
  if (!command.empty()) c["command"] = command;
  if (!args.empty()) c["args"] = args;
  c["ports"] = Json::array({{{"name", "grpc"}, {"containerPort", r.port}, {"protocol", "TCP"}}});
  Json res = internal::ResourcesJson(r.resources);
  if (!res.empty()) c["resources"] = res;
  Json mounts = VolumeMounts(spec, spec.launcher.enabled ? Launched::kYes : Launched::kNo);
  if (!mounts.empty()) c["volumeMounts"] = mounts;
  return c;
}

// The common labels plus `labels` (a workload part's own).
Json PodLabels(const TFClusterSpec& spec, const Json& labels) {
  Json out = CommonLabels(spec);
  for (auto it = labels.begin(); it != labels.end(); ++it) out[it.key()] = *it;
  return out;
}

// The pods of the replicas and TensorBoard meet spec.pod_security; the session's (sshd as
// root) are left as the spec says and held to at most baseline.
enum class PodKind { kHardened, kSession };

Json PodSpec(const TFClusterSpec& spec, Json container, bool gpu, const std::string& cputype,
             const std::string& gputype, const std::string& restart_policy,
             Launched launched = Launched::kNo, PodKind kind = PodKind::kHardened) {
  const PodOptions options = kind == PodKind::kHardened
                                 ? internal::WithSecurityDefaults(spec.pod, spec.pod_security)
                                 : spec.pod;
  internal::AddContainerOptions(&container, options);
  Json init = Json::array();
  if (launched == Launched::kYes && spec.launcher.delivery == TFLauncherDelivery::kImage) {
    init.push_back(LauncherInstaller(spec, options, container));
  }
  Json pod = {{"restartPolicy", restart_policy},
              {"containers", Json::array({std::move(container)})}};
  if (!init.empty()) pod["initContainers"] = std::move(init);
  internal::AddPlacement(&pod, PlacementFor(spec, cputype, gputype), gpu);
  internal::AddPodOptions(&pod, options);
  Json volumes = Volumes(spec, launched);
  if (!volumes.empty()) pod["volumes"] = volumes;
  return pod;
}

Json PodMetadata(const Json& labels, const std::map<std::string, std::string>& annotations) {
  Json m = {{"labels", labels}};
  if (!annotations.empty()) m["annotations"] = annotations;
  return m;
}

// A Job of one pod (a per-replica replica, the session).
Json OneShotJob(const TFClusterSpec& spec, const TFRenderOptions& o, const std::string& name,
                const Json& labels, int backoff_limit, Json pod_metadata, Json pod_spec) {
  return {{"apiVersion", "batch/v1"},
          {"kind", "Job"},
          {"metadata", Metadata(spec, o, name, labels)},
          {"spec",
           {{"parallelism", 1},
            {"completions", 1},
            {"backoffLimit", backoff_limit},
            {"template", {{"metadata", std::move(pod_metadata)}, {"spec", std::move(pod_spec)}}}}}};
}

Json HeadlessService(const TFClusterSpec& spec, const TFRenderOptions& o, const std::string& name,
                     const Json& labels, const Json& selector, int port) {
  return {
      {"apiVersion", "v1"},
      {"kind", "Service"},
      {"metadata", Metadata(spec, o, name, labels)},
      {"spec",
       {{"clusterIP", "None"},
        {"publishNotReadyAddresses", true},  // peers must resolve before they are Ready
        {"selector", selector},
        {"ports",
         Json::array(
             {{{"name", "grpc"}, {"port", port}, {"targetPort", port}, {"protocol", "TCP"}}})}}}};
}

Json ExposedService(const TFClusterSpec& spec, const TFRenderOptions& o, const std::string& name,
                    const Json& labels, const Json& selector, const std::string& port_name,
                    int port, const std::string& type) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", Metadata(spec, o, name, labels)},
          {"spec",
           {{"type", type},
            {"selector", selector},
            {"ports", Json::array({{{"name", port_name},
                                    {"port", port},
                                    {"targetPort", port},
                                    {"protocol", "TCP"}}})}}}};
}

}  // namespace

// RenderTFCluster, one part per kind of object; each appends to `out`.
namespace {

void RenderRoot(const TFClusterSpec& spec, std::vector<Json>& out) {
  // The root: owns everything else (one delete cascades) and stores the spec.
  out.push_back({{"apiVersion", "v1"},
                 {"kind", "ConfigMap"},
                 {"metadata",
                  {{"name", spec.name},
                   {"namespace", spec.namespace_name},
                   {"labels",
                    [&] {
                      Json l = CommonLabels(spec);
                      l[kComponentLabel] = "root";
                      return l;
                    }()}}},
                 {"data", {{kSpecKey, spec.ToJson().dump(2) + "\n"}}}});
  if (spec.launcher.enabled && spec.launcher.delivery == TFLauncherDelivery::kConfigMap) {
    // Encoded once per process: the binary does not change while it runs.
    static const std::string launcher = internal::Base64Encode(internal::LauncherBinary());
    out.back()["binaryData"] = {{kLauncherKey, launcher}};
  }
}

// The created claim, unless the spec mounts an existing one.
void RenderStorage(const TFClusterSpec& spec, const TFRenderOptions& o, std::vector<Json>& out) {
  if (!spec.storage || !spec.storage->existing_claim.empty()) return;
  Json pvc = {{"apiVersion", "v1"},
              {"kind", "PersistentVolumeClaim"},
              {"metadata", Metadata(spec, o, ClaimName(spec), {{kComponentLabel, "storage"}})},
              {"spec",
               {{"accessModes", spec.storage->access_modes},
                {"resources", {{"requests", {{"storage", spec.storage->size}}}}}}}};
  if (!spec.storage->storage_class.empty()) {
    pvc["spec"]["storageClassName"] = spec.storage->storage_class;
  }
  out.push_back(pvc);
}

// spec.spread: the pods of one role (`role_selector`: its cluster and role labels) kept on
// different nodes, every role alike (chief and evaluator, one replica each, are unaffected).
void AddSpread(const TFClusterSpec& spec, const Json& role_selector, Json* pod) {
  if (spec.spread == TFSpread::kNone) return;
  internal::AddHostAntiAffinity(pod, role_selector,
                                spec.spread == TFSpread::kRequired
                                    ? internal::AntiAffinity::kRequired
                                    : internal::AntiAffinity::kPreferred);
}

// Every role: its headless Service, then one Job per replica or one StatefulSet.
void RenderRoles(const TFClusterSpec& spec, const TFRenderOptions& o, std::vector<Json>& out) {
  for (const char* role_c : {"ps", "worker", "chief", "evaluator"}) {
    std::string role = role_c;
    const TFRoleSpec& r = RoleOf(spec, role);
    if (r.replicas == 0) continue;
    bool gpu = r.resources.gpus > 0;
    std::string cputype = r.cputype.empty() ? spec.placement.cputype : r.cputype;
    std::string gputype = r.gputype.empty() ? spec.placement.gputype : r.gputype;
    Json role_labels = {{kComponentLabel, "tensorflow"}, {kRoleLabel, role}};
    Launched launched = spec.launcher.enabled ? Launched::kYes : Launched::kNo;
    // One headless Service per role: the subdomain of its pods' addresses.
    std::string role_name = RoleName(spec, role);
    Json role_selector = {{kClusterLabel, spec.name}, {kRoleLabel, role}};
    out.push_back(HeadlessService(spec, o, role_name, role_labels, role_selector, r.port));
    if (spec.topology == TFTopology::kPerReplica) {
      for (int i = 0; i < r.replicas; ++i) {
        std::string name = ReplicaName(spec, role, i);
        Json labels = role_labels;
        labels[kIndexLabel] = std::to_string(i);
        Json pod = PodSpec(spec, TFContainer(spec, role, i), gpu, cputype, gputype,
                           r.restart_policy, launched);
        AddSpread(spec, role_selector, &pod);
        pod["hostname"] = name;
        pod["subdomain"] = role_name;
        out.push_back(OneShotJob(spec, o, name, labels, r.backoff_limit,
                                 PodMetadata(PodLabels(spec, labels), r.pod_annotations),
                                 std::move(pod)));
      }
    } else {
      const std::string& name = role_name;
      const Json& selector = role_selector;
      Json pod_labels = PodLabels(spec, role_labels);
      Json pod =
          PodSpec(spec, TFContainer(spec, role, 0), gpu, cputype, gputype, "Always", launched);
      AddSpread(spec, role_selector, &pod);
      out.push_back({{"apiVersion", "apps/v1"},
                     {"kind", "StatefulSet"},
                     {"metadata", Metadata(spec, o, name, role_labels)},
                     {"spec",
                      {{"serviceName", name},
                       {"replicas", r.replicas},
                       {"podManagementPolicy", "Parallel"},
                       {"selector", {{"matchLabels", selector}}},
                       {"template",
                        {{"metadata", PodMetadata(pod_labels, r.pod_annotations)},
                         {"spec", std::move(pod)}}}}}});
    }
  }
}

// The session: its Secret (when credentials are given), its Job and its two Services.
void RenderSession(const TFClusterSpec& spec, const TFRenderOptions& o, std::vector<Json>& out) {
  if (!spec.session) return;
  const TFSessionSpec& s = *spec.session;
  std::string name = spec.name + "-session";
  std::string secret = internal::TFSessionSecretName(spec);
  Json labels = {{kComponentLabel, "session"}, {kRoleLabel, "session"}};
  Json selector = {{kClusterLabel, spec.name}, {kRoleLabel, "session"}};
  if (o.session_credentials) {
    out.push_back({{"apiVersion", "v1"},
                   {"kind", "Secret"},
                   {"metadata", Metadata(spec, o, secret, labels)},
                   {"type", "Opaque"},
                   {"data", internal::CredentialsSecretData(*o.session_credentials)}});
  }
  Json c = {{"name", "session"}, {"image", s.image.empty() ? spec.cpu_image : s.image}};
  Json env = Env({{"TF_CLUSTER", TFClusterAddresses(spec).dump()},
                  {"CLUSTER_SPEC", SeedClusterSpec(spec)},
                  {"TASK_NAME", spec.name},
                  {"RESOURCE_TYPE", "session"},
                  {"RESOURCE_NAME", "session"}},
                 {});
  Json mounts = VolumeMounts(spec, Launched::kNo);
  if (s.command.empty()) {
    // The DevInstance start script: Jupyter and sshd, reading the hashes from the Secret.
    DevTools tools;
    tools.jupyter_port = s.jupyter_port;
    tools.ssh_port = s.ssh_port;
    tools.code_server = false;
    tools.tensorboard = false;
    internal::StartScriptTools script;
    script.tools = &tools;
    script.home = spec.storage ? spec.storage->mount_path : "/root";
    for (auto& e : internal::StartScriptEnv(script)) env.push_back(std::move(e));
    c["command"] = internal::StartScriptCommand();
    mounts.push_back(internal::CredentialsMount());
    c["readinessProbe"] = internal::ToolsReadinessProbe(tools);
  } else {
    c["command"] = internal::KubeletArgv(s.command, spec.expand_variable_references);
    // An image's own start script reads the password from a file (PASSWORD only on request).
    for (auto& e : internal::CustomScriptPasswordEnv(secret, s.password_env)) {
      env.push_back(std::move(e));
    }
    mounts.push_back(internal::CredentialsMount());
  }
  c["env"] = std::move(env);
  if (!s.args.empty()) c["args"] = internal::KubeletArgv(s.args, spec.expand_variable_references);
  c["ports"] =
      Json::array({{{"name", "jupyter"}, {"containerPort", s.jupyter_port}, {"protocol", "TCP"}},
                   {{"name", "ssh"}, {"containerPort", s.ssh_port}, {"protocol", "TCP"}}});
  Json res = internal::ResourcesJson(s.resources);
  if (!res.empty()) c["resources"] = res;
  if (!mounts.empty()) c["volumeMounts"] = mounts;
  Json pod = PodSpec(spec, c, s.resources.gpus > 0, spec.placement.cputype, spec.placement.gputype,
                     "Never", Launched::kNo, PodKind::kSession);
  pod["volumes"].push_back(internal::CredentialsVolume(secret, !s.command.empty(), false));
  out.push_back(
      OneShotJob(spec, o, name, labels, 0, {{"labels", PodLabels(spec, labels)}}, std::move(pod)));
  out.push_back(
      ExposedService(spec, o, name, labels, selector, "jupyter", s.jupyter_port, s.service_type));
  out.push_back(
      ExposedService(spec, o, name + "-ssh", labels, selector, "ssh", s.ssh_port, s.service_type));
}

// TensorBoard: a Deployment (or the seed's ReplicaSet) and its Service.
void RenderTensorBoard(const TFClusterSpec& spec, const TFRenderOptions& o,
                       std::vector<Json>& out) {
  if (!spec.tensorboard) return;
  const TFTensorBoardSpec& t = *spec.tensorboard;
  std::string name = spec.name + "-tf-board";
  Json labels = {{kComponentLabel, "tensorboard"}, {kRoleLabel, "tensorboard"}};
  Json selector = {{kClusterLabel, spec.name}, {kRoleLabel, "tensorboard"}};
  std::string log_dir = t.log_dir;
  if (log_dir.front() != '/' && spec.storage) log_dir = spec.storage->mount_path + "/" + log_dir;
  Json c = {
      {"name", "tensorboard"},
      {"image", t.image.empty() ? spec.cpu_image : t.image},
      {"command", internal::KubeletArgv({"tensorboard", "--logdir", log_dir, "--host", "0.0.0.0",
                                         "--port", std::to_string(t.port)})},
      {"env", Env({{"TASK_NAME", spec.name}, {"RESOURCE_TYPE", "tensorboard"}}, {})},
      {"ports",
       Json::array({{{"name", "tensorboard"}, {"containerPort", t.port}, {"protocol", "TCP"}}})}};
  Json res = internal::ResourcesJson(t.resources);
  if (!res.empty()) c["resources"] = res;
  Json mounts = VolumeMounts(spec, Launched::kNo);
  if (!mounts.empty()) c["volumeMounts"] = mounts;
  Json pod_labels = PodLabels(spec, labels);
  out.push_back({{"apiVersion", "apps/v1"},
                 {"kind", t.use_replicaset ? "ReplicaSet" : "Deployment"},
                 {"metadata", Metadata(spec, o, name, labels)},
                 {"spec",
                  {{"replicas", 1},
                   {"selector", {{"matchLabels", selector}}},
                   {"template",
                    {{"metadata", {{"labels", pod_labels}}},
                     {"spec", PodSpec(spec, c, t.resources.gpus > 0, spec.placement.cputype,
                                      spec.placement.gputype, "Always")}}}}}});
  out.push_back(
      ExposedService(spec, o, name, labels, selector, "tensorboard", t.port, t.service_type));
}

}  // namespace

std::vector<Json> RenderTFCluster(const TFClusterSpec& spec, const TFRenderOptions& o) {
  spec.Validate();
  std::vector<Json> out;
  RenderRoot(spec, out);
  RenderStorage(spec, o, out);
  RenderRoles(spec, o, out);
  RenderSession(spec, o, out);
  RenderTensorBoard(spec, o, out);
  // Nothing is sent when a pod would break the level the spec declares.
  for (const auto& object : out) {
    const Json labels = object.value("metadata", Json::object()).value("labels", Json::object());
    const bool session = labels.value(kComponentLabel, "") == "session";
    internal::RequirePodSecurity(
        object,
        session ? std::min(spec.pod_security, PodSecurityLevel::kBaseline) : spec.pod_security);
  }
  return out;
}

}  // namespace tfk8s
