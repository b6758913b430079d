// TFCluster: the spec's validation and JSON round trip. Pure: no I/O.

#include <fmt/format.h>

#include <set>

#include "tfk8s/quantity.hpp"
#include "tfk8s/tfcluster.hpp"
#include "tfk8s/validation.hpp"
#include "workloads/common.hpp"
#include "workloads/identity.hpp"
#include "workloads/kinds.hpp"
#include "workloads/pod.hpp"
#include "workloads/spec_json.hpp"
#include "workloads/tfcluster_internal.hpp"

namespace tfk8s {

using internal::Field;
using internal::ReplicaName;
using internal::RoleName;
using internal::RoleOf;

namespace internal {

bool RunsDefaultServer(const TFClusterSpec& spec, const std::string& role) {
  const TFRoleSpec& r = RoleOf(spec, role);
  bool has_program = !r.command.empty() || !r.args.empty() || !r.script.empty();
  return !has_program &&
         (role == "ps" || (role == "worker" && spec.strategy == TFStrategy::kParameterServer));
}

}  // namespace internal

using internal::RunsDefaultServer;

std::string ToString(TFSpread spread) {
  switch (spread) {
    case TFSpread::kNone:
      return "none";
    case TFSpread::kPreferred:
      return "preferred";
    case TFSpread::kRequired:
      return "required";
  }
  return "none";
}

TFSpread ParseTFSpread(std::string_view text) {
  for (auto s : {TFSpread::kNone, TFSpread::kPreferred, TFSpread::kRequired}) {
    if (text == ToString(s)) return s;
  }
  throw ValidationError("spread", std::string(text), "must be none, preferred or required");
}

std::string ToString(TFLauncherDelivery delivery) {
  return delivery == TFLauncherDelivery::kConfigMap ? "configmap" : "image";
}

TFLauncherDelivery ParseTFLauncherDelivery(std::string_view text) {
  for (auto d : {TFLauncherDelivery::kImage, TFLauncherDelivery::kConfigMap}) {
    if (text == ToString(d)) return d;
  }
  throw ValidationError("launcher.delivery", std::string(text), "must be image or configmap");
}

// ---- validation -----------------------------------------------------------------------------

namespace {

void CheckLabelValueIfSet(const std::string& field, const std::string& value) {
  if (!value.empty()) validation::RequireLabelValue(field, value);
}

}  // namespace

namespace {

// The checks of one role with replicas (`role` names it in fields: "worker.port").
void ValidateRole(const TFClusterSpec& spec, const char* role) {
  const TFRoleSpec& r = RoleOf(spec, role);
  const std::string f = role;
  validation::ValidateResources(f + ".resources", r.resources);
  validation::RequirePort(f + ".port", r.port);
  if (r.restart_policy != "OnFailure" && r.restart_policy != "Never") {
    throw ValidationError(f + ".restartPolicy", r.restart_policy, "must be OnFailure or Never");
  }
  if (r.backoff_limit < 0) {
    throw ValidationError(f + ".backoffLimit", std::to_string(r.backoff_limit), "must be >= 0");
  }
  if (!r.script.empty() && !r.command.empty()) {
    throw ValidationError(f + ".script", "…", "give either a script or a command, not both");
  }
  validation::ValidateEnv(f + ".env", r.env, [&spec](std::string_view env_name) -> std::string {
    for (const char* reserved : {"TF_CONFIG", "TF_CLUSTER", "CLUSTER_SPEC", "TASK_NAME",
                                 "TASK_INDEX", "RESOURCE_TYPE", "RESOURCE_NAME"}) {
      if (env_name == reserved) return "is set by tfk8s for every replica";
    }
    if (spec.launcher.enabled &&
        (env_name == "TFK8S_BARRIER_TIMEOUT" || env_name == "TFK8S_STRATEGY")) {
      return "is set by tfk8s for the launcher (use spec.launcher and spec.strategy)";
    }
    if (spec.storage && (env_name == "TFK8S_CHECKPOINT_DIR" ||
                         (spec.launcher.enabled && env_name == "TFK8S_LOG_DIR"))) {
      return "is set by tfk8s for every replica of a cluster with storage";
    }
    return {};
  });
  for (const auto& [k, v] : r.pod_annotations)
    validation::RequireLabelKey(f + ".podAnnotations", k);
  CheckLabelValueIfSet(f + ".cputype", r.cputype);
  CheckLabelValueIfSet(f + ".gputype", r.gputype);
}

void ValidateSession(const TFSessionSpec& session, const std::string& name) {
  validation::ValidateResources("session.resources", session.resources);
  validation::RequirePort("session.jupyterPort", session.jupyter_port);
  validation::RequirePort("session.sshPort", session.ssh_port);
  if (session.jupyter_port == session.ssh_port) {
    throw ValidationError("session.sshPort", std::to_string(session.ssh_port),
                          "clashes with the Jupyter port");
  }
  if (session.service_type != "ClusterIP" && session.service_type != "NodePort") {
    throw ValidationError("session.serviceType", session.service_type,
                          "must be ClusterIP or NodePort");
  }
  std::string ssh = name + "-session-ssh";
  if (ssh.size() > validation::kDns1123LabelMaxLength) {
    throw ValidationError("name", name, "too long: the derived name \"" + ssh + "\" exceeds 63");
  }
}

void ValidateTensorBoard(const TFTensorBoardSpec& tensorboard) {
  validation::ValidateResources("tensorboard.resources", tensorboard.resources);
  validation::RequirePort("tensorboard.port", tensorboard.port);
  if (tensorboard.service_type != "ClusterIP" && tensorboard.service_type != "NodePort") {
    throw ValidationError("tensorboard.serviceType", tensorboard.service_type,
                          "must be ClusterIP or NodePort");
  }
  if (tensorboard.log_dir.empty()) {
    throw ValidationError("tensorboard.logDir", "", "must not be empty");
  }
}

void ValidateStorage(const TFStorageSpec& storage) {
  if (!storage.existing_claim.empty()) {
    validation::RequireDns1123Subdomain("storage.existingClaim", storage.existing_claim);
  } else {
    validation::RequireQuantity("storage.size", storage.size);
    if (storage.size.empty() || Quantity::Parse(storage.size).IsZero()) {
      throw ValidationError("storage.size", storage.size, "must be a positive quantity");
    }
    for (const auto& m : storage.access_modes) {
      if (m != "ReadWriteOnce" && m != "ReadOnlyMany" && m != "ReadWriteMany") {
        throw ValidationError("storage.accessModes", m,
                              "must be ReadWriteOnce, ReadOnlyMany or ReadWriteMany");
      }
    }
    if (storage.access_modes.empty()) {
      throw ValidationError("storage.accessModes", "", "needs at least one access mode");
    }
  }
  if (storage.mount_path.empty() || storage.mount_path.front() != '/') {
    throw ValidationError("storage.mountPath", storage.mount_path, "must be an absolute path");
  }
}

}  // namespace

void TFClusterSpec::Validate() const {
  // The name starts every Service name the cluster gets, so it must be a DNS-1035 label.
  validation::RequireDns1035Label("name", name);
  validation::RequireDns1123Label("namespace", namespace_name);
  internal::ValidateOwner(owner, labels);
  for (const auto& [k, v] : labels) {
    validation::RequireLabelKey("labels", k);
    validation::RequireLabelValue("labels[" + k + "]", v);
  }
  validation::ValidatePodOptions("", pod);
  if (cpu_image.empty()) throw ValidationError("cpuImage", "", "must not be empty");
  if (gpu_image.empty()) throw ValidationError("gpuImage", "", "must not be empty");

  long total_replicas = 0;
  for (const char* role : kTFRoles) {
    const TFRoleSpec& r = RoleOf(*this, role);
    std::string f = role;
    if (r.replicas < 0) {
      throw ValidationError(f + ".replicas", std::to_string(r.replicas), "must be >= 0");
    }
    total_replicas += r.replicas;
    if (total_replicas > kMaxTFReplicas) {
      // Every replica's TF_CONFIG lists every address: beyond this the objects outgrow what the
      // API server stores (and rendering them, quadratic work).
      throw ValidationError(
          f + ".replicas", std::to_string(r.replicas),
          fmt::format("a cluster has at most {} replicas in all", kMaxTFReplicas));
    }
    if ((f == "chief" || f == "evaluator") && r.replicas > 1) {
      throw ValidationError(f + ".replicas", std::to_string(r.replicas),
                            "TensorFlow allows at most one " + f);
    }
    if (r.replicas > 0) ValidateRole(*this, role);
  }
  if (worker.replicas == 0) {
    throw ValidationError("worker.replicas", "0", "a cluster needs at least one worker");
  }
  if (cleanup != TFCleanupPolicy::kNone && topology == TFTopology::kStatefulSet) {
    throw ValidationError("cleanup", ToString(cleanup),
                          "needs the per-replica topology (StatefulSet replicas never finish)");
  }
  if (strategy == TFStrategy::kParameterServer && ps.replicas == 0) {
    throw ValidationError("ps.replicas", "0",
                          "the parameter-server strategy needs at least one ps");
  }
  if (strategy == TFStrategy::kMultiWorkerMirrored && ps.replicas > 0) {
    throw ValidationError("ps.replicas", std::to_string(ps.replicas),
                          "the multi-worker-mirrored strategy has no parameter servers");
  }
  if (launcher.barrier_timeout_seconds < 0) {
    throw ValidationError("launcher.barrierTimeoutSeconds",
                          std::to_string(launcher.barrier_timeout_seconds),
                          "must be >= 0 (0: no start-up barrier)");
  }
  if (launcher.enabled && launcher.delivery == TFLauncherDelivery::kImage) {
    if (launcher.image.empty()) {
      throw ValidationError("launcher.image", "",
                            "must name an image that carries /opt/tfk8s/bin/tfk8s-launcher "
                            "(or use launcher.delivery configmap)");
    }
    if (launcher.image.find_first_of(" \t\r\n") != std::string::npos) {
      throw ValidationError("launcher.image", launcher.image, "must not contain whitespace");
    }
  }
  if (launcher.enabled && launcher.python.empty()) {
    for (const char* role : kTFRoles) {
      if (RoleOf(*this, role).replicas > 0 && RunsDefaultServer(*this, role)) {
        throw ValidationError("launcher.python", "",
                              std::string("must name the image's Python 3 interpreter: ") + role +
                                  " has no command and runs a TensorFlow server");
      }
    }
  }
  if (topology == TFTopology::kStatefulSet) {
    for (const char* role : kTFRoles) {
      if (RoleOf(*this, role).replicas == 0) continue;
      validation::RequireStatefulSetName(std::string(role) + " (StatefulSet name)",
                                         RoleName(*this, role));
    }
  }
  // Every derived Job name and pod hostname must be a DNS-1123 label (at most 63).
  for (const char* role : kTFRoles) {
    const TFRoleSpec& r = RoleOf(*this, role);
    if (r.replicas == 0) continue;
    std::string longest = ReplicaName(*this, role, r.replicas - 1);
    if (longest.size() > validation::kDns1123LabelMaxLength) {
      throw ValidationError(
          "name", name,
          fmt::format("too long: the derived name \"{}\" has {} characters (at most {})", longest,
                      longest.size(), validation::kDns1123LabelMaxLength));
    }
  }
  if (session) ValidateSession(*session, name);
  if (tensorboard) ValidateTensorBoard(*tensorboard);
  if (storage) ValidateStorage(*storage);
  validation::ValidatePlacement("placement", placement);
}

// ---- JSON round trip ------------------------------------------------------------------------

namespace {

Json RoleToJson(const TFRoleSpec& r) {
  return {{"replicas", r.replicas},
          {"image", r.image},
          {"command", r.command},
          {"args", r.args},
          {"script", r.script},
          {"env", internal::ToSpecJson(r.env)},
          {"podAnnotations", r.pod_annotations},
          {"resources", internal::ToSpecJson(r.resources)},
          {"port", r.port},
          {"restartPolicy", r.restart_policy},
          {"backoffLimit", r.backoff_limit},
          {"cputype", r.cputype},
          {"gputype", r.gputype}};
}

TFRoleSpec RoleFromJson(const Json& j, const std::string& path) {
  TFRoleSpec r;
  if (!j.is_object()) return r;
  r.replicas = Field<int>(j, "replicas", path, 0);
  r.image = Field<std::string>(j, "image", path, "");
  r.command = Field<std::vector<std::string>>(j, "command", path, {});
  r.args = Field<std::vector<std::string>>(j, "args", path, {});
  r.script = Field<std::string>(j, "script", path, "");
  if (auto e = j.find("env"); e != j.end()) r.env = internal::EnvFromSpecJson(*e, path + "env");
  r.pod_annotations = Field<std::map<std::string, std::string>>(j, "podAnnotations", path, {});
  if (auto res = j.find("resources"); res != j.end()) {
    r.resources = internal::ResourcesFromSpecJson(*res, path + "resources.");
  }
  r.port = Field<int>(j, "port", path, 2222);
  r.restart_policy = Field<std::string>(j, "restartPolicy", path, "OnFailure");
  r.backoff_limit = Field<int>(j, "backoffLimit", path, 3);
  r.cputype = Field<std::string>(j, "cputype", path, "");
  r.gputype = Field<std::string>(j, "gputype", path, "");
  return r;
}

}  // namespace

Json TFClusterSpec::ToJson() const {
  Json j = {{"name", name},
            {"namespace", namespace_name},
            {"labels", labels},
            {"strategy", ToString(strategy)},
            {"topology", ToString(topology)},
            {"cpuImage", cpu_image},
            {"gpuImage", gpu_image},
            {"ps", RoleToJson(ps)},
            {"worker", RoleToJson(worker)},
            {"chief", RoleToJson(chief)},
            {"evaluator", RoleToJson(evaluator)},
            {"placement", internal::ToSpecJson(placement)}};
  if (session) {
    j["session"] = {{"image", session->image},
                    {"command", session->command},
                    {"args", session->args},
                    {"resources", internal::ToSpecJson(session->resources)},
                    {"jupyterPort", session->jupyter_port},
                    {"sshPort", session->ssh_port},
                    {"serviceType", session->service_type},
                    {"passwordEnv", session->password_env}};
  }
  if (tensorboard) {
    j["tensorboard"] = {{"image", tensorboard->image},
                        {"logDir", tensorboard->log_dir},
                        {"port", tensorboard->port},
                        {"serviceType", tensorboard->service_type},
                        {"useReplicaSet", tensorboard->use_replicaset},
                        {"resources", internal::ToSpecJson(tensorboard->resources)}};
  }
  if (storage) {
    j["storage"] = {{"existingClaim", storage->existing_claim},
                    {"size", storage->size},
                    {"storageClass", storage->storage_class},
                    {"accessModes", storage->access_modes},
                    {"mountPath", storage->mount_path}};
  }
  // Written only when set, so specs stored before the option existed read back unchanged.
  if (expand_variable_references) j["expandVariableReferences"] = true;
  const TFLauncherSpec default_launcher;
  if (launcher.enabled != default_launcher.enabled ||
      launcher.barrier_timeout_seconds != default_launcher.barrier_timeout_seconds ||
      launcher.python != default_launcher.python ||
      launcher.delivery != default_launcher.delivery || launcher.image != default_launcher.image) {
    j["launcher"] = {{"enabled", launcher.enabled},
                     {"barrierTimeoutSeconds", launcher.barrier_timeout_seconds},
                     {"python", launcher.python}};
    // These two only when set: a stored spec with the default image follows the library's
    // version (whose launcher matches what it renders) instead of pinning one.
    if (launcher.delivery != default_launcher.delivery) {
      j["launcher"]["delivery"] = ToString(launcher.delivery);
    }
    if (launcher.image != default_launcher.image) j["launcher"]["image"] = launcher.image;
  }
  internal::AddToSpecJson(&j, pod);
  if (pod_security != PodSecurityLevel::kRestricted) j["podSecurity"] = ToString(pod_security);
  // Only when set: the stored spec of a cluster without an owner stays as it was.
  if (!owner.empty()) j["owner"] = owner;
  if (cleanup != TFCleanupPolicy::kNone) j["cleanup"] = ToString(cleanup);
  if (spread != TFSpread::kNone) j["spread"] = ToString(spread);
  return j;
}

TFClusterSpec TFClusterSpec::FromJson(const Json& j) {
  if (!j.is_object()) throw ValidationError("spec", j.dump(), "must be a JSON object");
  TFClusterSpec s;
  s.name = Field<std::string>(j, "name", "", "");
  s.namespace_name = Field<std::string>(j, "namespace", "", "default");
  s.owner = Field<std::string>(j, "owner", "", "");
  s.labels = Field<std::map<std::string, std::string>>(j, "labels", "", {});
  s.pod = internal::PodOptionsFromSpecJson(j, "");
  s.pod_security = internal::PodSecurityFromSpecJson(j, "");
  std::string topology = Field<std::string>(j, "topology", "", "per-replica");
  if (topology == "per-replica") {
    s.topology = TFTopology::kPerReplica;
  } else if (topology == "statefulset") {
    s.topology = TFTopology::kStatefulSet;
  } else {
    throw ValidationError("topology", topology, "must be per-replica or statefulset");
  }
  s.expand_variable_references = Field<bool>(j, "expandVariableReferences", "", false);
  s.cleanup = ParseTFCleanupPolicy(Field<std::string>(j, "cleanup", "", "none"));
  s.spread = ParseTFSpread(Field<std::string>(j, "spread", "", "none"));
  if (auto x = j.find("launcher"); x != j.end()) {
    if (!x->is_object()) throw ValidationError("launcher", x->dump(), "must be a JSON object");
    s.launcher.enabled = Field<bool>(*x, "enabled", "launcher.", s.launcher.enabled);
    s.launcher.barrier_timeout_seconds =
        Field<int>(*x, "barrierTimeoutSeconds", "launcher.", s.launcher.barrier_timeout_seconds);
    s.launcher.python = Field<std::string>(*x, "python", "launcher.", s.launcher.python);
    s.launcher.delivery = ParseTFLauncherDelivery(
        Field<std::string>(*x, "delivery", "launcher.", ToString(s.launcher.delivery)));
    s.launcher.image = Field<std::string>(*x, "image", "launcher.", s.launcher.image);
  }
  s.cpu_image = Field<std::string>(j, "cpuImage", "", s.cpu_image);
  s.gpu_image = Field<std::string>(j, "gpuImage", "", s.gpu_image);
  for (const char* role : kTFRoles) {
    if (auto r = j.find(role); r != j.end()) {
      internal::MutableRoleOf(s, role) = RoleFromJson(*r, std::string(role) + ".");
    }
  }
  // Without a strategy, the roles say which: parameter servers mean the parameter-server
  // strategy, none the multi-worker-mirrored one (C++, Python and the CLI all read specs here).
  const std::string strategy = Field<std::string>(
      j, "strategy", "", s.ps.replicas > 0 ? "parameter-server" : "multi-worker-mirrored");
  if (strategy == "parameter-server") {
    s.strategy = TFStrategy::kParameterServer;
  } else if (strategy == "multi-worker-mirrored") {
    s.strategy = TFStrategy::kMultiWorkerMirrored;
  } else {
    throw ValidationError("strategy", strategy,
                          "must be parameter-server or multi-worker-mirrored");
  }
  if (auto p = j.find("placement"); p != j.end() && p->is_object()) {
    s.placement = internal::PlacementFromSpecJson(*p, "placement.");
  }
  if (auto x = j.find("session"); x != j.end() && x->is_object()) {
    TFSessionSpec t;
    t.image = Field<std::string>(*x, "image", "session.", "");
    t.command = Field<std::vector<std::string>>(*x, "command", "session.", {});
    t.args = Field<std::vector<std::string>>(*x, "args", "session.", {});
    if (auto r = x->find("resources"); r != x->end()) {
      t.resources = internal::ResourcesFromSpecJson(*r, "session.resources.");
    }
    t.jupyter_port = Field<int>(*x, "jupyterPort", "session.", 8888);
    t.ssh_port = Field<int>(*x, "sshPort", "session.", 22);
    t.service_type = Field<std::string>(*x, "serviceType", "session.", "ClusterIP");
    t.password_env = Field<bool>(*x, "passwordEnv", "session.", false);
    s.session = t;
  }
  if (auto x = j.find("tensorboard"); x != j.end() && x->is_object()) {
    TFTensorBoardSpec t;
    t.image = Field<std::string>(*x, "image", "tensorboard.", "");
    t.log_dir = Field<std::string>(*x, "logDir", "tensorboard.", "logs");
    t.port = Field<int>(*x, "port", "tensorboard.", 6006);
    t.service_type = Field<std::string>(*x, "serviceType", "tensorboard.", "ClusterIP");
    t.use_replicaset = Field<bool>(*x, "useReplicaSet", "tensorboard.", false);
    if (auto r = x->find("resources"); r != x->end()) {
      t.resources = internal::ResourcesFromSpecJson(*r, "tensorboard.resources.");
    }
    s.tensorboard = t;
  }
  if (auto x = j.find("storage"); x != j.end() && x->is_object()) {
    TFStorageSpec t;
    t.existing_claim = Field<std::string>(*x, "existingClaim", "storage.", "");
    t.size = Field<std::string>(*x, "size", "storage.", "10Gi");
    t.storage_class = Field<std::string>(*x, "storageClass", "storage.", "");
    t.access_modes =
        Field<std::vector<std::string>>(*x, "accessModes", "storage.", {"ReadWriteMany"});
    t.mount_path = Field<std::string>(*x, "mountPath", "storage.", "/data");
    s.storage = t;
  }
  // ToJson leaves these out at their defaults; written out, they are still fields.
  Json understood = s.ToJson();
  understood.emplace("podSecurity", "restricted");
  understood.emplace("cleanup", "none");
  understood.emplace("spread", "none");
  // Every launcher field, also when ToJson left some (or the whole object) out.
  understood["launcher"] = Json{{"enabled", true},
                                {"barrierTimeoutSeconds", 0},
                                {"python", ""},
                                {"delivery", "image"},
                                {"image", ""}};
  internal::RefuseUnknownFields(j, understood, "TFCluster");
  return s;
}

// ---- the spec stored on its root ConfigMap ----

namespace internal {

TFClusterSpec TFSpecFromRoot(const Json& root, RootIdentity* identity) {
  RootIdentity id = IdentityOf(root, "ConfigMap", "TFCluster", kClusterLabel, true);
  const std::string field = "data." + std::string(kSpecKey);
  const Json& data = At(root, "data");
  if (!At(data, kSpecKey).is_string()) {
    throw ValidationError(field, id.name, "the cluster's root holds no stored spec");
  }
  return StoredSpec<TFClusterSpec>(std::move(id), At(data, kSpecKey).get<std::string>(), field,
                                   identity);
}

}  // namespace internal

}  // namespace tfk8s
