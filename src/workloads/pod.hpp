#pragma once
// The one pod builder of the workloads: the only place that renders the shared pod vocabulary
// (tfk8s/pod.hpp) into Kubernetes JSON, and reads and writes it in the specs' own JSON. Pure.

#include <map>
#include <string>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/pod.hpp"

namespace tfk8s::internal {

// ---- rendering ------------------------------------------------------------------------------

/// A container's `resources` ({} when nothing is set): limits default to the requests, GPUs are
/// requested and limited equally.
Json ResourcesJson(const Resources& resources);
/// A TFCluster's or ScheduledJob's optional `owner` (the label tfk8s.io/owner on its objects):
/// "" or a DNS-1123 label, and not also set through `labels` (ValidationError naming the field).
void ValidateOwner(const std::string& owner, const std::map<std::string, std::string>& labels);
/// The required node affinity in the seeds' label vocabulary (the rule is on Placement), or
/// null when nothing is constrained.
Json AffinityJson(const Placement& placement, bool gpu);
/// The toleration of the GPU nodes' taint.
Json GpuToleration();
/// `env` entries with plain values, in order.
Json EnvJson(const std::vector<EnvVar>& env);

/// The claims of `mounts` as a pod's volumes and a container's volumeMounts, the one naming
/// rule of every workload: each distinct claim is one volume `claim-N` (N by first mention),
/// attached read-only when every mount of it is; each mount is one volumeMount of its volume
/// (readOnly, subPath when set).
struct ClaimVolumes {
  Json volumes = Json::array();
  Json mounts = Json::array();
};
ClaimVolumes ClaimVolumesJson(const std::vector<VolumeMount>& mounts);
/// `argv` as the process must receive it, whatever the kubelet does to a container's command
/// and args: it expands `$(VAR)` references and turns `$$` into `$`, so every `$` is written
/// `$$`. With `expand_variable_references` (the user asked for Kubernetes' expansion) `argv`
/// is returned unchanged.
std::vector<std::string> KubeletArgv(std::vector<std::string> argv,
                                     bool expand_variable_references = false);
/// Sets `affinity` (when constrained) and, for GPU pods, the GPU toleration on a pod spec.
void AddPlacement(Json* pod_spec, const Placement& placement, bool gpu);
/// How strongly AddHostAntiAffinity keeps pods apart.
enum class AntiAffinity { kPreferred, kRequired };
/// Adds to a pod spec's `affinity` (next to its node affinity, if any) a pod anti-affinity over
/// `kubernetes.io/hostname` against the pods whose labels include `match_labels`: preferred
/// (weight 100) or required during scheduling, ignored during execution.
void AddHostAntiAffinity(Json* pod_spec, const Json& match_labels, AntiAffinity strength);
/// Sets the pod-level options on a pod spec: `serviceAccountName`,
/// `automountServiceAccountToken`, `priorityClassName`, `imagePullSecrets` and the pod's
/// `securityContext` (user, group, non-root, fsGroup, seccomp), each only when set.
void AddPodOptions(Json* pod_spec, const PodOptions& options);
/// Sets the container-level options on a container: `imagePullPolicy` and its
/// `securityContext` (privilege escalation, capabilities, read-only root), each only when set.
void AddContainerOptions(Json* container, const PodOptions& options);

/// `options` with every security field left unset filled from RestrictedSecurityContext() when
/// `level` is restricted; unchanged otherwise.
PodOptions WithSecurityDefaults(PodOptions options, PodSecurityLevel level);
/// Throws ValidationError (field `podSecurity`) naming the object, the field and the rule when
/// the pod `object` carries breaks `level`; objects that carry no pod are skipped.
void RequirePodSecurity(const Json& object, PodSecurityLevel level);
/// The JSON `podSecurity` of a spec (default restricted), as ParsePodSecurityLevel reads it but
/// naming the field.
PodSecurityLevel PodSecurityFromSpecJson(const Json& spec, const std::string& path);

// ---- the specs' JSON ------------------------------------------------------------------------

/// {"cpu", "memory", "cpuLimit", "memoryLimit", "gpus"}.
Json ToSpecJson(const Resources& resources);
/// {"nodetype", "cputype", "gputype", "pool", "privateName"}.
Json ToSpecJson(const Placement& placement);
/// [{"name", "value"}, …].
Json ToSpecJson(const std::vector<EnvVar>& env);
/// Writes the options into a spec's JSON as top-level keys (`imagePullPolicy`,
/// `imagePullSecrets`, `serviceAccount`, `automountServiceAccountToken`, `priorityClassName`,
/// `securityContext`), each only when set, so specs without them read back unchanged.
void AddToSpecJson(Json* spec, const PodOptions& options);
/// The inverse of AddToSpecJson: keys missing from `spec` keep `defaults`' values; `path`
/// prefixes field names in errors.
PodOptions PodOptionsFromSpecJson(const Json& spec, const std::string& path,
                                  PodOptions defaults = {});
/// The inverse of ToSpecJson (missing keys keep Resources' defaults); `path` prefixes field
/// names in errors, e.g. "worker.resources.".
Resources ResourcesFromSpecJson(const Json& j, const std::string& path);
/// The inverse of ToSpecJson. Also reads the boolean `tensorflowNodesOnly` of specs stored
/// before Placement was shared (false: any nodetype).
Placement PlacementFromSpecJson(const Json& j, const std::string& path);
/// The inverse of ToSpecJson; `path` is e.g. "env".
std::vector<EnvVar> EnvFromSpecJson(const Json& j, const std::string& path);

}  // namespace tfk8s::internal
