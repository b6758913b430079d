// Node labels, node inventory and placement checks. Matching follows the scheduler's filters
// (NodeAffinity, TaintToleration, NodeResourcesFit) and core/v1 helpers (ToleratesTaint,
// NodeSelectorRequirementsAsSelector) of Kubernetes v1.20.

#include "tfk8s/placement.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "tfk8s/error.hpp"
#include "tfk8s/validation.hpp"
#include "workloads/common.hpp"
#include "workloads/quota_pods.hpp"
#include "workloads/tfcluster_internal.hpp"

namespace tfk8s {

using namespace internal::reading;

namespace {

constexpr std::string_view kActivePods = "status.phase!=Succeeded,status.phase!=Failed";

std::map<std::string, std::string> LabelsOf(const Json& object) {
  std::map<std::string, std::string> out;
  const Json& labels = At(At(object, "metadata"), "labels");
  if (!labels.is_object()) return out;
  for (const auto& [k, v] : labels.items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

std::string Get(const std::map<std::string, std::string>& m, std::string_view key) {
  auto it = m.find(std::string(key));
  return it == m.end() ? std::string() : it->second;
}

std::vector<std::string> Strings(const Json& array) {
  std::vector<std::string> out;
  if (!array.is_array()) return out;
  for (const auto& v : array) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}

// ---- label and taint matching ------------------------------------------------------------------

bool ParseInt(const std::string& s, std::int64_t* out) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

// One NodeSelectorRequirement against a label set (or a field set for matchFields).
bool RequirementMatches(const Json& requirement, const std::map<std::string, std::string>& labels) {
  const std::string key = StringAt(requirement, "key");
  const std::string op = StringAt(requirement, "operator");
  const std::vector<std::string> values = Strings(At(requirement, "values"));
  auto it = labels.find(key);
  const bool has = it != labels.end();
  if (op == "In") return has && std::find(values.begin(), values.end(), it->second) != values.end();
  if (op == "NotIn") {
    return !has || std::find(values.begin(), values.end(), it->second) == values.end();
  }
  if (op == "Exists") return has;
  if (op == "DoesNotExist") return !has;
  if (op == "Gt" || op == "Lt") {
    std::int64_t label = 0;
    std::int64_t bound = 0;
    if (!has || values.size() != 1 || !ParseInt(it->second, &label) ||
        !ParseInt(values[0], &bound)) {
      return false;
    }
    return op == "Gt" ? label > bound : label < bound;
  }
  return false;
}

std::string DescribeRequirement(const Json& requirement) {
  const std::string key = StringAt(requirement, "key");
  const std::string op = StringAt(requirement, "operator");
  const std::vector<std::string> values = Strings(At(requirement, "values"));
  std::string list;
  for (const auto& v : values) list += (list.empty() ? "" : ",") + v;
  if (op == "In" && values.size() == 1) return fmt::format("{}={}", key, values[0]);
  if (op == "In") return fmt::format("{} in ({})", key, list);
  if (op == "NotIn") return fmt::format("{} notin ({})", key, list);
  if (op == "Exists") return fmt::format("{}", key);
  if (op == "DoesNotExist") return "!" + key;
  if (op == "Gt") return fmt::format("{}>{}", key, list);
  if (op == "Lt") return fmt::format("{}<{}", key, list);
  return fmt::format("{} {} ({})", key, op, list);
}

const Json& RequiredTerms(const Json& pod_spec) {
  return At(At(At(pod_spec, "affinity"), "nodeAffinity"),
            "requiredDuringSchedulingIgnoredDuringExecution");
}

// A nodeSelectorTerm: all matchExpressions (labels) and matchFields (metadata.name); an empty
// term matches nothing.
bool TermMatches(const Json& term, const std::map<std::string, std::string>& labels,
                 const std::string& node_name) {
  const Json& exprs = At(term, "matchExpressions");
  const Json& fields = At(term, "matchFields");
  const bool has_exprs = exprs.is_array() && !exprs.empty();
  const bool has_fields = fields.is_array() && !fields.empty();
  if (!has_exprs && !has_fields) return false;
  if (has_exprs) {
    for (const auto& e : exprs) {
      if (!RequirementMatches(e, labels)) return false;
    }
  }
  if (has_fields) {
    const std::map<std::string, std::string> node_fields{{"metadata.name", node_name}};
    for (const auto& f : fields) {
      if (!RequirementMatches(f, node_fields)) return false;
    }
  }
  return true;
}

bool SelectorMatches(const Json& pod_spec, const std::map<std::string, std::string>& labels,
                     const std::string& node_name) {
  const Json& selector = At(pod_spec, "nodeSelector");
  if (selector.is_object()) {
    for (const auto& [k, v] : selector.items()) {
      if (!v.is_string() || Get(labels, k) != v.get<std::string>() || labels.count(k) == 0) {
        return false;
      }
    }
  }
  const Json& required = RequiredTerms(pod_spec);
  if (required.is_object()) {
    const Json& terms = At(required, "nodeSelectorTerms");
    if (!terms.is_array()) return false;
    bool any = false;
    for (const auto& term : terms) {
      if (TermMatches(term, labels, node_name)) {
        any = true;
        break;
      }
    }
    if (!any) return false;
  }
  const std::string bound = StringAt(pod_spec, "nodeName");
  return bound.empty() || bound == node_name;
}

// v1.Toleration.ToleratesTaint.
bool Tolerates(const Json& toleration, const Taint& taint) {
  const std::string effect = StringAt(toleration, "effect");
  const std::string key = StringAt(toleration, "key");
  const std::string op = StringAt(toleration, "operator");
  if (!effect.empty() && effect != taint.effect) return false;
  if (!key.empty() && key != taint.key) return false;
  if (op.empty() || op == "Equal") return StringAt(toleration, "value") == taint.value;
  return op == "Exists";
}

bool ToleratedBy(const Json& tolerations, const Taint& taint) {
  if (!tolerations.is_array()) return false;
  return std::any_of(tolerations.begin(), tolerations.end(),
                     [&](const Json& t) { return Tolerates(t, taint); });
}

bool Blocks(const Taint& taint) {
  return taint.effect == "NoSchedule" || taint.effect == "NoExecute";
}

// Taints the node lifecycle controller sets for a passing condition (not ready, pressure,
// cordoned). They say nothing about whether a pod could *ever* run there.
bool IsConditionTaint(const Taint& taint) { return taint.key.rfind("node.kubernetes.io/", 0) == 0; }

std::vector<Taint> TaintsOf(const Json& node) {
  std::vector<Taint> out;
  const Json& taints = At(At(node, "spec"), "taints");
  if (!taints.is_array()) return out;
  for (const auto& t : taints) {
    out.push_back({StringAt(t, "key"), StringAt(t, "value"), StringAt(t, "effect")});
  }
  return out;
}

constexpr std::string_view kNotReadyTaint = "node.kubernetes.io/not-ready";
constexpr std::string_view kUnreachableTaint = "node.kubernetes.io/unreachable";
constexpr std::string_view kUnschedulableTaint = "node.kubernetes.io/unschedulable";

// Why a node whose labels match cannot take a pod with `tolerations` ("NotReady", "cordoned",
// "taint k=v:NoSchedule not tolerated"; empty when it can), as the scheduler's
// NodeUnschedulable and TaintToleration filters judge it. kEver ignores what passes (readiness,
// the cordon and the node lifecycle's node.kubernetes.io/* taints). A NotReady node carries
// the not-ready or unreachable taint and a cordoned one the unschedulable taint: those are not
// named a second time.
std::vector<std::string> NodeBlockers(const NodeInfo& n, const Json& tolerations,
                                      PlacementScope scope) {
  std::vector<std::string> out;
  const bool now = scope == PlacementScope::kNow;
  auto tolerates = [&](std::string_view key) {
    return ToleratedBy(tolerations, Taint{std::string(key), "", "NoSchedule"});
  };
  const bool not_ready =
      now && !n.ready && !(tolerates(kNotReadyTaint) && tolerates(kUnreachableTaint));
  const bool cordoned = now && !n.schedulable && !tolerates(kUnschedulableTaint);
  if (not_ready) out.emplace_back("NotReady");
  if (cordoned) out.emplace_back("cordoned");
  for (const auto& t : n.taints) {
    if (!Blocks(t) || ToleratedBy(tolerations, t)) continue;
    if (IsConditionTaint(t)) {
      if (!now) continue;
      if (not_ready && (t.key == kNotReadyTaint || t.key == kUnreachableTaint)) continue;
      if (cordoned && t.key == kUnschedulableTaint) continue;
    }
    out.push_back(fmt::format("taint {} not tolerated", t.ToString()));
  }
  return out;
}

// ---- resources ---------------------------------------------------------------------------------

std::string NodeResourceName(const std::string& name) {
  return name.rfind("requests.", 0) == 0 ? name.substr(9) : name;
}

ResourceList Difference(const ResourceList& a, const ResourceList& b) {
  ResourceList out;
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    out[k] = it == b.end() ? v : v - it->second;
  }
  return out;
}

Quantity Amount(const ResourceList& list, const std::string& key) {
  auto it = list.find(key);
  return it == list.end() ? Quantity() : it->second;
}

// Resources of `need` (positive amounts) that `have` does not cover.
std::vector<std::string> ShortOf(const ResourceList& need, const ResourceList& have) {
  std::vector<std::string> out;
  for (const auto& [k, v] : need) {
    if (v.Sign() > 0 && Amount(have, k) < v) out.push_back(k);
  }
  return out;
}

NodeInfo NodeFromJson(const Json& node) {
  NodeInfo info;
  info.name = StringAt(At(node, "metadata"), "name");
  info.labels = LabelsOf(node);
  info.nodetype = Get(info.labels, kNodeTypeLabel);
  info.cputype = Get(info.labels, kCpuTypeLabel);
  info.gputype = Get(info.labels, kGpuTypeLabel);
  info.pooltype = Get(info.labels, kPoolTypeLabel);
  info.privatename = Get(info.labels, kPrivateNameLabel);
  const Json& unschedulable = At(At(node, "spec"), "unschedulable");
  info.schedulable = !(unschedulable.is_boolean() && unschedulable.get<bool>());
  info.taints = TaintsOf(node);
  const Json& status = At(node, "status");
  info.allocatable = ParseResourceList(At(status, "allocatable"), "status.allocatable");
  if (const Json& conditions = At(status, "conditions"); conditions.is_array()) {
    for (const auto& c : conditions) {
      if (StringAt(c, "type") == "Ready") info.ready = StringAt(c, "status") == "True";
    }
  }
  return info;
}

std::string PoolOf(const NodeInfo& n) {
  if (n.pooltype == "unshared") return "unshared/" + n.privatename;
  return n.pooltype;
}

std::vector<NodeGroup> GroupBy(const std::vector<NodeInfo>& nodes, std::string_view label,
                               std::string (*value_of)(const NodeInfo&)) {
  std::map<std::string, NodeGroup> groups;
  for (const auto& n : nodes) {
    const std::string value = value_of(n);
    NodeGroup& g = groups[value];
    g.label = std::string(label);
    g.value = value;
    g.nodes.push_back(n.name);
    AddTo(g.allocatable, n.allocatable);
    AddTo(g.requested, n.requested);
    AddTo(g.free, n.free);
  }
  std::vector<NodeGroup> out;
  out.reserve(groups.size());
  for (auto& [value, g] : groups) out.push_back(std::move(g));
  return out;
}

Json PatchLabels(Client& client, const std::string& node,
                 const std::function<std::map<std::string, std::string>(
                     const std::map<std::string, std::string>&, Json&)>& change) {
  for (int attempt = 0;; ++attempt) {
    Json current = internal::GetChecked(client, kNodes, "", node);
    Json label_patch = Json::object();
    const std::map<std::string, std::string> result = change(LabelsOf(current), label_patch);
    ValidateNodeLabels(result);
    if (label_patch.empty()) return current;
    // Conditional on the version we validated against: a concurrent label change makes this a
    // Conflict instead of silently producing an inconsistent pooltype/privatename pair.
    Json patch{{"metadata",
                {{"labels", label_patch},
                 {"resourceVersion", StringAt(At(current, "metadata"), "resourceVersion")}}}};
    try {
      return client.Patch(kNodes, "", node, PatchType::kMerge, patch);
    } catch (const Conflict&) {
      if (attempt >= 1) throw;
    }
  }
}

// ---- one pod per node --------------------------------------------------------------------------

constexpr std::string_view kHostnameKey = "kubernetes.io/hostname";

// A LabelSelector (matchLabels and matchExpressions, all of them) against a label set; an
// empty selector matches every pod, a missing one none.
bool LabelSelectorMatches(const Json& selector, const std::map<std::string, std::string>& labels) {
  if (!selector.is_object()) return false;
  if (const Json& match = At(selector, "matchLabels"); match.is_object()) {
    for (const auto& [k, v] : match.items()) {
      if (!v.is_string() || labels.count(k) == 0 || Get(labels, k) != v.get<std::string>()) {
        return false;
      }
    }
  }
  if (const Json& exprs = At(selector, "matchExpressions"); exprs.is_array()) {
    for (const auto& e : exprs) {
      if (!RequirementMatches(e, labels)) return false;
    }
  }
  return true;
}

// The label selectors of a pod's required anti-affinity terms over kubernetes.io/hostname that
// select the pod itself: two such pods never share a node.
std::vector<Json> SelfExcludingSelectors(const Json& pod) {
  std::vector<Json> out;
  const Json& terms = At(At(At(At(pod, "spec"), "affinity"), "podAntiAffinity"),
                         "requiredDuringSchedulingIgnoredDuringExecution");
  if (!terms.is_array()) return out;
  const std::map<std::string, std::string> labels = LabelsOf(pod);
  for (const auto& term : terms) {
    if (StringAt(term, "topologyKey") != kHostnameKey) continue;
    const Json& selector = At(term, "labelSelector");
    if (LabelSelectorMatches(selector, labels)) out.push_back(selector);
  }
  return out;
}

// The nodes that could take a pod of `spec` (labels, node state and taints as `scope` says,
// allocatable), as EvaluatePlacement judges one.
std::set<std::string> NodesThatCouldTake(const Json& spec, const std::vector<NodeInfo>& infos,
                                         PlacementScope scope) {
  ResourceList need = internal::PodSchedulingRequests(spec);
  need["pods"] += Quantity::FromInt(1);
  const Json& tolerations = At(spec, "tolerations");
  std::set<std::string> out;
  for (const auto& n : infos) {
    if (!SelectorMatches(spec, n.labels, n.name)) continue;
    if (NodeBlockers(n, tolerations, scope).empty() && ShortOf(need, n.allocatable).empty()) {
      out.insert(n.name);
    }
  }
  return out;
}

// A selector as `kubectl get -l` writes one: "app=web,tier in (a,b)".
std::string DescribeSelector(const Json& selector) {
  std::vector<std::string> parts;
  if (const Json& match = At(selector, "matchLabels"); match.is_object()) {
    for (const auto& [k, v] : match.items()) {
      parts.push_back(fmt::format("{}={}", k, v.is_string() ? v.get<std::string>() : v.dump()));
    }
  }
  if (const Json& exprs = At(selector, "matchExpressions"); exprs.is_array()) {
    for (const auto& e : exprs) parts.push_back(DescribeRequirement(e));
  }
  return parts.empty() ? "every pod" : fmt::format("{}", fmt::join(parts, ","));
}

// Pods that a required anti-affinity over kubernetes.io/hostname keeps apart (every pod of the
// groups that select themselves with the same selector) need one node each: more of them than
// nodes that could take one can never all run. Groups no node can take are reported already.
void CheckOnePodPerNode(const std::vector<internal::PodGroup>& groups,
                        const std::vector<NodeInfo>& infos, PlacementScope scope,
                        FitResult* result) {
  struct Apart {
    Json selector;
    std::int64_t pods = 0;
    std::set<std::string> nodes;
  };
  std::map<std::string, Apart> by_selector;  // keyed by the selector's JSON
  for (const auto& group : groups) {
    if (group.count == 0 || group.terminated) continue;
    for (const auto& selector : SelfExcludingSelectors(group.pod)) {
      Apart& a = by_selector[selector.dump()];
      a.selector = selector;
      a.pods += group.count;
      const std::set<std::string> nodes = NodesThatCouldTake(At(group.pod, "spec"), infos, scope);
      a.nodes.insert(nodes.begin(), nodes.end());
    }
  }
  for (const auto& [key, a] : by_selector) {
    const auto nodes = static_cast<std::int64_t>(a.nodes.size());
    if (nodes == 0 || a.pods <= nodes) continue;
    std::vector<std::string> names(a.nodes.begin(), a.nodes.end());
    if (names.size() > 10) {
      names.resize(10);
      names.emplace_back("…");
    }
    const Json& match = At(a.selector, "matchLabels");
    const std::string role = StringAt(match, kRoleLabel);
    const std::string cluster = StringAt(match, kClusterLabel);
    // A TFCluster's role (spread "required") by its name, other pods by the selector.
    const std::string problem =
        !role.empty() && !cluster.empty()
            ? fmt::format(
                  "TFCluster {}: role {} has {} replicas and spread \"required\" puts "
                  "each on a different node, but only {} node(s) could take its pod ({}); "
                  "add nodes, run fewer replicas, or use spread \"preferred\"",
                  cluster, role, a.pods, nodes, fmt::join(names, ", "))
            : fmt::format(
                  "pods {}: {} of them must each run on a different node (a required pod "
                  "anti-affinity over {}), but only {} node(s) could take one ({})",
                  DescribeSelector(a.selector), a.pods, kHostnameKey, nodes,
                  fmt::join(names, ", "));
    result->fits = false;
    result->problems.push_back(problem);
  }
}

}  // namespace

// ---- labels ------------------------------------------------------------------------------------

void ValidateNodeLabels(const std::map<std::string, std::string>& labels) {
  for (const auto& [key, value] : labels) {
    const std::string field = fmt::format("labels[{}]", key);
    validation::RequireLabelKey(field, key);
    validation::RequireLabelValue(field, value);
  }
  const std::string pool = Get(labels, kPoolTypeLabel);
  const bool has_pool = labels.count(std::string(kPoolTypeLabel)) != 0;
  if (has_pool && pool != "shared" && pool != "unshared") {
    throw ValidationError(fmt::format("labels[{}]", kPoolTypeLabel), pool,
                          "must be \"shared\" or \"unshared\"");
  }
  const std::string owner = Get(labels, kPrivateNameLabel);
  const bool has_owner = !owner.empty();
  if (pool == "unshared" && !has_owner) {
    throw ValidationError(fmt::format("labels[{}]", kPrivateNameLabel), owner,
                          "is required when pooltype=unshared: it names the user or cluster the "
                          "node is reserved to");
  }
  if (pool != "unshared" && labels.count(std::string(kPrivateNameLabel)) != 0) {
    throw ValidationError(
        fmt::format("labels[{}]", kPrivateNameLabel), owner,
        fmt::format("is only allowed with pooltype=unshared (pooltype is \"{}\")", pool));
  }
}

Json UpdateNodeLabels(Client& client, const std::string& node,
                      const std::map<std::string, std::string>& set,
                      const std::vector<std::string>& remove) {
  validation::RequireDns1123Subdomain("node", node);
  for (const auto& [key, value] : set) {
    const std::string field = fmt::format("labels[{}]", key);
    validation::RequireLabelKey(field, key);
    validation::RequireLabelValue(field, value);
  }
  for (const auto& key : remove) {
    const std::string field = fmt::format("labels[{}]", key);
    validation::RequireLabelKey(field, key);
    if (set.count(key) != 0) {
      throw ValidationError(field, set.at(key), "cannot be both set and removed");
    }
  }
  return PatchLabels(client, node,
                     [&](const std::map<std::string, std::string>& current, Json& patch) {
                       auto result = current;
                       for (const auto& [k, v] : set) {
                         if (current.count(k) == 0 || current.at(k) != v) patch[k] = v;
                         result[k] = v;
                       }
                       for (const auto& k : remove) {
                         if (result.erase(k) != 0)
                           patch[k] = nullptr;  // null deletes in a merge patch
                       }
                       return result;
                     });
}

Json SetNodeLabels(Client& client, const std::string& node,
                   const std::map<std::string, std::string>& labels) {
  return UpdateNodeLabels(client, node, labels, {});
}

Json RemoveNodeLabels(Client& client, const std::string& node,
                      const std::vector<std::string>& keys) {
  return UpdateNodeLabels(client, node, {}, keys);
}

std::string Taint::ToString() const {
  return value.empty() ? fmt::format("{}:{}", key, effect)
                       : fmt::format("{}={}:{}", key, value, effect);
}

// ---- inventory ---------------------------------------------------------------------------------

Inventory BuildInventory(const std::vector<Json>& nodes, const std::vector<Json>& pods) {
  Inventory inv;
  std::map<std::string, std::size_t> index;
  for (const auto& n : nodes) {
    inv.nodes.push_back(NodeFromJson(n));
  }
  std::sort(inv.nodes.begin(), inv.nodes.end(),
            [](const NodeInfo& a, const NodeInfo& b) { return a.name < b.name; });
  for (std::size_t i = 0; i < inv.nodes.size(); ++i) index[inv.nodes[i].name] = i;
  for (const auto& pod : pods) {
    const std::string node = StringAt(At(pod, "spec"), "nodeName");
    const std::string phase = StringAt(At(pod, "status"), "phase");
    if (node.empty() || phase == "Succeeded" || phase == "Failed") continue;
    auto it = index.find(node);
    if (it == index.end()) continue;
    Json spec = At(pod, "spec");
    internal::DefaultPodResources(spec, {});
    NodeInfo& info = inv.nodes[it->second];
    AddTo(info.requested, internal::PodSchedulingRequests(spec));
    info.requested["pods"] += Quantity::FromInt(1);
    ++info.pod_count;
  }
  for (auto& n : inv.nodes) n.free = Difference(n.allocatable, n.requested);
  inv.by_gputype = GroupBy(inv.nodes, kGpuTypeLabel, [](const NodeInfo& n) { return n.gputype; });
  inv.by_cputype = GroupBy(inv.nodes, kCpuTypeLabel, [](const NodeInfo& n) { return n.cputype; });
  inv.by_pool = GroupBy(inv.nodes, "pool", [](const NodeInfo& n) { return PoolOf(n); });
  return inv;
}

Inventory GetInventory(Client& client) {
  std::vector<Json> nodes = Items(client.ListAll(kNodes, ""));
  ListOptions active;
  // Only pods bound to a node and still running or pending: the scheduler's view of what the
  // node has promised away.
  active.field_selector = fmt::format("spec.nodeName!=,{}", kActivePods);
  std::vector<Json> pods = Items(client.ListAll(kPods, "", active));
  return BuildInventory(nodes, pods);
}

NodeInfo GetNodeInfo(Client& client, const std::string& node) {
  validation::RequireDns1123Subdomain("node", node);
  Json object = internal::GetChecked(client, kNodes, "", node);
  ListOptions on_node;
  on_node.field_selector = fmt::format("spec.nodeName={},{}", node, kActivePods);
  Inventory inv = BuildInventory({object}, Items(client.ListAll(kPods, "", on_node)));
  return inv.nodes.front();
}

std::vector<std::string> WhereFits(const Inventory& inventory, const FitQuery& query) {
  ResourceList need;
  for (const auto& [k, v] : query.requests) need[NodeResourceName(k)] += v;
  need["pods"] += Quantity::FromInt(1);
  Json tolerations = query.tolerations.is_array() ? query.tolerations : Json::array();
  if (query.tolerate_requested_resource_taints) {
    for (const auto& [k, v] : need) {
      if (v.Sign() > 0 && internal::IsExtendedResourceName(k)) {
        tolerations.push_back({{"key", k}, {"operator", "Exists"}, {"effect", "NoSchedule"}});
      }
    }
  }
  Json spec{{"nodeSelector", Json::object()}};
  for (const auto& [k, v] : query.node_selector) spec["nodeSelector"][k] = v;
  std::vector<std::string> out;
  for (const auto& n : inventory.nodes) {
    if (!n.ready || !n.schedulable) continue;
    if (!SelectorMatches(spec, n.labels, n.name)) continue;
    const bool blocked = std::any_of(n.taints.begin(), n.taints.end(), [&](const Taint& t) {
      return Blocks(t) && !ToleratedBy(tolerations, t);
    });
    if (blocked) continue;
    if (!ShortOf(need, n.free).empty()) continue;
    out.push_back(n.name);
  }
  return out;
}

std::vector<std::string> WhereFits(Client& client, const ResourceList& requests,
                                   const std::map<std::string, std::string>& node_selector) {
  FitQuery query;
  query.requests = requests;
  query.node_selector = node_selector;
  return WhereFits(GetInventory(client), query);
}

// ---- preemption ----------------------------------------------------------------------------

std::string PreemptedPod::ToString() const {
  return fmt::format("{}/{} (priority {}, node {})", namespace_name, name, priority, node);
}

namespace {

// A node of the preemption estimate: what is free on it and the pods that take the rest.
struct SimulatedNode {
  const NodeInfo* info = nullptr;
  ResourceList free;
  struct Running {
    PreemptedPod pod;
    ResourceList requests;  // with "pods" = 1
  };
  std::vector<Running> pods;
};

bool Covers(const ResourceList& have, const ResourceList& need) {
  return ShortOf(need, have).empty();
}

// The pods to evict from `node` for `need` to fit, as the scheduler picks them
// (selectVictimsOnNode): every pod of lower priority goes, then as many as still leave room
// come back, highest priority first. Indices into node.pods; nullopt when evicting all of
// them is not enough.
std::optional<std::vector<std::size_t>> VictimsOn(const SimulatedNode& node,
                                                  const ResourceList& need, std::int64_t priority) {
  ResourceList free = node.free;
  std::vector<std::size_t> lower;
  for (std::size_t i = 0; i < node.pods.size(); ++i) {
    if (node.pods[i].pod.priority >= priority) continue;
    lower.push_back(i);
    AddTo(free, node.pods[i].requests);
  }
  if (!Covers(free, need)) return std::nullopt;
  std::sort(lower.begin(), lower.end(), [&](std::size_t a, std::size_t b) {
    const PreemptedPod& x = node.pods[a].pod;
    const PreemptedPod& y = node.pods[b].pod;
    if (x.priority != y.priority) return x.priority > y.priority;
    return std::tie(x.namespace_name, x.name) < std::tie(y.namespace_name, y.name);
  });
  std::vector<std::size_t> victims;
  for (std::size_t i : lower) {
    ResourceList spared = Difference(free, node.pods[i].requests);
    if (Covers(spared, need)) {
      free = std::move(spared);
    } else {
      victims.push_back(i);
    }
  }
  return victims;
}

// A Pod object as one running pod of the estimate; false for pods that take no room.
bool RunningPodOf(const Json& pod, std::string* node, SimulatedNode::Running* out) {
  const Json& spec = At(pod, "spec");
  *node = StringAt(spec, "nodeName");
  const std::string phase = StringAt(At(pod, "status"), "phase");
  if (node->empty() || phase == "Succeeded" || phase == "Failed") return false;
  const Json& metadata = At(pod, "metadata");
  out->pod.namespace_name = StringAt(metadata, "namespace");
  out->pod.name = StringAt(metadata, "name");
  out->pod.node = *node;
  out->pod.priority = internal::IntField(spec, "priority", 0, "spec.priority");
  Json defaulted = spec;
  internal::DefaultPodResources(defaulted, {});
  out->requests = internal::PodSchedulingRequests(defaulted);
  out->requests["pods"] += Quantity::FromInt(1);
  return true;
}

}  // namespace

PreemptionPlan PlanPreemption(const std::vector<Json>& objects, const std::vector<Json>& nodes,
                              const std::vector<Json>& pods, std::int64_t priority,
                              bool may_preempt) {
  const std::vector<internal::PodGroup> groups = internal::PodGroupsOf(objects);
  std::vector<NodeInfo> infos;
  infos.reserve(nodes.size());
  for (const auto& n : nodes) infos.push_back(NodeFromJson(n));
  std::sort(infos.begin(), infos.end(),
            [](const NodeInfo& a, const NodeInfo& b) { return a.name < b.name; });
  std::vector<SimulatedNode> sim(infos.size());
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < infos.size(); ++i) {
    sim[i].info = &infos[i];
    sim[i].free = infos[i].allocatable;
    index[infos[i].name] = i;
  }
  for (const auto& pod : pods) {
    std::string node;
    SimulatedNode::Running running;
    if (!RunningPodOf(pod, &node, &running)) continue;
    auto it = index.find(node);
    if (it == index.end()) continue;
    SimulatedNode& n = sim[it->second];
    n.free = Difference(n.free, running.requests);
    n.pods.push_back(std::move(running));
  }

