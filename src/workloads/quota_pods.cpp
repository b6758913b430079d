// How rendered objects turn into pods and claims, and what those ask of a quota and of a node.
// The rules follow Kubernetes v1.20: pkg/quota/v1/evaluator/core (pods.go, services.go,
// persistent_volume_claims.go), SetDefaults_Pod, the LimitRanger admission plugin and the
// scheduler's computePodResourceRequest.

#include "workloads/quota_pods.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <utility>

#include "tfk8s/error.hpp"
#include "tfk8s/validation.hpp"
#include "workloads/common.hpp"

namespace tfk8s {

void AddTo(ResourceList& a, const ResourceList& b) {
  for (const auto& [name, amount] : b) a[name] += amount;
}

std::string ToString(const ResourceList& list) {
  std::string out;
  for (const auto& [name, amount] : list) {
    if (!out.empty()) out += ", ";
    out += name + "=" + amount.ToString();
  }
  return out;
}

namespace {

Quantity ParseQuantityValue(const Json& value, const std::string& field) {
  if (value.is_string()) {
    const auto& text = value.get_ref<const std::string&>();
    Quantity q;
    std::string why;
    if (!Quantity::TryParse(text, &q, &why)) throw ValidationError(field, text, why);
    return q;
  }
  if (value.is_number_integer()) return Quantity::FromInt(value.get<std::int64_t>());
  if (value.is_number_unsigned()) {
    // Larger than int64: go through the text form, which keeps it exact.
    return Quantity::Parse(value.dump());
  }
  if (value.is_number_float()) {
    Quantity q;
    std::string why;
    if (!Quantity::TryParse(value.dump(), &q, &why))
      throw ValidationError(field, value.dump(), why);
    return q;
  }
  throw ValidationError(field, value.dump(),
                        "must be a quantity (a string such as \"500m\" or a number)");
}

}  // namespace

ResourceList ParseResourceList(const Json& object, std::string_view field) {
  ResourceList out;
  if (object.is_null()) return out;
  if (!object.is_object()) {
    throw ValidationError(std::string(field), object.dump(),
                          "must be a map of resource quantities");
  }
  for (const auto& [name, value] : object.items()) {
    out[name] = ParseQuantityValue(value, fmt::format("{}[{}]", field, name));
  }
  return out;
}

namespace internal {

Json ResourceListJson(const ResourceList& list) {
  Json out = Json::object();
  for (const auto& [k, v] : list) out[k] = v.ToString();
  return out;
}

namespace {

bool BoolField(const Json& object, std::string_view key) {
  const Json& v = At(object, key);
  return v.is_boolean() && v.get<bool>();
}

ResourceList Times(const ResourceList& list, std::int64_t n) {
  ResourceList out;
  for (const auto& [name, amount] : list) out[name] = amount.Times(n);
  return out;
}

// quota.Max: every key of either list, the larger amount where both have it.
ResourceList Max(const ResourceList& a, const ResourceList& b) {
  ResourceList out = a;
  for (const auto& [name, amount] : b) {
    auto it = out.find(name);
    if (it == out.end() || it->second < amount) out[name] = amount;
  }
  return out;
}

const Json& Containers(const Json& spec, std::string_view key) { return At(spec, key); }

// The objects that count for "count/<resource>[.<group>]" and for the legacy short names.
struct CountName {
  std::string_view kind;
  std::string_view plural;
  std::string_view legacy;  // "" when the resource has no legacy alias
};
constexpr CountName kCountNames[] = {
    {"ConfigMap", "configmaps", "configmaps"},
    {"Secret", "secrets", "secrets"},
    {"ReplicationController", "replicationcontrollers", "replicationcontrollers"},
    {"ResourceQuota", "resourcequotas", "resourcequotas"},
    {"Deployment", "deployments", ""},
    {"StatefulSet", "statefulsets", ""},
    {"ReplicaSet", "replicasets", ""},
    {"DaemonSet", "daemonsets", ""},
    {"ControllerRevision", "controllerrevisions", ""},
    {"Job", "jobs", ""},
    {"CronJob", "cronjobs", ""},
    {"Ingress", "ingresses", ""},
    {"ServiceAccount", "serviceaccounts", ""},
    {"LimitRange", "limitranges", ""},
    {"Role", "roles", ""},
    {"RoleBinding", "rolebindings", ""},
    {"NetworkPolicy", "networkpolicies", ""},
    {"PodDisruptionBudget", "poddisruptionbudgets", ""},
    {"HorizontalPodAutoscaler", "horizontalpodautoscalers", ""},
    {"Endpoints", "endpoints", ""},
    {"Event", "events", ""},
};

std::string GroupOf(const std::string& api_version) {
  auto slash = api_version.find('/');
  return slash == std::string::npos ? std::string() : api_version.substr(0, slash);
}

std::string CountKey(std::string_view plural, const std::string& group) {
  return group.empty() ? fmt::format("count/{}", plural)
                       : fmt::format("count/{}.{}", plural, group);
}

// Object-count usage of one object of a counted kind (empty for other kinds).
ResourceList ObjectCountUsage(const std::string& kind, const std::string& api_version) {
  ResourceList out;
  for (const auto& c : kCountNames) {
    if (c.kind != kind) continue;
    out[CountKey(c.plural, GroupOf(api_version))] = Quantity::FromInt(1);
    if (!c.legacy.empty()) out[std::string(c.legacy)] = Quantity::FromInt(1);
  }
  return out;
}

// SetDefaults_LimitRangeItem for Container items: default <- max, defaultRequest <- default,
// defaultRequest <- min. The server stores limit ranges defaulted; rendered ones are not yet.
void DefaultLimitRangeItem(ResourceList& defaults, ResourceList& default_requests,
                           const ResourceList& max, const ResourceList& min) {
  for (const auto& [k, v] : max) defaults.try_emplace(k, v);
  for (const auto& [k, v] : defaults) default_requests.try_emplace(k, v);
  for (const auto& [k, v] : min) default_requests.try_emplace(k, v);
}

bool IsHugePages(std::string_view name) { return name.rfind("hugepages-", 0) == 0; }

}  // namespace

std::int64_t IntField(const Json& object, std::string_view key, std::int64_t fallback,
                      std::string_view field) {
  const Json& v = At(object, key);
  if (v.is_null()) return fallback;
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d == static_cast<double>(static_cast<std::int64_t>(d))) return static_cast<std::int64_t>(d);
  }
  throw ValidationError(std::string(field), v.dump(), "must be an integer");
}

