// The Pod Security Standards checker (tfk8s/pod_security.hpp), written from the rules as the
// Kubernetes documentation states them: one function per control, each walking the pod spec
// with typed accessors so that a wrongly typed field becomes a ValidationError naming it.

#include "tfk8s/pod_security.hpp"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "tfk8s/error.hpp"

namespace tfk8s {
namespace {

using Names = std::span<const std::string_view>;

// Baseline: the container runtimes' default capability set (Docker's, minus NET_RAW).
constexpr std::string_view kBaselineCapabilities[] = {
    "AUDIT_WRITE",      "CHOWN",   "DAC_OVERRIDE", "FOWNER",  "FSETID", "KILL",      "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID",       "SETPCAP", "SETUID", "SYS_CHROOT"};
// Baseline: sysctls that are namespaced and isolated from other pods (the list grows with
// Kubernetes releases: v1.27 ip_local_reserved_ports, v1.29 the tcp keepalive/fin ones, v1.32
// tcp_rmem/tcp_wmem).
constexpr std::string_view kSafeSysctls[] = {"kernel.shm_rmid_forced",
                                             "net.ipv4.ip_local_port_range",
                                             "net.ipv4.ip_unprivileged_port_start",
                                             "net.ipv4.tcp_syncookies",
                                             "net.ipv4.ping_group_range",
                                             "net.ipv4.ip_local_reserved_ports",
                                             "net.ipv4.tcp_keepalive_time",
                                             "net.ipv4.tcp_fin_timeout",
                                             "net.ipv4.tcp_keepalive_intvl",
                                             "net.ipv4.tcp_keepalive_probes",
                                             "net.ipv4.tcp_rmem",
                                             "net.ipv4.tcp_wmem"};
constexpr std::string_view kAllowedSeLinuxTypes[] = {"", "container_t", "container_init_t",
                                                     "container_kvm_t", "container_engine_t"};
constexpr std::string_view kConfinedProfileTypes[] = {"RuntimeDefault", "Localhost"};
// Restricted: the core volume sources and those whose storage an administrator set up.
constexpr std::string_view kRestrictedVolumeSources[] = {
    "configMap", "csi",   "downwardAPI", "emptyDir", "ephemeral", "image", "persistentVolumeClaim",
    "projected", "secret"};
constexpr std::string_view kAppArmorAnnotationPrefix =
    "container.apparmor.security.beta.kubernetes.io/";

bool Contains(Names names, std::string_view value) {
  return std::find(names.begin(), names.end(), value) != names.end();
}

std::string JoinNames(Names names) {
  std::string out;
  for (auto n : names) {
    if (n.empty()) continue;
    if (!out.empty()) out += ", ";
    out += n;
  }
  return out;
}

// "a.b" from "a" and "b", and "b" from "" and "b" (a bare PodSpec has no prefix).
std::string Path(std::string_view parent, std::string_view child) {
  if (parent.empty()) return std::string(child);
  return fmt::format("{}.{}", parent, child);
}

std::string Index(std::string_view parent, std::size_t i) {
  return fmt::format("{}[{}]", parent, i);
}

std::string Quoted(std::string_view text) { return Json(std::string(text)).dump(); }

// ---- typed access: absent and null mean "unset"; anything of the wrong type is an error -----

[[noreturn]] void WrongType(const std::string& path, const Json& value, std::string_view want) {
  throw ValidationError(path, value.dump(), fmt::format("must be {}", want));
}

const Json* Member(const Json& parent, std::string_view key) {
  if (!parent.is_object()) return nullptr;
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return nullptr;
  return &*it;
}

const Json* ObjectAt(const Json& parent, std::string_view key, const std::string& path) {
  const Json* v = Member(parent, key);
  if (v && !v->is_object()) WrongType(path, *v, "an object");
  return v;
}

const Json* ArrayAt(const Json& parent, std::string_view key, const std::string& path) {
  const Json* v = Member(parent, key);
  if (v && !v->is_array()) WrongType(path, *v, "a list");
  return v;
}

std::optional<bool> BoolAt(const Json& parent, std::string_view key, const std::string& path) {
  const Json* v = Member(parent, key);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) WrongType(path, *v, "true or false");
  return v->get<bool>();
}

std::optional<std::string> StringAt(const Json& parent, std::string_view key,
                                    const std::string& path) {
  const Json* v = Member(parent, key);
  if (!v) return std::nullopt;
  if (!v->is_string()) WrongType(path, *v, "a string");
  return v->get<std::string>();
}

std::optional<std::int64_t> IntAt(const Json& parent, std::string_view key,
                                  const std::string& path) {
  const Json* v = Member(parent, key);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) WrongType(path, *v, "an integer");
  return v->get<std::int64_t>();
}

