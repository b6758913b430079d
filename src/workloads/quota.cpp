// Team queues, quota usage and the quota pre-flight. The pre-flight mirrors the apiserver's
// ResourceQuota admission (k8s.io/apiserver/pkg/admission/plugin/resourcequota, v1.20): the
// same usage per object, the same scopes, the same "must specify" constraint, zero usage ignored,
// and a resource is short when used + requested > hard.

#include "tfk8s/quota.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "tfk8s/error.hpp"
#include "tfk8s/validation.hpp"
#include "workloads/common.hpp"
#include "workloads/quota_pods.hpp"
#include "workloads/server_shape.hpp"

namespace tfk8s {

using namespace internal::reading;

namespace {

using internal::UsageItem;

constexpr std::string_view kStorageClassInfix = ".storageclass.storage.k8s.io/";

// ---- quota scopes --------------------------------------------------------------------------

struct ScopeRequirement {
  std::string scope;
  std::string op;
  std::vector<std::string> values;
};

std::vector<ScopeRequirement> ScopesOf(const Json& quota) {
  std::vector<ScopeRequirement> out;
  const Json& spec = At(quota, "spec");
  if (const Json& scopes = At(spec, "scopes"); scopes.is_array()) {
    for (const auto& s : scopes) {
      if (s.is_string()) out.push_back({s.get<std::string>(), "Exists", {}});
    }
  }
  if (const Json& exprs = At(At(spec, "scopeSelector"), "matchExpressions"); exprs.is_array()) {
    for (const auto& e : exprs) {
      ScopeRequirement r{StringAt(e, "scopeName"), StringAt(e, "operator"), {}};
      if (const Json& values = At(e, "values"); values.is_array()) {
        for (const auto& v : values) {
          if (v.is_string()) r.values.push_back(v.get<std::string>());
        }
      }
      out.push_back(std::move(r));
    }
  }
  return out;
}

// qos.GetPodQOS == BestEffort: no container asks for or limits cpu or memory.
bool IsBestEffort(const Json& pod_spec) {
  for (std::string_view key : {"containers", "initContainers"}) {
    const Json& list = At(pod_spec, key);
    if (!list.is_array()) continue;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string f = fmt::format("spec.{}[{}]", key, i);
      for (std::string_view which : {"requests", "limits"}) {
        ResourceList r = internal::ContainerResources(list[i], which, f);
        for (std::string_view name : {"cpu", "memory"}) {
          auto it = r.find(std::string(name));
          if (it != r.end() && it->second.Sign() > 0) return false;
        }
      }
    }
  }
  return true;
}

bool PodMatchesScope(const ScopeRequirement& scope, const Json& pod_spec) {
  if (scope.scope == "Terminating" || scope.scope == "NotTerminating") {
    const Json& deadline = At(pod_spec, "activeDeadlineSeconds");
    const bool terminating = deadline.is_number_integer() && deadline.get<std::int64_t>() >= 0;
    return scope.scope == "Terminating" ? terminating : !terminating;
  }
  if (scope.scope == "BestEffort") return IsBestEffort(pod_spec);
  if (scope.scope == "NotBestEffort") return !IsBestEffort(pod_spec);
  if (scope.scope == "PriorityClass") {
    // A label selector over {"PriorityClass": <name>} (no key when the pod has no class).
    const std::string name = StringAt(pod_spec, "priorityClassName");
    const bool has = !name.empty();
    const bool listed =
        std::find(scope.values.begin(), scope.values.end(), name) != scope.values.end();
    if (scope.op == "In") return has && listed;
    if (scope.op == "NotIn") return !has || !listed;
    if (scope.op == "Exists") return has;
    if (scope.op == "DoesNotExist") return !has;
    return false;
  }
  return false;  // unknown scopes match nothing, like podMatchesScopeFunc
}

bool QuotaMatches(const std::vector<ScopeRequirement>& scopes, const UsageItem& item) {
  if (scopes.empty()) return true;
  if (!item.is_pod_group) return false;  // only the pod evaluator understands scopes
  const Json& spec = item.pods.pod["spec"];
  return std::all_of(scopes.begin(), scopes.end(),
                     [&](const ScopeRequirement& s) { return PodMatchesScope(s, spec); });
}

// The pod evaluator's Constraints: with cpu/memory under quota, every container must state them.
const std::set<std::string>& ValidationSet() {
  static const std::set<std::string> kSet = {
      "cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"};
  return kSet;
}

void CheckContainerConstraints(const UsageItem& item, const std::string& quota_name,
                               const ResourceList& hard, FitResult& result) {
  std::set<std::string> required;
  for (const auto& [name, amount] : hard) {
    if (ValidationSet().count(name) != 0) required.insert(name);
  }
  if (required.empty()) return;
  std::set<std::string> missing;
  std::vector<std::string> offenders;
  const Json& spec = item.pods.pod["spec"];
  for (std::string_view key : {"containers", "initContainers"}) {
    const Json& list = At(spec, key);
    if (!list.is_array()) continue;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string f = fmt::format("spec.{}[{}]", key, i);
      ResourceList requests = internal::ContainerResources(list[i], "requests", f);
      ResourceList limits = internal::ContainerResources(list[i], "limits", f);
      std::set<std::string> has;
      for (std::string_view r : {"cpu", "memory"}) {
        if (requests.count(std::string(r)) != 0) {
          has.insert(std::string(r));
          has.insert(fmt::format("requests.{}", r));
        }
        if (limits.count(std::string(r)) != 0) has.insert(fmt::format("limits.{}", r));
      }
      bool short_here = false;
      for (const auto& r : required) {
        if (has.count(r) == 0) {
          missing.insert(r);
          short_here = true;
        }
      }
      if (short_here) offenders.push_back(StringAt(list[i], "name"));
    }
  }
  if (missing.empty()) return;
  std::string names;
  for (const auto& m : missing) names += (names.empty() ? "" : ",") + m;
  std::string containers;
  for (const auto& c : offenders) containers += (containers.empty() ? "\"" : ", \"") + c + "\"";
  result.fits = false;
  result.problems.push_back(fmt::format(
      "{}: quota {} limits cpu/memory, so every container must specify {} (container {} does "
      "not); the server would refuse these pods with \"failed quota: {}: must specify {}\" — set "
      "resources or give the namespace a LimitRange with defaults",
      item.source, quota_name, names, containers, quota_name, names));
}

