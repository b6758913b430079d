#pragma once
// Internal: the resource types and labels every workload uses, written once.

#include <string>

#include "tfk8s/client.hpp"
#include "tfk8s/quota.hpp"

namespace tfk8s::internal::kinds {

inline const ResourceType kNamespaces{"", "v1", "Namespace", "namespaces", false};
inline const ResourceType kNodes{"", "v1", "Node", "nodes", false};
inline const ResourceType kConfigMaps{"", "v1", "ConfigMap", "configmaps", true};
inline const ResourceType kSecrets{"", "v1", "Secret", "secrets", true};
inline const ResourceType kServices{"", "v1", "Service", "services", true};
inline const ResourceType kPods{"", "v1", "Pod", "pods", true};
inline const ResourceType kEvents{"", "v1", "Event", "events", true};
inline const ResourceType kPvcs{"", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true};
inline const ResourceType kResourceQuotas{"", "v1", "ResourceQuota", "resourcequotas", true};
inline const ResourceType kLimitRanges{"", "v1", "LimitRange", "limitranges", true};
inline const ResourceType kStatefulSets{"apps", "v1", "StatefulSet", "statefulsets", true};
inline const ResourceType kDeployments{"apps", "v1", "Deployment", "deployments", true};
inline const ResourceType kReplicaSets{"apps", "v1", "ReplicaSet", "replicasets", true};
inline const ResourceType kJobs{"batch", "v1", "Job", "jobs", true};
inline const ResourceType kPriorityClasses{"scheduling.k8s.io", "v1", "PriorityClass",
                                           "priorityclasses", false};
inline const ResourceType kStorageClasses{"storage.k8s.io", "v1", "StorageClass", "storageclasses",
                                          false};

/// `app.kubernetes.io/managed-by` (tfk8s::kManagedByLabel) as a std::string, for JSON keys.
inline const std::string kManagedBy{kManagedByLabel};
/// "app.kubernetes.io/managed-by=tfk8s": the selector of everything tfk8s manages.
inline const std::string kManagedBySelector = kManagedBy + "=" + std::string(kManagedByValue);

}  // namespace tfk8s::internal::kinds
