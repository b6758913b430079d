// Node labels, inventory, WhereFits and the could-ever-fit placement check. No server (label
// patches run over a fake transport).
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "fake_transport.hpp"
#include "tfk8s/placement.hpp"
#include "tfk8s/testing/fake_cluster.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeTransport;
using tfk8s::testing::Respond;

namespace {

Quantity Q(std::string_view s) { return Quantity::Parse(s); }

// Nodes shaped like the local cluster's simulated ones.
Json Node(const std::string& name, const Json& labels, const Json& allocatable,
          const Json& taints = Json::array(), bool ready = true) {
  Json n{{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata", {{"name", name}, {"labels", labels}, {"resourceVersion", "7"}}},
         {"spec", Json::object()},
         {"status",
          {{"allocatable", allocatable},
           {"capacity", allocatable},
           {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
  if (!taints.empty()) n["spec"]["taints"] = taints;
  return n;
}

std::vector<Json> SimNodes() {
  const Json cpu{{"cpu", "32"}, {"memory", "128Gi"}, {"pods", "110"}};
  const Json gpu{{"cpu", "32"}, {"memory", "128Gi"}, {"pods", "110"}, {"nvidia.com/gpu", "4"}};
  const Json shared{{"nodetype", "tensorflow"}, {"cputype", "xeon-gold"}, {"pooltype", "shared"}};
  Json gpu_labels = shared;
  gpu_labels["gputype"] = "v100";
  Json private_labels{{"nodetype", "tensorflow"},
                      {"cputype", "xeon-gold"},
                      {"pooltype", "unshared"},
                      {"privatename", "alice"}};
  const Json gpu_taint = {
      {{"key", "nvidia.com/gpu"}, {"value", "present"}, {"effect", "NoSchedule"}}};
  return {Node("sim-cpu-0", shared, cpu), Node("sim-cpu-1", shared, cpu),
          Node("sim-gpu-0", gpu_labels, gpu, gpu_taint),
          Node("sim-gpu-1", gpu_labels, gpu, gpu_taint),
          Node("sim-private-0", private_labels, cpu)};
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The cells of a text table's line: columns are two or more spaces apart (no cell here holds
// two spaces in a row).
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < line.size()) {
    std::size_t gap = line.find("  ", at);
    if (gap == std::string::npos) gap = line.size();
    out.push_back(line.substr(at, gap - at));
    at = line.find_first_not_of(' ', gap);
    if (at == std::string::npos) break;
  }
  return out;
}

Json RunningPod(const std::string& node, const Json& requests, const std::string& phase = "Running",
                const Json& limits = nullptr) {
  Json c{{"name", "c"}, {"image", "x"}, {"resources", {{"requests", requests}}}};
  if (!limits.is_null()) c["resources"]["limits"] = limits;
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "p"}, {"namespace", "ns"}}},
          {"spec", {{"nodeName", node}, {"containers", {c}}}},
          {"status", {{"phase", phase}}}};
}

Json Worker(const std::string& name, const Json& pod_spec_extra, const Json& resources,
            int replicas = 1) {
  Json spec{{"containers", {{{"name", "tf"}, {"image", "tf"}, {"resources", resources}}}}};
  spec.update(pod_spec_extra);
  return {{"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", {{"name", name}}},
          {"spec", {{"replicas", replicas}, {"template", {{"spec", spec}}}}}};
}

const Json kGpuToleration = {
    {{"key", "nvidia.com/gpu"}, {"operator", "Exists"}, {"effect", "NoSchedule"}}};

// A CPU cluster of `workers` workers with the default placement (nodetype=tensorflow,
// pooltype=shared: sim-cpu-0 and sim-cpu-1 of SimNodes()).
TFClusterSpec Spread(TFSpread spread, int workers, TFTopology topology = TFTopology::kPerReplica) {
  TFClusterSpec s;
  s.name = "mnist";
  s.namespace_name = "team-a";
  s.topology = topology;
  s.ps.replicas = 1;
  s.worker.replicas = workers;
  s.worker.resources = {"2", "4Gi", "", "", 0};
  s.spread = spread;
  return s;
}

// A TFCluster's objects as its pre-flight checks them (the root ConfigMap left out).
std::vector<Json> Children(const TFClusterSpec& spec) {
  auto objects = RenderTFCluster(spec);
  return {objects.begin() + 1, objects.end()};
}

ClientConfig FakeConfig() {
  ClientConfig c;
  c.server = "https://127.0.0.1:6443";
  c.token = "t";
  c.rate_limit.qps = 0;
  return c;
}

}  // namespace