ResourceList HardOf(const Json& quota) {
  ResourceList hard = ParseResourceList(At(At(quota, "spec"), "hard"), "spec.hard");
  // Admission enforces status.hard; a quota whose status the controller has not written yet
  // is not enforced at all for a moment. The pre-flight uses spec.hard, the limit that will be
  // enforced, so that it never promises what the server will soon refuse.
  if (hard.empty()) hard = ParseResourceList(At(At(quota, "status"), "hard"), "status.hard");
  return hard;
}

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
  if (auto pos = key.find(kStorageClassInfix); pos != std::string::npos) {
    const std::string storage_class = key.substr(0, pos);
    const std::string rest = key.substr(pos + kStorageClassInfix.size());
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

// ---- usage table ------------------------------------------------------------------------------

std::string Percent(const ResourceUsage& r) {
  if (r.hard.IsZero()) return r.used.IsZero() ? "-" : "over";
  return fmt::format("{}%", static_cast<long long>(std::lround(r.Fraction() * 100.0)));
}

// Ready = the quota controller has caught up with spec.hard (see WaitForQuotaReady).
bool QuotaReady(const Json& quota) {
  ResourceList spec_hard = ParseResourceList(At(At(quota, "spec"), "hard"), "spec.hard");
  const Json& status = At(quota, "status");
  ResourceList status_hard = ParseResourceList(At(status, "hard"), "status.hard");
  const Json& used = At(status, "used");
  if (status_hard.size() != spec_hard.size()) return false;
  for (const auto& [name, amount] : spec_hard) {
    auto it = status_hard.find(name);
    if (it == status_hard.end() || it->second != amount) return false;
    if (!used.is_object() || !used.contains(name)) return false;
  }
  return true;
}

}  // namespace