// ---- the pod being checked ------------------------------------------------------------------

struct Container {
  const Json* json;
  std::string path;          // e.g. "spec.containers[0]"
  std::string name;          // for messages
  const Json* sc = nullptr;  // securityContext, nullptr when unset
  std::string sc_path;
};

struct Pod {
  const Json* spec = nullptr;
  std::string spec_path;  // "" for a bare PodSpec
  const Json* metadata = nullptr;
  std::string metadata_path;
  const Json* sc = nullptr;  // spec.securityContext
  std::string sc_path;
  std::vector<Container> containers;  // containers, initContainers, ephemeralContainers
  bool windows = false;
  bool user_namespace = false;  // spec.hostUsers: false
};

// Where the pod spec (and its metadata) sits in `object`.
Pod Locate(const Json& object) {
  if (!object.is_object()) WrongType("object", object, "a JSON object");
  Pod pod;
  auto at = [&](std::initializer_list<std::string_view> keys) -> const Json* {
    const Json* cur = &object;
    for (auto k : keys) {
      cur = Member(*cur, k);
      if (!cur || !cur->is_object()) return nullptr;
    }
    return cur;
  };
  std::string kind = StringAt(object, "kind", "kind").value_or("");
  const Json* spec_member = at({"spec"});
  if (kind == "Pod" || (kind.empty() && spec_member && spec_member->contains("containers"))) {
    pod.spec = spec_member;
    pod.spec_path = "spec";
    pod.metadata = at({"metadata"});
    pod.metadata_path = "metadata";
  } else if (const Json* t = at({"spec", "jobTemplate", "spec", "template", "spec"})) {
    pod.spec = t;
    pod.spec_path = "spec.jobTemplate.spec.template.spec";
    pod.metadata = at({"spec", "jobTemplate", "spec", "template", "metadata"});
    pod.metadata_path = "spec.jobTemplate.spec.template.metadata";
  } else if (const Json* t = at({"spec", "template", "spec"})) {
    pod.spec = t;
    pod.spec_path = "spec.template.spec";
    pod.metadata = at({"spec", "template", "metadata"});
    pod.metadata_path = "spec.template.metadata";
  } else if (const Json* t = at({"template", "spec"})) {  // PodTemplate
    pod.spec = t;
    pod.spec_path = "template.spec";
    pod.metadata = at({"template", "metadata"});
    pod.metadata_path = "template.metadata";
  } else if (object.contains("containers")) {  // a bare PodSpec
    pod.spec = &object;
  }
  if (!pod.spec) {
    throw ValidationError("kind", kind,
                          "carries no pod spec (expected a Pod, a PodTemplate, a workload with "
                          "spec.template.spec, a CronJob or a bare PodSpec)");
  }
  const Json& spec = *pod.spec;
  pod.sc_path = Path(pod.spec_path, "securityContext");
  pod.sc = ObjectAt(spec, "securityContext", pod.sc_path);
  for (std::string_view list : {"containers", "initContainers", "ephemeralContainers"}) {
    std::string list_path = Path(pod.spec_path, list);
    const Json* items = ArrayAt(spec, list, list_path);
    if (!items) continue;
    for (std::size_t i = 0; i < items->size(); ++i) {
      Container c;
      c.json = &(*items)[i];
      c.path = Index(list_path, i);
      if (!c.json->is_object()) WrongType(c.path, *c.json, "an object");
      c.name = StringAt(*c.json, "name", Path(c.path, "name")).value_or("");
      c.sc_path = Path(c.path, "securityContext");
      c.sc = ObjectAt(*c.json, "securityContext", c.sc_path);
      pod.containers.push_back(std::move(c));
    }
  }
  if (const Json* os = ObjectAt(spec, "os", Path(pod.spec_path, "os"))) {
    pod.windows = StringAt(*os, "name", Path(pod.spec_path, "os.name")).value_or("") == "windows";
  }
  pod.user_namespace = BoolAt(spec, "hostUsers", Path(pod.spec_path, "hostUsers")) == false;
  return pod;
}