std::string SourceOf(const Json& object) {
  const Json& metadata = At(object, "metadata");
  std::string name = StringAt(metadata, "name");
  // An object the server names (an on-demand run's Job): its prefix, marked as such.
  if (name.empty() && !StringAt(metadata, "generateName").empty()) {
    name = StringAt(metadata, "generateName") + "<generated>";
  }
  return fmt::format("{}/{}", StringAt(object, "kind"), name);
}

bool IsExtendedResourceName(std::string_view name) {
  // helper.IsExtendedResourceName: not native (no '/', or a kubernetes.io/ name), not already
  // prefixed with "requests.", and "requests.<name>" must be a qualified name.
  if (name.find('/') == std::string_view::npos) return false;
  if (name.find("kubernetes.io/") != std::string_view::npos) return false;
  if (name.rfind("requests.", 0) == 0) return false;
  return validation::IsQualifiedName(fmt::format("requests.{}", name)).empty();
}

Json NormalizePodTemplate(const Json& pod_template, std::string_view field) {
  if (!pod_template.is_object()) {
    throw ValidationError(std::string(field), pod_template.dump(), "must be a pod template object");
  }
  // A bare PodSpec has containers at the top; a PodTemplateSpec or Pod has them under spec.
  if (pod_template.contains("containers")) {
    return Json{{"metadata", Json::object()}, {"spec", pod_template}};
  }
  const Json& spec = At(pod_template, "spec");
  if (!spec.is_object()) {
    throw ValidationError(fmt::format("{}.spec", field), spec.dump(),
                          "a pod template needs a spec with containers");
  }
  Json metadata = At(pod_template, "metadata");
  if (!metadata.is_object()) metadata = Json::object();
  Json out{{"metadata", metadata}, {"spec", spec}};
  if (pod_template.contains("status")) out["status"] = pod_template["status"];
  return out;
}

ResourceList ContainerResources(const Json& container, std::string_view which,
                                std::string_view field) {
  return ParseResourceList(At(At(container, "resources"), which),
                           fmt::format("{}.resources.{}", field, which));
}