// ---- demand -----------------------------------------------------------------------------------

ResourceList QuotaDemandOf(const std::vector<Json>& objects) {
  return QuotaDemandOf(objects, DemandContext{});
}

ResourceList QuotaDemandOf(const std::vector<Json>& objects, const DemandContext& context) {
  ResourceList total;
  for (const auto& item : internal::UsageItemsOf(objects, context)) AddTo(total, item.usage);
  // Admission ignores resources with zero usage (RemoveZeros); so does the demand.
  std::erase_if(total, [](const auto& entry) { return entry.second.IsZero(); });
  return total;
}

ResourceList PodDemandOf(const Json& pod_template, std::int64_t replicas,
                         const DemandContext& context) {
  ResourceList demand = internal::PodTemplateItem(pod_template, replicas, context).usage;
  std::erase_if(demand, [](const auto& entry) { return entry.second.IsZero(); });
  return demand;
}

// ---- fit results --------------------------------------------------------------------------------

std::string FitResult::Message() const {
  std::string out;
  for (const auto& s : shortfalls) {
    if (!out.empty()) out += "\n";
    out += fmt::format("{}: requested {}, remaining {} (hard {}, used {}) in quota {}", s.resource,
                       s.requested.ToString(), s.remaining.ToString(), s.hard.ToString(),
                       s.used.ToString(), s.quota);
  }
  for (const auto& p : problems) {
    if (!out.empty()) out += "\n";
    out += p;
  }
  return out;
}

void FitResult::Merge(const FitResult& other) {
  fits = fits && other.fits;
  shortfalls.insert(shortfalls.end(), other.shortfalls.begin(), other.shortfalls.end());
  problems.insert(problems.end(), other.problems.begin(), other.problems.end());
  notes.insert(notes.end(), other.notes.begin(), other.notes.end());
}

namespace {

FitResult EvaluateItems(const std::vector<UsageItem>& items, const std::vector<Json>& quotas) {
  FitResult result;
  for (const auto& quota : quotas) {
    const std::string name = StringAt(At(quota, "metadata"), "name");
    const ResourceList hard = HardOf(quota);
    if (hard.empty()) continue;
    const ResourceList used = ParseResourceList(At(At(quota, "status"), "used"), "status.used");
    const auto scopes = ScopesOf(quota);

    ResourceList demand;
    for (const auto& item : items) {
      if (!QuotaMatches(scopes, item)) continue;
      if (item.is_pod_group) CheckContainerConstraints(item, name, hard, result);
      for (const auto& [resource, amount] : item.usage) {
        if (hard.count(resource) != 0) demand[resource] += amount;
      }
    }
    for (const auto& [resource, requested] : demand) {
      if (requested.IsZero()) continue;  // admission ignores zero usage
      const Quantity& limit = hard.at(resource);
      auto u = used.find(resource);
      const Quantity already = u == used.end() ? Quantity() : u->second;
      if (already + requested > limit) {
        result.fits = false;
        result.shortfalls.push_back(
            Shortfall{resource, name, requested, already, limit, limit - already});
      }
    }
  }
  return result;
}

// The namespace's admission context: LimitRanges, and the default StorageClass when a quota has
// per-class keys (the only case where it matters, so the read is skipped otherwise).
DemandContext ContextFor(Client& client, const std::string& ns, const std::vector<Json>& quotas) {
  DemandContext context;
  context.limit_ranges = Items(client.List(kLimitRanges, ns));
  bool per_class = false;
  for (const auto& q : quotas) {
    for (const auto& [k, v] : HardOf(q)) {
      if (k.find(kStorageClassInfix) != std::string::npos) per_class = true;
    }
  }
  if (!per_class) return context;
  for (const auto& sc : Items(client.List(kStorageClasses, ""))) {
    const Json& annotations = At(At(sc, "metadata"), "annotations");
    for (std::string_view key : {"storageclass.kubernetes.io/is-default-class",
                                 "storageclass.beta.kubernetes.io/is-default-class"}) {
      if (StringAt(annotations, key) == "true") {
        context.default_storage_class = StringAt(At(sc, "metadata"), "name");
      }
    }
  }
  return context;
}

}  // namespace

