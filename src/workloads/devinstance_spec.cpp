// DevInstance: the spec's validation and JSON round trip. Pure: no I/O.

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <set>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/quantity.hpp"
#include "tfk8s/validation.hpp"
#include "workloads/common.hpp"
#include "workloads/devinstance_internal.hpp"
#include "workloads/identity.hpp"
#include "workloads/pod.hpp"
#include "workloads/spec_json.hpp"

namespace tfk8s {

using internal::Field;
using internal::kInstanceLabel;
using internal::kManagedBy;

// ---- validation -----------------------------------------------------------------------------

namespace {

Quantity RequirePositiveQuantity(const std::string& field, const std::string& value,
                                 bool required) {
  if (value.empty()) {
    if (required) throw ValidationError(field, value, "is required");
    return {};
  }
  Quantity q;
  std::string why;
  if (!Quantity::TryParse(value, &q, &why)) throw ValidationError(field, value, why);
  if (q.Sign() < 0) throw ValidationError(field, value, "must not be negative");
  if (required && q.IsZero()) throw ValidationError(field, value, "must be positive");
  return q;
}

void CheckAbsolutePath(const std::string& field, const std::string& path) {
  if (path.empty() || path.front() != '/') {
    throw ValidationError(field, path, "must be an absolute path");
  }
  if (path.find(':') != std::string::npos) {
    throw ValidationError(field, path, "must not contain ':'");
  }
}

// Kubernetes' IsValidPortName: an IANA service name.
void CheckPortName(const std::string& field, const std::string& name) {
  bool letter = false;
  bool ok = !name.empty() && name.size() <= 15 && name.front() != '-' && name.back() != '-' &&
            name.find("--") == std::string::npos;
  for (char c : name) {
    if (c >= 'a' && c <= 'z') {
      letter = true;
    } else if (!((c >= '0' && c <= '9') || c == '-')) {
      ok = false;
    }
  }
  if (!ok || !letter) {
    throw ValidationError(field, name,
                          "must be an IANA service name: at most 15 lower-case letters, digits "
                          "and '-', with a letter, no leading, trailing or double '-'");
  }
}

}  // namespace

// DevInstanceSpec::Validate, one part per seam of the spec (each throws ValidationError).
namespace {

void ValidateBasics(const DevInstanceSpec& s) {
  validation::RequireDns1123Label("owner", s.owner);
  validation::RequireDns1035Label("name", s.name);  // the instance's Service is named after it
  validation::RequireStatefulSetName("name", s.name);
  validation::RequireDns1123Label("namespace", s.namespace_name);
  for (const auto& [k, v] : s.labels) {
    validation::RequireLabelKey("labels", k);
    validation::RequireLabelValue("labels[" + k + "]", v);
    if (k == kManagedBy || k == kInstanceLabel || k == kOwnerLabel ||
        k == internal::kDevComponentLabel) {
      throw ValidationError("labels", k, "is set by tfk8s");
    }
  }
  if (s.image.empty() || s.image.find_first_of(" \t\n") != std::string::npos) {
    throw ValidationError("image", s.image, "must be a non-empty image reference without spaces");
  }
  validation::ValidatePodOptions("", s.pod);
  if (s.launch_workloads && !s.pod.service_account.empty()) {
    throw ValidationError("serviceAccount", s.pod.service_account,
                          "launchWorkloads runs the instance as its own service account");
  }
  for (std::size_t i = 0; i < s.command.size(); ++i) {
    if (s.command[i].empty() && i == 0) {
      throw ValidationError("command[0]", "", "must name a program");
    }
  }

  // Resources: requests are required (a dev container is a long-lived reservation) and
  // positive; limits equal requests unless given (then at least the request).
  validation::ValidateResources("resources", s.resources, /*require_requests=*/true);
  RequirePositiveQuantity("resources.cpu", s.resources.cpu, true);
  RequirePositiveQuantity("resources.memory", s.resources.memory, true);
}

void ValidateEnvAndTime(const DevInstanceSpec& s) {
  // Environment: tfk8s's own variables cannot be overridden (PASSWORD would defeat the Secret).
  validation::ValidateEnv("env", s.env, [&s](std::string_view env_name) -> std::string {
    if (env_name == "PASSWORD" || env_name == "NOTEBOOK_TAG" || env_name == "HADOOP_USER" ||
        env_name.rfind("TFK8S_", 0) == 0) {
      return "is set by tfk8s (use notebookTag / hadoopUser; the password comes from the "
             "instance's Secret)";
    }
    if (env_name == "TZ" && !s.time_zone.empty()) return "is set by timeZone";
    return {};
  });
  if (!s.time_zone.empty()) {
    // An IANA zone name ("UTC", "Europe/Berlin", "Etc/GMT+2"): no dots, so never a path out of
    // the zone database.
    static const std::regex kZone("[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)*");
    if (s.time_zone.size() > 64 || !std::regex_match(s.time_zone, kZone)) {
      throw ValidationError("timeZone", s.time_zone,
                            "must be an IANA time zone name such as Europe/Berlin or UTC");
    }
    if (s.host_localtime) {
      throw ValidationError("timeZone", s.time_zone,
                            "give either timeZone or hostLocaltime, not both");
    }
  }
  for (const auto& [k, v] : s.pod_annotations) validation::RequireLabelKey("podAnnotations", k);
  if (s.idle && s.idle->after.count() <= 0) {
    throw ValidationError("idle.after", s.idle->AfterText(), "must be a positive duration");
  }
  if (s.idle && s.idle->action != DevIdleAction::kStop) {
    throw ValidationError("idle.action", ToString(s.idle->action),
                          "must be stop (the only action of an instance's idle policy)");
  }
}

// Tools and ports; returns the names of every served port (built-in tools and custom ports).
std::set<std::string> ValidateTools(const DevInstanceSpec& s) {
  // Tools and ports: every port once, every name once.
  validation::RequirePort("tools.jupyterPort", s.tools.jupyter_port);
  validation::RequirePort("tools.sshPort", s.tools.ssh_port);
  validation::RequirePort("tools.codeServerPort", s.tools.code_server_port);
  validation::RequirePort("tools.tensorboardPort", s.tools.tensorboard_port);
  if (s.tools.tensorboard)
    CheckAbsolutePath("tools.tensorboardLogDir", s.tools.tensorboard_log_dir);
  std::map<int, std::string> port_owner;
  std::set<std::string> port_names;
  auto claim_port = [&](const std::string& field, const std::string& port_name, int port) {
    auto [it, fresh] = port_owner.emplace(port, port_name);
    if (!fresh) {
      throw ValidationError(field, std::to_string(port),
                            "clashes with the " + it->second + " port");
    }
    if (!port_names.insert(port_name).second) {
      throw ValidationError(field, port_name, "port name is used twice");
    }
  };
  if (s.tools.jupyter) claim_port("tools.jupyterPort", "jupyter", s.tools.jupyter_port);
  if (s.tools.ssh) claim_port("tools.sshPort", "ssh", s.tools.ssh_port);
  if (s.tools.code_server)
    claim_port("tools.codeServerPort", "code-server", s.tools.code_server_port);
  if (s.tools.tensorboard)
    claim_port("tools.tensorboardPort", "tensorboard", s.tools.tensorboard_port);
  for (std::size_t i = 0; i < s.tools.custom_ports.size(); ++i) {
    const DevPort& p = s.tools.custom_ports[i];
    std::string f = fmt::format("tools.customPorts[{}]", i);
    CheckPortName(f + ".name", p.name);
    for (const char* reserved : {"jupyter", "ssh", "code-server", "tensorboard"}) {
      if (p.name == reserved) {
        throw ValidationError(f + ".name", p.name, "is the name of a built-in tool");
      }
    }
    validation::RequirePort(f + ".port", p.port);
    if (port_names.count(p.name)) {
      throw ValidationError(f + ".name", p.name, "port name is used twice");
    }
    claim_port(f + ".port", p.name, p.port);
  }

  return port_names;
}

void ValidateVolumes(const DevInstanceSpec& s) {
  // Volumes.
  std::set<std::string> paths;
  auto claim_path = [&](const std::string& field, const std::string& path) {
    CheckAbsolutePath(field, path);
    std::string p = path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1) : path;
    if (!paths.insert(p).second) throw ValidationError(field, path, "is mounted twice");
  };
  claim_path("credentials (reserved)", internal::kCredentialsDir);
  if (s.host_localtime) claim_path("hostLocaltime (reserved)", "/etc/localtime");
  if (s.home.enabled) {
    RequirePositiveQuantity("home.size", s.home.size, true);
    if (s.home.access_modes.empty()) {
      throw ValidationError("home.accessModes", "", "needs at least one access mode");
    }
    for (const auto& m : s.home.access_modes) {
      if (m != "ReadWriteOnce" && m != "ReadOnlyMany" && m != "ReadWriteMany") {
        throw ValidationError("home.accessModes", m,
                              "must be ReadWriteOnce, ReadOnlyMany or ReadWriteMany");
      }
    }
    if (!s.home.storage_class.empty()) {
      validation::RequireDns1123Subdomain("home.storageClass", s.home.storage_class);
    }
    claim_path("home.mountPath", s.home.mount_path);
  }
  for (std::size_t i = 0; i < s.mounts.size(); ++i) {
    const VolumeMount& m = s.mounts[i];
    std::string f = fmt::format("mounts[{}]", i);
    validation::RequireDns1123Subdomain(f + ".claim", m.claim);
    if (s.home.enabled && m.claim == HomeClaimName(s.owner)) {
      throw ValidationError(f + ".claim", m.claim,
                            "is the owner's home volume, already mounted at " + s.home.mount_path);
    }
    claim_path(f + ".mountPath", m.mount_path);
    if (!m.sub_path.empty() &&
        (m.sub_path.front() == '/' || m.sub_path == ".." || m.sub_path.rfind("../", 0) == 0 ||
         m.sub_path.find("/../") != std::string::npos ||
         (m.sub_path.size() >= 3 && m.sub_path.compare(m.sub_path.size() - 3, 3, "/..") == 0))) {
      throw ValidationError(f + ".subPath", m.sub_path,
                            "must be a relative path that does not leave the volume");
    }
  }
}

void ValidateSecurity(const DevInstanceSpec& s) {
  // SSH login.
  for (std::size_t i = 0; i < s.security.ssh_authorized_keys.size(); ++i) {
    const std::string& key = s.security.ssh_authorized_keys[i];
    std::string f = fmt::format("security.sshAuthorizedKeys[{}]", i);
    if (key.find_first_of("\r\n") != std::string::npos || key.empty()) {
      throw ValidationError(f, "(key)", "must be one non-empty line");
    }
    if (key.rfind("ssh-", 0) != 0 && key.rfind("ecdsa-", 0) != 0 && key.rfind("sk-", 0) != 0) {
      throw ValidationError(f, key.substr(0, 16),
                            "must be an OpenSSH public key (ssh-ed25519 …, ssh-rsa …, ecdsa-…)");
    }
  }
  for (std::size_t i = 0; i < s.security.credential_readers.size(); ++i) {
    const RbacSubject& r = s.security.credential_readers[i];
    std::string f = fmt::format("security.credentialReaders[{}]", i);
    if (r.kind != "User" && r.kind != "Group" && r.kind != "ServiceAccount") {
      throw ValidationError(f + ".kind", r.kind, "must be User, Group or ServiceAccount");
    }
    if (r.name.empty()) throw ValidationError(f + ".name", "", "is required");
    if (r.kind == "ServiceAccount") {
      validation::RequireDns1123Subdomain(f + ".name", r.name);
      if (!r.namespace_name.empty()) {
        validation::RequireNamespaceName(f + ".namespace", r.namespace_name);
      }
    } else if (!r.namespace_name.empty()) {
      throw ValidationError(f + ".namespace", r.namespace_name,
                            "only a ServiceAccount has a namespace");
    }
  }
  if (s.tools.ssh && !s.security.ssh_password_login && s.security.ssh_authorized_keys.empty()) {
    throw ValidationError("security.sshPasswordLogin", "false",
                          "SSH is enabled with neither password login nor authorized keys");
  }
}

void ValidateExposure(const DevInstanceSpec& s, const std::set<std::string>& port_names) {
  // Exposure.
  if (s.expose.backend != DevExposure::kNone) {
    for (std::size_t i = 0; i < s.expose.tools.size(); ++i) {
      if (!port_names.count(s.expose.tools[i])) {
        throw ValidationError(fmt::format("expose.tools[{}]", i), s.expose.tools[i],
                              "is not an enabled tool or custom port of this instance");
      }
    }
    if (internal::DevExposedPorts(s).empty()) {
      throw ValidationError("expose.tools", "",
                            "nothing to expose: enable Jupyter, SSH or code-server, or list the "
                            "tools to expose");
    }
  }
  if (s.expose.backend == DevExposure::kIngressTcp) {
    validation::RequireDns1123Label("expose.configmapNamespace", s.expose.configmap_namespace);
    validation::RequireDns1123Subdomain("expose.configmapName", s.expose.configmap_name);
    validation::RequirePort("expose.portMin", s.expose.port_min);
    validation::RequirePort("expose.portMax", s.expose.port_max);
    if (s.expose.port_max < s.expose.port_min) {
      throw ValidationError("expose.portMax", std::to_string(s.expose.port_max),
                            "must be at least portMin (" + std::to_string(s.expose.port_min) + ")");
    }
  }
  if (!s.expose.external_host.empty() &&
      s.expose.external_host.find_first_of(" /\t\n") != std::string::npos) {
    throw ValidationError("expose.externalHost", s.expose.external_host,
                          "must be a host name or address");
  }
}

}  // namespace