std::string Describe(const Container& c) { return fmt::format("container {}", Quoted(c.name)); }

class Checker {
 public:
  explicit Checker(const Pod& pod) : pod_(pod) {}

  std::vector<PodSecurityViolation> Take() { return std::move(out_); }

  // ---- baseline ------------------------------------------------------------------------------

  void HostProcess() {
    constexpr std::string_view kCheck = "hostProcess";
    auto check = [&](const Json* sc, const std::string& sc_path, const std::string& who) {
      if (!sc) return;
      std::string path = Path(sc_path, "windowsOptions");
      const Json* wo = ObjectAt(*sc, "windowsOptions", path);
      if (!wo) return;
      path = Path(path, "hostProcess");
      if (BoolAt(*wo, "hostProcess", path) == true) {
        Add(kCheck, path,
            fmt::format("Windows HostProcess containers (privileged access to the node) are not "
                        "allowed: {} sets hostProcess to true",
                        who));
      }
    };
    check(pod_.sc, pod_.sc_path, "the pod");
    for (const auto& c : pod_.containers) check(c.sc, c.sc_path, Describe(c));
  }

  void HostNamespaces() {
    constexpr std::string_view kCheck = "hostNamespaces";
    const std::pair<std::string_view, std::string_view> fields[] = {
        {"hostNetwork", "network"}, {"hostPID", "process ID"}, {"hostIPC", "IPC"}};
    for (const auto& [field, what] : fields) {
      std::string path = Path(pod_.spec_path, field);
      if (BoolAt(*pod_.spec, field, path) == true) {
        Add(kCheck, path,
            fmt::format("sharing the host's {} namespace is not allowed: {} is true", what, field));
      }
    }
  }

  void Privileged() {
    for (const auto& c : pod_.containers) {
      if (!c.sc) continue;
      std::string path = Path(c.sc_path, "privileged");
      if (BoolAt(*c.sc, "privileged", path) == true) {
        Add("privileged", path,
            fmt::format("privileged containers are not allowed: {} sets privileged to true",
                        Describe(c)));
      }
    }
  }

  void CapabilitiesBaseline() {
    ForEachAddedCapability(
        [&](const Container& c, const std::string& path, const std::string& cap) {
          if (Contains(kBaselineCapabilities, cap)) return;
          Add("capabilities_baseline", path,
              fmt::format("capabilities beyond the default set ({}) must not be added: {} adds {}",
                          JoinNames(kBaselineCapabilities), Describe(c), cap));
        });
  }

  void HostPathVolumes() {
    ForEachVolume([&](const Json& v, const std::string& path, const std::string& name) {
      std::string host_path = Path(path, "hostPath");
      const Json* hp = ObjectAt(v, "hostPath", host_path);
      if (!hp) return;
      auto where = StringAt(*hp, "path", Path(host_path, "path")).value_or("");
      Add("hostPathVolumes", host_path,
          fmt::format("hostPath volumes are not allowed: volume {} mounts the node's {}",
                      Quoted(name), Quoted(where)));
    });
  }

  void HostPorts() {
    for (const auto& c : pod_.containers) {
      std::string ports_path = Path(c.path, "ports");
      const Json* ports = ArrayAt(*c.json, "ports", ports_path);
      if (!ports) continue;
      for (std::size_t i = 0; i < ports->size(); ++i) {
        std::string port_path = Index(ports_path, i);
        const Json& port = (*ports)[i];
        if (!port.is_object()) WrongType(port_path, port, "an object");
        std::string path = Path(port_path, "hostPort");
        auto host_port = IntAt(port, "hostPort", path);
        if (host_port && *host_port != 0) {
          Add("hostPorts", path,
              fmt::format("host ports are not allowed: {} binds host port {}", Describe(c),
                          *host_port));
        }
      }
    }
  }

