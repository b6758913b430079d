#pragma once
// The one pod builder of the workloads: the only place that renders the shared pod vocabulary
// (tfk8s/pod.hpp) into Kubernetes JSON, and reads and writes it in the specs' own JSON. Pure.

#include <string>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/pod.hpp"

namespace tfk8s::internal {

// ---- rendering ------------------------------------------------------------------------------

/// A container's `resources` ({} when nothing is set): limits default to the requests, GPUs are
/// requested and limited equally.
Json ResourcesJson(const Resources& resources);
/// The required node affinity in the seeds' label vocabulary (the rule is on Placement), or
/// null when nothing is constrained.
Json AffinityJson(const Placement& placement, bool gpu);
/// The toleration of the GPU nodes' taint.
Json GpuToleration();
/// `env` entries with plain values, in order.
Json EnvJson(const std::vector<EnvVar>& env);
/// `argv` as the process must receive it, whatever the kubelet does to a container's command
/// and args: it expands `$(VAR)` references and turns `$$` into `$`, so every `$` is written
/// `$$`. With `expand_variable_references` (the user asked for Kubernetes' expansion) `argv`
/// is returned unchanged.
std::vector<std::string> KubeletArgv(std::vector<std::string> argv,
                                     bool expand_variable_references = false);
/// Sets `affinity` (when constrained) and, for GPU pods, the GPU toleration on a pod spec.
void AddPlacement(Json* pod_spec, const Placement& placement, bool gpu);

// ---- the specs' JSON ------------------------------------------------------------------------

/// {"cpu", "memory", "cpuLimit", "memoryLimit", "gpus"}.
Json ToSpecJson(const Resources& resources);
/// {"nodetype", "cputype", "gputype", "pool", "privateName"}.
Json ToSpecJson(const Placement& placement);
/// [{"name", "value"}, …].
Json ToSpecJson(const std::vector<EnvVar>& env);
/// The inverse of ToSpecJson (missing keys keep Resources' defaults); `path` prefixes field
/// names in errors, e.g. "worker.resources.".
Resources ResourcesFromSpecJson(const Json& j, const std::string& path);
/// The inverse of ToSpecJson. Also reads the boolean `tensorflowNodesOnly` of specs stored
/// before Placement was shared (false: any nodetype).
Placement PlacementFromSpecJson(const Json& j, const std::string& path);
/// The inverse of ToSpecJson; `path` is e.g. "env".
std::vector<EnvVar> EnvFromSpecJson(const Json& j, const std::string& path);

}  // namespace tfk8s::internal