void DefaultPodResources(Json& pod_spec, const std::vector<Json>& limit_ranges) {
  // LimitRanger's defaults: the union of every Container item of every LimitRange, later items
  // overriding earlier ones (defaultContainerResourceRequirements), per LimitRange in turn.
  std::vector<std::pair<ResourceList, ResourceList>> defaults;  // (requests, limits)
  for (std::size_t r = 0; r < limit_ranges.size(); ++r) {
    ResourceList requests;
    ResourceList limits;
    const Json& items = At(At(limit_ranges[r], "spec"), "limits");
    if (!items.is_array()) continue;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const Json& item = items[i];
      if (StringAt(item, "type") != "Container") continue;
      const std::string f = fmt::format("limitRanges[{}].spec.limits[{}]", r, i);
      ResourceList d = ParseResourceList(At(item, "default"), f + ".default");
      ResourceList dr = ParseResourceList(At(item, "defaultRequest"), f + ".defaultRequest");
      DefaultLimitRangeItem(d, dr, ParseResourceList(At(item, "max"), f + ".max"),
                            ParseResourceList(At(item, "min"), f + ".min"));
      for (const auto& [k, v] : dr) requests[k] = v;
      for (const auto& [k, v] : d) limits[k] = v;
    }
    defaults.emplace_back(std::move(requests), std::move(limits));
  }

  for (std::string_view key : {"containers", "initContainers"}) {
    if (!pod_spec.contains(key)) continue;
    Json& list = pod_spec[std::string(key)];
    if (!list.is_array()) continue;
    for (auto& container : list) {
      if (!container.is_object()) continue;
      Json& resources = container["resources"];
      if (!resources.is_object()) resources = Json::object();
      // SetDefaults_Pod: requests default to limits, per resource (at decode, before admission).
      if (resources.contains("limits") && resources["limits"].is_object()) {
        Json& requests = resources["requests"];
        if (!requests.is_object()) requests = Json::object();
        for (const auto& [k, v] : resources["limits"].items()) {
          if (!requests.contains(k)) requests[k] = v;
        }
      }
      // LimitRanger (admission): fill what is still missing.
      for (const auto& [requests, limits] : defaults) {
        for (const auto& [target, source] :
             {std::pair{"requests", &requests}, std::pair{"limits", &limits}}) {
          if (source->empty()) continue;
          Json& list_json = resources[target];
          if (!list_json.is_object()) list_json = Json::object();
          const Json values = ResourceListJson(*source);
          for (const auto& [k, v] : values.items()) {
            if (!list_json.contains(k)) list_json[k] = v;
          }
        }
      }
      if (resources.empty()) container.erase("resources");
    }
  }
}

ResourceList PodQuotaUsage(const Json& pod_spec, bool terminated) {
  ResourceList result{{"count/pods", Quantity::FromInt(1)}};
  if (terminated) return result;
  ResourceList requests;
  ResourceList limits;
  const Json& containers = Containers(pod_spec, "containers");
  if (containers.is_array()) {
    for (std::size_t i = 0; i < containers.size(); ++i) {
      const std::string f = fmt::format("spec.containers[{}]", i);
      AddTo(requests, ContainerResources(containers[i], "requests", f));
      AddTo(limits, ContainerResources(containers[i], "limits", f));
    }
  }
  // Init containers run one at a time before the app containers: the largest of them is
  // compared with the sum of the app containers, per resource.
  const Json& init = Containers(pod_spec, "initContainers");
  if (init.is_array()) {
    for (std::size_t i = 0; i < init.size(); ++i) {
      const std::string f = fmt::format("spec.initContainers[{}]", i);
      requests = Max(requests, ContainerResources(init[i], "requests", f));
      limits = Max(limits, ContainerResources(init[i], "limits", f));
    }
  }
  // podComputeUsageHelper.
  result["pods"] = Quantity::FromInt(1);
  for (std::string_view r : {"cpu", "memory", "ephemeral-storage"}) {
    const std::string name(r);
    if (auto it = requests.find(name); it != requests.end()) {
      result[name] = it->second;
      result["requests." + name] = it->second;
    }
    if (auto it = limits.find(name); it != limits.end()) result["limits." + name] = it->second;
  }
  for (const auto& [name, amount] : requests) {
    if (IsHugePages(name)) {
      result[name] = amount;
      result["requests." + name] = amount;
    }
    if (IsExtendedResourceName(name)) result["requests." + name] = amount;
  }
  return result;
}