TEST_SUITE("placement") {
  TEST_CASE("seed label rules") {
    CHECK_NOTHROW(ValidateNodeLabels({{"nodetype", "tensorflow"}, {"pooltype", "shared"}}));
    CHECK_NOTHROW(ValidateNodeLabels({{"pooltype", "unshared"}, {"privatename", "alice"}}));
    CHECK_NOTHROW(ValidateNodeLabels({}));
    try {
      ValidateNodeLabels({{"pooltype", "private"}});
      FAIL("expected ValidationError");
    } catch (const ValidationError& e) {
      CHECK(e.field() == "labels[pooltype]");
      CHECK(e.value() == "private");
    }
    try {
      ValidateNodeLabels({{"pooltype", "unshared"}});
      FAIL("expected ValidationError");
    } catch (const ValidationError& e) {
      CHECK(e.field() == "labels[privatename]");
      CHECK(std::string(e.what()).find("required when pooltype=unshared") != std::string::npos);
    }
    try {
      ValidateNodeLabels({{"pooltype", "shared"}, {"privatename", "bob"}});
      FAIL("expected ValidationError");
    } catch (const ValidationError& e) {
      CHECK(e.field() == "labels[privatename]");
      CHECK(e.value() == "bob");
    }
    CHECK_THROWS_AS(ValidateNodeLabels({{"privatename", "bob"}}), ValidationError);
    CHECK_THROWS_AS(ValidateNodeLabels({{"gputype", "v100 sxm"}}), ValidationError);
    CHECK_THROWS_AS(ValidateNodeLabels({{"-bad", "x"}}), ValidationError);
  }

  TEST_CASE("SetNodeLabels validates the resulting set, then patches conditionally") {
    std::vector<std::string> bodies;
    auto fake = std::make_shared<FakeTransport>([&](const internal::HttpRequest& r) {
      if (r.method == "GET") return Respond(200, SimNodes()[0].dump());
      bodies.push_back(r.body);
      return Respond(200, SimNodes()[0].dump());
    });
    Client client = internal::ClientOver(FakeConfig(), fake);
    SetNodeLabels(client, "sim-cpu-0", {{"gputype", "a100"}});
    REQUIRE(bodies.size() == 1);
    Json patch = Json::parse(bodies[0]);
    CHECK(patch["metadata"]["labels"] == Json{{"gputype", "a100"}});
    CHECK(patch["metadata"]["resourceVersion"] == "7");
    auto reqs = fake->requests();
    CHECK(reqs.back().method == "PATCH");
    CHECK(testing::HasHeader(reqs.back(), "Content-Type: application/merge-patch+json"));

    // sim-cpu-0 is shared: making it unshared without an owner is refused before any PATCH.
    CHECK_THROWS_AS(SetNodeLabels(client, "sim-cpu-0", {{"pooltype", "unshared"}}),
                    ValidationError);
    CHECK(bodies.size() == 1);
    SetNodeLabels(client, "sim-cpu-0", {{"pooltype", "unshared"}, {"privatename", "bob"}});
    CHECK(bodies.size() == 2);
    // Syntax errors fail before even the GET.
    const auto before = fake->requests().size();
    CHECK_THROWS_AS(SetNodeLabels(client, "sim-cpu-0", {{"gputype", "not valid!"}}),
                    ValidationError);
    CHECK(fake->requests().size() == before);

    // A key cannot be both set and removed.
    CHECK_THROWS_AS(UpdateNodeLabels(client, "sim-cpu-0", {{"gputype", "a100"}}, {"gputype"}),
                    ValidationError);
    CHECK(fake->requests().size() == before);
    UpdateNodeLabels(client, "sim-cpu-0", {{"gputype", "a100"}}, {"pooltype"});
    Json both = Json::parse(bodies.back());
    CHECK(both["metadata"]["labels"] == Json{{"gputype", "a100"}, {"pooltype", nullptr}});

    RemoveNodeLabels(client, "sim-cpu-0", {"cputype", "absent"});
    Json removal = Json::parse(bodies.back());
    CHECK(removal["metadata"]["labels"] == Json{{"cputype", nullptr}});
    // Nothing to change: no PATCH at all.
    const auto patches = bodies.size();
    SetNodeLabels(client, "sim-cpu-0", {{"nodetype", "tensorflow"}});
    CHECK(bodies.size() == patches);
  }

  TEST_CASE("inventory: requests of non-terminated pods per node, groups") {
    std::vector<Json> pods{
        RunningPod("sim-gpu-0", {{"cpu", "4"}, {"memory", "16Gi"}}, "Running",
                   {{"nvidia.com/gpu", "2"}}),
        RunningPod("sim-gpu-0", {{"cpu", "500m"}}, "Pending"),
        RunningPod("sim-gpu-0", {{"cpu", "8"}}, "Succeeded"),  // finished: frees its requests
        RunningPod("sim-cpu-1", {{"cpu", "1"}, {"memory", "1Gi"}}),
        RunningPod("", {{"cpu", "1"}}, "Pending"),  // not scheduled yet
    };
    Inventory inv = BuildInventory(SimNodes(), pods);
    REQUIRE(inv.nodes.size() == 5);
    const NodeInfo& g0 = inv.nodes[2];
    CHECK(g0.name == "sim-gpu-0");
    CHECK(g0.gputype == "v100");
    CHECK(g0.pod_count == 2);
    CHECK(g0.requested.at("cpu") == Q("4500m"));
    CHECK(g0.requested.at("memory") == Q("16Gi"));
    CHECK(g0.requested.at("nvidia.com/gpu") == Q("2"));  // from the limit, like the apiserver
    CHECK(g0.requested.at("pods") == Q("2"));
    CHECK(g0.free.at("cpu") == Q("27500m"));
    CHECK(g0.free.at("nvidia.com/gpu") == Q("2"));
    CHECK(g0.free.at("pods") == Q("108"));
    REQUIRE(g0.taints.size() == 1);
    CHECK(g0.taints[0].ToString() == "nvidia.com/gpu=present:NoSchedule");

    REQUIRE(inv.by_gputype.size() == 2);
    CHECK(inv.by_gputype[0].value.empty());
    CHECK(inv.by_gputype[0].nodes.size() == 3);
    CHECK(inv.by_gputype[1].value == "v100");
    CHECK(inv.by_gputype[1].allocatable.at("nvidia.com/gpu") == Q("8"));
    CHECK(inv.by_gputype[1].free.at("nvidia.com/gpu") == Q("6"));
    REQUIRE(inv.by_cputype.size() == 1);
    CHECK(inv.by_cputype[0].allocatable.at("cpu") == Q("160"));
    CHECK(inv.by_cputype[0].requested.at("cpu") == Q("5500m"));
    REQUIRE(inv.by_pool.size() == 2);
    CHECK(inv.by_pool[0].value == "shared");
    CHECK(inv.by_pool[1].value == "unshared/alice");
    CHECK(inv.by_pool[1].nodes == std::vector<std::string>{"sim-private-0"});
    // The text: upper-case headers, amounts in Kubernetes' notation, one state word.
    const std::vector<std::string> lines = Lines(FormatInventory(inv));
    REQUIRE(lines.size() == 1 + 5 + 2 + 1 + 2);
    CHECK(Cells(lines[0]) == std::vector<std::string>{"NODE", "STATE", "NODETYPE", "GPUTYPE",
                                                      "CPUTYPE", "POOL", "PODS", "CPU REQ/ALLOC",
                                                      "MEMORY REQ/ALLOC", "GPU REQ/ALLOC"});
    CHECK(Cells(lines[2]) == std::vector<std::string>{"sim-cpu-1", "Ready", "tensorflow", "-",
                                                      "xeon-gold", "shared", "1", "1/32",
                                                      "1Gi/128Gi", "0/0"});
    CHECK(Cells(lines[3]) == std::vector<std::string>{"sim-gpu-0", "Ready", "tensorflow", "v100",
                                                      "xeon-gold", "shared", "2", "4500m/32",
                                                      "16Gi/128Gi", "2/4"});
    CHECK(Cells(lines[5])[5] == "unshared/alice");
    CHECK(lines[7] == "gputype=v100: 2 node(s), free cpu 59500m, memory 240Gi, nvidia.com/gpu 6");
    auto nodes = SimNodes();
    nodes[0]["status"]["conditions"][0]["status"] = "False";
    nodes[1]["spec"]["unschedulable"] = true;
    const std::vector<std::string> states = Lines(FormatInventory(BuildInventory(nodes, {})));
    CHECK(Cells(states[1])[1] == "NotReady");
    CHECK(Cells(states[2])[1] == "Cordoned");
    CHECK(Cells(states[3])[1] == "Ready");
  }

  TEST_CASE("WhereFits: labels, taints (GPU requests tolerate the GPU taint), free capacity") {
    std::vector<Json> pods{RunningPod("sim-gpu-0", {{"nvidia.com/gpu", "1"}})};
    Inventory inv = BuildInventory(SimNodes(), pods);
    FitQuery four_gpus;
    four_gpus.requests = {{"nvidia.com/gpu", Q("4")}, {"requests.cpu", Q("8")}};
    four_gpus.node_selector = {{"gputype", "v100"}};
    CHECK(WhereFits(inv, four_gpus) == std::vector<std::string>{"sim-gpu-1"});
    four_gpus.tolerate_requested_resource_taints = false;
    CHECK(WhereFits(inv, four_gpus).empty());
    four_gpus.tolerations = kGpuToleration;
    CHECK(WhereFits(inv, four_gpus) == std::vector<std::string>{"sim-gpu-1"});

    FitQuery a100;
    a100.requests = {{"nvidia.com/gpu", Q("1")}};
    a100.node_selector = {{"gputype", "a100"}};
    CHECK(WhereFits(inv, a100).empty());

    // A CPU pod: GPU nodes are tainted, so only untainted nodes are offered.
    FitQuery cpu;
    cpu.requests = {{"cpu", Q("16")}, {"memory", Q("64Gi")}};
    cpu.node_selector = {{"pooltype", "shared"}};
    CHECK(WhereFits(inv, cpu) == std::vector<std::string>{"sim-cpu-0", "sim-cpu-1"});
    cpu.requests["cpu"] = Q("33");
    CHECK(WhereFits(inv, cpu).empty());

    // Not-ready and cordoned nodes are not offered.
    auto nodes = SimNodes();
    nodes[0]["status"]["conditions"][0]["status"] = "False";
    nodes[1]["spec"]["unschedulable"] = true;
    FitQuery any;
    CHECK(WhereFits(BuildInventory(nodes, {}), any) == std::vector<std::string>{"sim-private-0"});
  }

  TEST_CASE("EvaluatePlacement: a pod that fits somewhere") {
    Json w = Worker("w", {{"nodeSelector", {{"gputype", "v100"}}}, {"tolerations", kGpuToleration}},
                    {{"limits", {{"nvidia.com/gpu", "4"}, {"cpu", "8"}}}}, 3);
    FitResult r = EvaluatePlacement({w}, SimNodes());
    CHECK(r.fits);
    CHECK(r.problems.empty());
  }

  TEST_CASE("EvaluatePlacement: no node with gputype=a100") {
    Json w = Worker("w",
                    {{"nodeSelector", {{"nodetype", "tensorflow"}, {"gputype", "a100"}}},
                     {"tolerations", kGpuToleration}},
                    {{"limits", {{"nvidia.com/gpu", "1"}}}});
    FitResult r = EvaluatePlacement({w}, SimNodes());
    CHECK_FALSE(r.fits);
    REQUIRE(r.problems.size() == 1);
    INFO(r.problems[0]);
    CHECK(r.problems[0].find("StatefulSet/w") == 0);
    CHECK(r.problems[0].find("no node has label gputype=a100") != std::string::npos);
    CHECK(r.problems[0].find("nodetype") == std::string::npos);  // that one matches
  }

  TEST_CASE("EvaluatePlacement: a pod bigger than any node") {
    Json big = Worker("big", Json::object(), {{"requests", {{"cpu", "64"}, {"memory", "1Gi"}}}});
    FitResult r = EvaluatePlacement({big}, SimNodes());
    CHECK_FALSE(r.fits);
    REQUIRE(r.problems.size() == 1);
    INFO(r.problems[0]);
    CHECK(r.problems[0].find("bigger than any node") != std::string::npos);
    CHECK(r.problems[0].find("cpu 64 > largest allocatable 32") != std::string::npos);
    CHECK(r.problems[0].find("memory") == std::string::npos);
    // Five GPUs on nodes with four each.
    Json gpus =
        Worker("g", {{"tolerations", kGpuToleration}}, {{"limits", {{"nvidia.com/gpu", "5"}}}});
    FitResult g = EvaluatePlacement({gpus}, SimNodes());
    REQUIRE(g.problems.size() == 1);
    CHECK(g.problems[0].find("nvidia.com/gpu 5 > largest allocatable 4") != std::string::npos);
    // Init containers count by their maximum, not their sum.
    Json init = Worker("i", Json::object(), {{"requests", {{"cpu", "20"}}}});
    init["spec"]["template"]["spec"]["initContainers"] = {
        {{"name", "a"}, {"image", "x"}, {"resources", {{"requests", {{"cpu", "30"}}}}}},
        {{"name", "b"}, {"image", "x"}, {"resources", {{"requests", {{"cpu", "30"}}}}}}};
    CHECK(EvaluatePlacement({init}, SimNodes()).fits);
  }

  TEST_CASE("EvaluatePlacement: taints, affinity operators, matchFields") {
    // GPU pods without a toleration cannot go anywhere with GPUs.
    Json untolerated = Worker("u", Json::object(), {{"limits", {{"nvidia.com/gpu", "1"}}}});
    FitResult u = EvaluatePlacement({untolerated}, SimNodes());
    CHECK_FALSE(u.fits);
    // Nodes without GPUs fail on resources, so the message is about size; with a selector for
    // GPU nodes it is about the taint.
    Json selected = Worker("s", {{"nodeSelector", {{"gputype", "v100"}}}},
                           {{"limits", {{"nvidia.com/gpu", "1"}}}});
    FitResult s = EvaluatePlacement({selected}, SimNodes());
    REQUIRE(s.problems.size() == 1);
    CHECK(s.problems[0].find("nvidia.com/gpu=present:NoSchedule") != std::string::npos);
    CHECK(s.problems[0].find("add a toleration") != std::string::npos);

    auto with_affinity = [](const Json& expressions) {
      return Worker("a",
                    {{"affinity",
                      {{"nodeAffinity",
                        {{"requiredDuringSchedulingIgnoredDuringExecution",
                          {{"nodeSelectorTerms", {{{"matchExpressions", expressions}}}}}}}}}}},
                    {{"requests", {{"cpu", "1"}}}});
    };
    auto fits = [&](const Json& expressions) {
      return EvaluatePlacement({with_affinity(expressions)}, SimNodes()).fits;
    };
    CHECK(fits({{{"key", "pooltype"}, {"operator", "In"}, {"values", {"unshared"}}},
                {{"key", "privatename"}, {"operator", "In"}, {"values", {"alice"}}}}));
    CHECK_FALSE(fits({{{"key", "privatename"}, {"operator", "In"}, {"values", {"bob", "carol"}}}}));
    CHECK(fits({{{"key", "gputype"}, {"operator", "DoesNotExist"}}}));
    CHECK(fits({{{"key", "gputype"}, {"operator", "NotIn"}, {"values", {"v100"}}}}));
    CHECK_FALSE(fits({{{"key", "gputype"}, {"operator", "Exists"}}}));  // tainted, no toleration
    CHECK_FALSE(fits({{{"key", "cputype"}, {"operator", "Gt"}, {"values", {"3"}}}}));
    FitResult named = EvaluatePlacement(
        {with_affinity(
            {{{"key", "privatename"}, {"operator", "In"}, {"values", {"bob", "carol"}}}})},
        SimNodes());
    REQUIRE(named.problems.size() == 1);
    CHECK(named.problems[0].find("privatename in (bob,carol)") != std::string::npos);

    Json by_name = Worker("n",
                          {{"affinity",
                            {{"nodeAffinity",
                              {{"requiredDuringSchedulingIgnoredDuringExecution",
                                {{"nodeSelectorTerms",
                                  {{{"matchFields",
                                     {{{"key", "metadata.name"},
                                       {"operator", "In"},
                                       {"values", {"sim-private-0"}}}}}}}}}}}}}}},
                          {{"requests", {{"cpu", "1"}}}});
    CHECK(EvaluatePlacement({by_name}, SimNodes()).fits);

    // A transient condition taint does not make a pod impossible to place (ever), but keeps it
    // off the nodes now.
    auto nodes = SimNodes();
    for (auto& n : nodes) {
      n["spec"]["taints"] = {{{"key", "node.kubernetes.io/not-ready"}, {"effect", "NoSchedule"}}};
    }
    const Json c = Worker("c", Json::object(), {{"requests", {{"cpu", "1"}}}});
    CHECK(EvaluatePlacement({c}, nodes, PlacementScope::kEver).fits);
    CHECK_FALSE(EvaluatePlacement({c}, nodes).fits);
  }

  TEST_CASE("EvaluatePlacement: several objects, only pod-making kinds, zero replicas skipped") {
    Json svc{{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", {{"name", "s"}}}};
    Json none = Worker("none", {{"nodeSelector", {{"gputype", "a100"}}}}, Json::object(), 0);
    Json big = Worker("big", Json::object(), {{"requests", {{"memory", "200Gi"}}}});
    FitResult r = EvaluatePlacement({svc, none, big}, SimNodes());
    CHECK_FALSE(r.fits);
    REQUIRE(r.problems.size() == 1);
    CHECK(r.problems[0].find("StatefulSet/big") == 0);
    CHECK(EvaluatePlacement({svc}, {}).fits);
  }

  TEST_CASE("EvaluatePlacement: spread required needs a node per replica of a role") {
    for (TFTopology topology : {TFTopology::kPerReplica, TFTopology::kStatefulSet}) {
      CAPTURE(ToString(topology));
      // Two nodes take a CPU pod: three workers cannot each have their own.
      FitResult r =
          EvaluatePlacement(Children(Spread(TFSpread::kRequired, 3, topology)), SimNodes());
      CHECK_FALSE(r.fits);
      REQUIRE(r.problems.size() == 1);  // the worker role only: one ps fits
      INFO(r.problems[0]);
      CHECK(r.problems[0].find("TFCluster mnist: role worker has 3 replicas") == 0);
      CHECK(r.problems[0].find("spread \"required\"") != std::string::npos);
      CHECK(r.problems[0].find("only 2 node(s) could take its pod (sim-cpu-0, sim-cpu-1)") !=
            std::string::npos);
      CHECK(r.problems[0].find("spread \"preferred\"") != std::string::npos);
      // As many replicas as nodes fit; preferred and none have no such rule.
      CHECK(EvaluatePlacement(Children(Spread(TFSpread::kRequired, 2, topology)), SimNodes()).fits);
      CHECK(
          EvaluatePlacement(Children(Spread(TFSpread::kPreferred, 5, topology)), SimNodes()).fits);
      CHECK(EvaluatePlacement(Children(Spread(TFSpread::kNone, 5, topology)), SimNodes()).fits);
    }
    // Nodes the pod could not go to do not count: a GPU node it does not tolerate, a node too
    // small, a private node.
    TFClusterSpec big = Spread(TFSpread::kRequired, 2);
    big.worker.resources.cpu = "20";
    auto nodes = SimNodes();
    nodes[1]["status"]["allocatable"]["cpu"] = "8";
    FitResult small = EvaluatePlacement(Children(big), nodes);
    REQUIRE(small.problems.size() == 1);
    CHECK(small.problems[0].find("role worker has 2 replicas") != std::string::npos);
    CHECK(small.problems[0].find("only 1 node(s) could take its pod (sim-cpu-0)") !=
          std::string::npos);
    // A pod no node can take at all is reported once, as before.
    big.worker.resources.cpu = "64";
    FitResult none = EvaluatePlacement(Children(big), SimNodes());
    REQUIRE(none.problems.size() == 2);  // one per worker Job
    CHECK(none.problems[0].find("bigger than any node") != std::string::npos);
  }

  TEST_CASE("EvaluatePlacement: any pods kept apart by a required hostname anti-affinity") {
    const Json apart = {{"affinity",
                         {{"podAntiAffinity",
                           {{"requiredDuringSchedulingIgnoredDuringExecution",
                             {{{"labelSelector", {{"matchLabels", {{"app", "web"}}}}},
                               {"topologyKey", "kubernetes.io/hostname"}}}}}}}}};
    auto web = [&](int replicas, const Json& labels) {
      Json w = Worker("web", apart, {{"requests", {{"cpu", "1"}}}}, replicas);
      w["spec"]["template"]["metadata"] = {{"labels", labels}};
      return w;
    };
    // sim-cpu-0, sim-cpu-1 and sim-private-0 take it (the GPU nodes are tainted).
    FitResult r = EvaluatePlacement({web(4, {{"app", "web"}})}, SimNodes());
    REQUIRE(r.problems.size() == 1);
    CHECK(r.problems[0] ==
          "pods app=web: 4 of them must each run on a different node (a required pod "
          "anti-affinity over kubernetes.io/hostname), but only 3 node(s) could take one "
          "(sim-cpu-0, sim-cpu-1, sim-private-0)");
    CHECK(EvaluatePlacement({web(3, {{"app", "web"}})}, SimNodes()).fits);
    // A selector that does not select the pod itself keeps it from others, not from its own.
    CHECK(EvaluatePlacement({web(4, {{"app", "api"}})}, SimNodes()).fits);
  }

  TEST_CASE("TFCluster::Apply: spread required with too few nodes is refused, nothing created") {
    tfk8s::testing::FakeCluster fake;
    const std::map<std::string, std::string> labels = {{"nodetype", "tensorflow"},
                                                       {"pooltype", "shared"}};
    fake.AddNode("cpu-1", labels, "64", "256Gi");
    fake.AddNode("cpu-2", labels, "64", "256Gi");
    Client client = fake.client("team-a");
    TFCluster cluster(client, Spread(TFSpread::kRequired, 3));
    try {
      cluster.Apply();
      FAIL("expected TFClusterFailed");
    } catch (const TFClusterFailed& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).find("nothing was created") != std::string::npos);
      CHECK(std::string(e.what()).find("role worker has 3 replicas") != std::string::npos);
      CHECK(std::string(e.what()).find("only 2 node(s) could take its pod (cpu-1, cpu-2)") !=
            std::string::npos);
    }
    CHECK_FALSE(fake.Find("v1", "ConfigMap", "team-a", "mnist").has_value());
    CHECK(fake.Objects("batch/v1", "Job", "team-a").empty());
    // Preferred lets the scheduler put two workers on one node: it is applied.
    TFCluster(client, Spread(TFSpread::kPreferred, 3)).Apply();
    CHECK(fake.Objects("batch/v1", "Job", "team-a").size() == 4);
  }
}