FitResult EvaluateQuota(const std::vector<Json>& objects, const std::vector<Json>& quotas,
                        const DemandContext& context) {
  // Parse the objects even without quotas, so malformed input fails the same way either way.
  const std::vector<UsageItem> items = internal::UsageItemsOf(objects, context);
  return EvaluateItems(items, quotas);
}

namespace {

// The quotas of `ns`, plus for each team quota among them (kTeamNamespacesAnnotation) one more:
// the team's total, with the team quota's hard limits and the usage summed over the team's
// namespaces. The server enforces each namespace's quota alone; no Kubernetes object limits a
// sum over namespaces, so this is the only place the team's total is checked.
std::vector<Json> QuotasWithTeamTotals(Client& client, const std::string& ns,
                                       std::vector<std::string>* notes) {
  std::vector<Json> quotas = Items(client.List(kResourceQuotas, ns));
  const std::size_t own = quotas.size();
  for (std::size_t i = 0; i < own; ++i) {
    const Json& metadata = At(quotas[i], "metadata");
    const std::string team = StringAt(At(metadata, "annotations"), kTeamNamespacesAnnotation);
    if (team.empty()) continue;
    const std::string name = StringAt(metadata, "name");
    ResourceList used = ParseResourceList(At(At(quotas[i], "status"), "used"), "status.used");
    std::vector<std::string> counted{ns};
    std::size_t start = 0;
    while (start <= team.size()) {
      std::size_t comma = std::min(team.find(',', start), team.size());
      std::string other = team.substr(start, comma - start);
      start = comma + 1;
      if (other.empty() || other == ns) continue;
      try {
        Json theirs = internal::GetChecked(client, kResourceQuotas, other, name);
        AddTo(used, ParseResourceList(At(At(theirs, "status"), "used"), "status.used"));
        counted.push_back(other);
      } catch (const NotFound&) {
        // A member's namespace deleted since the quota was applied: nothing left to count.
      } catch (const Forbidden&) {
        notes->push_back(fmt::format(
            "the team total of quota {} leaves out namespace {}: these credentials may not read "
            "its quota (the server still enforces each namespace's own quota)",
            name, other));
      }
    }
    Json used_json = Json::object();
    for (const auto& [resource, amount] : used) used_json[resource] = amount.ToString();
    quotas.push_back(
        {{"metadata",
          {{"name", fmt::format("{} (team total over {})", name, fmt::join(counted, ", "))}}},
         {"spec", {{"hard", At(At(quotas[i], "spec"), "hard")}}},
         {"status", {{"used", used_json}}}});
  }
  return quotas;
}

}  // namespace

FitResult CheckQuota(Client& client, const std::string& ns, const std::vector<Json>& objects) {
  std::vector<std::string> notes;
  std::vector<Json> quotas = QuotasWithTeamTotals(client, ns, &notes);
  if (quotas.empty()) return EvaluateQuota(objects, {}, {});
  FitResult fit = EvaluateQuota(objects, quotas, ContextFor(client, ns, quotas));
  fit.notes.insert(fit.notes.end(), notes.begin(), notes.end());
  return fit;
}

FitResult CheckQuotaForPods(Client& client, const std::string& ns, const Json& pod_template,
                            std::int64_t replicas) {
  (void)internal::PodTemplateItem(pod_template, replicas, {});  // validate before any request
  std::vector<std::string> notes;
  std::vector<Json> quotas = QuotasWithTeamTotals(client, ns, &notes);
  if (quotas.empty()) return {};
  const DemandContext context = ContextFor(client, ns, quotas);
  FitResult fit =
      EvaluateItems({internal::PodTemplateItem(pod_template, replicas, context)}, quotas);
  fit.notes.insert(fit.notes.end(), notes.begin(), notes.end());
  return fit;
}

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
  return spec;
}

