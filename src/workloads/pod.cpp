// The one pod builder (see pod.hpp).

#include "workloads/pod.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "tfk8s/error.hpp"
#include "tfk8s/validation.hpp"
#include "tfk8s/workload.hpp"
#include "workloads/spec_json.hpp"

namespace tfk8s {

SecurityContext RestrictedSecurityContext() {
  SecurityContext c;
  c.run_as_user = 1000;
  c.run_as_group = 1000;
  c.run_as_non_root = true;
  c.fs_group = 1000;
  c.allow_privilege_escalation = false;
  c.drop_capabilities = {"ALL"};
  c.seccomp_profile = "RuntimeDefault";
  return c;
}

}  // namespace tfk8s

namespace tfk8s::internal {

void ValidateOwner(const std::string& owner, const std::map<std::string, std::string>& labels) {
  if (!owner.empty()) validation::RequireDns1123Label("owner", owner);
  if (labels.count(kOwnerLabel) != 0) {
    throw ValidationError("labels", kOwnerLabel, "is set by tfk8s: use the spec's owner field");
  }
}

Json ResourcesJson(const Resources& r) {
  Json requests = Json::object();
  Json limits = Json::object();
  if (!r.cpu.empty()) requests["cpu"] = r.cpu;
  if (!r.memory.empty()) requests["memory"] = r.memory;
  if (!r.cpu_limit.empty() || !r.cpu.empty()) {
    limits["cpu"] = r.cpu_limit.empty() ? r.cpu : r.cpu_limit;
  }
  if (!r.memory_limit.empty() || !r.memory.empty()) {
    limits["memory"] = r.memory_limit.empty() ? r.memory : r.memory_limit;
  }
  if (r.gpus > 0) {
    // Extended resources cannot be over-committed: requests must equal limits.
    requests[std::string(kGpuResource)] = std::to_string(r.gpus);
    limits[std::string(kGpuResource)] = std::to_string(r.gpus);
  }
  Json out = Json::object();
  if (!requests.empty()) out["requests"] = requests;
  if (!limits.empty()) out["limits"] = limits;
  return out;
}

Json AffinityJson(const Placement& p, bool gpu) {
  Json exprs = Json::array();
  auto in = [&](const char* key, const std::string& value) {
    if (value.empty()) return;
    exprs.push_back({{"key", key}, {"operator", "In"}, {"values", Json::array({value})}});
  };
  in("nodetype", p.nodetype);
  if (gpu) {
    in("gputype", p.gputype);
  } else {
    in("cputype", p.cputype);
  }
  in("pooltype", p.pool);
  if (p.pool == "unshared") in("privatename", p.private_name);
  if (exprs.empty()) return nullptr;
  return {{"nodeAffinity",
           {{"requiredDuringSchedulingIgnoredDuringExecution",
             {{"nodeSelectorTerms", Json::array({{{"matchExpressions", exprs}}})}}}}}};
}

Json GpuToleration() {
  return {{"key", std::string(kGpuResource)}, {"operator", "Exists"}, {"effect", "NoSchedule"}};
}

ClaimVolumes ClaimVolumesJson(const std::vector<VolumeMount>& mounts) {
  ClaimVolumes out;
  std::vector<std::string> claims;  // distinct, by first mention
  for (const auto& m : mounts) {
    if (std::find(claims.begin(), claims.end(), m.claim) == claims.end()) {
      claims.push_back(m.claim);
    }
  }
  for (std::size_t i = 0; i < claims.size(); ++i) {
    const bool read_only = std::all_of(mounts.begin(), mounts.end(), [&](const VolumeMount& m) {
      return m.claim != claims[i] || m.read_only;
    });
    Json pvc = {{"claimName", claims[i]}};
    if (read_only) pvc["readOnly"] = true;
    out.volumes.push_back({{"name", fmt::format("claim-{}", i)}, {"persistentVolumeClaim", pvc}});
  }
  for (const auto& m : mounts) {
    const auto index = std::find(claims.begin(), claims.end(), m.claim) - claims.begin();
    Json vm = {{"name", fmt::format("claim-{}", index)}, {"mountPath", m.mount_path}};
    if (m.read_only) vm["readOnly"] = true;
    if (!m.sub_path.empty()) vm["subPath"] = m.sub_path;
    out.mounts.push_back(std::move(vm));
  }
  return out;
}

Json EnvJson(const std::vector<EnvVar>& env) {
  Json out = Json::array();
  for (const auto& e : env) out.push_back({{"name", e.name}, {"value", e.value}});
  return out;
}

std::vector<std::string> KubeletArgv(std::vector<std::string> argv,
                                     bool expand_variable_references) {
  if (expand_variable_references) return argv;
  for (auto& word : argv) {
    std::string escaped;
    escaped.reserve(word.size());
    for (char c : word) {
      escaped += c;
      if (c == '$') escaped += '$';
    }
    word = std::move(escaped);
  }
  return argv;
}

void AddPlacement(Json* pod_spec, const Placement& placement, bool gpu) {
  Json affinity = AffinityJson(placement, gpu);
  if (!affinity.is_null()) (*pod_spec)["affinity"] = std::move(affinity);
  if (gpu) (*pod_spec)["tolerations"] = Json::array({GpuToleration()});
}

void AddHostAntiAffinity(Json* pod_spec, const Json& match_labels, AntiAffinity strength) {
  Json term = {{"labelSelector", {{"matchLabels", match_labels}}},
               {"topologyKey", "kubernetes.io/hostname"}};
  Json& anti = (*pod_spec)["affinity"]["podAntiAffinity"];
  if (strength == AntiAffinity::kRequired) {
    anti["requiredDuringSchedulingIgnoredDuringExecution"].push_back(std::move(term));
  } else {
    anti["preferredDuringSchedulingIgnoredDuringExecution"].push_back(
        {{"weight", 100}, {"podAffinityTerm", std::move(term)}});
  }
}

void AddPodOptions(Json* pod_spec, const PodOptions& o) {
  Json& pod = *pod_spec;
  if (!o.service_account.empty()) pod["serviceAccountName"] = o.service_account;
  if (o.automount_service_account_token) {
    pod["automountServiceAccountToken"] = *o.automount_service_account_token;
  }
  if (!o.priority_class.empty()) pod["priorityClassName"] = o.priority_class;
  if (!o.image_pull_secrets.empty()) {
    Json secrets = Json::array();
    for (const auto& name : o.image_pull_secrets) secrets.push_back({{"name", name}});
    pod["imagePullSecrets"] = std::move(secrets);
  }
  const SecurityContext& c = o.security_context;
  Json sc = Json::object();
  if (c.run_as_user) sc["runAsUser"] = *c.run_as_user;
  if (c.run_as_group) sc["runAsGroup"] = *c.run_as_group;
  if (c.run_as_non_root) sc["runAsNonRoot"] = *c.run_as_non_root;
  if (c.fs_group) sc["fsGroup"] = *c.fs_group;
  if (!c.seccomp_profile.empty()) sc["seccompProfile"] = {{"type", c.seccomp_profile}};
  if (!sc.empty()) pod["securityContext"] = std::move(sc);
}

void AddContainerOptions(Json* container, const PodOptions& o) {
  if (!o.image_pull_policy.empty()) (*container)["imagePullPolicy"] = o.image_pull_policy;
  const SecurityContext& c = o.security_context;
  Json sc = Json::object();
  if (c.allow_privilege_escalation) sc["allowPrivilegeEscalation"] = *c.allow_privilege_escalation;
  if (c.read_only_root_filesystem) sc["readOnlyRootFilesystem"] = *c.read_only_root_filesystem;
  Json caps = Json::object();
  if (!c.drop_capabilities.empty()) caps["drop"] = c.drop_capabilities;
  if (!c.add_capabilities.empty()) caps["add"] = c.add_capabilities;
  if (!caps.empty()) sc["capabilities"] = std::move(caps);
  if (!sc.empty()) (*container)["securityContext"] = std::move(sc);
}

void AddToSpecJson(Json* spec, const PodOptions& o) {
  Json& j = *spec;
  if (!o.image_pull_policy.empty()) j["imagePullPolicy"] = o.image_pull_policy;
  if (!o.image_pull_secrets.empty()) j["imagePullSecrets"] = o.image_pull_secrets;
  if (!o.service_account.empty()) j["serviceAccount"] = o.service_account;
  if (o.automount_service_account_token) {
    j["automountServiceAccountToken"] = *o.automount_service_account_token;
  }
  if (!o.priority_class.empty()) j["priorityClassName"] = o.priority_class;
  const SecurityContext& c = o.security_context;
  Json sc = Json::object();
  auto optional = [&sc](const char* key, const auto& value) {
    if (value) sc[key] = *value;
  };
  optional("runAsUser", c.run_as_user);
  optional("runAsGroup", c.run_as_group);
  optional("runAsNonRoot", c.run_as_non_root);
  optional("fsGroup", c.fs_group);
  optional("allowPrivilegeEscalation", c.allow_privilege_escalation);
  optional("readOnlyRootFilesystem", c.read_only_root_filesystem);
  if (!c.drop_capabilities.empty()) sc["dropCapabilities"] = c.drop_capabilities;
  if (!c.add_capabilities.empty()) sc["addCapabilities"] = c.add_capabilities;
  if (!c.seccomp_profile.empty()) sc["seccompProfile"] = c.seccomp_profile;
  if (!sc.empty()) j["securityContext"] = std::move(sc);
}

PodOptions PodOptionsFromSpecJson(const Json& j, const std::string& path, PodOptions o) {
  o.image_pull_policy = Field<std::string>(j, "imagePullPolicy", path, o.image_pull_policy);
  o.image_pull_secrets =
      Field<std::vector<std::string>>(j, "imagePullSecrets", path, o.image_pull_secrets);
  o.service_account = Field<std::string>(j, "serviceAccount", path, o.service_account);
  o.automount_service_account_token = OptionalField<bool>(j, "automountServiceAccountToken", path,
                                                          o.automount_service_account_token);
  o.priority_class = Field<std::string>(j, "priorityClassName", path, o.priority_class);
  auto sc_it = j.is_object() ? j.find("securityContext") : j.end();
  if (!j.is_object() || sc_it == j.end() || sc_it->is_null()) return o;
  const Json& sc = *sc_it;
  const std::string at = path + "securityContext.";
  if (!sc.is_object())
    throw ValidationError(path + "securityContext", sc.dump(), "must be an object");
  SecurityContext& c = o.security_context;
  c.run_as_user = OptionalField<std::int64_t>(sc, "runAsUser", at, c.run_as_user);
  c.run_as_group = OptionalField<std::int64_t>(sc, "runAsGroup", at, c.run_as_group);
  c.run_as_non_root = OptionalField<bool>(sc, "runAsNonRoot", at, c.run_as_non_root);
  c.fs_group = OptionalField<std::int64_t>(sc, "fsGroup", at, c.fs_group);
  c.allow_privilege_escalation =
      OptionalField<bool>(sc, "allowPrivilegeEscalation", at, c.allow_privilege_escalation);
  c.read_only_root_filesystem =
      OptionalField<bool>(sc, "readOnlyRootFilesystem", at, c.read_only_root_filesystem);
  c.drop_capabilities =
      Field<std::vector<std::string>>(sc, "dropCapabilities", at, c.drop_capabilities);
  c.add_capabilities =
      Field<std::vector<std::string>>(sc, "addCapabilities", at, c.add_capabilities);
  c.seccomp_profile = Field<std::string>(sc, "seccompProfile", at, c.seccomp_profile);
  return o;
}

Json ToSpecJson(const Resources& r) {
  return {{"cpu", r.cpu},
          {"memory", r.memory},
          {"cpuLimit", r.cpu_limit},
          {"memoryLimit", r.memory_limit},
          {"gpus", r.gpus}};
}

Json ToSpecJson(const Placement& p) {
  return {{"nodetype", p.nodetype},
          {"cputype", p.cputype},
          {"gputype", p.gputype},
          {"pool", p.pool},
          {"privateName", p.private_name}};
}

Json ToSpecJson(const std::vector<EnvVar>& env) { return EnvJson(env); }

Resources ResourcesFromSpecJson(const Json& j, const std::string& path) {
  Resources r;
  r.cpu = Field<std::string>(j, "cpu", path, "");
  r.memory = Field<std::string>(j, "memory", path, "");
  r.cpu_limit = Field<std::string>(j, "cpuLimit", path, "");
  r.memory_limit = Field<std::string>(j, "memoryLimit", path, "");
  r.gpus = Field<int>(j, "gpus", path, 0);
  return r;
}

Placement PlacementFromSpecJson(const Json& j, const std::string& path) {
  Placement p;
  if (j.is_object() && !j.contains("nodetype") && j.contains("tensorflowNodesOnly")) {
    p.nodetype = Field<bool>(j, "tensorflowNodesOnly", path, true) ? "tensorflow" : "";
  } else {
    p.nodetype = Field<std::string>(j, "nodetype", path, p.nodetype);
  }
  p.cputype = Field<std::string>(j, "cputype", path, "");
  p.gputype = Field<std::string>(j, "gputype", path, "");
  p.pool = Field<std::string>(j, "pool", path, p.pool);
  p.private_name = Field<std::string>(j, "privateName", path, "");
  return p;
}

std::vector<EnvVar> EnvFromSpecJson(const Json& j, const std::string& path) {
  std::vector<EnvVar> env;
  if (j.is_null()) return env;
  if (!j.is_array()) throw ValidationError(path, j.dump(), "must be a list of {name, value}");
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string item = fmt::format("{}[{}].", path, i);
    if (!j[i].is_object()) throw ValidationError(item, j[i].dump(), "must be {name, value}");
    env.push_back(
        {Field<std::string>(j[i], "name", item, ""), Field<std::string>(j[i], "value", item, "")});
  }
  return env;
}

