// TFCluster status: replicas lost with their node, in words (workloads/tfcluster_losses.cpp),
// from the objects Kubernetes leaves after a node stops: the evicted pod (being deleted, still
// on its node), the node's Ready condition, and the replica's next pod.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tfk8s/client.hpp"
#include "tfk8s/testing/fake_cluster.hpp"
#include "workloads/tfcluster_internal.hpp"

using namespace tfk8s;
using internal::NodeReadiness;

namespace {

TFClusterSpec Spec(TFTopology topology = TFTopology::kPerReplica) {
  TFClusterSpec spec;
  spec.name = "train";
  spec.topology = topology;
  spec.ps.replicas = 2;
  spec.worker.replicas = 2;
  spec.chief.replicas = 1;
  return spec;
}

Json Pod(const std::string& name, const std::string& role, int index, const std::string& node,
         const std::string& created) {
  Json pod = {
      {"metadata",
       {{"name", name},
        {"uid", "uid-" + name},
        {"creationTimestamp", created},
        {"labels",
         {{"tfk8s.io/cluster", "train"},
          {"tfk8s.io/role", role},
          {"tfk8s.io/index", std::to_string(index)}}}}},
      {"spec", {{"nodeName", node}}},
      {"status",
       {{"phase", "Running"},
        {"conditions",
         {{{"type", "PodScheduled"}, {"status", "True"}, {"lastTransitionTime", created}}}}}}};
  return pod;
}

Json Evicted(Json pod, const std::string& at) {
  pod["metadata"]["deletionTimestamp"] = at;
  return pod;
}

// Every replica running on n1 or n2, as a cluster stands before anything is lost.
internal::TFObserved Running() {
  internal::TFObserved seen;
  seen.pods = {Pod("train-chief-0-a", "chief", 0, "n1", "2026-12-06T12:00:00Z"),
               Pod("train-ps-0-a", "ps", 0, "n1", "2026-12-06T12:00:00Z"),
               Pod("train-ps-1-a", "ps", 1, "n2", "2026-12-06T12:00:00Z"),
               Pod("train-worker-0-a", "worker", 0, "n1", "2026-12-06T12:00:00Z"),
               Pod("train-worker-1-a", "worker", 1, "n2", "2026-12-06T12:00:00Z")};
  return seen;
}

}  // namespace

TEST_CASE("a replica lost with its node and recreated elsewhere is told in words") {
  internal::TFObserved seen = Running();
  seen.pods[4] = Evicted(seen.pods[4], "2026-12-06T12:01:31Z");
  seen.pods.push_back(Pod("train-worker-1-b", "worker", 1, "n3", "2026-12-06T12:01:41Z"));
  seen.nodes["n2"] = NodeReadiness{false, "2026-12-06T12:01:07Z"};
  TFClusterStatus st = internal::ComputeTFStatus(Spec(), seen, nullptr);
  const std::string said = "worker-1 lost with node n2 at 12:01:07Z; recreated on n3 at 12:01:41Z";
  CHECK(st.events == std::vector<std::string>{said});
  CHECK(st.phase == TFClusterPhase::kRunning);
  CHECK(st.message == "5 replicas running; " + said);
  CHECK(st.Table().find("event: " + said + "\n") != std::string::npos);
  // The replica's row is its new pod.
  for (const auto& r : st.replicas) {
    if (r.role == "worker" && r.index == 1) {
      CHECK(r.pod == "train-worker-1-b");
      CHECK(r.node == "n3");
    }
  }
  CHECK(st.ToJson()["events"] == Json::array({said}));
}

TEST_CASE("a lost replica not recreated yet is the reason the cluster is not ready") {
  internal::TFObserved seen = Running();
  seen.pods[2] = Evicted(seen.pods[2], "2026-12-06T12:01:31Z");  // ps-1 on n2
  seen.nodes["n2"] = NodeReadiness{false, "2026-12-06T12:01:07Z"};
  TFClusterStatus st = internal::ComputeTFStatus(Spec(), seen, nullptr);
  const std::string said = "ps-1 lost with node n2 at 12:01:07Z; not recreated yet";
  CHECK(st.events == std::vector<std::string>{said});
  CHECK(st.phase == TFClusterPhase::kPending);
  CHECK(st.message == "1 of 5 replicas not ready; ps-1: " + said);

  // A StatefulSet keeps the pod's name: it cannot recreate it while the old pod exists.
  TFClusterStatus sts = internal::ComputeTFStatus(Spec(TFTopology::kStatefulSet), seen, nullptr);
  REQUIRE(sts.events.size() == 1);
  CHECK(sts.events[0] ==
        "ps-1 lost with node n2 at 12:01:07Z; its StatefulSet recreates it only once the node "
        "is back or the pod is deleted with --force");
}