  void HostProbesAndLifecycle() {
    constexpr std::string_view kCheck = "hostProbesAndLifecycle";
    auto check_handler = [&](const Container& c, const Json& handler, const std::string& path) {
      for (std::string_view action : {"httpGet", "tcpSocket"}) {
        std::string action_path = Path(path, action);
        const Json* a = ObjectAt(handler, action, action_path);
        if (!a) continue;
        std::string host_path = Path(action_path, "host");
        auto host = StringAt(*a, "host", host_path);
        if (host && !host->empty()) {
          Add(kCheck, host_path,
              fmt::format("probes and lifecycle hooks must not set host (the kubelet would "
                          "connect to that address from the node): {} sets {}",
                          Describe(c), Quoted(*host)));
        }
      }
    };
    for (const auto& c : pod_.containers) {
      for (std::string_view probe : {"livenessProbe", "readinessProbe", "startupProbe"}) {
        std::string path = Path(c.path, probe);
        if (const Json* p = ObjectAt(*c.json, probe, path)) check_handler(c, *p, path);
      }
      std::string lifecycle_path = Path(c.path, "lifecycle");
      const Json* lifecycle = ObjectAt(*c.json, "lifecycle", lifecycle_path);
      if (!lifecycle) continue;
      for (std::string_view hook : {"postStart", "preStop"}) {
        std::string path = Path(lifecycle_path, hook);
        if (const Json* h = ObjectAt(*lifecycle, hook, path)) check_handler(c, *h, path);
      }
    }
  }

  void AppArmor() {
    constexpr std::string_view kCheck = "appArmorProfile";
    auto check = [&](const Json* sc, const std::string& sc_path, const std::string& who) {
      if (!sc) return;
      std::string path = Path(sc_path, "appArmorProfile");
      const Json* profile = ObjectAt(*sc, "appArmorProfile", path);
      if (!profile) return;
      path = Path(path, "type");
      auto type = StringAt(*profile, "type", path);
      if (type && !Contains(kConfinedProfileTypes, *type)) {
        Add(kCheck, path,
            fmt::format("the AppArmor profile must not be overridden or disabled (type must be "
                        "unset, RuntimeDefault or Localhost): {} sets {}",
                        who, Quoted(*type)));
      }
    };
    check(pod_.sc, pod_.sc_path, "the pod");
    for (const auto& c : pod_.containers) check(c.sc, c.sc_path, Describe(c));

    if (!pod_.metadata) return;
    std::string annotations_path = Path(pod_.metadata_path, "annotations");
    const Json* annotations = ObjectAt(*pod_.metadata, "annotations", annotations_path);
    if (!annotations) return;
    for (const auto& [key, value] : annotations->items()) {
      if (key.rfind(kAppArmorAnnotationPrefix, 0) != 0) continue;
      std::string path = fmt::format("{}[{}]", annotations_path, Quoted(key));
      if (!value.is_string()) WrongType(path, value, "a string");
      const auto& profile = value.get_ref<const std::string&>();
      if (profile == "runtime/default" || profile.rfind("localhost/", 0) == 0) continue;
      Add(kCheck, path,
          fmt::format("the AppArmor profile must not be overridden or disabled (the annotation "
                      "must be runtime/default or localhost/<profile>): {} is {}",
                      key, Quoted(profile)));
    }
  }

  void SeLinux() {
    constexpr std::string_view kCheck = "seLinuxOptions";
    auto check = [&](const Json* sc, const std::string& sc_path, const std::string& who) {
      if (!sc) return;
      std::string path = Path(sc_path, "seLinuxOptions");
      const Json* options = ObjectAt(*sc, "seLinuxOptions", path);
      if (!options) return;
      std::string type_path = Path(path, "type");
      auto type = StringAt(*options, "type", type_path);
      if (type && !Contains(kAllowedSeLinuxTypes, *type)) {
        Add(kCheck, type_path,
            fmt::format("custom SELinux types are not allowed (type must be unset, {}): {} sets {}",
                        JoinNames(kAllowedSeLinuxTypes), who, Quoted(*type)));
      }
      for (std::string_view field : {"user", "role"}) {
        std::string field_path = Path(path, field);
        auto value = StringAt(*options, field, field_path);
        if (value && !value->empty()) {
          Add(kCheck, field_path,
              fmt::format("custom SELinux {}s are not allowed: {} sets {}", field, who,
                          Quoted(*value)));
        }
      }
    };
    check(pod_.sc, pod_.sc_path, "the pod");
    for (const auto& c : pod_.containers) check(c.sc, c.sc_path, Describe(c));
  }