namespace {

// The queue's namespaces: its own (shared by the team), then each member's (personal).
std::vector<std::string> TeamNamespaces(const QuotaSpec& spec) {
  std::vector<std::string> out{spec.name};
  for (const auto& m : spec.members) out.push_back(spec.name + "-" + m);
  return out;
}

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
      quota_metadata["annotations"] = {{std::string(kTeamNamespacesAnnotation),
                                        fmt::format("{}", fmt::join(TeamNamespaces(spec), ","))}};
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
    for (const auto& n : TeamNamespaces(spec)) {
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

bool ManagedByTfk8s(const Json& object) {
  return StringAt(At(At(object, "metadata"), "labels"), kManagedByLabel) == kManagedByValue;
}

// Deletes a queue object that an earlier spec created and the current one no longer wants; only
// objects tfk8s manages are touched.
void DeleteIfManaged(Client& client, const ResourceType& type, const std::string& ns,
                     const std::string& name) {
  try {
    Json existing = internal::GetChecked(client, type, ns, name);
    if (!ManagedByTfk8s(existing)) return;
    client.Delete(type, ns, name);
  } catch (const NotFound&) {
  }
}

// Deletes namespace `name` only when tfk8s created it (ApplyQuota labels managed-by=tfk8s only
// the namespaces it creates), and only the incarnation that was read: a UID precondition, so a
// namespace deleted and re-created by someone else after the check is left alone.
void DeleteOwnNamespace(Client& client, const std::string& name) {
  const Json ns = internal::GetChecked(client, kNamespaces, "", name);
  if (!ManagedByTfk8s(ns)) {
    const std::string label = StringAt(At(At(ns, "metadata"), "labels"), kManagedByLabel);
    throw ValidationError(
        "name", name,
        fmt::format("namespace {} was not created by tfk8s (label {} is {}): it is not deleted, "
                    "with everything in it; delete_namespace=false removes only the queue's "
                    "quota and LimitRange",
                    name, kManagedByLabel, label.empty() ? "absent" : "\"" + label + "\""));
  }
  // Already being deleted (its content is going): nothing to do, and the server would answer
  // a second delete with a Conflict.
  if (At(ns, "metadata").contains("deletionTimestamp")) return;
  DeleteOptions options;
  options.precondition_uid = StringAt(At(ns, "metadata"), "uid");
  if (options.precondition_uid.empty()) {
    throw DecodeError(fmt::format("namespace {}: the server's answer has no metadata.uid", name),
                      "metadata.uid");
  }
  try {
    client.Delete(kNamespaces, "", name, options);
  } catch (const Conflict& e) {
    throw Conflict(ErrorKind::kConflict,
                   fmt::format("namespace {} changed after it was checked (the delete was "
                               "only for uid {}): not deleted ({})",
                               name, options.precondition_uid, e.what()),
                   e.http_code(), e.reason(), e.server_message(), e.causes());
  }
}

}  // namespace

QuotaUsage ApplyQuota(Client& client, const QuotaSpec& spec, const ApplyQuotaOptions& options) {
  const std::vector<Json> objects = RenderQuota(spec);
  ApplyOptions apply;
  apply.force = options.force;
  // In order: each Namespace exists before anything is applied into it. The managed-by label
  // on a Namespace says tfk8s created it, and DeleteQuota deletes only such namespaces: a
  // namespace that exists without it (the team's, "default") is not given it.
  for (Json object : objects) {
    if (object.value("kind", "") == "Namespace") {
      if (auto existing = internal::GetOptional(client, kNamespaces, "", internal::NameOf(object));
          existing && !ManagedByTfk8s(*existing)) {
        object["metadata"]["labels"].erase(std::string(kManagedByLabel));
      }
    }
    client.Apply(object, apply);
  }
  for (const auto& ns : TeamNamespaces(spec)) {
    if (spec.hard.empty()) DeleteIfManaged(client, kResourceQuotas, ns, spec.name);
    if (!spec.limit_range) DeleteIfManaged(client, kLimitRanges, ns, spec.name);
    if (options.wait_ready && !spec.hard.empty()) {
      WaitForQuotaReady(client, ns, options.ready_timeout);
    }
  }
  if (spec.hard.empty()) return QuotaUsage{spec.name, spec.name, {}, true};
  return UsageOf(internal::GetChecked(client, kResourceQuotas, spec.name, spec.name));
}

void DeleteQuota(Client& client, const std::string& name, bool delete_namespace) {
  validation::RequireDns1123Label("name", name);
  try {
    if (delete_namespace) {
      DeleteOwnNamespace(client, name);
      return;
    }
    try {
      client.Delete(kResourceQuotas, name, name);
    } catch (const NotFound&) {
    }
    client.Delete(kLimitRanges, name, name);
  } catch (const NotFound&) {
  }
}

// ---- usage --------------------------------------------------------------------------------------

double ResourceUsage::Fraction() const {
  if (hard.Sign() <= 0) return used.Sign() > 0 ? 1.0 : 0.0;
  return used.AsDouble() / hard.AsDouble();
}

std::optional<ResourceUsage> QuotaUsage::Find(std::string_view resource) const {
  for (const auto& r : resources) {
    if (r.resource == resource) return r;
  }
  return std::nullopt;
}

QuotaUsage UsageOf(const Json& resource_quota) {
  QuotaUsage out;
  const Json& metadata = At(resource_quota, "metadata");
  out.ns = StringAt(metadata, "namespace");
  out.name = StringAt(metadata, "name");
  const ResourceList spec_hard =
      ParseResourceList(At(At(resource_quota, "spec"), "hard"), "spec.hard");
  const Json& status = At(resource_quota, "status");
  const ResourceList status_hard = ParseResourceList(At(status, "hard"), "status.hard");
  const ResourceList used = ParseResourceList(At(status, "used"), "status.used");
  // What `kubectl describe quota` prints: status.hard (what admission enforces) and status.used;
  // resources the controller has not reached yet show spec.hard and zero use.
  std::set<std::string> names;
  for (const auto& [k, v] : spec_hard) names.insert(k);
  for (const auto& [k, v] : status_hard) names.insert(k);
  for (const auto& name : names) {
    ResourceUsage r;
    r.resource = name;
    auto sh = status_hard.find(name);
    r.hard = sh != status_hard.end() ? sh->second : spec_hard.at(name);
    auto u = used.find(name);
    if (u != used.end()) r.used = u->second;
    r.remaining = r.hard - r.used;
    out.resources.push_back(std::move(r));
  }
  out.ready = QuotaReady(resource_quota);
  return out;
}

std::vector<QuotaUsage> GetQuotaUsage(Client& client, const std::string& ns) {
  std::vector<QuotaUsage> out;
  for (const auto& q : Items(client.List(kResourceQuotas, ns))) out.push_back(UsageOf(q));
  std::sort(out.begin(), out.end(),
            [](const QuotaUsage& a, const QuotaUsage& b) { return a.name < b.name; });
  return out;
}

std::vector<QuotaUsage> ListQueues(Client& client) {
  ListOptions options;
  options.label_selector = std::string(kQueueLabel);
  std::vector<QuotaUsage> out;
  for (const auto& q : Items(client.ListAll(kResourceQuotas, "", options))) {
    out.push_back(UsageOf(q));
  }
  std::sort(out.begin(), out.end(), [](const QuotaUsage& a, const QuotaUsage& b) {
    return std::tie(a.ns, a.name) < std::tie(b.ns, b.name);
  });
  return out;
}

std::vector<std::vector<std::string>> UsageRows(const std::vector<QuotaUsage>& usages) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"NAMESPACE", "QUOTA", "RESOURCE", "USED", "HARD", "REMAINING", "USE%"});
  for (const auto& q : usages) {
    for (const auto& r : q.resources) {
      rows.push_back({q.ns, q.name, r.resource, FormatAmount(r.resource, r.used),
                      FormatAmount(r.resource, r.hard), FormatAmount(r.resource, r.remaining),
                      Percent(r)});
    }
  }
  return rows;
}