ResourceList PodSchedulingRequests(const Json& pod_spec) {
  ResourceList requests;
  const Json& containers = Containers(pod_spec, "containers");
  if (containers.is_array()) {
    for (std::size_t i = 0; i < containers.size(); ++i) {
      AddTo(requests,
            ContainerResources(containers[i], "requests", fmt::format("spec.containers[{}]", i)));
    }
  }
  const Json& init = Containers(pod_spec, "initContainers");
  if (init.is_array()) {
    for (std::size_t i = 0; i < init.size(); ++i) {
      requests = Max(requests, ContainerResources(init[i], "requests",
                                                  fmt::format("spec.initContainers[{}]", i)));
    }
  }
  AddTo(requests, ParseResourceList(At(pod_spec, "overhead"), "spec.overhead"));
  return requests;
}

std::vector<PodGroup> PodGroupsOf(const std::vector<Json>& objects) {
  std::vector<PodGroup> groups;
  for (std::size_t i = 0; i < objects.size(); ++i) {
    const Json& object = objects[i];
    const std::string kind = StringAt(object, "kind");
    const std::string source = SourceOf(object);
    const Json& spec = At(object, "spec");
    const std::string f = fmt::format("objects[{}]({})", i, source);

    PodGroup group;
    group.source = source;
    const Json* pod_template = nullptr;
    if (kind == "Pod") {
      group.pod = NormalizePodTemplate(object, f);
      group.count = 1;
      const std::string phase = StringAt(At(object, "status"), "phase");
      group.terminated = phase == "Succeeded" || phase == "Failed";
    } else if (kind == "Deployment" || kind == "ReplicaSet" || kind == "StatefulSet" ||
               kind == "ReplicationController") {
      pod_template = &At(spec, "template");
      group.count = IntField(spec, "replicas", 1, f + ".spec.replicas");
    } else if (kind == "Job" || kind == "CronJob") {
      const Json* job_spec = &spec;
      if (kind == "CronJob") {
        if (BoolField(spec, "suspend")) continue;  // no run will start while suspended
        job_spec = &At(At(spec, "jobTemplate"), "spec");
      }
      if (BoolField(*job_spec, "suspend")) continue;
      pod_template = &At(*job_spec, "template");
      // The Job controller keeps min(parallelism, completions - succeeded) pods active.
      std::int64_t parallelism = IntField(*job_spec, "parallelism", 1, f + ".spec.parallelism");
      const Json& completions = At(*job_spec, "completions");
      if (!completions.is_null()) {
        parallelism =
            std::min(parallelism, IntField(*job_spec, "completions", 1, f + ".spec.completions"));
      }
      group.count = parallelism;
    } else {
      continue;
    }
    if (pod_template != nullptr) {
      if (pod_template->is_null()) {
        throw ValidationError(f + ".spec.template", "null", "a pod template is required");
      }
      group.pod = NormalizePodTemplate(*pod_template, f + ".spec.template");
    }
    if (group.count < 0) {
      throw ValidationError(f + ".spec.replicas", std::to_string(group.count),
                            "must be greater than or equal to 0");
    }
    DefaultPodResources(group.pod["spec"], {});
    groups.push_back(std::move(group));
  }
  return groups;
}

namespace {

// The PVC evaluator: persistentvolumeclaims, count/persistentvolumeclaims, requests.storage
// (rounded up to whole bytes) and their per-StorageClass forms.
ResourceList ClaimUsage(const Json& claim, const DemandContext& context, const std::string& f) {
  ResourceList out{{"persistentvolumeclaims", Quantity::FromInt(1)},
                   {"count/persistentvolumeclaims", Quantity::FromInt(1)}};
  // GetPersistentVolumeClaimClass: the beta annotation wins over spec.storageClassName; an
  // absent class gets the default one (DefaultStorageClass admission), an empty one stays none.
  std::string storage_class;
  const Json& annotation =
      At(At(At(claim, "metadata"), "annotations"), "volume.beta.kubernetes.io/storage-class");
  const Json& spec = At(claim, "spec");
  if (annotation.is_string()) {
    storage_class = annotation.get<std::string>();
  } else if (At(spec, "storageClassName").is_string()) {
    storage_class = At(spec, "storageClassName").get<std::string>();
  } else {
    storage_class = context.default_storage_class;
  }
  const std::string prefix = storage_class + ".storageclass.storage.k8s.io/";
  if (!storage_class.empty()) out[prefix + "persistentvolumeclaims"] = Quantity::FromInt(1);
  ResourceList requests =
      ParseResourceList(At(At(spec, "resources"), "requests"), f + ".spec.resources.requests");
  if (auto it = requests.find("storage"); it != requests.end()) {
    Quantity storage = it->second;
    // Whole bytes, like the evaluator (kubernetes issue 94313).
    const Quantity whole = Quantity::FromInt(storage.Value(), storage.format());
    if (whole != storage) storage = whole;
    out["requests.storage"] = storage;
    if (!storage_class.empty()) out[prefix + "requests.storage"] = storage;
  }
  return out;
}

ResourceList ServiceUsage(const Json& service) {
  ResourceList out{{"services", Quantity::FromInt(1)}, {"count/services", Quantity::FromInt(1)}};
  const Json& spec = At(service, "spec");
  const std::string type = StringAt(spec, "type");
  const Json& ports = At(spec, "ports");
  const std::int64_t n = ports.is_array() ? static_cast<std::int64_t>(ports.size()) : 0;
  if (type == "NodePort" || type == "LoadBalancer")
    out["services.nodeports"] = Quantity::FromInt(n);
  if (type == "LoadBalancer") out["services.loadbalancers"] = Quantity::FromInt(1);
  return out;
}

}  // namespace

