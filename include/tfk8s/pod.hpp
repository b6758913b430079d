#pragma once
/// @file
/// The pod vocabulary every workload spec shares: compute resources, node placement in the
/// seeds' label vocabulary, environment variables and volume mounts. TFCluster, DevInstance and
/// ScheduledJob embed these types, so a rule about pods is written (and checked) once; see
/// docs/architecture.md ("The workload kit").

#include <string>
#include <string_view>
#include <vector>

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

/// The GPU resource name and the taint key of GPU nodes.
inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";

}  // namespace tfk8s
