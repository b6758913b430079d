// Server object shapes (see server_shape.hpp). The table lists the fields the workload readers
// read (common.cpp, tfcluster.cpp, devinstance*.cpp, scheduledjob*.cpp, quota*.cpp,
// placement.cpp), with the types of the Kubernetes API (core/v1, apps/v1, batch/v1, v1beta1).

#include "workloads/server_shape.hpp"

#include <fmt/format.h>

#include <string>

#include "tfk8s/error.hpp"

namespace tfk8s::internal {

namespace {

enum class Type { kObject, kArray, kString, kNumber, kBool };

std::string_view Name(Type t) {
  switch (t) {
    case Type::kObject:
      return "an object";
    case Type::kArray:
      return "an array";
    case Type::kString:
      return "a string";
    case Type::kNumber:
      return "a number";
    case Type::kBool:
      return "a boolean";
  }
  return "?";
}

bool Is(const Json& v, Type t) {
  switch (t) {
    case Type::kObject:
      return v.is_object();
    case Type::kArray:
      return v.is_array();
    case Type::kString:
      return v.is_string();
    case Type::kNumber:
      return v.is_number();
    case Type::kBool:
      return v.is_boolean();
  }
  return false;
}

struct Rule {
  const char* kind;  // "*": every kind
  const char* path;  // dot-separated; "*" = every element of an array or value of an object
  Type type;
};

// Parents before children: a parent of the wrong type is reported as itself.
constexpr Rule kRules[] = {
    {"*", "metadata", Type::kObject},
    {"*", "metadata.name", Type::kString},
    {"*", "metadata.namespace", Type::kString},
    {"*", "metadata.uid", Type::kString},
    {"*", "metadata.resourceVersion", Type::kString},
    {"*", "metadata.creationTimestamp", Type::kString},
    {"*", "metadata.deletionTimestamp", Type::kString},
    {"*", "metadata.labels", Type::kObject},
    {"*", "metadata.labels.*", Type::kString},
    {"*", "metadata.annotations", Type::kObject},
    {"*", "metadata.annotations.*", Type::kString},
    {"*", "metadata.ownerReferences", Type::kArray},
    {"*", "metadata.ownerReferences.*", Type::kObject},
    {"*", "metadata.ownerReferences.*.kind", Type::kString},
    {"*", "metadata.ownerReferences.*.name", Type::kString},
    {"*", "metadata.ownerReferences.*.uid", Type::kString},
    {"*", "spec", Type::kObject},
    {"*", "status", Type::kObject},
    {"*", "status.conditions", Type::kArray},
    {"*", "status.conditions.*", Type::kObject},
    {"*", "status.conditions.*.type", Type::kString},
    {"*", "status.conditions.*.status", Type::kString},
    {"*", "status.conditions.*.reason", Type::kString},
    {"*", "status.conditions.*.message", Type::kString},
    // Pods (and the pod templates of their controllers, below).
    {"Pod", "spec.nodeName", Type::kString},
    {"Pod", "spec.containers", Type::kArray},
    {"Pod", "spec.containers.*", Type::kObject},
    {"Pod", "spec.containers.*.name", Type::kString},
    {"Pod", "spec.containers.*.image", Type::kString},
    {"Pod", "spec.containers.*.resources", Type::kObject},
    {"Pod", "spec.containers.*.resources.requests", Type::kObject},
    {"Pod", "spec.containers.*.resources.requests.*", Type::kString},
    {"Pod", "spec.containers.*.resources.limits", Type::kObject},
    {"Pod", "spec.containers.*.resources.limits.*", Type::kString},
    {"Pod", "spec.initContainers", Type::kArray},
    {"Pod", "spec.initContainers.*", Type::kObject},
    {"Pod", "spec.initContainers.*.resources", Type::kObject},
    {"Pod", "spec.initContainers.*.resources.requests", Type::kObject},
    {"Pod", "spec.initContainers.*.resources.requests.*", Type::kString},
    {"Pod", "spec.initContainers.*.resources.limits", Type::kObject},
    {"Pod", "spec.initContainers.*.resources.limits.*", Type::kString},
    {"Pod", "status.phase", Type::kString},
    {"Pod", "status.reason", Type::kString},
    {"Pod", "status.message", Type::kString},
    {"Pod", "status.podIP", Type::kString},
    {"Pod", "status.hostIP", Type::kString},
    {"Pod", "status.startTime", Type::kString},
    {"Pod", "status.containerStatuses", Type::kArray},
    {"Pod", "status.containerStatuses.*", Type::kObject},
    {"Pod", "status.containerStatuses.*.name", Type::kString},
    {"Pod", "status.containerStatuses.*.ready", Type::kBool},
    {"Pod", "status.containerStatuses.*.restartCount", Type::kNumber},
    {"Pod", "status.containerStatuses.*.state", Type::kObject},
    {"Pod", "status.containerStatuses.*.state.*", Type::kObject},
    {"Pod", "status.containerStatuses.*.state.*.reason", Type::kString},
    {"Pod", "status.containerStatuses.*.state.*.message", Type::kString},
    {"Pod", "status.containerStatuses.*.state.*.exitCode", Type::kNumber},
    {"Pod", "status.containerStatuses.*.state.*.startedAt", Type::kString},
    {"Pod", "status.containerStatuses.*.state.*.finishedAt", Type::kString},
    {"Pod", "status.containerStatuses.*.lastState", Type::kObject},
    {"Pod", "status.containerStatuses.*.lastState.*", Type::kObject},
    {"Pod", "status.containerStatuses.*.lastState.*.reason", Type::kString},
    {"Pod", "status.containerStatuses.*.lastState.*.exitCode", Type::kNumber},
    {"Pod", "status.initContainerStatuses", Type::kArray},
    {"Pod", "status.initContainerStatuses.*", Type::kObject},
    {"Pod", "status.initContainerStatuses.*.state", Type::kObject},
    {"Pod", "status.initContainerStatuses.*.state.*", Type::kObject},
    {"Pod", "status.initContainerStatuses.*.state.*.reason", Type::kString},
    {"Pod", "status.initContainerStatuses.*.state.*.exitCode", Type::kNumber},
    // Jobs.
    {"Job", "spec.parallelism", Type::kNumber},
    {"Job", "spec.completions", Type::kNumber},
    {"Job", "spec.backoffLimit", Type::kNumber},
    {"Job", "spec.activeDeadlineSeconds", Type::kNumber},
    {"Job", "status.active", Type::kNumber},
    {"Job", "status.succeeded", Type::kNumber},
    {"Job", "status.failed", Type::kNumber},
    {"Job", "status.startTime", Type::kString},
    {"Job", "status.completionTime", Type::kString},
    // StatefulSets (TFCluster's StatefulSet topology, DevInstance).
    {"StatefulSet", "spec.replicas", Type::kNumber},
    {"StatefulSet", "status.replicas", Type::kNumber},
    {"StatefulSet", "status.readyReplicas", Type::kNumber},
    {"StatefulSet", "status.currentReplicas", Type::kNumber},
    // The pod templates of controllers (their pod fields are checked like a Pod's, below).
    {"StatefulSet", "spec.template", Type::kObject},
    {"StatefulSet", "spec.template.metadata", Type::kObject},
    {"StatefulSet", "spec.template.spec", Type::kObject},
    {"Job", "spec.template", Type::kObject},
    {"Job", "spec.template.metadata", Type::kObject},
    {"Job", "spec.template.spec", Type::kObject},
    {"Deployment", "spec.template", Type::kObject},
    {"Deployment", "spec.template.spec", Type::kObject},
    {"ReplicaSet", "spec.template", Type::kObject},
    {"ReplicaSet", "spec.template.spec", Type::kObject},
    // CronJobs (ScheduledJob).
    {"CronJob", "spec.schedule", Type::kString},
    {"CronJob", "spec.suspend", Type::kBool},
    {"CronJob", "status.active", Type::kArray},
    {"CronJob", "status.active.*", Type::kObject},
    {"CronJob", "status.active.*.name", Type::kString},
    {"CronJob", "status.lastScheduleTime", Type::kString},
    // Services (access, node ports).
    {"Service", "spec.type", Type::kString},
    {"Service", "spec.clusterIP", Type::kString},
    {"Service", "spec.ports", Type::kArray},
    {"Service", "spec.ports.*", Type::kObject},
    {"Service", "spec.ports.*.name", Type::kString},
    {"Service", "spec.ports.*.port", Type::kNumber},
    {"Service", "spec.ports.*.nodePort", Type::kNumber},
    // Nodes (placement, inventory).
    {"Node", "spec.unschedulable", Type::kBool},
    {"Node", "spec.taints", Type::kArray},
    {"Node", "spec.taints.*", Type::kObject},
    {"Node", "spec.taints.*.key", Type::kString},
    {"Node", "spec.taints.*.value", Type::kString},
    {"Node", "spec.taints.*.effect", Type::kString},
    {"Node", "status.allocatable", Type::kObject},
    {"Node", "status.allocatable.*", Type::kString},
    {"Node", "status.capacity", Type::kObject},
    {"Node", "status.capacity.*", Type::kString},
    // Events (failure reasons, quota refusals).
    {"Event", "involvedObject", Type::kObject},
    {"Event", "involvedObject.kind", Type::kString},
    {"Event", "involvedObject.name", Type::kString},
    {"Event", "involvedObject.uid", Type::kString},
    {"Event", "reason", Type::kString},
    {"Event", "message", Type::kString},
    {"Event", "type", Type::kString},
    {"Event", "count", Type::kNumber},
    {"Event", "lastTimestamp", Type::kString},
    {"Event", "firstTimestamp", Type::kString},
    // Quotas and limit ranges (pre-flight, usage).
    {"ResourceQuota", "spec.hard", Type::kObject},
    {"ResourceQuota", "spec.hard.*", Type::kString},
    {"ResourceQuota", "status.hard", Type::kObject},
    {"ResourceQuota", "status.hard.*", Type::kString},
    {"ResourceQuota", "status.used", Type::kObject},
    {"ResourceQuota", "status.used.*", Type::kString},
    {"LimitRange", "spec.limits", Type::kArray},
    {"LimitRange", "spec.limits.*", Type::kObject},
    {"LimitRange", "spec.limits.*.type", Type::kString},
    // Claims (mount grants, home volumes), ConfigMaps (a TFCluster's root, tcp-services) and
    // Secrets (credentials).
    {"PersistentVolumeClaim", "spec.accessModes", Type::kArray},
    {"PersistentVolumeClaim", "spec.accessModes.*", Type::kString},
    {"PersistentVolumeClaim", "status.phase", Type::kString},
    {"ConfigMap", "data", Type::kObject},
    {"ConfigMap", "data.*", Type::kString},
    {"Secret", "data", Type::kObject},
    {"Secret", "data.*", Type::kString},
};

bool Applies(std::string_view rule_kind, std::string_view kind) {
  return rule_kind == "*" || rule_kind == kind;
}

struct Walk {
  std::string_view context;
  std::string_view kind;
  const Json& object;