void DevInstanceSpec::Validate() const {
  ValidateBasics(*this);
  ValidateEnvAndTime(*this);
  const std::set<std::string> port_names = ValidateTools(*this);
  ValidateVolumes(*this);
  validation::ValidatePlacement("placement", placement);
  ValidateSecurity(*this);
  ValidateExposure(*this, port_names);
}

// ---- JSON round trip ------------------------------------------------------------------------

namespace {

const Json& Section(const Json& j, const char* key) {
  static const Json kEmpty = Json::object();
  if (!j.is_object()) return kEmpty;
  auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : kEmpty;
}

// The pod options, also from specs stored before they were shared (a single
// `imagePullSecret`; the service account settings under `security`).
PodOptions ReadPodOptions(const Json& j) {
  PodOptions defaults = DevInstanceSpec::DefaultPodOptions();
  const Json& sec = Section(j, "security");
  defaults.service_account = Field<std::string>(sec, "serviceAccount", "security.", "");
  defaults.automount_service_account_token = internal::OptionalField<bool>(
      sec, "automountServiceAccountToken", "security.", defaults.automount_service_account_token);
  if (auto secret = Field<std::string>(j, "imagePullSecret", "", ""); !secret.empty()) {
    defaults.image_pull_secrets = {secret};
  }
  return internal::PodOptionsFromSpecJson(j, "", std::move(defaults));
}

// credentialReaders only when set, so specs stored before it read back unchanged.
Json SecurityJson(const DevSecurity& security) {
  Json out = {{"sshPasswordLogin", security.ssh_password_login},
              {"sshAuthorizedKeys", security.ssh_authorized_keys},
              {"passwordEnv", security.password_env}};
  if (!security.credential_readers.empty()) {
    Json readers = Json::array();
    for (const auto& r : security.credential_readers) {
      Json x = {{"kind", r.kind}, {"name", r.name}};
      if (!r.namespace_name.empty()) x["namespace"] = r.namespace_name;
      readers.push_back(std::move(x));
    }
    out["credentialReaders"] = std::move(readers);
  }
  return out;
}

}  // namespace