std::vector<UsageItem> UsageItemsOf(const std::vector<Json>& objects,
                                    const DemandContext& context) {
  std::vector<UsageItem> items;
  for (std::size_t i = 0; i < objects.size(); ++i) {
    const Json& object = objects[i];
    if (!object.is_object()) {
      throw ValidationError(fmt::format("objects[{}]", i), object.dump(), "must be an object");
    }
    const std::string kind = StringAt(object, "kind");
    const std::string api_version = StringAt(object, "apiVersion");
    const std::string source = SourceOf(object);
    const std::string f = fmt::format("objects[{}]({})", i, source);

    // The object itself.
    UsageItem self;
    self.source = source;
    if (kind == "Service") {
      self.usage = ServiceUsage(object);
    } else if (kind == "PersistentVolumeClaim") {
      self.usage = ClaimUsage(object, context, f);
    } else if (kind != "Pod") {
      self.usage = ObjectCountUsage(kind, api_version);
    }
    // Objects a controller creates on the object's behalf.
    const Json& spec = At(object, "spec");
    if (kind == "Deployment") {
      self.usage["count/replicasets.apps"] += Quantity::FromInt(1);
    } else if (kind == "CronJob" && !BoolField(spec, "suspend")) {
      self.usage["count/jobs.batch"] += Quantity::FromInt(1);
    } else if (kind == "StatefulSet") {
      const Json& templates = At(spec, "volumeClaimTemplates");
      const std::int64_t replicas = IntField(spec, "replicas", 1, f + ".spec.replicas");
      if (templates.is_array() && replicas > 0) {
        for (std::size_t t = 0; t < templates.size(); ++t) {
          AddTo(self.usage, Times(ClaimUsage(templates[t], context,
                                             fmt::format("{}.spec.volumeClaimTemplates[{}]", f, t)),
                                  replicas));
        }
      }
    }
    if (!self.usage.empty()) items.push_back(std::move(self));

    // Its pods.
    for (auto& group : PodGroupsOf({object})) {
      if (group.count == 0) continue;
      DefaultPodResources(group.pod["spec"], context.limit_ranges);
      UsageItem pods;
      pods.source = group.source;
      pods.is_pod_group = true;
      pods.usage = Times(PodQuotaUsage(group.pod["spec"], group.terminated), group.count);
      pods.pods = std::move(group);
      items.push_back(std::move(pods));
    }
  }
  return items;
}

UsageItem PodTemplateItem(const Json& pod_template, std::int64_t replicas,
                          const DemandContext& context) {
  if (replicas < 0) {
    throw ValidationError("replicas", std::to_string(replicas),
                          "must be greater than or equal to 0");
  }
  UsageItem item;
  item.source = "pod template";
  item.is_pod_group = true;
  item.pods.source = item.source;
  item.pods.pod = NormalizePodTemplate(pod_template, "pod_template");
  item.pods.count = replicas;
  const std::string phase = StringAt(At(item.pods.pod, "status"), "phase");
  item.pods.terminated = phase == "Succeeded" || phase == "Failed";
  DefaultPodResources(item.pods.pod["spec"], context.limit_ranges);
  if (replicas > 0) {
    item.usage = Times(PodQuotaUsage(item.pods.pod["spec"], item.pods.terminated), replicas);
  }
  return item;
}

}  // namespace internal
}  // namespace tfk8s
