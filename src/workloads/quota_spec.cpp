// QuotaSpec: its JSON, validation, over-commit and rendering (pure: spec -> objects). The
// pre-flight, apply and usage (I/O) are in quota.cpp.

#include "tfk8s/quota.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "tfk8s/error.hpp"
#include "tfk8s/validation.hpp"
#include "workloads/common.hpp"
#include "workloads/quota_pods.hpp"
#include "workloads/spec_json.hpp"

namespace tfk8s {

using namespace internal::reading;

namespace {

// ---- quota spec validation ------------------------------------------------------------------

const std::set<std::string>& KnownQuotaKeys() {
  static const std::set<std::string> kKeys = {"cpu",
                                              "memory",
                                              "ephemeral-storage",
                                              "requests.cpu",
                                              "requests.memory",
                                              "requests.ephemeral-storage",
                                              "limits.cpu",
                                              "limits.memory",
                                              "limits.ephemeral-storage",
                                              "requests.storage",
                                              "pods",
                                              "services",
                                              "persistentvolumeclaims",
                                              "secrets",
                                              "configmaps",
                                              "replicationcontrollers",
                                              "resourcequotas",
                                              "services.nodeports",
                                              "services.loadbalancers"};
  return kKeys;
}

bool IsIntegerQuotaKey(const std::string& key) {
  static const std::set<std::string> kCounts = {
      "pods",           "services",           "persistentvolumeclaims",
      "secrets",        "configmaps",         "replicationcontrollers",
      "resourcequotas", "services.nodeports", "services.loadbalancers"};
  if (kCounts.count(key) != 0 || key.rfind("count/", 0) == 0) return true;
  if (key.size() > 22 && key.ends_with("/persistentvolumeclaims")) return true;
  // GPUs and other extended resources are whole devices.
  return key.rfind("requests.", 0) == 0 && internal::IsExtendedResourceName(key.substr(9));
}

std::string QuotaField(std::string_view map, const std::string& key) {
  return fmt::format("{}[{}]", map, key);
}

void ValidateQuotaKey(const std::string& key, const std::string& value) {
  const std::string field = QuotaField("hard", key);
  if (KnownQuotaKeys().count(key) != 0) return;
  // Object counts and per-class storage keys contain a '/' too: recognise them before the
  // extended-resource rules.
  if (key.rfind("hugepages-", 0) == 0 || key.rfind("requests.hugepages-", 0) == 0) {
    std::string size = key.substr(key.find("hugepages-") + 10);
    if (Quantity::TryParse(size, nullptr)) return;
  }
  if (auto pos = key.find(internal::kStorageClassInfix); pos != std::string::npos) {
    const std::string storage_class = key.substr(0, pos);
    const std::string rest = key.substr(pos + internal::kStorageClassInfix.size());
    if ((rest == "requests.storage" || rest == "persistentvolumeclaims") &&
        validation::IsDns1123Subdomain(storage_class).empty()) {
      return;
    }
  }
  if (key.rfind("count/", 0) == 0) {
    // count/<resource> or count/<resource>.<group>: lower-case resource, DNS-style group.
    if (validation::IsDns1123Subdomain(key.substr(6)).empty()) return;
  }
  if (key.rfind("limits.", 0) == 0 && internal::IsExtendedResourceName(key.substr(7))) {
    throw ValidationError(
        field, value,
        fmt::format("extended resources such as {0} can only be limited through the "
                    "\"requests.\" prefix: use \"requests.{0}\" (Kubernetes requires requests == "
                    "limits for extended resources, and ResourceQuota refuses limits.{0})",
                    key.substr(7)));
  }
  if (internal::IsExtendedResourceName(key)) {
    throw ValidationError(field, value,
                          fmt::format("a quota on an extended resource must be written "
                                      "\"requests.{}\"",
                                      key));
  }
  if (key.rfind("requests.", 0) == 0 && internal::IsExtendedResourceName(key.substr(9))) return;
  throw ValidationError(
      field, value,
      "unknown quota resource; known: requests.cpu, requests.memory, limits.cpu, limits.memory, "
      "requests.nvidia.com/gpu (any requests.<extended resource>), requests.storage, "
      "requests.ephemeral-storage, limits.ephemeral-storage, cpu, memory, pods, services, "
      "persistentvolumeclaims, secrets, configmaps, replicationcontrollers, resourcequotas, "
      "services.nodeports, services.loadbalancers, <class>.storageclass.storage.k8s.io/"
      "requests.storage, <class>.storageclass.storage.k8s.io/persistentvolumeclaims, "
      "count/<resource>[.<group>]");
}

Quantity ValidQuantity(const std::string& field, const std::string& value, bool integer) {
  Quantity q;
  std::string why;
  if (!Quantity::TryParse(value, &q, &why)) throw ValidationError(field, value, why);
  if (q.Sign() < 0) throw ValidationError(field, value, "must be greater than or equal to 0");
  if (integer && q != Quantity::FromInt(q.Value())) {
    throw ValidationError(field, value, "must be an integer");
  }
  return q;
}

void ValidateContainerResourceName(const std::string& field, const std::string& key,
                                   const std::string& value) {
  if (key == "cpu" || key == "memory" || key == "ephemeral-storage") return;
  if (key.rfind("hugepages-", 0) == 0) return;
  if (internal::IsExtendedResourceName(key)) return;
  throw ValidationError(field, value,
                        "unknown container resource; use cpu, memory, ephemeral-storage, "
                        "hugepages-<size> or an extended resource such as nvidia.com/gpu");
}

std::map<std::string, Quantity> ValidLimitMap(std::string_view map_name,
                                              const std::map<std::string, std::string>& map) {
  std::map<std::string, Quantity> out;
  for (const auto& [key, value] : map) {
    const std::string field = fmt::format("limit_range.{}[{}]", map_name, key);
    ValidateContainerResourceName(field, key, value);
    out[key] = ValidQuantity(field, value, internal::IsExtendedResourceName(key));
  }
  return out;
}

void ValidateLimitRange(const LimitRangeSpec& lr) {
  if (lr.default_requests.empty() && lr.default_limits.empty() && lr.max.empty() &&
      lr.min.empty()) {
    throw ValidationError("limit_range", "{}",
                          "is set but empty: give default_requests, default_limits, max or min");
  }
  auto requests = ValidLimitMap("default_requests", lr.default_requests);
  auto limits = ValidLimitMap("default_limits", lr.default_limits);
  auto max = ValidLimitMap("max", lr.max);
  auto min = ValidLimitMap("min", lr.min);
  // The same ordering rules the apiserver checks (ValidateLimitRange), so the error comes
  // before anything is sent and names the value.
  auto require_le = [](const auto& small, const auto& big, std::string_view small_name,
                       std::string_view big_name) {
    for (const auto& [key, s] : small) {
      auto it = big.find(key);
      if (it == big.end() || !(it->second < s)) continue;
      throw ValidationError(fmt::format("limit_range.{}[{}]", small_name, key), s.ToString(),
                            fmt::format("must be less than or equal to {}[{}] ({})", big_name, key,
                                        it->second.ToString()));
    }
  };
  require_le(requests, limits, "default_requests", "default_limits");
  require_le(min, max, "min", "max");
  require_le(min, requests, "min", "default_requests");
  require_le(limits, max, "default_limits", "max");
  require_le(requests, max, "default_requests", "max");
  for (const auto& [key, request] : requests) {
    auto it = limits.find(key);
    if (internal::IsExtendedResourceName(key) && it != limits.end() && it->second != request) {
      throw ValidationError(fmt::format("limit_range.default_requests[{}]", key),
                            request.ToString(),
                            "extended resources need equal default request and default limit");
    }
  }
}

void ValidateLabels(std::string_view map_name, const std::map<std::string, std::string>& labels,
                    bool values_are_labels) {
  for (const auto& [key, value] : labels) {
    const std::string field = fmt::format("{}[{}]", map_name, key);
    validation::RequireLabelKey(field, key);
    if (values_are_labels) validation::RequireLabelValue(field, value);
    if (key == kQueueLabel || key == kManagedByLabel) {
      throw ValidationError(field, value, "is set by tfk8s for every queue; remove it");
    }
  }
}

// ---- over-commit arithmetic -------------------------------------------------------------------

__extension__ typedef __int128 Int128;

// ceil(q * ratio_milli / 1000) at the precision that matters for the resource: milli-cores for
// cpu, whole bytes for memory. Exact in 128 bits.
Quantity Scale(const Quantity& q, std::int64_t ratio_milli, bool bytes) {
  auto ceil_div = [](Int128 a, Int128 b) { return a >= 0 ? (a + b - 1) / b : a / b; };
  if (bytes) {
    const Int128 v = ceil_div(Int128{q.Value()} * ratio_milli, 1000);
    if (v > std::numeric_limits<std::int64_t>::max()) {
      throw ValidationError("ratio", fmt::format("{}", static_cast<double>(ratio_milli) / 1000.0),
                            "over-committed limit is out of range");
    }
    return Quantity::FromInt(static_cast<std::int64_t>(v), q.format());
  }
  const Int128 v = ceil_div(Int128{q.MilliValue()} * ratio_milli, 1000);
  if (v > std::numeric_limits<std::int64_t>::max()) {
    throw ValidationError("ratio", fmt::format("{}", static_cast<double>(ratio_milli) / 1000.0),
                          "over-committed limit is out of range");
  }
  return Quantity::FromMilli(static_cast<std::int64_t>(v));
}

}  // namespace

// ---- queues -------------------------------------------------------------------------------------

namespace {

void ValidateMembers(const QuotaSpec& spec) {
  if (auto team = spec.labels.find(std::string(kTeamLabel)); team != spec.labels.end()) {
    throw ValidationError(fmt::format("labels[{}]", kTeamLabel), team->second,
                          "is set by tfk8s on the namespaces of a queue with members; remove it");
  }
  auto owner = spec.labels.find(kOwnerLabel);
  if (owner != spec.labels.end() && !spec.members.empty()) {
    throw ValidationError(
        fmt::format("labels[{}]", kOwnerLabel), owner->second,
        fmt::format("a queue with members is shared by the team, so its namespace is personal to "
                    "no one; each member gets {}-<member>, personal to them",
                    spec.name));
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < spec.members.size(); ++i) {
    const std::string field = fmt::format("members[{}]", i);
    const std::string& member = spec.members[i];
    validation::RequireDns1123Label(field, member);
    if (!seen.insert(member).second) throw ValidationError(field, member, "is listed twice");
    const std::string ns = spec.name + "-" + member;
    if (ns.size() > validation::kDns1123LabelMaxLength) {
      throw ValidationError(field, member,
                            fmt::format("the member's namespace {} would be longer than {} "
                                        "characters; use a shorter queue or member name",
                                        ns, validation::kDns1123LabelMaxLength));
    }
  }
}

}  // namespace

void ValidateQuotaSpec(const QuotaSpec& spec) {
  validation::RequireDns1123Label("name", spec.name);
  ValidateLabels("labels", spec.labels, /*values_are_labels=*/true);
  for (const auto& [key, value] : spec.annotations) {
    validation::RequireLabelKey(fmt::format("annotations[{}]", key), key);
  }
  for (const auto& [key, value] : spec.hard) {
    ValidateQuotaKey(key, value);
    ValidQuantity(QuotaField("hard", key), value, IsIntegerQuotaKey(key));
  }
  if (spec.limit_range) ValidateLimitRange(*spec.limit_range);
  ValidateMembers(spec);
}

QuotaSpec OverCommitted(QuotaSpec spec, double ratio) {
  if (!std::isfinite(ratio) || ratio < 1.0 || ratio > 1000.0) {
    throw ValidationError("ratio", fmt::format("{}", ratio),
                          "must be a number from 1 to 1000 (limits = requests × ratio)");
  }
  const double milli = ratio * 1000.0;
  const auto ratio_milli = static_cast<std::int64_t>(std::llround(milli));
  if (std::fabs(milli - static_cast<double>(ratio_milli)) > 1e-6) {
    throw ValidationError("ratio", fmt::format("{}", ratio),
                          "at most three decimals are supported");
  }
  for (std::string_view r : {"cpu", "memory"}) {
    const bool bytes = r == "memory";
    const std::string request_key = fmt::format("requests.{}", r);
    if (auto it = spec.hard.find(request_key); it != spec.hard.end()) {
      Quantity q = ValidQuantity(QuotaField("hard", request_key), it->second, false);
      spec.hard[fmt::format("limits.{}", r)] = Scale(q, ratio_milli, bytes).ToString();
    }
    if (spec.limit_range) {
      auto& lr = *spec.limit_range;
      if (auto it = lr.default_requests.find(std::string(r)); it != lr.default_requests.end()) {
        Quantity q =
            ValidQuantity(fmt::format("limit_range.default_requests[{}]", r), it->second, false);
        lr.default_limits[std::string(r)] = Scale(q, ratio_milli, bytes).ToString();
      }
    }
  }
  return spec;
}

namespace {

std::map<std::string, std::string> StringMapAt(const Json& spec, const std::string& path,
                                               const char* key) {
  std::map<std::string, std::string> out;
  if (!spec.contains(key) || spec[key].is_null()) return out;
  const Json& value = spec[key];
  if (!value.is_object()) throw ValidationError(path + key, value.dump(), "must be a mapping");
  for (const auto& [k, v] : value.items()) {
    if (v.is_string()) {
      out[k] = v.get<std::string>();
    } else if (v.is_number()) {
      out[k] = v.dump();
    } else {
      throw ValidationError(fmt::format("{}{}[{}]", path, key, k), v.dump(),
                            "must be a string or a number");
    }
  }
  return out;
}

}  // namespace

Json QuotaSpec::ToJson() const {
  Json j = {{"name", name}, {"labels", labels}, {"annotations", annotations}, {"hard", hard}};
  if (!members.empty()) j["members"] = members;
  if (limit_range) {
    j["limit_range"] = {{"default_requests", limit_range->default_requests},
                        {"default_limits", limit_range->default_limits},
                        {"max", limit_range->max},
                        {"min", limit_range->min}};
  }
  return j;
}

QuotaSpec QuotaSpec::FromJson(const Json& json) {
  if (!json.is_object()) throw ValidationError("spec", json.dump(), "must be a mapping");
  QuotaSpec spec;
  if (json.contains("name") && !json["name"].is_null()) {
    if (!json["name"].is_string()) {
      throw ValidationError("name", json["name"].dump(), "has the wrong type");
    }
    spec.name = json["name"].get<std::string>();
  }
  spec.labels = StringMapAt(json, "", "labels");
  spec.annotations = StringMapAt(json, "", "annotations");
  spec.hard = StringMapAt(json, "", "hard");
  if (json.contains("members") && !json["members"].is_null()) {
    const Json& members = json["members"];
    if (!members.is_array()) throw ValidationError("members", members.dump(), "must be a list");
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (!members[i].is_string()) {
        throw ValidationError(fmt::format("members[{}]", i), members[i].dump(),
                              "must be a string (an owner's name)");
      }
      spec.members.push_back(members[i].get<std::string>());
    }
  }
  if (json.contains("limit_range") && !json["limit_range"].is_null()) {
    const Json& lr = json["limit_range"];
    if (!lr.is_object()) throw ValidationError("limit_range", lr.dump(), "must be a mapping");
    LimitRangeSpec l;
    l.default_requests = StringMapAt(lr, "limit_range.", "default_requests");
    l.default_limits = StringMapAt(lr, "limit_range.", "default_limits");
    l.max = StringMapAt(lr, "limit_range.", "max");
    l.min = StringMapAt(lr, "limit_range.", "min");
    spec.limit_range = std::move(l);
  }
  internal::RefuseUnknownFields(json, spec.ToJson(), "Quota");
  return spec;
}