std::string FormatUsageTable(const std::vector<QuotaUsage>& usages) {
  return internal::FormatTextTable(UsageRows(usages));
}

// ---- readiness and the "status unknown" window --------------------------------------------------

void WaitForQuotaReady(Client& client, const std::string& ns, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  Json list = client.List(kResourceQuotas, ns);
  std::map<std::string, Json> quotas;
  for (const auto& q : Items(list)) quotas[StringAt(At(q, "metadata"), "name")] = q;
  auto all_ready = [&] {
    return std::all_of(quotas.begin(), quotas.end(),
                       [](const auto& entry) { return QuotaReady(entry.second); });
  };
  if (all_ready()) return;

  // Watch from the list's version: the controller's status update arrives as an event, so the
  // wait ends as soon as usage is known instead of at the next poll.
  ListOptions from;
  from.resource_version = StringAt(At(list, "metadata"), "resourceVersion");
  Informer informer(client, kResourceQuotas, ns, from);
  informer.set_watch_timeout(std::chrono::seconds(std::max<std::int64_t>(
      1, std::chrono::duration_cast<std::chrono::seconds>(timeout).count())));
  while (true) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) break;
    auto event =
        informer.Next(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now));
    if (!event) continue;
    const std::string name = StringAt(At(event->object, "metadata"), "name");
    if (event->type == WatchEventType::kDeleted) {
      quotas.erase(name);
    } else if (event->type == WatchEventType::kAdded || event->type == WatchEventType::kModified) {
      internal::CheckServerObject(event->object, "ResourceQuota", "watch");
      quotas[name] = event->object;
    }
    if (all_ready()) return;
  }
  std::string pending;
  for (const auto& [name, q] : quotas) {
    if (!QuotaReady(q)) pending += (pending.empty() ? "" : ", ") + name;
  }
  const std::string message = fmt::format(
      "quota {} in namespace {} has no usage yet after {} ms (is kube-controller-manager "
      "running its resourcequota controller?)",
      pending, ns, timeout.count());
  throw Timeout(ErrorKind::kTimeout, message, 0, "Timeout", message);
}

