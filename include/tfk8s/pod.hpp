#pragma once
/// @file
/// The pod vocabulary every workload spec shares: compute resources, node placement in the
/// seeds' label vocabulary, environment variables, volume mounts, and the pod options (image
/// pull policy and secrets, service account, security context). TFCluster, DevInstance and
/// ScheduledJob embed these types, so a rule about pods is written (and checked) once; see
/// docs/architecture.md ("The workload kit").

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/pod_security.hpp"

namespace tfk8s {

/// Compute resources of one container. Empty strings mean "not set"; a limit left empty equals
/// its request. GPUs (`nvidia.com/gpu`) are requested and limited equally, since extended
/// resources cannot be over-committed, and a pod with GPUs tolerates the GPU nodes' taint.
struct Resources {
  std::string cpu;           ///< Request, e.g. "2" or "500m".
  std::string memory;        ///< Request, e.g. "8Gi".
  std::string cpu_limit;     ///< Limit; "" = the request. When set, at least the request.
  std::string memory_limit;  ///< Limit; "" = the request. When set, at least the request.
  int gpus = 0;              ///< nvidia.com/gpu (requests = limits).
  bool operator==(const Resources&) const = default;
};

/// Where pods may run, in the seeds' node-label vocabulary: a required node affinity. One rule
/// for every workload: `nodetype` when set; then `gputype` for a pod with GPUs, `cputype` for a
/// pod without (a GPU node's CPU model is not a CPU pod's concern, and the reverse); `pooltype`
/// when set; `privatename` with the unshared pool. Empty strings mean "no constraint".
struct Placement {
  std::string nodetype = "tensorflow";  ///< Required `nodetype` label; "" = any node.
  std::string cputype;                  ///< Required `cputype` of pods without GPUs.
  std::string gputype;                  ///< Required `gputype` of pods with GPUs.
  std::string pool = "shared";          ///< `pooltype`: "shared", "unshared" or "" (any).
  std::string private_name;             ///< `privatename`: required with pool "unshared".
  bool operator==(const Placement&) const = default;
};

/// One environment variable. The value is plain text in the pod spec: never put a secret here.
struct EnvVar {
  std::string name;   ///< `[-._a-zA-Z][-._a-zA-Z0-9]*` (Kubernetes' rule).
  std::string value;  ///< Passed as is.
  bool operator==(const EnvVar&) const = default;
};

/// A PersistentVolumeClaim mounted into a workload's container.
struct VolumeMount {
  std::string claim;       ///< The PVC, in the workload's namespace.
  std::string mount_path;  ///< Absolute path in the container.
  bool read_only = false;  ///< Mount read-only.
  std::string sub_path;    ///< Mount only this folder of the volume ("" = all of it).
  bool operator==(const VolumeMount&) const = default;
};

/// The security settings of a workload's pods, as Kubernetes' `securityContext` (the fields the
/// Pod Security Standards check). Unset fields are left to the image and the cluster. User,
/// group, non-root, fsGroup and seccomp are rendered on the pod; privilege escalation,
/// capabilities and the read-only root file system on each container.
struct SecurityContext {
  std::optional<std::int64_t> run_as_user;         ///< Numeric user of the processes.
  std::optional<std::int64_t> run_as_group;        ///< Numeric primary group.
  std::optional<bool> run_as_non_root;             ///< The kubelet refuses to start root processes.
  std::optional<std::int64_t> fs_group;            ///< Group owning mounted volumes.
  std::optional<bool> allow_privilege_escalation;  ///< setuid binaries may gain privileges.
  std::optional<bool> read_only_root_filesystem;   ///< The image's file system is read-only.
  std::vector<std::string> drop_capabilities;      ///< e.g. {"ALL"}.
  std::vector<std::string> add_capabilities;       ///< e.g. {"NET_BIND_SERVICE"}.
  /// "" (unset), "RuntimeDefault" or "Unconfined".
  std::string seccomp_profile;
  bool operator==(const SecurityContext&) const = default;
};

/// Settings of every pod a workload creates that are not about one container's program.
struct PodOptions {
  /// "" (Kubernetes' default: Always for `:latest`, else IfNotPresent), "Always",
  /// "IfNotPresent" or "Never" (only images already on the node).
  std::string image_pull_policy;
  std::vector<std::string> image_pull_secrets;  ///< Secrets of private registries.
  std::string service_account;                  ///< "" = the namespace's default account.
  /// Mount the service account's API token; unset = Kubernetes' default (mounted).
  std::optional<bool> automount_service_account_token;
  /// The PriorityClass of the pods ("" = none: the cluster's default priority). Pods of a class
  /// with a higher value may preempt (evict) pods of lower priority to be scheduled; the
  /// pre-flight refuses a class the server does not have and notes what would be preempted.
  /// A DNS-1123 subdomain not starting with "system-" (Kubernetes' own classes).
  std::string priority_class;
  SecurityContext security_context;  ///< Applied to every container of the workload's pods.
  bool operator==(const PodOptions&) const = default;
};

/// The security context tfk8s fills in, field by field where the spec leaves one unset, for
/// pods whose workload asks for Pod Security "restricted" (TFCluster replicas and TensorBoard,
/// ScheduledJob runs, by default): user and group 1000, runAsNonRoot, fsGroup 1000 (mounted
/// volumes that support it become writable by the group), no privilege escalation, every
/// capability dropped, the runtime's default seccomp profile.
SecurityContext RestrictedSecurityContext();

/// The GPU resource name and the taint key of GPU nodes.
inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";

}  // namespace tfk8s