PodOptions WithSecurityDefaults(PodOptions options, PodSecurityLevel level) {
  if (level != PodSecurityLevel::kRestricted) return options;
  const SecurityContext d = RestrictedSecurityContext();
  SecurityContext& c = options.security_context;
  if (!c.run_as_user) c.run_as_user = d.run_as_user;
  if (!c.run_as_group) c.run_as_group = d.run_as_group;
  if (!c.run_as_non_root) c.run_as_non_root = d.run_as_non_root;
  if (!c.fs_group) c.fs_group = d.fs_group;
  if (!c.allow_privilege_escalation) c.allow_privilege_escalation = d.allow_privilege_escalation;
  if (c.drop_capabilities.empty()) c.drop_capabilities = d.drop_capabilities;
  if (c.seccomp_profile.empty()) c.seccomp_profile = d.seccomp_profile;
  return options;
}

void RequirePodSecurity(const Json& object, PodSecurityLevel level) {
  if (!IsPodCarrier(object)) return;
  const std::string kind = object.value("kind", "");
  auto violations = CheckPodSecurity(object, level);
  if (violations.empty()) return;
  const auto& v = violations.front();
  std::string name = object.contains("metadata") ? object["metadata"].value("name", "") : "";
  throw ValidationError(
      "podSecurity", std::string(ToString(level)),
      fmt::format("the {} {} breaks it: {}: {}{} (change the securityContext, or lower "
                  "podSecurity for an image that needs it)",
                  kind, name, v.field, v.message,
                  violations.size() > 1 ? fmt::format("; {} more", violations.size() - 1) : ""));
}

PodSecurityLevel PodSecurityFromSpecJson(const Json& spec, const std::string& path) {
  const std::string value = Field<std::string>(spec, "podSecurity", path, "restricted");
  if (value != "restricted" && value != "baseline" && value != "privileged") {
    throw ValidationError(path + "podSecurity", value,
                          "must be restricted, baseline or privileged (Pod Security Standards)");
  }
  return ParsePodSecurityLevel(value);
}

}  // namespace tfk8s::internal