PodOptions DevInstanceSpec::DefaultPodOptions() {
  PodOptions o;
  o.image_pull_policy = "IfNotPresent";
  o.automount_service_account_token = false;  // JupyterHub's default: no API token in the pod
  o.security_context.seccomp_profile = "RuntimeDefault";
  return o;
}

Json DevInstanceSpec::ToJson() const {
  Json custom = Json::array();
  for (const auto& p : tools.custom_ports) custom.push_back({{"name", p.name}, {"port", p.port}});
  Json mounts_json = Json::array();
  for (const auto& m : mounts) {
    mounts_json.push_back({{"claim", m.claim},
                           {"mountPath", m.mount_path},
                           {"readOnly", m.read_only},
                           {"subPath", m.sub_path}});
  }
  Json j = {{"owner", owner},
            {"name", name},
            {"namespace", namespace_name},
            {"labels", labels},
            {"image", image},
            {"command", command},
            {"resources", internal::ToSpecJson(resources)},
            {"notebookTag", notebook_tag},
            {"hadoopUser", hadoop_user},
            {"env", internal::ToSpecJson(env)},
            {"podAnnotations", pod_annotations},
            {"tools",
             {{"jupyter", tools.jupyter},
              {"jupyterPort", tools.jupyter_port},
              {"ssh", tools.ssh},
              {"sshPort", tools.ssh_port},
              {"codeServer", tools.code_server},
              {"codeServerPort", tools.code_server_port},
              {"tensorboard", tools.tensorboard},
              {"tensorboardPort", tools.tensorboard_port},
              {"tensorboardLogDir", tools.tensorboard_log_dir},
              {"customPorts", custom}}},
            {"home",
             {{"enabled", home.enabled},
              {"size", home.size},
              {"storageClass", home.storage_class},
              {"accessModes", home.access_modes},
              {"mountPath", home.mount_path}}},
            {"mounts", mounts_json},
            {"hostLocaltime", host_localtime},
            {"placement", internal::ToSpecJson(placement)},
            {"security", SecurityJson(security)},
            {"expose",
             {{"backend", ToString(expose.backend)},
              {"tools", expose.tools},
              {"configmapNamespace", expose.configmap_namespace},
              {"configmapName", expose.configmap_name},
              {"portMin", expose.port_min},
              {"portMax", expose.port_max},
              {"createConfigmap", expose.create_configmap},
              {"externalHost", expose.external_host}}}};
  // Written only when set, so specs stored before the option existed read back unchanged.
  if (expand_variable_references) j["expandVariableReferences"] = true;
  if (launch_workloads) j["launchWorkloads"] = true;
  if (!time_zone.empty()) j["timeZone"] = time_zone;
  if (idle) j["idle"] = {{"after", idle->AfterText()}, {"action", ToString(idle->action)}};
  internal::AddToSpecJson(&j, pod);
  return j;
}

