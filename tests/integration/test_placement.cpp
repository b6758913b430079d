// Placement against the local cluster: the simulated nodes' labels and capacity, requested
// resources of scheduled pods, WhereFits checked by the real scheduler, CheckPlacement, and
// node label changes (always restored).
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "cluster.hpp"
#include "tfk8s/placement.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

const ResourceType kNodes{"", "v1", "Node", "nodes", false};
constexpr const char* kLabelNode = "sim-cpu-3";

Quantity Q(std::string_view s) { return Quantity::Parse(s); }

Json PinnedPod(const std::string& name, const Json& selector, const Json& resources) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"nodeSelector", selector},
            {"tolerations",
             {{{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}}},
            {"terminationGracePeriodSeconds", 0},
            {"containers", {{{"name", "main"}, {"image", "busybox"}, {"resources", resources}}}}}}};
}

// Waits until the scheduler bound the pod; returns the node ("" on timeout).
std::string WaitScheduled(Client& c, const std::string& ns, const std::string& pod,
                          std::chrono::seconds limit = std::chrono::seconds(30)) {
  std::string node;
  TestNamespace::WaitFor(
      [&] {
        node = c.Get(kPods, ns, pod)["spec"].value("nodeName", "");
        return !node.empty();
      },
      limit);
  return node;
}

std::string Kubectl(const std::string& args) {
  const std::string cmd = "kubectl --kubeconfig=" + Kubeconfig() + " " + args + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  if (!pipe) return "";
  std::string out;
  char buf[4096];
  while (std::size_t n = fread(buf, 1, sizeof buf, pipe.get())) out.append(buf, n);
  return out;
}

// "Allocated resources" requests of `kubectl describe node`: {"cpu": "4500m", …}.
std::map<std::string, std::string> DescribeNodeRequests(const std::string& node) {
  std::map<std::string, std::string> out;
  std::istringstream in(Kubectl("describe node " + node));
  std::string line;
  bool section = false;
  bool table = false;
  while (std::getline(in, line)) {
    if (line.rfind("Allocated resources:", 0) == 0) section = true;
    if (!section) continue;
    if (line.find("--------") != std::string::npos) {
      table = true;
      continue;
    }
    if (!table) continue;
    if (line.empty() || line[0] != ' ') break;
    std::istringstream fields(line);
    std::string resource, requests;
    if (fields >> resource >> requests) out[resource] = requests;
  }
  return out;
}

const NodeInfo& NodeNamed(const Inventory& inv, const std::string& name) {
  for (const auto& n : inv.nodes) {
    if (n.name == name) return n;
  }
  throw std::runtime_error("no node " + name);
}

// UIDs of the pods bound to the node and not finished (the inventory's own selection).
std::set<std::string> ActivePodUids(Client& c, const std::string& node) {
  ListOptions on_node;
  on_node.field_selector =
      "spec.nodeName=" + node + ",status.phase!=Succeeded,status.phase!=Failed";
  std::set<std::string> uids;
  const Json list = c.ListAll(kPods, "", on_node);  // kept: the loop below refers into it
  for (const Json& pod : list["items"]) {
    uids.insert(pod["metadata"]["uid"].get<std::string>());
  }
  return uids;
}

Quantity Amount(const ResourceList& list, const std::string& key) {
  auto it = list.find(key);
  return it == list.end() ? Quantity() : it->second;
}

// Restores a node's labels when the test ends, whatever happened.
class LabelGuard {
 public:
  LabelGuard(Client client, std::string node) : client_(std::move(client)), node_(std::move(node)) {
    original_ = client_.Get(kNodes, "", node_)["metadata"]["labels"];
  }
  ~LabelGuard() {
    try {
      Json now = client_.Get(kNodes, "", node_)["metadata"]["labels"];
      Json patch = Json::object();
      for (const auto& [k, v] : now.items()) {
        if (!original_.contains(k)) patch[k] = nullptr;
      }
      for (const auto& [k, v] : original_.items()) patch[k] = v;
      client_.Patch(kNodes, "", node_, PatchType::kMerge, {{"metadata", {{"labels", patch}}}});
    } catch (...) {
    }
  }

 private:
  Client client_;
  std::string node_;
  Json original_;
};

}  // namespace

