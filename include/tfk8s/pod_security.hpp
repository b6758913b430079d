#pragma once
/// @file
/// A client-side checker of the Kubernetes Pod Security Standards
/// (https://kubernetes.io/docs/concepts/security/pod-security-standards/), baseline and
/// restricted levels, current ("latest") definitions. It answers, before anything is sent,
/// what a namespace labelled `pod-security.kubernetes.io/enforce: <level>` would refuse, and
/// why, field by field.
///
/// Checks, by level (names modelled on Pod Security admission's check names):
///
/// baseline
/// - `hostProcess`: no Windows HostProcess (`securityContext.windowsOptions.hostProcess` of the
///   pod and of every container must be unset or false).
/// - `hostNamespaces`: `hostNetwork`, `hostPID`, `hostIPC` unset or false.
/// - `privileged`: no container with `securityContext.privileged: true`.
/// - `capabilities_baseline`: `capabilities.add` only from AUDIT_WRITE, CHOWN, DAC_OVERRIDE,
///   FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT.
/// - `hostPathVolumes`: no `hostPath` volume.
/// - `hostPorts`: every `ports[*].hostPort` unset or 0.
/// - `hostProbesAndLifecycle`: no `host` in the httpGet/tcpSocket of liveness, readiness and
///   startup probes or of postStart/preStop hooks (Kubernetes v1.34+).
/// - `appArmorProfile`: `appArmorProfile.type` (pod, containers) unset, RuntimeDefault or
///   Localhost; `container.apparmor.security.beta.kubernetes.io/*` annotations unset,
///   `runtime/default` or `localhost/...`.
/// - `seLinuxOptions`: `seLinuxOptions.type` (pod, containers) unset, "", container_t,
///   container_init_t, container_kvm_t or container_engine_t; `.user` and `.role` unset or "".
/// - `procMount`: every container's `securityContext.procMount` unset or Default.
/// - `seccompProfile_baseline`: `seccompProfile.type` (pod, containers) unset, RuntimeDefault
///   or Localhost (never Unconfined).
/// - `sysctls`: `securityContext.sysctls[*].name` only from the safe set (kernel.shm_rmid_forced,
///   net.ipv4.ip_local_port_range, net.ipv4.ip_unprivileged_port_start, net.ipv4.tcp_syncookies,
///   net.ipv4.ping_group_range, net.ipv4.ip_local_reserved_ports, net.ipv4.tcp_keepalive_time,
///   net.ipv4.tcp_fin_timeout, net.ipv4.tcp_keepalive_intvl, net.ipv4.tcp_keepalive_probes,
///   net.ipv4.tcp_rmem, net.ipv4.tcp_wmem).
///
/// restricted (everything of baseline, plus)
/// - `restrictedVolumes`: volume sources only configMap, csi, downwardAPI, emptyDir, ephemeral,
///   image, persistentVolumeClaim, projected, secret.
/// - `allowPrivilegeEscalation`: every container sets `allowPrivilegeEscalation: false`.
/// - `runAsNonRoot`: `runAsNonRoot: true` at pod level or on every container, and false nowhere.
/// - `runAsUser`: `runAsUser` (pod, containers) never 0.
/// - `seccompProfile_restricted`: `seccompProfile.type` RuntimeDefault or Localhost at pod level
///   or on every container, and no other value anywhere.
/// - `capabilities_restricted`: every container drops ALL and adds at most NET_BIND_SERVICE.
///
/// As in Kubernetes: containers means containers, initContainers and ephemeralContainers; pods
/// with `spec.os.name: windows` skip allowPrivilegeEscalation, seccompProfile_restricted and
/// capabilities_restricted; pods with `spec.hostUsers: false` (user namespaces) skip runAsNonRoot
/// and runAsUser. The optional "non-root groups" control is not checked (Kubernetes does not
/// enforce it either).

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tfk8s {

using Json = nlohmann::json;

/// A Pod Security Standards level, as in the namespace label
/// `pod-security.kubernetes.io/enforce`.
enum class PodSecurityLevel {
  kPrivileged,  ///< No restrictions.
  kBaseline,    ///< Prevents known privilege escalations.
  kRestricted,  ///< Baseline plus current pod hardening practice.
};

/// What a workload's pre-flight does when the target namespace's
/// `pod-security.kubernetes.io/enforce` label would refuse its pods (CheckNamespacePodSecurity
/// in quota.hpp).
enum class PodSecurityAdmission {
  kRefuse,  ///< Refuse the operation before anything is sent (the default).
  kWarn,    ///< Go on, and report each violation as a warning (the server may refuse the pods).
};

/// The pre-flight's Pod Security settings, part of every workload's create/apply options.
struct PodSecurityPreflight {
  PodSecurityAdmission admission = PodSecurityAdmission::kRefuse;
  /// Called, before anything is sent, with each warning: violations of the namespace's `warn`
  /// and `audit` levels, and of its `enforce` level under kWarn. Unset: warnings are dropped.
  std::function<void(const std::string&)> on_warning;
};

/// The label value of a level: "privileged", "baseline" or "restricted".
std::string_view ToString(PodSecurityLevel level);

/// The level named by a namespace label value ("privileged", "baseline" or "restricted", as
/// Kubernetes spells them). Throws ValidationError naming the value for anything else.
PodSecurityLevel ParsePodSecurityLevel(std::string_view value);

/// One way a pod breaks a level.
struct PodSecurityViolation {
  std::string check;  ///< The check's name, e.g. "allowPrivilegeEscalation" (see the file comment).
  std::string
      field;  ///< JSON path in the checked object, e.g.
              ///< "spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation".
  std::string message;  ///< The rule in words, and what the field holds.

  /// {"check": ..., "field": ..., "message": ...}.
  [[nodiscard]] Json ToJson() const;
  bool operator==(const PodSecurityViolation&) const = default;
};

/// True when `object`'s kind is one whose objects carry a pod: Pod, PodTemplate, Deployment,
/// StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job or CronJob (what Pod
/// Security admission checks, directly or through the pods the controller creates).
bool IsPodCarrier(const Json& object);

/// Every violation of `level` by the pod that `object` carries, in check order (empty when the
/// pod satisfies the level, and always for kPrivileged).
///
/// `object` may be a Pod (`spec`), a PodTemplate (`template.spec`), a workload with a pod
/// template — Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job
/// (`spec.template.spec`) or CronJob (`spec.jobTemplate.spec.template.spec`) — or a bare
/// PodSpec (an object with `containers`). Field paths start from the object given, so a bare
/// PodSpec's are "containers[0]...". AppArmor annotations are read from the pod's metadata
/// (none for a bare PodSpec).
///
/// Throws ValidationError when `object` carries no pod spec, or when a checked field has the
/// wrong JSON type (naming the field).
std::vector<PodSecurityViolation> CheckPodSecurity(const Json& object, PodSecurityLevel level);

}  // namespace tfk8s
