// TFCluster status: replicas lost with their node, in words. A node that stops (a power-off, a
// kernel panic, a network partition) goes NotReady; Kubernetes evicts its pods (marks them for
// deletion), and the pod objects stay until the node's kubelet confirms or the node is removed.
// A replica's Job then creates a new pod elsewhere (a StatefulSet does not: its pod name is taken
// until the old pod is gone). What is lost, where and when, is read from those objects: the pod
// being deleted, its node's Ready condition, and the replica's next pod.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "workloads/common.hpp"
#include "workloads/cron.hpp"
#include "workloads/tfcluster_internal.hpp"

namespace tfk8s::internal {

namespace {

using namespace kinds;

bool BeingDeleted(const Json& pod) {
  return pod.value("metadata", Json::object()).contains("deletionTimestamp");
}

std::string NodeOf(const Json& pod) {
  return pod.value("spec", Json::object()).value("nodeName", "");
}

std::string Created(const Json& pod) {
  return pod.value("metadata", Json::object()).value("creationTimestamp", "");
}

// "2026-12-06T12:01:07Z" -> "12:01:07Z" (the status speaks of one run: the time is enough).
std::string Clock(const std::string& timestamp) {
  auto t = timestamp.find('T');
  return t == std::string::npos ? timestamp : timestamp.substr(t + 1);
}

// A condition of `object` ("type"), or an empty object.
Json Condition(const Json& object, const char* type) {
  for (const auto& c : object.value("status", Json::object()).value("conditions", Json::array())) {
    if (c.value("type", "") == type) return c;
  }
  return Json::object();
}

// The time a condition of `object` last changed, when it has `status` ("" otherwise).
std::string ConditionSince(const Json& object, const char* type, const char* status) {
  Json c = Condition(object, type);
  return c.value("status", "") == status ? c.value("lastTransitionTime", "") : "";
}

bool Lost(const Json& pod, const std::map<std::string, NodeReadiness>& nodes) {
  if (!BeingDeleted(pod)) return false;
  auto node = nodes.find(NodeOf(pod));
  return node != nodes.end() && !node->second.ready;
}

// When the pod was deleted: its deletionTimestamp is that time plus its grace period.
std::string DeletedAt(const Json& pod) {
  const Json& meta = pod["metadata"];
  std::string stamp = meta.value("deletionTimestamp", "");
  auto t = ParseTimestamp(stamp);
  if (!t) return stamp;
  return FormatTimestamp(*t - std::chrono::seconds(meta.value("deletionGracePeriodSeconds", 0)));
}

std::string LossText(const TFClusterSpec& spec, const ReplicaKey& key, const Json& lost,
                     const NodeReadiness& node, const Json* next) {
  // A node removed from the cluster: when its pod was deleted is the closest we know.
  std::string since = node.since.empty() ? DeletedAt(lost) : node.since;
  std::string text =
      fmt::format("{}-{} lost with node {} at {}", key.role, key.index, NodeOf(lost), Clock(since));
  if (next) {
    std::string where = NodeOf(*next);
    std::string scheduled = ConditionSince(*next, "PodScheduled", "True");
    if (where.empty()) {
      return text + fmt::format("; recreated at {}, not on a node yet", Clock(Created(*next)));
    }
    return text + fmt::format("; recreated on {} at {}", where,
                              Clock(scheduled.empty() ? Created(*next) : scheduled));
  }
  if (spec.topology == TFTopology::kStatefulSet && key.role != "session") {
    return text +
           "; its StatefulSet recreates it only once the node is back or the pod is "
           "deleted with --force";
  }
  return text + "; not recreated yet";
}

}  // namespace

std::set<std::string> NodesToRead(const std::vector<Json>& pods,
                                  const std::map<std::string, NodeReadiness>& nodes) {
  std::set<std::string> out;
  for (const auto& pod : pods) {
    std::string node = NodeOf(pod);
    if (BeingDeleted(pod) && !node.empty() && !nodes.count(node)) out.insert(node);
  }
  return out;
}

void ReadNodes(Client& client, const std::set<std::string>& names,
               std::map<std::string, NodeReadiness>* nodes) {
  for (const auto& name : names) {
    try {
      Json node = GetChecked(client, kNodes, "", name);
      // No Ready condition yet: a node just registered, not a lost one.
      Json ready = Condition(node, "Ready");
      NodeReadiness r;
      r.ready = ready.value("status", "True") == "True";
      if (!r.ready) r.since = ready.value("lastTransitionTime", "");
      (*nodes)[name] = r;
    } catch (const NotFound&) {
      (*nodes)[name] = NodeReadiness{false, ""};  // removed with its pods still on it
    } catch (const Forbidden&) {
      // Credentials that may not read nodes: the status cannot tell a loss from a deletion.
    }
  }
}

std::vector<std::pair<ReplicaKey, std::string>> LossEvents(const TFClusterSpec& spec,
                                                           const TFObserved& seen) {
  std::map<std::pair<std::string, int>, std::vector<const Json*>> by_replica;
  for (const auto& pod : seen.pods) {
    std::string role = LabelOf(pod, kRoleLabel);
    if (role.empty()) continue;
    by_replica[{role, role == "session" ? 0 : PodIndex(pod)}].push_back(&pod);
  }
  std::vector<std::pair<ReplicaKey, std::string>> out;
  for (auto& [key, pods] : by_replica) {
    std::stable_sort(pods.begin(), pods.end(),
                     [](const Json* a, const Json* b) { return Created(*a) < Created(*b); });
    for (size_t i = 0; i < pods.size(); ++i) {
      if (!Lost(*pods[i], seen.nodes)) continue;
      ReplicaKey replica{key.first, key.second};
      const Json* next = i + 1 < pods.size() ? pods[i + 1] : nullptr;
      out.emplace_back(replica,
                       LossText(spec, replica, *pods[i], seen.nodes.at(NodeOf(*pods[i])), next));
    }
  }
  return out;
}

}  // namespace tfk8s::internal