TEST_CASE("a recreated pod not yet placed, and a node removed from the cluster") {
  internal::TFObserved seen = Running();
  // Deleted at 12:01:31 with a grace period of 30 s: its deletionTimestamp is 12:02:01.
  seen.pods[4] = Evicted(seen.pods[4], "2026-12-06T12:02:01Z");
  seen.pods[4]["metadata"]["deletionGracePeriodSeconds"] = 30;
  Json next = Pod("train-worker-1-b", "worker", 1, "", "2026-12-06T12:01:40Z");
  next["status"] = {{"phase", "Pending"}};
  seen.pods.push_back(next);
  seen.nodes["n2"] = NodeReadiness{false, ""};  // gone: the eviction's time is the loss's
  TFClusterStatus st = internal::ComputeTFStatus(Spec(), seen, nullptr);
  CHECK(st.events == std::vector<std::string>{
                         "worker-1 lost with node n2 at 12:01:31Z; recreated at 12:01:40Z, not on "
                         "a node yet"});
}

TEST_CASE("pods deleted on purpose, on a Ready node or one not read, are no loss") {
  internal::TFObserved seen = Running();
  seen.pods[4] = Evicted(seen.pods[4], "2026-12-06T12:01:31Z");
  seen.pods[1] = Evicted(seen.pods[1], "2026-12-06T12:01:31Z");
  seen.nodes["n2"] = NodeReadiness{true, ""};  // n1 not read (e.g. Forbidden)
  TFClusterStatus st = internal::ComputeTFStatus(Spec(), seen, nullptr);
  CHECK(st.events.empty());
  CHECK(st.message.find("lost") == std::string::npos);
}

TEST_CASE("two losses of one replica are told in order, each with its successor") {
  internal::TFObserved seen = Running();
  seen.pods[4] = Evicted(seen.pods[4], "2026-12-06T12:01:31Z");
  seen.pods.push_back(Evicted(Pod("train-worker-1-b", "worker", 1, "n3", "2026-12-06T12:01:41Z"),
                              "2026-12-06T12:05:00Z"));
  seen.pods.push_back(Pod("train-worker-1-c", "worker", 1, "n1", "2026-12-06T12:05:10Z"));
  seen.nodes["n2"] = NodeReadiness{false, "2026-12-06T12:01:07Z"};
  seen.nodes["n3"] = NodeReadiness{false, "2026-12-06T12:04:40Z"};
  TFClusterStatus st = internal::ComputeTFStatus(Spec(), seen, nullptr);
  CHECK(st.events == std::vector<std::string>{
                         "worker-1 lost with node n2 at 12:01:07Z; recreated on n3 at 12:01:41Z",
                         "worker-1 lost with node n3 at 12:04:40Z; recreated on n1 at 12:05:10Z"});
}

TEST_CASE("the nodes a status reads: those of pods being deleted, each once, by GET") {
  internal::TFObserved seen = Running();
  seen.pods[4] = Evicted(seen.pods[4], "2026-12-06T12:01:31Z");
  seen.pods[2] = Evicted(seen.pods[2], "2026-12-06T12:01:31Z");
  seen.pods[1] = Evicted(seen.pods[1], "2026-12-06T12:01:31Z");
  CHECK(internal::NodesToRead(seen.pods, {}) == std::set<std::string>{"n1", "n2"});
  CHECK(internal::NodesToRead(seen.pods, {{"n1", NodeReadiness{}}}) == std::set<std::string>{"n2"});
  CHECK(internal::NodesToRead(Running().pods, {}).empty());

  testing::FakeCluster fake;
  fake.Add({{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", "n1"}}},
            {"status",
             {{"conditions",
               {{{"type", "Ready"},
                 {"status", "Unknown"},
                 {"lastTransitionTime", "2026-12-06T12:01:07Z"}}}}}}});
  fake.Add({{"apiVersion", "v1"},
            {"kind", "Node"},
            {"metadata", {{"name", "n3"}}},
            {"status", {{"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}});
  Client client = fake.client();
  std::map<std::string, NodeReadiness> nodes;
  internal::ReadNodes(client, {"n1", "n2", "n3"}, &nodes);
  REQUIRE(nodes.size() == 3);
  CHECK_FALSE(nodes["n1"].ready);
  CHECK(nodes["n1"].since == "2026-12-06T12:01:07Z");
  CHECK_FALSE(nodes["n2"].ready);  // no such node: removed with its pods
  CHECK(nodes["n2"].since.empty());
  CHECK(nodes["n3"].ready);
}