bool IsQuotaStatusUnknown(const std::exception& error) {
  const auto* forbidden = dynamic_cast<const Forbidden*>(&error);
  if (forbidden == nullptr) return false;
  return forbidden->server_message().find("status unknown for quota") != std::string::npos ||
         std::string_view(forbidden->what()).find("status unknown for quota") !=
             std::string_view::npos;
}

Json RetryWhileQuotaUnknown(const std::function<Json()>& write, std::chrono::milliseconds budget) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  std::chrono::milliseconds backoff(50);
  while (true) {
    try {
      return write();
    } catch (const Forbidden& e) {
      if (!IsQuotaStatusUnknown(e) || std::chrono::steady_clock::now() + backoff > deadline) throw;
    }
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(1000));
  }
}

// ---- results as JSON -----------------------------------------------------------------------

Json FitResult::ToJson() const {
  Json out_shortfalls = Json::array();
  for (const auto& s : shortfalls) {
    out_shortfalls.push_back({{"resource", s.resource},
                              {"quota", s.quota},
                              {"requested", s.requested.ToString()},
                              {"used", s.used.ToString()},
                              {"hard", s.hard.ToString()},
                              {"remaining", s.remaining.ToString()}});
  }
  return {{"fits", fits},
          {"shortfalls", std::move(out_shortfalls)},
          {"problems", problems},
          {"notes", notes},
          {"message", Message()}};
}

Json QuotaUsage::ToJson() const {
  Json out = Json::array();
  for (const auto& r : resources) {
    out.push_back({{"resource", r.resource},
                   {"hard", r.hard.ToString()},
                   {"used", r.used.ToString()},
                   {"remaining", r.remaining.ToString()},
                   {"fraction", r.Fraction()}});
  }
  return {{"namespace", ns}, {"name", name}, {"ready", ready}, {"resources", std::move(out)}};
}

}  // namespace tfk8s