// ---- preemption: PlanPreemption (pure) and the pre-flight's priority class checks ------------

namespace {

const Json kShared = {{"nodetype", "tensorflow"}, {"pooltype", "shared"}};

// Two 4-CPU nodes of the shared pool.
std::vector<Json> SmallNodes() {
  const Json four{{"cpu", "4"}, {"memory", "16Gi"}, {"pods", "110"}};
  return {Node("node-1", kShared, four), Node("node-2", kShared, four)};
}

// A running pod of another team on `node`, with `priority` (absent when nullopt).
Json PodOf(const std::string& name, const std::string& node, const std::string& cpu,
           std::optional<std::int64_t> priority) {
  Json pod = RunningPod(node, {{"cpu", cpu}, {"memory", "1Gi"}});
  pod["metadata"] = {{"name", name}, {"namespace", "batch"}};
  if (priority) pod["spec"]["priority"] = *priority;
  return pod;
}

// `replicas` pods of 3 CPUs on the shared pool.
std::vector<Json> ThreeCpuWorkers(int replicas) {
  return {Worker("urgent", {{"nodeSelector", kShared}},
                 {{"requests", {{"cpu", "3"}, {"memory", "1Gi"}}}}, replicas)};
}

std::vector<std::string> Names(const std::vector<PreemptedPod>& pods) {
  std::vector<std::string> out;
  out.reserve(pods.size());
  for (const auto& p : pods) out.push_back(p.ToString());
  return out;
}

}  // namespace