std::vector<std::string> internal::TeamNamespaces(const QuotaSpec& spec) {
  std::vector<std::string> out{spec.name};
  for (const auto& m : spec.members) out.push_back(spec.name + "-" + m);
  return out;
}

namespace {

// One namespace of a queue: the Namespace, its ResourceQuota and LimitRange; `owner` is the
// member the namespace is personal to ("" for the queue's own namespace).
void RenderQueueNamespace(const QuotaSpec& spec, const std::string& ns, const std::string& owner,
                          std::vector<Json>* out) {
  const bool team = !spec.members.empty();
  Json ns_labels = Json::object();
  for (const auto& [k, v] : spec.labels) ns_labels[k] = v;
  ns_labels[std::string(kManagedByLabel)] = kManagedByValue;
  ns_labels[std::string(kQueueLabel)] = "true";
  if (team) ns_labels[std::string(kTeamLabel)] = spec.name;
  if (!owner.empty()) {
    ns_labels[kOwnerLabel] = owner;
    // What RBAC cannot stop: a pod of the owner's that mounts the node's disk (hostPath) or runs
    // privileged reads every other pod's Secrets and volumes on that node. Servers from v1.23
    // enforce this label; the labels of the spec may choose another level.
    const std::string pod_security = "pod-security.kubernetes.io/enforce";
    if (!ns_labels.contains(pod_security)) ns_labels[pod_security] = "baseline";
  }
  Json ns_metadata{{"name", ns}, {"labels", ns_labels}};
  if (!spec.annotations.empty()) {
    Json annotations = Json::object();
    for (const auto& [k, v] : spec.annotations) annotations[k] = v;
    ns_metadata["annotations"] = annotations;
  }
  out->push_back({{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", ns_metadata}});

  Json labels{{std::string(kManagedByLabel), kManagedByValue},
              {std::string(kQueueLabel), spec.name}};
  if (team) labels[std::string(kTeamLabel)] = spec.name;
  const Json metadata{{"name", spec.name}, {"namespace", ns}, {"labels", labels}};
  if (!spec.hard.empty()) {
    Json hard = Json::object();
    for (const auto& [k, v] : spec.hard) hard[k] = Quantity::Parse(v).ToString();
    Json quota_metadata = metadata;
    if (team) {
      quota_metadata["annotations"] = {
          {std::string(kTeamNamespacesAnnotation),
           fmt::format("{}", fmt::join(internal::TeamNamespaces(spec), ","))}};
    }
    out->push_back({{"apiVersion", "v1"},
                    {"kind", "ResourceQuota"},
                    {"metadata", quota_metadata},
                    {"spec", {{"hard", hard}}}});
  }
  if (spec.limit_range) {
    const auto& lr = *spec.limit_range;
    Json item{{"type", "Container"}};
    for (const auto& [field, map] : {std::pair{"default", &lr.default_limits},
                                     std::pair{"defaultRequest", &lr.default_requests},
                                     std::pair{"max", &lr.max}, std::pair{"min", &lr.min}}) {
      if (map->empty()) continue;
      Json values = Json::object();
      for (const auto& [k, v] : *map) values[k] = Quantity::Parse(v).ToString();
      item[field] = values;
    }
    out->push_back({{"apiVersion", "v1"},
                    {"kind", "LimitRange"},
                    {"metadata", metadata},
                    {"spec", {{"limits", Json::array({item})}}}});
  }
  if (team && !spec.hard.empty()) {
    // The team-wide pre-flight from inside any of the team's namespaces (an instance's own
    // account) reads the other namespaces' quotas: usage numbers, nothing else.
    Json reader_metadata = metadata;
    reader_metadata["name"] = kTeamQuotaReaderName;
    Json subjects = Json::array();
    for (const auto& n : internal::TeamNamespaces(spec)) {
      subjects.push_back({{"kind", "Group"},
                          {"apiGroup", "rbac.authorization.k8s.io"},
                          {"name", "system:serviceaccounts:" + n}});
    }
    out->push_back({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                    {"kind", "Role"},
                    {"metadata", reader_metadata},
                    {"rules", Json::array({{{"apiGroups", {""}},
                                            {"resources", {"resourcequotas"}},
                                            {"verbs", {"get"}}}})}});
    out->push_back({{"apiVersion", "rbac.authorization.k8s.io/v1"},
                    {"kind", "RoleBinding"},
                    {"metadata", reader_metadata},
                    {"roleRef",
                     {{"apiGroup", "rbac.authorization.k8s.io"},
                      {"kind", "Role"},
                      {"name", kTeamQuotaReaderName}}},
                    {"subjects", subjects}});
  }
}

}  // namespace

std::vector<Json> RenderQuota(const QuotaSpec& spec) {
  ValidateQuotaSpec(spec);
  std::vector<Json> out;
  RenderQueueNamespace(spec, spec.name, "", &out);
  for (const auto& member : spec.members) {
    RenderQueueNamespace(spec, spec.name + "-" + member, member, &out);
  }
  return out;
}

namespace {

// The string values of a server object's map field ({} when absent); DecodeError when it is
// not a map of strings.
std::map<std::string, std::string> ServerStringMap(const Json& object, std::string_view key,
                                                   const std::string& field) {
  std::map<std::string, std::string> out;
  const Json& map = At(object, key);
  if (map.is_null()) return out;
  if (!map.is_object()) throw DecodeError(field + " is not a map", field);
  for (const auto& [k, v] : map.items()) {
    if (!v.is_string()) throw DecodeError(fmt::format("{}[{}] is not a string", field, k), field);
    out[k] = v.get<std::string>();
  }
  return out;
}

}  // namespace

QuotaSpec QuotaSpecOf(const Json& namespace_object, const Json& resource_quota,
                      const Json& limit_range) {
  QuotaSpec spec;
  const Json& metadata = At(namespace_object, "metadata");
  spec.name = StringAt(metadata, "name");
  if (spec.name.empty()) throw DecodeError("the Namespace has no metadata.name", "metadata.name");
  spec.labels = ServerStringMap(metadata, "labels", "metadata.labels");
  // What RenderQuota adds, and what the server (v1.21+) and kubectl add, are not the spec's.
  for (std::string_view added : {kManagedByLabel, kQueueLabel, kTeamLabel,
                                 std::string_view("kubernetes.io/metadata.name")}) {
    spec.labels.erase(std::string(added));
  }
  spec.annotations = ServerStringMap(metadata, "annotations", "metadata.annotations");
  spec.annotations.erase("kubectl.kubernetes.io/last-applied-configuration");
  if (!resource_quota.is_null()) {
    spec.hard = ServerStringMap(At(resource_quota, "spec"), "hard", "ResourceQuota spec.hard");
    const std::string team =
        StringAt(At(At(resource_quota, "metadata"), "annotations"), kTeamNamespacesAnnotation);
    const std::string prefix = spec.name + "-";
    std::size_t start = 0;
    while (!team.empty() && start <= team.size()) {
      std::size_t end = team.find(',', start);
      if (end == std::string::npos) end = team.size();
      std::string ns = team.substr(start, end - start);
      if (ns.size() > prefix.size() && ns.compare(0, prefix.size(), prefix) == 0) {
        spec.members.push_back(ns.substr(prefix.size()));
      }
      start = end + 1;
    }
  }
  if (!limit_range.is_null()) {
    const Json& limits = At(At(limit_range, "spec"), "limits");
    if (!limits.is_null() && !limits.is_array()) {
      throw DecodeError("LimitRange spec.limits is not a list", "spec.limits");
    }
    for (const Json& item : limits.is_array() ? limits : Json::array()) {
      if (StringAt(item, "type") != "Container") continue;
      LimitRangeSpec lr;
      lr.default_limits = ServerStringMap(item, "default", "LimitRange spec.limits[].default");
      lr.default_requests =
          ServerStringMap(item, "defaultRequest", "LimitRange spec.limits[].defaultRequest");
      lr.max = ServerStringMap(item, "max", "LimitRange spec.limits[].max");
      lr.min = ServerStringMap(item, "min", "LimitRange spec.limits[].min");
      spec.limit_range = std::move(lr);
      break;
    }
  }
  return spec;
}

}  // namespace tfk8s