TEST_SUITE("placement") {
  TEST_CASE("inventory matches the simulated nodes and the pods scheduled on them") {
    Client c = AdminClient();
    Inventory before = GetInventory(c);
    REQUIRE(before.nodes.size() == 7);
    for (const auto& n : before.nodes) {
      INFO(n.name);
      CHECK(n.ready);
      CHECK(n.nodetype == "tensorflow");
      CHECK(n.cputype == "xeon-gold");
      CHECK(n.allocatable.at("cpu") == Q("32"));
      CHECK(n.allocatable.at("memory") == Q("128Gi"));
      CHECK(n.allocatable.at("pods") == Q("110"));
      const bool gpu = n.name.rfind("sim-gpu-", 0) == 0;
      CHECK(Amount(n.allocatable, "nvidia.com/gpu") == Q(gpu ? "4" : "0"));
      CHECK(n.gputype == (gpu ? "v100" : ""));
      CHECK(n.taints.size() == (gpu ? 1u : 0u));
      const bool private_node = n.name == "sim-private-0";
      CHECK(n.pooltype == (private_node ? "unshared" : "shared"));
      CHECK(n.privatename == (private_node ? "alice" : ""));
    }
    REQUIRE(before.by_gputype.size() == 2);
    CHECK(before.by_gputype[1].value == "v100");
    CHECK(before.by_gputype[1].nodes == std::vector<std::string>{"sim-gpu-0", "sim-gpu-1"});
    CHECK(before.by_gputype[1].allocatable.at("nvidia.com/gpu") == Q("8"));
    REQUIRE(before.by_pool.size() == 2);
    CHECK(before.by_pool[0].value == "shared");
    CHECK(before.by_pool[0].nodes.size() == 6);
    CHECK(before.by_pool[1].value == "unshared/alice");
    REQUIRE(before.by_cputype.size() == 1);
    CHECK(before.by_cputype[0].allocatable.at("cpu") == Q("224"));

    // Other suites run beside this one (ctest -j) and their pods may come and go on the node
    // between two reads. A measurement counts only when the node's set of active pods (read by
    // UID around the reads: both inventories, the per-node read and `kubectl describe node`)
    // changed by exactly our two pods; otherwise it is taken again
    // with new pods, at most five times, and a node that never holds still is a failure.
    TestNamespace ns(c, "inv");
    const Json on_node{{"kubernetes.io/hostname", kLabelNode}};
    Inventory after;
    NodeInfo single;
    std::map<std::string, std::string> described;
    bool quiet = false;
    for (int attempt = 1; attempt <= 5 && !quiet; ++attempt) {
      const std::set<std::string> u0 = ActivePodUids(c, kLabelNode);
      before = GetInventory(c);
      const std::set<std::string> u1 = ActivePodUids(c, kLabelNode);
      const std::string a = fmt::format("a{}", attempt);
      const std::string b = fmt::format("b{}", attempt);
      std::set<std::string> ours;
      ours.insert(c.Create(
          kPods, ns.name(),
          PinnedPod(a, on_node,
                    {{"requests", {{"cpu", "3"}, {"memory", "5Gi"}}}}))["metadata"]["uid"]);
      // Limits only: the apiserver defaults the requests to them.
      ours.insert(c.Create(
          kPods, ns.name(),
          PinnedPod(b, on_node,
                    {{"limits", {{"cpu", "1500m"}, {"memory", "1Gi"}}}}))["metadata"]["uid"]);
      REQUIRE(WaitScheduled(c, ns.name(), a) == kLabelNode);
      REQUIRE(WaitScheduled(c, ns.name(), b) == kLabelNode);
      const std::set<std::string> u2 = ActivePodUids(c, kLabelNode);
      after = GetInventory(c);
      // The per-node read and kubectl's view are taken inside the same quiet window.
      single = GetNodeInfo(c, kLabelNode);
      described = DescribeNodeRequests(kLabelNode);
      const std::set<std::string> u3 = ActivePodUids(c, kLabelNode);
      std::set<std::string> expected = u1;
      expected.insert(ours.begin(), ours.end());
      quiet = u0 == u1 && u2 == u3 && u2 == expected;
      if (!quiet) {
        MESSAGE("attempt " << attempt << ": other pods came or went on " << std::string(kLabelNode)
                           << " while measuring (" << u0.size() << ", " << u1.size() << ", "
                           << u2.size() << ", " << u3.size() << " pods); measuring again");
        c.Delete(kPods, ns.name(), a);
        c.Delete(kPods, ns.name(), b);
      }
    }
    REQUIRE_MESSAGE(quiet, "the node's pods changed during each of 5 measurements");
    const NodeInfo& was = NodeNamed(before, kLabelNode);
    const NodeInfo& now = NodeNamed(after, kLabelNode);
    CHECK(Amount(now.requested, "cpu") - Amount(was.requested, "cpu") == Q("4500m"));
    CHECK(Amount(now.requested, "memory") - Amount(was.requested, "memory") == Q("6Gi"));
    CHECK(Amount(now.requested, "pods") - Amount(was.requested, "pods") == Q("2"));
    CHECK(now.pod_count - was.pod_count == 2);
    CHECK(now.free.at("cpu") == Q("32") - Amount(now.requested, "cpu"));

    // The per-node read (field selector spec.nodeName) agrees with the one-list inventory.
    CHECK(single.requested == now.requested);
    CHECK(single.pod_count == now.pod_count);

    // And so does kubectl describe node.
    REQUIRE_MESSAGE(!described.empty(),
                    "`kubectl describe node` gave no allocated resources (tools/install-deps.sh "
                    "installs kubectl)");
    CHECK(described["cpu"] == Amount(now.requested, "cpu").ToString());
    CHECK(described["memory"] == Amount(now.requested, "memory").ToString());
  }

  TEST_CASE("WhereFits answers where a 4-GPU v100 worker fits, and the scheduler agrees") {
    Client c = AdminClient();
    // The exact answers below need idle GPU nodes; pods of earlier tests may still be
    // terminating with their namespaces, so give them time. Still busy after that is a failure
    // (a test that leaks GPU pods), reported with the pods that hold them.
    const bool idle = TestNamespace::WaitFor(
        [&] {
          Inventory inv = GetInventory(c);
          return NodeNamed(inv, "sim-gpu-0").free.at("nvidia.com/gpu") == Q("4") &&
                 NodeNamed(inv, "sim-gpu-1").free.at("nvidia.com/gpu") == Q("4");
        },
        std::chrono::seconds(120));
    if (!idle) {
      std::string holders;
      const Json pods = c.ListAll(kPods, "");
      for (const Json& pod : pods["items"]) {
        const std::string node = pod["spec"].value("nodeName", "");
        const std::string phase = pod.value("status", Json::object()).value("phase", "");
        if ((node == "sim-gpu-0" || node == "sim-gpu-1") && phase != "Succeeded" &&
            phase != "Failed") {
          holders += " " + pod["metadata"].value("namespace", "") + "/" +
                     pod["metadata"].value("name", "") + "@" + node;
        }
      }
      FAIL("the GPU nodes stayed busy for 120 s; pods on them:" << holders);
    }
    const ResourceList four{{"nvidia.com/gpu", Q("4")}, {"cpu", Q("4")}};
    const std::map<std::string, std::string> v100{{"gputype", "v100"}};
    CHECK(WhereFits(c, four, v100) == std::vector<std::string>{"sim-gpu-0", "sim-gpu-1"});
    CHECK(WhereFits(c, four, {{"gputype", "a100"}}).empty());

    TestNamespace ns(c, "fits");
    c.Create(kPods, ns.name(),
             PinnedPod("three", {{"kubernetes.io/hostname", "sim-gpu-0"}},
                       {{"limits", {{"nvidia.com/gpu", 3}}}}));
    REQUIRE(WaitScheduled(c, ns.name(), "three") == "sim-gpu-0");
    CHECK(WhereFits(c, four, v100) == std::vector<std::string>{"sim-gpu-1"});
    CHECK(WhereFits(c, {{"nvidia.com/gpu", Q("1")}}, v100) ==
          std::vector<std::string>{"sim-gpu-0", "sim-gpu-1"});

    // The scheduler puts a 4-GPU worker exactly where WhereFits said it would fit.
    c.Create(kPods, ns.name(),
             PinnedPod("worker", {{"gputype", "v100"}}, {{"limits", {{"nvidia.com/gpu", 4}}}}));
    CHECK(WaitScheduled(c, ns.name(), "worker") == "sim-gpu-1");
    // Now no node can take another one right now, and the scheduler leaves it pending.
    CHECK(WhereFits(c, four, v100).empty());
    c.Create(kPods, ns.name(),
             PinnedPod("waiting", {{"gputype", "v100"}}, {{"limits", {{"nvidia.com/gpu", 4}}}}));
    std::string reason;
    CHECK(TestNamespace::WaitFor(
        [&] {
          for (const auto& cond :
               c.Get(kPods, ns.name(), "waiting")["status"].value("conditions", Json::array())) {
            if (cond.value("type", "") == "PodScheduled") reason = cond.value("reason", "");
          }
          return reason == "Unschedulable";
        },
        std::chrono::seconds(20)));
    // But it could *ever* fit: the placement pre-flight accepts it.
    CHECK(CheckPlacement(c, {c.Get(kPods, ns.name(), "waiting")}).fits);
  }

  TEST_CASE("CheckPlacement: no node with gputype=a100, a pod bigger than any node, a fit") {
    Client c = AdminClient();
    auto worker = [](const std::string& name, const Json& selector, const Json& resources) {
      Json pod = PinnedPod(name, selector, resources);
      return Json{
          {"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", {{"name", name}}},
          {"spec",
           {{"replicas", 2},
            {"serviceName", name},
            {"selector", {{"matchLabels", {{"app", name}}}}},
            {"template", {{"metadata", {{"labels", {{"app", name}}}}}, {"spec", pod["spec"]}}}}}};
    };
    FitResult a100 =
        CheckPlacement(c, {worker("tf-worker", {{"nodetype", "tensorflow"}, {"gputype", "a100"}},
                                  {{"limits", {{"nvidia.com/gpu", 1}}}})});
    CHECK_FALSE(a100.fits);
    REQUIRE(a100.problems.size() == 1);
    CHECK(a100.problems[0] ==
          "StatefulSet/tf-worker: cannot be placed on any node: no node has label "
          "gputype=a100 (of 7 nodes)");

    FitResult big = CheckPlacement(
        c, {worker("tf-ps", {{"nodetype", "tensorflow"}}, {{"requests", {{"cpu", "48"}}}})});
    CHECK_FALSE(big.fits);
    REQUIRE(big.problems.size() == 1);
    CHECK(big.problems[0].find("bigger than any node") != std::string::npos);
    CHECK(big.problems[0].find("cpu 48 > largest allocatable 32") != std::string::npos);

    FitResult ok = CheckPlacement(
        c, {worker("tf-worker", {{"nodetype", "tensorflow"}, {"gputype", "v100"}},
                   {{"limits", {{"nvidia.com/gpu", 4}, {"cpu", "8"}, {"memory", "32Gi"}}}})});
    CHECK(ok.fits);
    CHECK(ok.Message().empty());
  }

  TEST_CASE("node labels: set, validated against the node's labels, removed, restored") {
    Client c = AdminClient();
    LabelGuard guard(c, kLabelNode);
    SetNodeLabels(c, kLabelNode, {{"cputype", "epyc"}});
    Inventory inv = GetInventory(c);
    CHECK(NodeNamed(inv, kLabelNode).cputype == "epyc");
    REQUIRE(inv.by_cputype.size() == 2);
    CHECK(inv.by_cputype[0].value == "epyc");
    CHECK(inv.by_cputype[0].nodes == std::vector<std::string>{kLabelNode});

    // Unshared needs an owner: refused, and the node is unchanged.
    CHECK_THROWS_AS(SetNodeLabels(c, kLabelNode, {{"pooltype", "unshared"}}), ValidationError);
    CHECK(c.Get(kNodes, "", kLabelNode)["metadata"]["labels"]["pooltype"] == "shared");
    CHECK_THROWS_AS(SetNodeLabels(c, kLabelNode, {{"pooltype", "private"}}), ValidationError);

    SetNodeLabels(c, kLabelNode, {{"pooltype", "unshared"}, {"privatename", "bob"}});
    CHECK(WhereFits(c, {{"cpu", Q("1")}}, {{"privatename", "bob"}}) ==
          std::vector<std::string>{kLabelNode});
    CHECK_THROWS_AS(RemoveNodeLabels(c, kLabelNode, {"privatename"}), ValidationError);
    // Back to the shared pool: both changes in one patch.
    UpdateNodeLabels(c, kLabelNode, {{"pooltype", "shared"}}, {"privatename"});
    Json labels = c.Get(kNodes, "", kLabelNode)["metadata"]["labels"];
    CHECK(labels["pooltype"] == "shared");
    CHECK_FALSE(labels.contains("privatename"));

    RemoveNodeLabels(c, kLabelNode, {"cputype"});
    CHECK_FALSE(c.Get(kNodes, "", kLabelNode)["metadata"]["labels"].contains("cputype"));
    SetNodeLabels(c, kLabelNode, {{"cputype", "xeon-gold"}});
    CHECK(c.Get(kNodes, "", kLabelNode)["metadata"]["labels"]["cputype"] == "xeon-gold");
  }
}