TEST_SUITE("placement") {
  TEST_CASE("PlanPreemption: pods that fit on free capacity evict nothing") {
    // node-1 has 3 CPUs free, node-2 all 4: one 3-CPU pod each.
    const std::vector<Json> pods = {PodOf("small", "node-1", "1", 0)};
    const PreemptionPlan plan = PlanPreemption(ThreeCpuWorkers(2), SmallNodes(), pods, 1000);
    CHECK(plan.fits_free);
    CHECK(plan.fits);
    CHECK(plan.victims.empty());
    // A third pod has no room left: with nothing of lower priority to evict, it does not fit.
    const PreemptionPlan three = PlanPreemption(ThreeCpuWorkers(3), SmallNodes(), pods, 1000);
    CHECK_FALSE(three.fits_free);
    CHECK_FALSE(three.fits);  // "small" (1 CPU) alone would not make room for 3
    CHECK(three.victims.empty());
  }

  TEST_CASE("PlanPreemption: fits only by evicting pods of lower priority, the fewest needed") {
    // node-1: a (2 CPUs, priority 0) and b (1 CPU, priority 100); node-2: c (3 CPUs, 500).
    // Neither node has 3 CPUs free. The first pod evicts a on node-1 (its victims' highest
    // priority, 0, is lower than node-2's 500) and spares b, which still leaves room; the
    // second finds node-1 full of pods it may not evict (b, and the first new pod of equal
    // priority) and evicts c on node-2.
    const std::vector<Json> pods = {PodOf("a", "node-1", "2", 0), PodOf("b", "node-1", "1", 100),
                                    PodOf("c", "node-2", "3", 500)};
    const PreemptionPlan plan = PlanPreemption(ThreeCpuWorkers(2), SmallNodes(), pods, 1000);
    CHECK_FALSE(plan.fits_free);
    CHECK(plan.fits);
    CHECK(Names(plan.victims) == std::vector<std::string>{"batch/a (priority 0, node node-1)",
                                                          "batch/c (priority 500, node node-2)"});
    // One pod only: evicting a suffices; c is left alone.
    const PreemptionPlan one = PlanPreemption(ThreeCpuWorkers(1), SmallNodes(), pods, 1000);
    CHECK(Names(one.victims) == std::vector<std::string>{"batch/a (priority 0, node node-1)"});
    // A pod without spec.priority has priority 0.
    const std::vector<Json> unset = {PodOf("old", "node-1", "4", std::nullopt),
                                     PodOf("d", "node-2", "4", 10)};
    CHECK(Names(PlanPreemption(ThreeCpuWorkers(1), SmallNodes(), unset, 5).victims) ==
          std::vector<std::string>{"batch/old (priority 0, node node-1)"});
  }

  TEST_CASE("PlanPreemption: pods of higher or equal priority, and other nodes' pods, stay") {
    // node-1 is full of a pod of equal priority, node-2 of a higher one; node-3 has a pod of
    // the lowest priority but not the workload's labels, node-4 is not Ready.
    const Json four{{"cpu", "4"}, {"memory", "16Gi"}, {"pods", "110"}};
    std::vector<Json> nodes = SmallNodes();
    nodes.push_back(Node("node-3", {{"nodetype", "other"}}, four));
    nodes.push_back(Node("node-4", kShared, four, Json::array(), /*ready=*/false));
    const std::vector<Json> pods = {
        PodOf("equal", "node-1", "4", 1000), PodOf("higher", "node-2", "4", 2000),
        PodOf("elsewhere", "node-3", "4", -5), PodOf("unready", "node-4", "4", 0),
        PodOf("done", "node-1", "4", 0)};
    Json done = pods.back();
    std::vector<Json> with_done(pods.begin(), pods.end() - 1);
    done["status"]["phase"] = "Succeeded";  // takes no room, is never a victim
    with_done.push_back(done);
    const PreemptionPlan plan = PlanPreemption(ThreeCpuWorkers(1), nodes, with_done, 1000);
    CHECK_FALSE(plan.fits_free);
    CHECK_FALSE(plan.fits);
    CHECK(plan.victims.empty());
    // One step higher, the pod of priority 1000 on node-1 may go.
    CHECK(Names(PlanPreemption(ThreeCpuWorkers(1), nodes, with_done, 1001).victims) ==
          std::vector<std::string>{"batch/equal (priority 1000, node node-1)"});
  }

  TEST_CASE("PlanPreemption: a class with preemptionPolicy Never evicts nothing") {
    const std::vector<Json> pods = {PodOf("a", "node-1", "2", 0), PodOf("c", "node-2", "3", 0)};
    const PreemptionPlan plan =
        PlanPreemption(ThreeCpuWorkers(1), SmallNodes(), pods, 1000, /*may_preempt=*/false);
    CHECK_FALSE(plan.fits_free);
    CHECK_FALSE(plan.fits);
    CHECK(plan.victims.empty());
    CHECK(PlanPreemption(ThreeCpuWorkers(1), SmallNodes(), pods, 1000).fits);
  }

  TEST_CASE("PlanPreemption: pods kept apart by a required anti-affinity get a node each") {
    // Two 1-CPU pods fit on node-1's free room, but spread "required" puts them on different
    // nodes: the second must evict node-2's low-priority pod.
    TFClusterSpec s = Spread(TFSpread::kRequired, 2);
    s.ps.replicas = 0;
    s.strategy = TFStrategy::kMultiWorkerMirrored;
    s.worker.resources = {"1", "1Gi", "", "", 0};
    const std::vector<Json> pods = {PodOf("filler", "node-2", "4", 0)};
    const PreemptionPlan plan = PlanPreemption(Children(s), SmallNodes(), pods, 10);
    CHECK(plan.fits);
    CHECK(Names(plan.victims) ==
          std::vector<std::string>{"batch/filler (priority 0, node node-2)"});
  }

  TEST_CASE("pre-flight: a missing PriorityClass is refused, one that preempts is a note") {
    tfk8s::testing::FakeCluster fake;
    fake.AddNode("node-1", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}, "4", "16Gi");
    fake.AddNode("node-2", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}, "4", "16Gi");
    for (const auto& [name, node] : {std::pair{"low-1", "node-1"}, std::pair{"low-2", "node-2"}}) {
      Json pod = PodOf(name, node, "3", 0);
      pod["metadata"]["namespace"] = "default";
      fake.Add(pod);
    }
    auto priority_class = [](const std::string& name, int value, const std::string& policy) {
      Json c{{"apiVersion", "scheduling.k8s.io/v1"},
             {"kind", "PriorityClass"},
             {"metadata", {{"name", name}}},
             {"value", value}};
      if (!policy.empty()) c["preemptionPolicy"] = policy;
      return c;
    };
    fake.Add(priority_class("high", 1000, ""));
    fake.Add(priority_class("polite", 1000, "Never"));
    Client client = fake.client("team-a");
    TFClusterSpec s = Spread(TFSpread::kNone, 2);
    s.ps.replicas = 0;
    s.strategy = TFStrategy::kMultiWorkerMirrored;
    s.worker.resources = {"3", "1Gi", "", "", 0};

    // No class: no PriorityClass or pod request, nothing to note.
    fake.ClearRequests();
    FitResult fit = TFCluster(client, s).Preflight();
    CHECK(fit.fits);
    CHECK(fit.notes.empty());
    for (const auto& r : fake.requests()) {
      CHECK(r.path.find("priorityclasses") == std::string::npos);
      CHECK(r.path != "/api/v1/pods");
    }

    s.pod.priority_class = "high";
    fit = TFCluster(client, s).Preflight();
    CHECK(fit.fits);
    REQUIRE(fit.notes.size() == 1);
    CHECK(fit.notes[0] ==
          "PriorityClass high (value 1000) would preempt: the pods do not all fit on the nodes' "
          "free capacity now, and the scheduler would evict 2 pod(s) of lower priority to place "
          "them: default/low-1 (priority 0, node node-1), default/low-2 (priority 0, node node-2)");
    CHECK(fit.ToJson()["notes"] == Json(fit.notes));

    s.pod.priority_class = "polite";  // preemptionPolicy Never: it waits, evicting nobody
    fit = TFCluster(client, s).Preflight();
    CHECK(fit.fits);
    CHECK(fit.notes.empty());

    s.pod.priority_class = "missing";
    TFCluster cluster(client, s);
    fit = cluster.Preflight();
    CHECK_FALSE(fit.fits);
    REQUIRE(fit.problems.size() == 1);
    CHECK(fit.problems[0].find("priorityClassName \"missing\": no PriorityClass named missing on "
                               "the server") == 0);
    fake.ClearRequests();
    try {
      cluster.Apply();
      FAIL("applied a TFCluster naming a missing PriorityClass");
    } catch (const TFClusterFailed& e) {
      CHECK(std::string(e.what()).find("nothing was created") != std::string::npos);
      CHECK(std::string(e.what()).find("no PriorityClass named missing") != std::string::npos);
    }
    for (const auto& r : fake.requests()) CHECK_MESSAGE(r.method == "GET", r.path);
    CHECK(fake.Objects("v1", "ConfigMap", "team-a").empty());
    CHECK(fake.Objects("batch/v1", "Job", "team-a").empty());

    // Credentials that can read neither nodes nor PriorityClasses: notes, not a refusal.
    fake.FailNext(403, "Forbidden", "nodes is forbidden");
    fake.FailNext(403, "Forbidden", "priorityclasses is forbidden");
    const FitResult unread = CheckPlacement(client, Children(cluster.spec()));
    CHECK(unread.fits);
    REQUIRE(unread.notes.size() == 2);
    CHECK(unread.notes[0].find("node placement not checked") == 0);
    CHECK(unread.notes[1].find("priorityClassName \"missing\" not checked") == 0);
  }
}
