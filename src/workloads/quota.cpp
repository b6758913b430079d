// Team queues, quota usage and the quota pre-flight. The pre-flight mirrors the apiserver's
// ResourceQuota admission (k8s.io/apiserver/pkg/admission/plugin/resourcequota, v1.20): the
// same usage per object, the same scopes, the same "must specify" constraint, zero usage ignored,
// and a resource is short when used + requested > hard.

#include "tfk8s/quota.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
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
      if (k.find(internal::kStorageClassInfix) != std::string::npos) per_class = true;
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
// namespace deleted and re-created by someone else after the check is left alone. Returns
// false when there is no such namespace (true for one already being deleted).
bool DeleteOwnNamespace(Client& client, const std::string& name) {
  const std::optional<Json> found = internal::GetOptional(client, kNamespaces, "", name);
  if (!found) return false;
  const Json& ns = *found;
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
  if (At(ns, "metadata").contains("deletionTimestamp")) return true;
  DeleteOptions options;
  options.precondition_uid = StringAt(At(ns, "metadata"), "uid");
  if (options.precondition_uid.empty()) {
    throw DecodeError(fmt::format("namespace {}: the server's answer has no metadata.uid", name),
                      "metadata.uid");
  }
  try {
    client.Delete(kNamespaces, "", name, options);
  } catch (const NotFound&) {
    return false;  // gone since it was read
  } catch (const Conflict& e) {
    throw Conflict(ErrorKind::kConflict,
                   fmt::format("namespace {} changed after it was checked (the delete was "
                               "only for uid {}): not deleted ({})",
                               name, options.precondition_uid, e.what()),
                   e.http_code(), e.reason(), e.server_message(), e.causes());
  }
  return true;
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
  for (const auto& ns : internal::TeamNamespaces(spec)) {
    if (spec.hard.empty()) DeleteIfManaged(client, kResourceQuotas, ns, spec.name);
    if (!spec.limit_range) DeleteIfManaged(client, kLimitRanges, ns, spec.name);
    if (options.wait_ready && !spec.hard.empty()) {
      WaitForQuotaReady(client, ns, options.ready_timeout);
    }
  }
  if (spec.hard.empty()) return QuotaUsage{spec.name, spec.name, {}, true};
  return UsageOf(internal::GetChecked(client, kResourceQuotas, spec.name, spec.name));
}

bool DeleteQuota(Client& client, const std::string& name, bool delete_namespace) {
  validation::RequireDns1123Label("name", name);
  if (delete_namespace) return DeleteOwnNamespace(client, name);
  // Each one missing is not an error (a queue may have no LimitRange, or no quota); whether
  // either was there is the answer.
  bool deleted = false;
  for (const ResourceType* type : {&kResourceQuotas, &kLimitRanges}) {
    try {
      client.Delete(*type, name, name);
      deleted = true;
    } catch (const NotFound&) {
    }
  }
  return deleted;
}

QuotaSpec GetQuotaSpec(Client& client, const std::string& name) {
  validation::RequireDns1123Label("name", name);
  const std::optional<Json> quota = internal::GetOptional(client, kResourceQuotas, name, name);
  const std::optional<Json> limits = internal::GetOptional(client, kLimitRanges, name, name);
  if (!quota && !limits) {
    throw NotFound(ErrorKind::kNotFound,
                   "quota/" + name + " not found (no ResourceQuota or LimitRange " + name +
                       " in namespace " + name + ")",
                   404, "NotFound");
  }
  QuotaSpec spec = QuotaSpecOf(internal::GetChecked(client, kNamespaces, "", name),
                               quota ? *quota : Json(nullptr), limits ? *limits : Json(nullptr));
  // The members come from an annotation: each is kept only when its namespace is the one
  // ApplyQuota made for it (managed by tfk8s, of this team, personal to that member), so an
  // annotation edited by hand cannot add a member that applying the result would create.
  std::vector<std::string> members;
  for (const auto& member : spec.members) {
    const std::optional<Json> ns =
        internal::GetOptional(client, kNamespaces, "", spec.name + "-" + member);
    if (!ns) continue;
    const Json& labels = At(At(*ns, "metadata"), "labels");
    if (StringAt(labels, kManagedByLabel) == kManagedByValue &&
        StringAt(labels, kTeamLabel) == spec.name && StringAt(labels, kOwnerLabel) == member) {
      members.push_back(member);
    }
  }
  spec.members = std::move(members);
  return spec;
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
      // Kubernetes' notation, as kubectl describe quota prints them (2700m, 16Gi).
      rows.push_back({q.ns, q.name, r.resource, r.used.ToString(), r.hard.ToString(),
                      r.remaining.ToString(), Percent(r)});
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
