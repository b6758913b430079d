#pragma once
// Internal: how rendered objects turn into pods, and what one pod asks of a quota and of a node.
// Shared by the quota pre-flight (quota.cpp) and the placement checks (placement.cpp).

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/quota.hpp"

namespace tfk8s::internal {

/// What a per-storage-class quota key holds between the class and the resource
/// ("gold.storageclass.storage.k8s.io/requests.storage").
inline constexpr std::string_view kStorageClassInfix = ".storageclass.storage.k8s.io/";

/// A queue's namespaces: its own (shared by the team), then each member's (personal).
std::vector<std::string> TeamNamespaces(const QuotaSpec& spec);

/// The pods one object would run at once, from one template.
struct PodGroup {
  std::string source;       ///< "StatefulSet/tf-worker" (for messages).
  Json pod;                 ///< {metadata, spec} of one pod, after API defaulting of resources.
  std::int64_t count = 0;   ///< How many such pods run at the same time.
  bool terminated = false;  ///< A Pod object already Succeeded/Failed (no compute usage).
};

/// One object's contribution to quota usage (pods included).
struct UsageItem {
  std::string source;         ///< "Deployment/web".
  ResourceList usage;         ///< Total for the object (all its pods / claims).
  bool is_pod_group = false;  ///< Usage of pods (subject to scoped quotas).
  PodGroup pods;              ///< Set when is_pod_group.
};

/// Reads a JSON integer field (absent/null -> fallback), with a typed error naming `field`.
std::int64_t IntField(const Json& object, std::string_view key, std::int64_t fallback,
                      std::string_view field);

/// "Kind/name" of an object.
std::string SourceOf(const Json& object);

/// The pod groups of `objects` (pods, controllers, jobs, cron jobs); other kinds give none.
std::vector<PodGroup> PodGroupsOf(const std::vector<Json>& objects);

/// A {metadata, spec} pod from a PodTemplateSpec, a PodSpec or a Pod.
Json NormalizePodTemplate(const Json& pod_template, std::string_view field);

/// Applies the apiserver's defaulting (container requests default to limits) and then the
/// LimitRanger's container defaults to a pod's spec (in place).
void DefaultPodResources(Json& pod_spec, const std::vector<Json>& limit_ranges);

/// Quota usage of one running pod (PodUsageFunc): pods, count/pods, cpu/memory/
/// ephemeral-storage requests (short and requests.* forms) and limits, hugepages, extended
/// resources as requests.<name>. `terminated` pods only count as count/pods.
ResourceList PodQuotaUsage(const Json& pod_spec, bool terminated);

/// Quota usage of every object (pods × count, services, claims, object counts).
std::vector<UsageItem> UsageItemsOf(const std::vector<Json>& objects, const DemandContext& context);

/// Quota usage of `replicas` pods from a raw template (PodTemplateSpec, PodSpec or Pod).
UsageItem PodTemplateItem(const Json& pod_template, std::int64_t replicas,
                          const DemandContext& context);

/// What the scheduler reserves on a node for one pod, keyed by node resource names ("cpu",
/// "memory", "nvidia.com/gpu", …): max(sum of app containers, each init container) + overhead.
ResourceList PodSchedulingRequests(const Json& pod_spec);

/// Resource list of a container's resources.requests/limits (`which`), parsed.
ResourceList ContainerResources(const Json& container, std::string_view which,
                                std::string_view field);

/// True for extended resources (a domain-prefixed name outside kubernetes.io/, not requests.*),
/// e.g. "nvidia.com/gpu".
bool IsExtendedResourceName(std::string_view name);

/// {resource: quantity string}.
Json ResourceListJson(const ResourceList& list);

}  // namespace tfk8s::internal