  void ProcMount() {
    for (const auto& c : pod_.containers) {
      if (!c.sc) continue;
      std::string path = Path(c.sc_path, "procMount");
      auto mount = StringAt(*c.sc, "procMount", path);
      if (mount && *mount != "Default") {
        Add("procMount", path,
            fmt::format("the default /proc masks are required (procMount must be unset or "
                        "Default): {} sets {}",
                        Describe(c), Quoted(*mount)));
      }
    }
  }

  void SeccompBaseline() {
    auto check = [&](const Json* sc, const std::string& sc_path, const std::string& who) {
      auto [type, path] = SeccompType(sc, sc_path);
      if (type && !Contains(kConfinedProfileTypes, *type)) {
        Add("seccompProfile_baseline", path,
            fmt::format("seccomp must not be disabled (type must be unset, RuntimeDefault or "
                        "Localhost): {} sets {}",
                        who, Quoted(*type)));
      }
    };
    check(pod_.sc, pod_.sc_path, "the pod");
    for (const auto& c : pod_.containers) check(c.sc, c.sc_path, Describe(c));
  }

  void Sysctls() {
    if (!pod_.sc) return;
    std::string list_path = Path(pod_.sc_path, "sysctls");
    const Json* sysctls = ArrayAt(*pod_.sc, "sysctls", list_path);
    if (!sysctls) return;
    for (std::size_t i = 0; i < sysctls->size(); ++i) {
      std::string item_path = Index(list_path, i);
      const Json& item = (*sysctls)[i];
      if (!item.is_object()) WrongType(item_path, item, "an object");
      std::string path = Path(item_path, "name");
      auto name = StringAt(item, "name", path).value_or("");
      if (Contains(kSafeSysctls, name)) continue;
      Add("sysctls", path,
          fmt::format("only namespaced, isolated (\"safe\") sysctls may be set ({}): {} is not one",
                      JoinNames(kSafeSysctls), Quoted(name)));
    }
  }

  // ---- restricted ----------------------------------------------------------------------------

  void RestrictedVolumes() {
    ForEachVolume([&](const Json& v, const std::string& path, const std::string& name) {
      for (const auto& [key, value] : v.items()) {
        if (key == "name" || value.is_null() || Contains(kRestrictedVolumeSources, key)) continue;
        Add("restrictedVolumes", Path(path, key),
            fmt::format("only {} volumes are allowed: volume {} is a {} volume",
                        JoinNames(kRestrictedVolumeSources), Quoted(name), key));
      }
    });
  }

  void AllowPrivilegeEscalation() {
    if (pod_.windows) return;
    for (const auto& c : pod_.containers) {
      std::string path = Path(c.sc_path, "allowPrivilegeEscalation");
      std::optional<bool> allow =
          c.sc ? BoolAt(*c.sc, "allowPrivilegeEscalation", path) : std::nullopt;
      if (allow == false) continue;
      Add("allowPrivilegeEscalation", path,
          fmt::format("privilege escalation (e.g. through set-user-ID programs) must be "
                      "disallowed: {} must set allowPrivilegeEscalation to false (it is {})",
                      Describe(c), allow ? "true" : "unset"));
    }
  }