  PreemptionPlan plan;
  std::map<std::string, std::set<std::size_t>> apart;  // anti-affinity selector -> nodes taken
  for (const auto& group : groups) {
    if (group.count == 0 || group.terminated) continue;
    const Json& spec = At(group.pod, "spec");
    ResourceList need = internal::PodSchedulingRequests(spec);
    need["pods"] += Quantity::FromInt(1);
    const Json& tolerations = At(spec, "tolerations");
    std::vector<std::string> selectors;
    for (const auto& selector : SelfExcludingSelectors(group.pod)) {
      selectors.push_back(selector.dump());
    }
    std::vector<std::size_t> candidates;
    for (std::size_t i = 0; i < sim.size(); ++i) {
      const NodeInfo& n = *sim[i].info;
      if (!n.ready || !n.schedulable || !SelectorMatches(spec, n.labels, n.name)) continue;
      const bool blocked = std::any_of(n.taints.begin(), n.taints.end(), [&](const Taint& t) {
        return Blocks(t) && !ToleratedBy(tolerations, t);
      });
      if (!blocked) candidates.push_back(i);
    }
    for (std::int64_t k = 0; k < group.count; ++k) {
      auto kept_apart = [&](std::size_t i) {
        return std::any_of(selectors.begin(), selectors.end(),
                           [&](const std::string& s) { return apart[s].count(i) != 0; });
      };
      std::optional<std::size_t> chosen;
      for (std::size_t i : candidates) {
        if (!kept_apart(i) && Covers(sim[i].free, need)) {
          chosen = i;
          break;
        }
      }
      std::vector<std::size_t> evicted;
      if (!chosen) {
        plan.fits_free = false;
        // The node whose victims have the lowest highest priority, then the fewest victims.
        std::optional<std::pair<std::int64_t, std::size_t>> best;
        for (std::size_t i : may_preempt ? candidates : std::vector<std::size_t>{}) {
          if (kept_apart(i)) continue;
          auto victims = VictimsOn(sim[i], need, priority);
          if (!victims) continue;
          std::int64_t highest = std::numeric_limits<std::int64_t>::min();
          for (std::size_t v : *victims) highest = std::max(highest, sim[i].pods[v].pod.priority);
          const std::pair<std::int64_t, std::size_t> rank{highest, victims->size()};
          if (!best || rank < *best) {
            best = rank;
            chosen = i;
            evicted = std::move(*victims);
          }
        }
      }
      if (!chosen) {
        plan.fits = false;
        continue;
      }
      SimulatedNode& n = sim[*chosen];
      std::sort(evicted.rbegin(), evicted.rend());  // erase from the back: indices stay valid
      for (std::size_t v : evicted) {
        AddTo(n.free, n.pods[v].requests);
        plan.victims.push_back(n.pods[v].pod);
        n.pods.erase(n.pods.begin() + static_cast<std::ptrdiff_t>(v));
      }
      // The new pod runs at `priority`: later pods of the same objects never evict it.
      n.free = Difference(n.free, need);
      n.pods.push_back({{"", "", n.info->name, priority}, need});
      for (const auto& s : selectors) apart[s].insert(*chosen);
    }
  }
  if (!plan.fits) plan.victims.clear();
  std::sort(plan.victims.begin(), plan.victims.end(),
            [](const PreemptedPod& a, const PreemptedPod& b) {
              return std::tie(a.namespace_name, a.name) < std::tie(b.namespace_name, b.name);
            });
  return plan;
}

std::string FormatInventory(const Inventory& inventory) {
  // Kubernetes' notation, as kubectl describe node prints them (2700m, 16Gi).
  auto amount = [](const ResourceList& list, const char* key) {
    return Amount(list, key).ToString();
  };
  auto of = [&](const NodeInfo& n, const char* key) {
    return amount(n.requested, key) + "/" + amount(n.allocatable, key);
  };
  auto or_dash = [](const std::string& text) { return text.empty() ? "-" : text; };
  // The seed's five node labels: nodetype, gputype, cputype, and pooltype with privatename
  // together in POOL ("shared", "unshared/<privatename>").
  std::vector<std::vector<std::string>> rows = {{"NODE", "STATE", "NODETYPE", "GPUTYPE", "CPUTYPE",
                                                 "POOL", "PODS", "CPU REQ/ALLOC",
                                                 "MEMORY REQ/ALLOC", "GPU REQ/ALLOC"}};
  for (const auto& n : inventory.nodes) {
    const char* state = !n.ready ? "NotReady" : (n.schedulable ? "Ready" : "Cordoned");
    rows.push_back({n.name, state, or_dash(n.nodetype), or_dash(n.gputype), or_dash(n.cputype),
                    or_dash(PoolOf(n)), std::to_string(n.pod_count), of(n, "cpu"), of(n, "memory"),
                    of(n, "nvidia.com/gpu")});
  }
  std::string out = internal::FormatTextTable(rows);
  for (const auto* groups : {&inventory.by_gputype, &inventory.by_cputype, &inventory.by_pool}) {
    for (const auto& g : *groups) {
      out +=
          fmt::format("{}={}: {} node(s), free cpu {}, memory {}, nvidia.com/gpu {}\n", g.label,
                      g.value.empty() ? "(none)" : g.value, g.nodes.size(), amount(g.free, "cpu"),
                      amount(g.free, "memory"), amount(g.free, "nvidia.com/gpu"));
    }
  }
  return out;
}

// ---- could-ever-fit
// ------------------------------------------------------------------------------

namespace {

// "node a: NotReady; node b: cordoned", the first 10 of them (then "… and N more").
std::string BlockedList(const std::vector<std::string>& blocked) {
  constexpr std::size_t kShown = 10;
  std::string out;
  for (std::size_t i = 0; i < blocked.size() && i < kShown; ++i) {
    out += (i == 0 ? "" : "; ") + blocked[i];
  }
  if (blocked.size() > kShown) out += fmt::format("; … and {} more", blocked.size() - kShown);
  return out;
}

}  // namespace

FitResult EvaluatePlacement(const std::vector<Json>& objects, const std::vector<Json>& nodes,
                            PlacementScope scope) {
  FitResult result;
  std::vector<NodeInfo> infos;
  infos.reserve(nodes.size());
  for (const auto& n : nodes) infos.push_back(NodeFromJson(n));
  std::sort(infos.begin(), infos.end(),
            [](const NodeInfo& a, const NodeInfo& b) { return a.name < b.name; });
  const std::vector<internal::PodGroup> groups = internal::PodGroupsOf(objects);
  const char* cannot = scope == PlacementScope::kNow ? "cannot take it now" : "can never take it";
  if (infos.empty()) {
    // No node to judge by: a cluster that adds nodes on demand (a cluster autoscaler scaling
    // from zero) places the pods once it has some, and the server accepts them meanwhile.
    const bool any_pods = std::any_of(groups.begin(), groups.end(),
                                      [](const auto& g) { return g.count != 0 && !g.terminated; });
    if (any_pods && scope == PlacementScope::kNow) {
      result.notes.emplace_back(
          "node placement not checked: the cluster has no nodes (one that adds nodes on demand, "
          "e.g. a cluster autoscaler scaling from zero, places the pods once it has them; until "
          "then they wait)");
    }
    return result;
  }
  for (const auto& group : groups) {
    if (group.count == 0 || group.terminated) continue;
    const Json& spec = group.pod["spec"];
    ResourceList need = internal::PodSchedulingRequests(spec);
    need["pods"] += Quantity::FromInt(1);
    const Json& tolerations = At(spec, "tolerations");

    std::vector<const NodeInfo*> label_ok;
    std::vector<const NodeInfo*> taint_ok;
    // The matching nodes that cannot take it, each "node n1: NotReady, taint …".
    std::vector<std::string> blocked_nodes;
    bool untolerated = false;  // some of it is a taint the spec could tolerate
    bool placeable = false;
    for (const auto& n : infos) {
      if (!SelectorMatches(spec, n.labels, n.name)) continue;
      label_ok.push_back(&n);
      const std::vector<std::string> blockers = NodeBlockers(n, tolerations, scope);
      if (!blockers.empty()) {
        blocked_nodes.push_back(fmt::format("node {}: {}", n.name, fmt::join(blockers, ", ")));
        untolerated = untolerated ||
                      std::any_of(blockers.begin(), blockers.end(),
                                  [](const std::string& b) { return b.rfind("taint ", 0) == 0; });
        continue;
      }
      taint_ok.push_back(&n);
      if (ShortOf(need, n.allocatable).empty()) {
        placeable = true;
        break;
      }
    }
    if (placeable) continue;

    std::vector<std::string> reasons;
    if (label_ok.empty()) {
      // Name the selector terms that no node satisfies, so "gputype=a100" shows up verbatim.
      std::vector<std::string> unmatched;
      if (const Json& sel = At(spec, "nodeSelector"); sel.is_object()) {
        for (const auto& item : sel.items()) {
          const std::string& key = item.key();
          const std::string value =
              item.value().is_string() ? item.value().get<std::string>() : item.value().dump();
          const bool any = std::any_of(infos.begin(), infos.end(), [&](const NodeInfo& n) {
            auto it = n.labels.find(key);
            return it != n.labels.end() && it->second == value;
          });
          if (!any) unmatched.push_back(fmt::format("{}={}", key, value));
        }
      }
      if (const Json& terms = At(RequiredTerms(spec), "nodeSelectorTerms"); terms.is_array()) {
        for (const auto& term : terms) {
          const Json& exprs = At(term, "matchExpressions");
          if (!exprs.is_array()) continue;
          for (const auto& e : exprs) {
            const bool any = std::any_of(infos.begin(), infos.end(), [&](const NodeInfo& n) {
              return RequirementMatches(e, n.labels);
            });
            if (!any) unmatched.push_back(DescribeRequirement(e));
          }
        }
      }
      if (unmatched.empty()) {
        reasons.push_back(fmt::format(
            "no node matches its nodeSelector and required node affinity together (of {} nodes)",
            infos.size()));
      } else {
        std::string list;
        for (const auto& u : unmatched) list += (list.empty() ? "" : ", ") + u;
        reasons.push_back(fmt::format("no node has label {} (of {} nodes)", list, infos.size()));
      }
    } else if (taint_ok.empty()) {
      reasons.push_back(fmt::format("the {} node(s) matching its selector {}: {}{}",
                                    label_ok.size(), cannot, BlockedList(blocked_nodes),
                                    untolerated ? " (add a toleration)" : ""));
    } else {
      // Resources: for each one that no candidate offers, the largest allocatable there is.
      std::vector<std::string> too_big;
      for (const auto& [resource, amount] : need) {
        if (amount.Sign() <= 0) continue;
        const NodeInfo* largest = nullptr;
        for (const auto* n : taint_ok) {
          if (largest == nullptr ||
              Amount(largest->allocatable, resource) < Amount(n->allocatable, resource)) {
            largest = n;
          }
        }
        const Quantity best = Amount(largest->allocatable, resource);
        if (best < amount) {
          too_big.push_back(fmt::format("{} {} > largest allocatable {} ({})", resource,
                                        amount.ToString(), best.ToString(), largest->name));
        }
      }
      std::string list;
      for (const auto& t : too_big) list += (list.empty() ? "" : "; ") + t;
      if (too_big.empty()) {
        reasons.push_back(fmt::format(
            "no single matching node has all of its requests ({}) at once", ToString(need)));
      } else {
        reasons.push_back(
            fmt::format("it is bigger than any node it may run on: {} (of {} candidate node(s))",
                        list, taint_ok.size()));
      }
      if (!blocked_nodes.empty()) {
        reasons.back() += fmt::format("; the other {} node(s) matching its selector {}: {}",
                                      blocked_nodes.size(), cannot, BlockedList(blocked_nodes));
      }
    }
    result.fits = false;
    for (const auto& r : reasons) {
      result.problems.push_back(
          fmt::format("{}: cannot be placed on any node: {}", group.source, r));
    }
  }
  CheckOnePodPerNode(groups, infos, scope, &result);
  return result;
}

namespace {

// The objects whose pods name each priority class (by class name).
std::map<std::string, std::vector<Json>> ObjectsByPriorityClass(const std::vector<Json>& objects) {
  std::map<std::string, std::vector<Json>> out;
  for (const auto& object : objects) {
    std::set<std::string> classes;
    for (const auto& group : internal::PodGroupsOf({object})) {
      const std::string name = StringAt(At(group.pod, "spec"), "priorityClassName");
      if (!name.empty()) classes.insert(name);
    }
    for (const auto& name : classes) out[name].push_back(object);
  }
  return out;
}

// The priority classes the objects' pods name: each must exist; what a class that may preempt
// would evict is a note. `nodes` is null when they could not be read.
void CheckPriorityClasses(Client& client, const std::vector<Json>& objects,
                          const std::vector<Json>* nodes, FitResult* result) {
  const auto by_class = ObjectsByPriorityClass(objects);
  std::optional<std::vector<Json>> pods;  // read once, for the first class that may preempt
  for (const auto& [name, members] : by_class) {
    Json priority_class;
    try {
      priority_class = client.Get(kPriorityClasses, "", name);
    } catch (const NotFound&) {
      result->fits = false;
      result->problems.push_back(fmt::format(
          "priorityClassName \"{}\": no PriorityClass named {} on the server, which would "
          "refuse every pod naming it (kubectl get priorityclasses lists those there are)",
          name, name));
      continue;
    } catch (const Forbidden& e) {
      result->notes.push_back(fmt::format(
          "priorityClassName \"{}\" not checked: these credentials cannot read PriorityClasses "
          "({})",
          name, e.what()));
      continue;
    }
    const std::int64_t value = internal::IntField(priority_class, "value", 0, "value");
    if (nodes == nullptr || StringAt(priority_class, "preemptionPolicy") == "Never") continue;
    if (!pods) {
      ListOptions active;
      active.field_selector = fmt::format("spec.nodeName!=,{}", kActivePods);
      try {
        pods = internal::ListItemsWithout(client, kPods, "", active,
                                          {"managedFields", "annotations", "volumes", "conditions",
                                           "containerStatuses", "initContainerStatuses"});
      } catch (const Forbidden& e) {
        result->notes.push_back(fmt::format(
            "preemption not checked: these credentials cannot list the pods of every namespace "
            "({})",
            e.what()));
        return;
      }
    }
    const PreemptionPlan plan = PlanPreemption(members, *nodes, *pods, value);
    if (plan.fits_free || !plan.fits || plan.victims.empty()) continue;
    std::vector<std::string> victims;
    victims.reserve(plan.victims.size());
    for (const auto& v : plan.victims) victims.push_back(v.ToString());
    result->notes.push_back(fmt::format(
        "PriorityClass {} (value {}) would preempt: the pods do not all fit on the nodes' free "
        "capacity now, and the scheduler would evict {} pod(s) of lower priority to place them: "
        "{}",
        name, value, victims.size(), fmt::join(victims, ", ")));
  }
}

}  // namespace

FitResult CheckPlacement(Client& client, const std::vector<Json>& objects, PlacementScope scope) {
  // Parse first, so bad input fails before any request.
  (void)internal::PodGroupsOf(objects);
  std::vector<Json> nodes;
  FitResult result;
  bool nodes_read = true;
  try {
    nodes = Items(client.ListAll(kNodes, ""));
  } catch (const Forbidden& e) {
    // Nodes are cluster-scoped: credentials limited to a namespace (a DevInstance's launching
    // Role) cannot read them. The server still schedules; only the early check is skipped.
    result.notes.push_back(fmt::format(
        "node placement not checked: these credentials cannot list nodes ({})", e.what()));
    nodes_read = false;
  }
  if (nodes_read) result = EvaluatePlacement(objects, nodes, scope);
  CheckPriorityClasses(client, objects, nodes_read ? &nodes : nullptr, &result);
  return result;
}

// ---- results as JSON -----------------------------------------------------------------------

Json NodeGroup::ToJson() const {
  return {{"label", label},
          {"value", value},
          {"nodes", nodes},
          {"allocatable", internal::ResourceListJson(allocatable)},
          {"requested", internal::ResourceListJson(requested)},
          {"free", internal::ResourceListJson(free)}};
}

Json Inventory::ToJson() const {
  Json out_nodes = Json::array();
  for (const auto& n : nodes) {
    Json taints = Json::array();
    for (const auto& t : n.taints) taints.push_back(t.ToString());
    out_nodes.push_back({{"name", n.name},
                         {"labels", n.labels},
                         {"nodetype", n.nodetype},
                         {"cputype", n.cputype},
                         {"gputype", n.gputype},
                         {"pooltype", n.pooltype},
                         {"privatename", n.privatename},
                         {"ready", n.ready},
                         {"schedulable", n.schedulable},
                         {"taints", std::move(taints)},
                         {"allocatable", internal::ResourceListJson(n.allocatable)},
                         {"requested", internal::ResourceListJson(n.requested)},
                         {"free", internal::ResourceListJson(n.free)},
                         {"pod_count", n.pod_count}});
  }
  auto groups = [](const std::vector<NodeGroup>& gs) {
    Json out = Json::array();
    for (const auto& g : gs) out.push_back(g.ToJson());
    return out;
  };
  return {{"nodes", std::move(out_nodes)},
          {"by_gputype", groups(by_gputype)},
          {"by_cputype", groups(by_cputype)},
          {"by_pool", groups(by_pool)},
          {"text", FormatInventory(*this)}};
}

}  // namespace tfk8s