namespace {

// The spec's `idle` object: `after` (required, a duration in whole seconds), `action` ("stop").
DevIdlePolicy IdleFromJson(const Json& j) {
  if (!j.is_object()) throw ValidationError("idle", j.dump(), "must be an object {after, action}");
  DevIdlePolicy policy;
  std::string after = Field<std::string>(j, "after", "idle.", "");
  if (after.empty()) {
    throw ValidationError("idle.after", after, "is required (a duration such as 2h or 90m)");
  }
  auto ms = validation::ParseDuration("idle.after", after);
  if (ms.count() % 1000 != 0) throw ValidationError("idle.after", after, "must be whole seconds");
  policy.after = std::chrono::duration_cast<std::chrono::seconds>(ms);
  std::string action = Field<std::string>(j, "action", "idle.", "stop");
  if (action != "stop") {
    throw ValidationError("idle.action", action,
                          "must be stop (the only action of an instance's idle policy)");
  }
  return policy;
}

}  // namespace

DevInstanceSpec DevInstanceSpec::FromJson(const Json& j) {
  if (!j.is_object()) throw ValidationError("spec", j.dump(), "must be a JSON object");
  DevInstanceSpec s;
  s.owner = Field<std::string>(j, "owner", "", "");
  s.name = Field<std::string>(j, "name", "", "");
  s.namespace_name = Field<std::string>(j, "namespace", "", s.namespace_name);
  s.labels = Field<std::map<std::string, std::string>>(j, "labels", "", {});
  s.image = Field<std::string>(j, "image", "", s.image);
  s.pod = ReadPodOptions(j);
  s.command = Field<std::vector<std::string>>(j, "command", "", {});
  s.expand_variable_references = Field<bool>(j, "expandVariableReferences", "", false);
  s.resources = internal::ResourcesFromSpecJson(Section(j, "resources"), "resources.");
  s.notebook_tag = Field<std::string>(j, "notebookTag", "", "");
  s.hadoop_user = Field<std::string>(j, "hadoopUser", "", "");
  if (auto e = j.find("env"); e != j.end()) s.env = internal::EnvFromSpecJson(*e, "env");
  s.pod_annotations = Field<std::map<std::string, std::string>>(j, "podAnnotations", "", {});
  const Json& t = Section(j, "tools");
  s.tools.jupyter = Field<bool>(t, "jupyter", "tools.", s.tools.jupyter);
  s.tools.jupyter_port = Field<int>(t, "jupyterPort", "tools.", s.tools.jupyter_port);
  s.tools.ssh = Field<bool>(t, "ssh", "tools.", s.tools.ssh);
  s.tools.ssh_port = Field<int>(t, "sshPort", "tools.", s.tools.ssh_port);
  s.tools.code_server = Field<bool>(t, "codeServer", "tools.", s.tools.code_server);
  s.tools.code_server_port = Field<int>(t, "codeServerPort", "tools.", s.tools.code_server_port);
  s.tools.tensorboard = Field<bool>(t, "tensorboard", "tools.", s.tools.tensorboard);
  s.tools.tensorboard_port = Field<int>(t, "tensorboardPort", "tools.", s.tools.tensorboard_port);
  s.tools.tensorboard_log_dir =
      Field<std::string>(t, "tensorboardLogDir", "tools.", s.tools.tensorboard_log_dir);
  if (auto c = t.find("customPorts"); c != t.end() && c->is_array()) {
    for (const auto& p : *c) {
      s.tools.custom_ports.push_back({Field<std::string>(p, "name", "tools.customPorts.", ""),
                                      Field<int>(p, "port", "tools.customPorts.", 0)});
    }
  }
  const Json& h = Section(j, "home");
  s.home.enabled = Field<bool>(h, "enabled", "home.", s.home.enabled);
  s.home.size = Field<std::string>(h, "size", "home.", s.home.size);
  s.home.storage_class = Field<std::string>(h, "storageClass", "home.", "");
  s.home.access_modes =
      Field<std::vector<std::string>>(h, "accessModes", "home.", s.home.access_modes);
  s.home.mount_path = Field<std::string>(h, "mountPath", "home.", s.home.mount_path);
  if (auto m = j.find("mounts"); m != j.end() && m->is_array()) {
    for (const auto& v : *m) {
      s.mounts.push_back({Field<std::string>(v, "claim", "mounts.", ""),
                          Field<std::string>(v, "mountPath", "mounts.", ""),
                          Field<bool>(v, "readOnly", "mounts.", false),
                          Field<std::string>(v, "subPath", "mounts.", "")});
    }
  }
  s.host_localtime = Field<bool>(j, "hostLocaltime", "", s.host_localtime);
  s.time_zone = Field<std::string>(j, "timeZone", "", "");
  s.launch_workloads = Field<bool>(j, "launchWorkloads", "", false);
  s.placement = internal::PlacementFromSpecJson(Section(j, "placement"), "placement.");
  const Json& sec = Section(j, "security");
  s.security.ssh_password_login = Field<bool>(sec, "sshPasswordLogin", "security.", true);
  s.security.password_env = Field<bool>(sec, "passwordEnv", "security.", false);
  s.security.ssh_authorized_keys =
      Field<std::vector<std::string>>(sec, "sshAuthorizedKeys", "security.", {});
  if (auto r = sec.find("credentialReaders"); r != sec.end() && !r->is_null()) {
    if (!r->is_array()) {
      throw ValidationError("security.credentialReaders", r->dump(), "must be a list");
    }
    for (const auto& v : *r) {
      const char* f = "security.credentialReaders.";
      s.security.credential_readers.push_back({Field<std::string>(v, "kind", f, "User"),
                                               Field<std::string>(v, "name", f, ""),
                                               Field<std::string>(v, "namespace", f, "")});
    }
  }
  const Json& x = Section(j, "expose");
  std::string backend = Field<std::string>(x, "backend", "expose.", "none");
  if (backend == "none") {
    s.expose.backend = DevExposure::kNone;
  } else if (backend == "ingress-tcp") {
    s.expose.backend = DevExposure::kIngressTcp;
  } else if (backend == "node-port") {
    s.expose.backend = DevExposure::kNodePort;
  } else {
    throw ValidationError("expose.backend", backend, "must be none, ingress-tcp or node-port");
  }
  s.expose.tools = Field<std::vector<std::string>>(x, "tools", "expose.", {});
  s.expose.configmap_namespace =
      Field<std::string>(x, "configmapNamespace", "expose.", s.expose.configmap_namespace);
  s.expose.configmap_name =
      Field<std::string>(x, "configmapName", "expose.", s.expose.configmap_name);
  s.expose.port_min = Field<int>(x, "portMin", "expose.", s.expose.port_min);
  s.expose.port_max = Field<int>(x, "portMax", "expose.", s.expose.port_max);
  s.expose.create_configmap = Field<bool>(x, "createConfigmap", "expose.", false);
  s.expose.external_host = Field<std::string>(x, "externalHost", "expose.", "");
  if (auto it = j.find("idle"); it != j.end() && !it->is_null()) s.idle = IdleFromJson(*it);
  Json understood = s.ToJson();
  // The keys of specs stored before the pod options were shared, which ReadPodOptions reads.
  understood["imagePullSecret"] = true;
  for (const char* key : {"serviceAccount", "automountServiceAccountToken"}) {
    understood["security"][key] = true;
  }
  internal::RefuseUnknownFields(j, understood, "DevInstance");
  return s;
}

std::string DevIdlePolicy::AfterText() const {
  auto n = after.count();
  if (n != 0 && n % 3600 == 0) return std::to_string(n / 3600) + "h";
  if (n != 0 && n % 60 == 0) return std::to_string(n / 60) + "m";
  return std::to_string(n) + "s";
}

// ---- the spec stored on its StatefulSet ----

namespace internal {

DevInstanceSpec DevSpecFromObject(const Json& sts, RootIdentity* identity) {
  RootIdentity id = IdentityOf(sts, "StatefulSet", "DevInstance", kInstanceLabel, true);
  const std::string field = std::string("metadata.annotations[") + kDevSpecAnnotation + "]";
  std::string text = AnnotationOf(sts, kDevSpecAnnotation);
  if (text.empty()) {
    throw NotFound(
        ErrorKind::kNotFound,
        fmt::format("{} exists but is not a tfk8s dev instance: it has no {}", id.object, field),
        404, "NotFound");
  }
  return StoredSpec<DevInstanceSpec>(std::move(id), text, field, identity);
}

}  // namespace internal

}  // namespace tfk8s