  void RunAsNonRoot() {
    if (pod_.user_namespace) return;
    constexpr std::string_view kCheck = "runAsNonRoot";
    std::string pod_path = Path(pod_.sc_path, "runAsNonRoot");
    std::optional<bool> pod_value =
        pod_.sc ? BoolAt(*pod_.sc, "runAsNonRoot", pod_path) : std::nullopt;
    if (pod_value == false) {
      Add(kCheck, pod_path,
          "containers must run as non-root users: the pod sets runAsNonRoot to false");
    }
    for (const auto& c : pod_.containers) {
      std::string path = Path(c.sc_path, "runAsNonRoot");
      std::optional<bool> value = c.sc ? BoolAt(*c.sc, "runAsNonRoot", path) : std::nullopt;
      if (value == true || (!value && pod_value == true)) continue;
      Add(kCheck, path,
          value ? fmt::format("containers must run as non-root users: {} sets runAsNonRoot to "
                              "false",
                              Describe(c))
                : fmt::format("containers must run as non-root users: set runAsNonRoot to true "
                              "in {} or in the pod's securityContext (both are unset)",
                              Describe(c)));
    }
  }

  void RunAsUser() {
    if (pod_.user_namespace) return;
    auto check = [&](const Json* sc, const std::string& sc_path, const std::string& who) {
      if (!sc) return;
      std::string path = Path(sc_path, "runAsUser");
      if (IntAt(*sc, "runAsUser", path) == 0) {
        Add("runAsUser", path,
            fmt::format("containers must not run as root: {} sets runAsUser to 0", who));
      }
    };
    check(pod_.sc, pod_.sc_path, "the pod");
    for (const auto& c : pod_.containers) check(c.sc, c.sc_path, Describe(c));
  }

  void SeccompRestricted() {
    if (pod_.windows) return;
    constexpr std::string_view kCheck = "seccompProfile_restricted";
    auto [pod_type, pod_path] = SeccompType(pod_.sc, pod_.sc_path);
    bool pod_confined = pod_type && Contains(kConfinedProfileTypes, *pod_type);
    if (pod_type && !pod_confined) {
      Add(kCheck, pod_path,
          fmt::format("a seccomp profile is required (type RuntimeDefault or Localhost): the pod "
                      "sets {}",
                      Quoted(*pod_type)));
    }
    for (const auto& c : pod_.containers) {
      auto [type, path] = SeccompType(c.sc, c.sc_path);
      if (type ? Contains(kConfinedProfileTypes, *type) : pod_confined) continue;
      Add(kCheck, path,
          type ? fmt::format("a seccomp profile is required (type RuntimeDefault or Localhost): "
                             "{} sets {}",
                             Describe(c), Quoted(*type))
               : fmt::format("a seccomp profile is required: set seccompProfile.type to "
                             "RuntimeDefault or Localhost in {} or in the pod's securityContext "
                             "(both are unset)",
                             Describe(c)));
    }
  }

  void CapabilitiesRestricted() {
    if (pod_.windows) return;
    constexpr std::string_view kCheck = "capabilities_restricted";
    for (const auto& c : pod_.containers) {
      std::string caps_path = Path(c.sc_path, "capabilities");
      const Json* caps = c.sc ? ObjectAt(*c.sc, "capabilities", caps_path) : nullptr;
      std::string drop_path = Path(caps_path, "drop");
      const Json* drop = caps ? ArrayAt(*caps, "drop", drop_path) : nullptr;
      bool drops_all = false;
      if (drop) {
        for (std::size_t i = 0; i < drop->size(); ++i) {
          const Json& cap = (*drop)[i];
          if (!cap.is_string()) WrongType(Index(drop_path, i), cap, "a string");
          drops_all = drops_all || cap.get_ref<const std::string&>() == "ALL";
        }
      }
      if (!drops_all) {
        Add(kCheck, drop_path,
            fmt::format("containers must drop ALL capabilities: {} does not drop ALL",
                        Describe(c)));
      }
    }
    ForEachAddedCapability(
        [&](const Container& c, const std::string& path, const std::string& cap) {
          if (cap == "NET_BIND_SERVICE") return;
          Add(kCheck, path,
              fmt::format("containers may add only the NET_BIND_SERVICE capability: {} adds {}",
                          Describe(c), cap));
        });
  }

 private:
  void Add(std::string_view check, std::string field, std::string message) {
    out_.push_back(PodSecurityViolation{std::string(check), std::move(field), std::move(message)});
  }

