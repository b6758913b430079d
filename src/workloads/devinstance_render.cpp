// DevInstance: credentials and rendering (the spec: devinstance_spec.cpp). Pure: no I/O.

#include <fmt/format.h>

#include <algorithm>
#include <regex>
#include <set>

#include "http/crypto.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/quantity.hpp"
#include "tfk8s/validation.hpp"
#include "util/base64.hpp"
#include "workloads/devinstance_internal.hpp"
#include "workloads/pod.hpp"
#include "workloads/spec_json.hpp"
#include "workloads/start_script.hpp"

namespace tfk8s {

using internal::kInstanceLabel;
using internal::kManagedBy;

std::string ToString(DevExposure e) {
  switch (e) {
    case DevExposure::kNone:
      return "none";
    case DevExposure::kIngressTcp:
      return "ingress-tcp";
    case DevExposure::kNodePort:
      return "node-port";
  }
  return "none";
}

std::string ToString(DevPhase phase) {
  switch (phase) {
    case DevPhase::kStopped:
      return "Stopped";
    case DevPhase::kPending:
      return "Pending";
    case DevPhase::kRunning:
      return "Running";
    case DevPhase::kFailed:
      return "Failed";
    case DevPhase::kUnknown:
      break;
  }
  return "Unknown";
}

std::string ToString(DevShareMode mode) { return mode == DevShareMode::kReadOnly ? "ro" : "rw"; }

std::string HomeClaimName(const std::string& owner) { return owner + "-home"; }

DevCredentials DevCredentials::Generate() {
  DevCredentials c;
  c.password = internal::GeneratePassword();
  c.jupyter_hash = internal::NewJupyterPasswordHash(c.password);
  c.jupyter_fallback_hash = internal::NewJupyterSha512Hash(c.password);
  c.ssh_hash = internal::NewSha512Crypt(c.password);
  return c;
}

std::string DevCredentials::ToString() const {
  return "DevCredentials{password=REDACTED, jupyter_hash=REDACTED, "
         "jupyter_fallback_hash=REDACTED, ssh_hash=REDACTED}";
}

namespace internal {

std::string DevSecretName(const DevInstanceSpec& spec) { return spec.name + "-credentials"; }
std::string DevNodePortName(const DevInstanceSpec& spec) { return spec.name + "-nodeport"; }
std::string DevPodName(const DevInstanceSpec& spec) { return spec.name + "-0"; }
std::string DevSelector(const DevInstanceSpec& spec) {
  return std::string(kInstanceLabel) + "=" + spec.name;
}

std::vector<DevPort> DevPorts(const DevInstanceSpec& spec) { return ToolPorts(spec.tools); }

std::vector<DevPort> DevExposedPorts(const DevInstanceSpec& spec) {
  std::vector<DevPort> out;
  if (spec.expose.backend == DevExposure::kNone) return out;
  std::set<std::string> wanted(spec.expose.tools.begin(), spec.expose.tools.end());
  for (const auto& p : DevPorts(spec)) {
    bool authenticated = p.name == "jupyter" || p.name == "ssh" || p.name == "code-server";
    if (wanted.empty() ? authenticated : wanted.count(p.name) > 0) out.push_back(p);
  }
  return out;
}

Json DevSecretData(const DevInstanceSpec& spec, const DevCredentials& credentials) {
  return CredentialsSecretData(credentials, spec.security.ssh_authorized_keys);
}

}  // namespace internal

using internal::DevPorts;

// ---- rendering --------------------------------------------------------------------------------

namespace {

Json CommonLabels(const DevInstanceSpec& spec, const char* component) {
  Json labels = Json::object();
  for (const auto& [k, v] : spec.labels) labels[k] = v;
  labels[kManagedBy] = "tfk8s";
  labels[kInstanceLabel] = spec.name;
  labels[kOwnerLabel] = spec.owner;
  labels[internal::kDevComponentLabel] = component;
  return labels;
}

Json Metadata(const DevInstanceSpec& spec, const DevRenderOptions& o, const std::string& name,
              const char* component) {
  Json m = {{"name", name},
            {"namespace", spec.namespace_name},
            {"labels", CommonLabels(spec, component)}};
  if (!o.root_uid.empty()) {
    m["ownerReferences"] = Json::array({{{"apiVersion", "apps/v1"},
                                         {"kind", "StatefulSet"},
                                         {"name", spec.name},
                                         {"uid", o.root_uid},
                                         {"controller", true},
                                         {"blockOwnerDeletion", true}}});
  }
  return m;
}

Json Env(const DevInstanceSpec& spec) {
  Json env = Json::array();
  auto add = [&](const std::string& name, const std::string& value) {
    env.push_back({{"name", name}, {"value", value}});
  };
  add("NOTEBOOK_TAG", spec.notebook_tag.empty() ? spec.name : spec.notebook_tag);
  add("HADOOP_USER", spec.hadoop_user.empty() ? spec.owner : spec.hadoop_user);
  add("TFK8S_INSTANCE", spec.name);
  add("TFK8S_OWNER", spec.owner);
  internal::StartScriptTools tools;
  tools.tools = &spec.tools;
  tools.home = spec.home.enabled ? spec.home.mount_path : "/root";
  tools.ssh_password_login = spec.security.ssh_password_login;
  for (auto& e : internal::StartScriptEnv(tools)) env.push_back(std::move(e));
  if (!spec.time_zone.empty()) add("TZ", spec.time_zone);
  for (const auto& e : spec.env) add(e.name, e.value);
  if (!spec.command.empty()) {
    // An image's own start script reads the password from a file (PASSWORD only on request).
    for (auto& e : internal::CustomScriptPasswordEnv(internal::DevSecretName(spec),
                                                     spec.security.password_env)) {
      env.push_back(std::move(e));
    }
  }
  return env;
}

Json Container(const DevInstanceSpec& spec) {
  Json c = {{"name", internal::kDevContainer}, {"image", spec.image}};
  internal::AddContainerOptions(&c, spec.pod);
  if (spec.command.empty()) {
    c["command"] = internal::StartScriptCommand();
  } else {
    c["command"] = internal::KubeletArgv(spec.command, spec.expand_variable_references);
  }
  c["env"] = Env(spec);
  Json ports = Json::array();
  for (const auto& p : DevPorts(spec)) {
    ports.push_back({{"name", p.name}, {"containerPort", p.port}, {"protocol", "TCP"}});
  }
  if (!ports.empty()) c["ports"] = ports;
  c["resources"] = internal::ResourcesJson(spec.resources);
  Json mounts = Json::array();
  if (spec.home.enabled) mounts.push_back({{"name", "home"}, {"mountPath", spec.home.mount_path}});
  for (auto& m : internal::ClaimVolumesJson(spec.mounts).mounts) mounts.push_back(std::move(m));
  mounts.push_back(internal::CredentialsMount());
  if (spec.host_localtime) {
    mounts.push_back({{"name", "localtime"}, {"mountPath", "/etc/localtime"}, {"readOnly", true}});
  }
  c["volumeMounts"] = mounts;
  // The pod counts as ready once every enabled tool accepts connections.
  Json probe = internal::ToolsReadinessProbe(spec.tools);
  if (!probe.is_null()) c["readinessProbe"] = std::move(probe);
  return c;
}

Json Volumes(const DevInstanceSpec& spec) {
  Json volumes = Json::array();
  if (spec.home.enabled) {
    volumes.push_back(
        {{"name", "home"}, {"persistentVolumeClaim", {{"claimName", HomeClaimName(spec.owner)}}}});
  }
  for (auto& v : internal::ClaimVolumesJson(spec.mounts).volumes) volumes.push_back(std::move(v));
  // The hashes (and public keys) are projected into root-only files; the plaintext only for
  // an image's own start script (tfk8s's gives every tool a hash).
  volumes.push_back(internal::CredentialsVolume(internal::DevSecretName(spec),
                                                !spec.command.empty(),
                                                !spec.security.ssh_authorized_keys.empty()));
  if (spec.host_localtime) {
    volumes.push_back({{"name", "localtime"}, {"hostPath", {{"path", "/etc/localtime"}}}});
  }
  return volumes;
}

Json PodSpec(const DevInstanceSpec& spec) {
  Json pod = {{"enableServiceLinks", false}};
  internal::AddPlacement(&pod, spec.placement, spec.resources.gpus > 0);
  PodOptions options = spec.pod;
  if (spec.launch_workloads) {
    // Its own account, whose token tfk8s.Client() finds (in-cluster config).
    options.service_account = spec.name;
    options.automount_service_account_token = true;
  }
  internal::AddPodOptions(&pod, options);
  pod["containers"] = Json::array({Container(spec)});
  pod["volumes"] = Volumes(spec);
  return pod;
}

Json ServicePorts(const std::vector<DevPort>& ports) {
  Json out = Json::array();
  for (const auto& p : ports) {
    // protocol is explicit: server-side apply on v1.20 fails without it.
    out.push_back(
        {{"name", p.name}, {"port", p.port}, {"targetPort", p.port}, {"protocol", "TCP"}});
  }
  return out;
}

}  // namespace

Json DevInstanceWorkloadRules() {
  const std::vector<std::string> manage = {"get",    "list",  "watch", "create",
                                           "update", "patch", "delete"};
  const std::vector<std::string> read = {"get", "list", "watch"};
  auto rule = [](const char* group, std::vector<std::string> resources,
                 const std::vector<std::string>& verbs) {
    return Json{{"apiGroups", {group}}, {"resources", std::move(resources)}, {"verbs", verbs}};
  };
  return Json::array(
      {// What the workloads are made of (a TFCluster's root ConfigMap, Services, shared storage).
       rule("", {"configmaps", "services", "persistentvolumeclaims"}, manage),
       // Credentials (a session's, a DevInstance's): WriteSecretWhole creates one, or replaces
       // it with the resourceVersion it read (get, update); Apply keeps a password by reading
       // it. Granted only because the namespace is personal to the owner (CheckDevTenancy
       // refuses launch_workloads elsewhere): every Secret here is the owner's own, and an
       // account that may create pods could mount them anyway. No list or watch: names are
       // known.
       rule("", {"secrets"}, {"get", "create", "update", "delete"}),
       // Their controllers' objects.
       rule("batch", {"jobs", "cronjobs"}, manage),
       rule("apps", {"statefulsets", "deployments", "replicasets"}, manage),
       // Status, logs and failure reasons; the quota pre-flight. Pods are deleted through
       // their controllers; no exec or port-forward.
       rule("", {"pods", "pods/log", "events", "resourcequotas", "limitranges"}, read)});
}

std::vector<Json> RenderDevInstance(const DevInstanceSpec& spec, const DevRenderOptions& o) {
  spec.Validate();
  std::vector<Json> out;
  Json selector = {{kInstanceLabel, spec.name}};

  Json sts_meta = {{"name", spec.name},
                   {"namespace", spec.namespace_name},
                   {"labels", CommonLabels(spec, "instance")},
                   {"annotations", {{internal::kDevSpecAnnotation, spec.ToJson().dump()}}}};
  if (spec.idle) {  // what a culler, or kubectl, reads without parsing the spec
    sts_meta["annotations"][internal::kIdleAfterAnnotation] = spec.idle->AfterText();
    sts_meta["annotations"][internal::kIdleActionAnnotation] = ToString(spec.idle->action);
  }
  Json pod_meta = {{"labels", CommonLabels(spec, "instance")}};
  if (!spec.pod_annotations.empty()) pod_meta["annotations"] = spec.pod_annotations;
  out.push_back({{"apiVersion", "apps/v1"},
                 {"kind", "StatefulSet"},
                 {"metadata", sts_meta},
                 {"spec",
                  {{"serviceName", spec.name},
                   {"replicas", o.running ? 1 : 0},
                   {"selector", {{"matchLabels", selector}}},
                   {"template", {{"metadata", pod_meta}, {"spec", PodSpec(spec)}}}}}});

  out.push_back(
      {{"apiVersion", "v1"},
       {"kind", "Service"},
       {"metadata", Metadata(spec, o, spec.name, "service")},
       {"spec",
        {{"clusterIP", "None"}, {"selector", selector}, {"ports", ServicePorts(DevPorts(spec))}}}});

  if (spec.expose.backend == DevExposure::kNodePort) {
    out.push_back({{"apiVersion", "v1"},
                   {"kind", "Service"},
                   {"metadata", Metadata(spec, o, internal::DevNodePortName(spec), "node-port")},
                   {"spec",
                    {{"type", "NodePort"},
                     {"selector", selector},
                     {"ports", ServicePorts(internal::DevExposedPorts(spec))}}}});
  }

  if (o.credentials) {
    out.push_back({{"apiVersion", "v1"},
                   {"kind", "Secret"},
                   {"metadata", Metadata(spec, o, internal::DevSecretName(spec), "credentials")},
                   {"type", "Opaque"},
                   {"data", internal::DevSecretData(spec, *o.credentials)}});
  }

  if (!spec.security.credential_readers.empty()) {
    // Per-user credential isolation: only these subjects may read this instance's Secret.
    std::string role = spec.name + "-credentials-reader";
    Json subjects = Json::array();
    for (const auto& r : spec.security.credential_readers) {
      Json x = {{"kind", r.kind}, {"name", r.name}};
      if (r.kind == "ServiceAccount") {
        x["namespace"] = r.namespace_name.empty() ? spec.namespace_name : r.namespace_name;
      } else {
        x["apiGroup"] = "rbac.authorization.k8s.io";
      }
      subjects.push_back(std::move(x));
    }
    out.push_back({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                   {"kind", "Role"},
                   {"metadata", Metadata(spec, o, role, "credentials-reader")},
                   {"rules", Json::array({{{"apiGroups", {""}},
                                           {"resources", {"secrets"}},
                                           {"resourceNames", {internal::DevSecretName(spec)}},
                                           {"verbs", {"get"}}}})}});
    out.push_back(
        {{"apiVersion", "rbac.authorization.k8s.io/v1"},
         {"kind", "RoleBinding"},
         {"metadata", Metadata(spec, o, role, "credentials-reader")},
         {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", role}}},
         {"subjects", std::move(subjects)}});
  }

  if (spec.launch_workloads) {
    // In-cluster launching: the pod's own account, bound to the workloads' Role.
    std::string role = spec.name + "-workloads";
    out.push_back({{"apiVersion", "v1"},
                   {"kind", "ServiceAccount"},
                   {"metadata", Metadata(spec, o, spec.name, "launcher")}});
    out.push_back({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                   {"kind", "Role"},
                   {"metadata", Metadata(spec, o, role, "launcher")},
                   {"rules", DevInstanceWorkloadRules()}});
    out.push_back(
        {{"apiVersion", "rbac.authorization.k8s.io/v1"},
         {"kind", "RoleBinding"},
         {"metadata", Metadata(spec, o, role, "launcher")},
         {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", role}}},
         {"subjects", Json::array({{{"kind", "ServiceAccount"},
                                    {"name", spec.name},
                                    {"namespace", spec.namespace_name}}})}});
  }

  if (spec.home.enabled) {
    // The home volume belongs to the user, not the instance: no ownerReference, no instance
    // label, so deleting an instance never deletes it.
    Json labels = Json::object();
    labels[kManagedBy] = "tfk8s";
    labels[kOwnerLabel] = spec.owner;
    labels[internal::kDevComponentLabel] = "home";
    Json pvc = {{"apiVersion", "v1"},
                {"kind", "PersistentVolumeClaim"},
                {"metadata",
                 {{"name", HomeClaimName(spec.owner)},
                  {"namespace", spec.namespace_name},
                  {"labels", labels}}},
                {"spec",
                 {{"accessModes", spec.home.access_modes},
                  {"resources", {{"requests", {{"storage", spec.home.size}}}}}}}};
    if (!spec.home.storage_class.empty()) pvc["spec"]["storageClassName"] = spec.home.storage_class;
    out.push_back(pvc);
  }
  return out;
}

}  // namespace tfk8s