  [[noreturn]] void Wrong(const std::string& path, const Json& value, Type want) const {
    std::string name;
    if (auto m = object.find("metadata"); m != object.end() && m->is_object()) {
      auto ns = m->find("namespace");
      auto n = m->find("name");
      if (ns != m->end() && ns->is_string()) name = ns->get<std::string>() + "/";
      if (n != m->end() && n->is_string()) name += n->get<std::string>();
    }
    throw DecodeError(
        fmt::format("{}: the server's {}{}{} has field \"{}\" of type {}, not {}", context, kind,
                    name.empty() ? "" : " ", name, path, value.type_name(), Name(want)),
        path);
  }

  // Follows `rest` (dot-separated) from `value`, found at `path`.
  void Check(const Json& value, std::string_view rest, const std::string& path, Type want) const {
    if (value.is_null()) return;
    if (rest.empty()) {
      if (!Is(value, want)) Wrong(path, value, want);
      return;
    }
    auto dot = rest.find('.');
    std::string_view segment = rest.substr(0, dot);
    std::string_view tail =
        dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
    if (segment == "*") {
      if (value.is_array()) {
        for (std::size_t i = 0; i < value.size(); ++i) {
          Check(value[i], tail, fmt::format("{}[{}]", path, i), want);
        }
      } else if (value.is_object()) {
        for (const auto& [key, v] : value.items()) {
          Check(v, tail, path.empty() ? key : fmt::format("{}.{}", path, key), want);
        }
      }
      return;  // a parent of another type is its own rule's to report
    }
    if (!value.is_object()) return;
    auto it = value.find(segment);
    if (it == value.end()) return;
    Check(*it, tail, path.empty() ? std::string(segment) : path + "." + std::string(segment), want);
  }
};

}  // namespace

void CheckServerObject(const Json& object, std::string_view kind, std::string_view context) {
  std::string own;
  if (kind.empty() && object.is_object()) {
    auto k = object.find("kind");
    if (k != object.end() && k->is_string()) own = k->get<std::string>();
    kind = own;
  }
  Walk walk{context, kind, object};
  if (!object.is_object()) {
    throw DecodeError(fmt::format("{}: the server's {} is {}, not an object", context,
                                  kind.empty() ? "object" : kind, object.type_name()),
                      "");
  }
  for (const Rule& rule : kRules) {
    if (Applies(rule.kind, kind)) walk.Check(object, rule.path, "", rule.type);
  }
  // A controller's pod template is read like a pod (requests for the quota pre-flight).
  if (kind == "Job" || kind == "StatefulSet" || kind == "Deployment" || kind == "ReplicaSet") {
    const Json* tmpl = &object;
    for (const char* key : {"spec", "template"}) {
      auto it = tmpl->find(key);
      if (it == tmpl->end() || !it->is_object()) return;
      tmpl = &*it;
    }
    Walk pod{context, kind, object};
    for (const Rule& rule : kRules) {
      if (std::string_view(rule.kind) != "Pod" ||
          std::string_view(rule.path).rfind("spec.", 0) != 0) {
        continue;
      }
      pod.Check(*tmpl, rule.path, "spec.template", rule.type);
    }
  }
}

const std::vector<Json>& CheckServerObjects(const std::vector<Json>& objects, std::string_view kind,
                                            std::string_view context) {
  for (const auto& o : objects) CheckServerObject(o, kind, context);
  return objects;
}

}  // namespace tfk8s::internal