  // The seccompProfile.type of a securityContext and its path.
  std::pair<std::optional<std::string>, std::string> SeccompType(const Json* sc,
                                                                 const std::string& sc_path) {
    std::string path = Path(sc_path, "seccompProfile");
    std::string type_path = Path(path, "type");
    if (!sc) return {std::nullopt, type_path};
    const Json* profile = ObjectAt(*sc, "seccompProfile", path);
    if (!profile) return {std::nullopt, type_path};
    return {StringAt(*profile, "type", type_path), type_path};
  }

  template <typename F>
  void ForEachAddedCapability(F&& f) {
    for (const auto& c : pod_.containers) {
      if (!c.sc) continue;
      std::string caps_path = Path(c.sc_path, "capabilities");
      const Json* caps = ObjectAt(*c.sc, "capabilities", caps_path);
      if (!caps) continue;
      std::string add_path = Path(caps_path, "add");
      const Json* add = ArrayAt(*caps, "add", add_path);
      if (!add) continue;
      for (std::size_t i = 0; i < add->size(); ++i) {
        std::string path = Index(add_path, i);
        const Json& cap = (*add)[i];
        if (!cap.is_string()) WrongType(path, cap, "a string");
        f(c, path, cap.get<std::string>());
      }
    }
  }

  template <typename F>
  void ForEachVolume(F&& f) {
    std::string list_path = Path(pod_.spec_path, "volumes");
    const Json* volumes = ArrayAt(*pod_.spec, "volumes", list_path);
    if (!volumes) return;
    for (std::size_t i = 0; i < volumes->size(); ++i) {
      std::string path = Index(list_path, i);
      const Json& v = (*volumes)[i];
      if (!v.is_object()) WrongType(path, v, "an object");
      f(v, path, StringAt(v, "name", Path(path, "name")).value_or(""));
    }
  }

  const Pod& pod_;
  std::vector<PodSecurityViolation> out_;
};

}  // namespace

std::string_view ToString(PodSecurityLevel level) {
  switch (level) {
    case PodSecurityLevel::kPrivileged:
      return "privileged";
    case PodSecurityLevel::kBaseline:
      return "baseline";
    case PodSecurityLevel::kRestricted:
      return "restricted";
  }
  return "unknown";
}

PodSecurityLevel ParsePodSecurityLevel(std::string_view value) {
  for (auto level : {PodSecurityLevel::kPrivileged, PodSecurityLevel::kBaseline,
                     PodSecurityLevel::kRestricted}) {
    if (value == ToString(level)) return level;
  }
  throw ValidationError("level", std::string(value),
                        "is not a Pod Security Standards level (privileged, baseline or "
                        "restricted)");
}

Json PodSecurityViolation::ToJson() const {
  return {{"check", check}, {"field", field}, {"message", message}};
}

bool IsPodCarrier(const Json& object) {
  static const std::set<std::string, std::less<>> kKinds = {
      "Pod", "PodTemplate",           "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet",
      "Job", "ReplicationController", "CronJob"};
  if (!object.is_object()) return false;
  auto kind = object.find("kind");
  return kind != object.end() && kind->is_string() && kKinds.count(kind->get<std::string>()) > 0;
}

std::vector<PodSecurityViolation> CheckPodSecurity(const Json& object, PodSecurityLevel level) {
  Pod pod = Locate(object);
  Checker checker(pod);
  if (level == PodSecurityLevel::kPrivileged) return {};
  checker.HostProcess();
  checker.HostNamespaces();
  checker.Privileged();
  checker.CapabilitiesBaseline();
  checker.HostPathVolumes();
  checker.HostPorts();
  checker.HostProbesAndLifecycle();
  checker.AppArmor();
  checker.SeLinux();
  checker.ProcMount();
  checker.SeccompBaseline();
  checker.Sysctls();
  if (level == PodSecurityLevel::kRestricted) {
    checker.RestrictedVolumes();
    checker.AllowPrivilegeEscalation();
    checker.RunAsNonRoot();
    checker.RunAsUser();
    checker.SeccompRestricted();
    checker.CapabilitiesRestricted();
  }
  return checker.Take();
}

}  // namespace tfk8s
