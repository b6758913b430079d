// The placement pre-flight against the nodes as they are now (issue #40, item 3): NotReady and
// cordoned nodes and untolerated taints make a pod not fit, each node named with its reason;
// a cluster without nodes (one that scales from zero) fits with a note; `preflight = false`
// skips the check on every path that runs it; and a wait goes on waiting for a pod no node can
// take *yet*, failing fast only for what the spec itself rules out.
#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/placement.hpp"
#include "tfk8s/quota.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/testing/fake_cluster.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeCluster;

namespace {

const std::map<std::string, std::string> kSharedLabels = {{"nodetype", "tensorflow"},
                                                          {"pooltype", "shared"}};

Json NodeJson(const std::string& name, bool ready = true, bool cordoned = false,
              const Json& taints = Json::array()) {
  Json n{{"apiVersion", "v1"},
         {"kind", "Node"},
         {"metadata",
          {{"name", name},
           {"labels", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}},
           {"resourceVersion", "7"}}},
         {"spec", Json::object()},
         {"status",
          {{"allocatable", {{"cpu", "32"}, {"memory", "128Gi"}, {"pods", "110"}}},
           {"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
  if (cordoned) n["spec"]["unschedulable"] = true;
  if (!taints.empty()) n["spec"]["taints"] = taints;
  return n;
}

Json TaintJson(const std::string& key, const std::string& value, const std::string& effect) {
  Json t{{"key", key}, {"effect", effect}};
  if (!value.empty()) t["value"] = value;
  return t;
}

// A StatefulSet of one pod asking for 1 CPU, with `tolerations` (none when null).
Json Pods(const Json& tolerations = nullptr, const std::string& cpu = "1") {
  Json spec{{"containers",
             {{{"name", "c"}, {"image", "x"}, {"resources", {{"requests", {{"cpu", cpu}}}}}}}}};
  if (!tolerations.is_null()) spec["tolerations"] = tolerations;
  return {{"apiVersion", "apps/v1"},
          {"kind", "StatefulSet"},
          {"metadata", {{"name", "web"}}},
          {"spec", {{"replicas", 1}, {"template", {{"spec", spec}}}}}};
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string Problems(const FitResult& r) {
  std::string out;
  for (const auto& p : r.problems) out += p + "\n";
  return out;
}

// The node as the fake stores it, changed by `change` and stored again.
template <typename F>
void ChangeNode(FakeCluster& fake, const std::string& name, F change) {
  Json node = fake.Find("v1", "Node", "", name).value();
  change(node);
  fake.Add(node);
}

void MakeNotReady(FakeCluster& fake, const std::string& name) {
  ChangeNode(fake, name, [](Json& n) {
    n["status"]["conditions"] = {{{"type", "Ready"}, {"status", "False"}}};
    n["spec"]["taints"] =
        Json::array({TaintJson("node.kubernetes.io/not-ready", "", "NoSchedule")});
  });
}

TFClusterSpec OneWorker(const std::string& cpu = "1") {
  TFClusterSpec s;
  s.name = "mnist";
  s.namespace_name = "team-a";
  s.ps.replicas = 1;
  s.ps.resources = {"100m", "128Mi", "", "", 0};
  s.worker.replicas = 1;
  s.worker.resources = {cpu, "1Gi", "", "", 0};
  return s;
}

DevInstanceSpec Lab() {
  DevInstanceSpec spec;
  spec.owner = "alice";
  spec.name = "lab";
  spec.namespace_name = "team-a";
  spec.resources = {"2", "4Gi", "", "", 0};
  spec.expose.backend = DevExposure::kNodePort;
  return spec;
}

ScheduledJobSpec Task() {
  ScheduledJobSpec spec;
  spec.name = "once";
  spec.namespace_name = "team-a";
  spec.image = "tensorflow/tensorflow:2.4.0";
  spec.entry_path = "train.py";
  spec.resources = {"2", "4Gi", "", "", 0};
  return spec;
}

// A Pending pod made from `template_of`'s pod template, which the scheduler could not place.
Json UnschedulablePod(const Json& owner_template, const std::string& name, const std::string& ns,
                      const std::string& why) {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata",
           {{"name", name}, {"namespace", ns}, {"labels", owner_template["metadata"]["labels"]}}},
          {"spec", owner_template["spec"]},
          {"status",
           {{"phase", "Pending"},
            {"conditions",
             {{{"type", "PodScheduled"},
               {"status", "False"},
               {"reason", "Unschedulable"},
               {"message", why}}}}}}};
}

// A pod for each of the cluster's Jobs, none of them placed.
void AddUnschedulableReplicas(FakeCluster& fake, const std::string& why) {
  for (const auto& job : fake.Objects("batch/v1", "Job", "team-a")) {
    const std::string name = job["metadata"]["name"];
    fake.Add(UnschedulablePod(job["spec"]["template"], name + "-abcde", "team-a", why));
  }
}

}  // namespace

TEST_SUITE("placement") {
  TEST_CASE("pre-flight now: a NotReady node, a cordoned one, each named with its reason") {
    FitResult not_ready = EvaluatePlacement({Pods()}, {NodeJson("n1", false)});
    CHECK_FALSE(not_ready.fits);
    REQUIRE(not_ready.problems.size() == 1);
    CHECK(not_ready.problems[0] ==
          "StatefulSet/web: cannot be placed on any node: the 1 node(s) matching its selector "
          "cannot take it now: node n1: NotReady");
    // The node lifecycle's not-ready taint on it is the same fact: not named twice.
    const Json not_ready_taints =
        Json::array({TaintJson("node.kubernetes.io/not-ready", "", "NoSchedule"),
                     TaintJson("node.kubernetes.io/not-ready", "", "NoExecute")});
    FitResult tainted =
        EvaluatePlacement({Pods()}, {NodeJson("n1", false, false, not_ready_taints)});
    REQUIRE(tainted.problems.size() == 1);
    CHECK(Has(tainted.problems[0], "node n1: NotReady"));
    CHECK_FALSE(Has(tainted.problems[0], "taint node.kubernetes.io/not-ready"));

    FitResult cordoned =
        EvaluatePlacement({Pods()}, {NodeJson("n1", true, true), NodeJson("n2", false, true)});
    REQUIRE(cordoned.problems.size() == 1);
    CHECK(Has(cordoned.problems[0],
              "the 2 node(s) matching its selector cannot take it now: node n1: cordoned; node "
              "n2: NotReady, cordoned"));
    // One Ready, schedulable node is enough.
    CHECK(EvaluatePlacement({Pods()}, {NodeJson("n1", false), NodeJson("n2")}).fits);
    // What the scheduler honours: a toleration of the condition's taint.
    const Json unschedulable_ok = {
        {{"key", "node.kubernetes.io/unschedulable"}, {"operator", "Exists"}}};
    CHECK(EvaluatePlacement({Pods(unschedulable_ok)}, {NodeJson("n1", true, true)}).fits);
    CHECK(EvaluatePlacement({Pods(Json::array({{{"operator", "Exists"}}}))},
                            {NodeJson("n1", false, true)})
              .fits);
    // Ever (what a wait asks): the node's state passes, so it is no reason.
    CHECK(EvaluatePlacement({Pods()}, {NodeJson("n1", false, true, not_ready_taints)},
                            PlacementScope::kEver)
              .fits);
  }

  TEST_CASE("a placement problem of an object the server names says its prefix, not 'Job/'") {
    Json run = Pods();
    run["kind"] = "Job";
    run["apiVersion"] = "batch/v1";
    run["metadata"] = {{"generateName", "nightly-"}};
    run["spec"].erase("replicas");
    FitResult r = EvaluatePlacement({run}, {NodeJson("n1", false)});
    REQUIRE(r.problems.size() == 1);
    CHECK(r.problems[0].rfind("Job/nightly-<generated>: cannot be placed on any node: ", 0) == 0);
  }

  TEST_CASE("pre-flight now: taints against tolerations as the TaintToleration filter has it") {
    const std::vector<Json> gpu = {
        NodeJson("n1", true, false, Json::array({TaintJson("gpu", "yes", "NoSchedule")}))};
    FitResult none = EvaluatePlacement({Pods()}, gpu);
    REQUIRE(none.problems.size() == 1);
    CHECK(none.problems[0] ==
          "StatefulSet/web: cannot be placed on any node: the 1 node(s) matching its selector "
          "cannot take it now: node n1: taint gpu=yes:NoSchedule not tolerated (add a "
          "toleration)");
    auto fits = [&](const Json& toleration, const std::vector<Json>& nodes) {
      return EvaluatePlacement({Pods(Json::array({toleration}))}, nodes).fits;
    };
    CHECK(fits({{"key", "gpu"}, {"operator", "Equal"}, {"value", "yes"}, {"effect", "NoSchedule"}},
               gpu));
    CHECK(fits({{"key", "gpu"}, {"value", "yes"}}, gpu));  // Equal is the default operator
    CHECK(fits({{"key", "gpu"}, {"operator", "Exists"}}, gpu));
    CHECK(fits({{"operator", "Exists"}}, gpu));  // empty key + Exists tolerates every taint
    CHECK_FALSE(fits({{"key", "gpu"}, {"operator", "Equal"}, {"value", "no"}}, gpu));
    CHECK_FALSE(fits({{"key", "gpu"}, {"operator", "Exists"}, {"effect", "NoExecute"}}, gpu));
    CHECK_FALSE(fits({{"key", "other"}, {"operator", "Exists"}}, gpu));
    // PreferNoSchedule never blocks.
    CHECK(EvaluatePlacement({Pods()},
                            {NodeJson("n1", true, false,
                                      Json::array({TaintJson("gpu", "yes", "PreferNoSchedule")}))})
              .fits);
    // NoExecute blocks like NoSchedule.
    CHECK_FALSE(
        EvaluatePlacement(
            {Pods()}, {NodeJson("n1", true, false, Json::array({TaintJson("x", "", "NoExecute")}))})
            .fits);
    // A condition taint on a Ready node (memory pressure) keeps pods off now, not forever.
    const std::vector<Json> pressure = {
        NodeJson("n1", true, false,
                 Json::array({TaintJson("node.kubernetes.io/memory-pressure", "", "NoSchedule")}))};
    FitResult now = EvaluatePlacement({Pods()}, pressure);
    CHECK_FALSE(now.fits);
    CHECK(Has(Problems(now),
              "node n1: taint node.kubernetes.io/memory-pressure:NoSchedule not tolerated"));
    CHECK(EvaluatePlacement({Pods()}, pressure, PlacementScope::kEver).fits);
  }

  TEST_CASE("pre-flight now: too small where Ready, the others named with why they cannot") {
    Json small = NodeJson("small");
    small["status"]["allocatable"]["cpu"] = "2";
    FitResult r = EvaluatePlacement({Pods(nullptr, "8")}, {NodeJson("big", false), small});
    CHECK_FALSE(r.fits);
    REQUIRE(r.problems.size() == 1);
    CHECK(Has(r.problems[0],
              "cpu 8 > largest allocatable 2 (small) (of 1 candidate node(s)); "
              "the other 1 node(s) matching its selector cannot take it now: "
              "node big: NotReady"));
    // Ever, the big node counts: it fits.
    CHECK(EvaluatePlacement({Pods(nullptr, "8")}, {NodeJson("big", false), small},
                            PlacementScope::kEver)
              .fits);
  }

  TEST_CASE("pre-flight now: spread required counts only the nodes that can take a pod now") {
    TFClusterSpec spec = OneWorker();
    spec.worker.replicas = 2;
    spec.spread = TFSpread::kRequired;
    auto objects = RenderTFCluster(spec);
    objects.erase(objects.begin());
    const std::vector<Json> nodes = {NodeJson("n1"), NodeJson("n2", true, true)};
    FitResult r = EvaluatePlacement(objects, nodes);
    CHECK_FALSE(r.fits);
    CHECK(Has(Problems(r), "only 1 node(s) could take its pod (n1)"));
    CHECK(EvaluatePlacement(objects, nodes, PlacementScope::kEver).fits);
  }

  TEST_CASE("pre-flight: a cluster without nodes fits, with a note (it may scale from zero)") {
    FitResult r = EvaluatePlacement({Pods(nullptr, "500")}, {});
    CHECK(r.fits);
    CHECK(r.problems.empty());
    REQUIRE(r.notes.size() == 1);
    CHECK(r.notes[0].find("node placement not checked: the cluster has no nodes") == 0);
    CHECK(Has(r.notes[0], "cluster autoscaler scaling from zero"));
    // Nothing to place, nothing to note; ever, nothing to note either.
    Json svc{{"apiVersion", "v1"}, {"kind", "Service"}, {"metadata", {{"name", "s"}}}};
    CHECK(EvaluatePlacement({svc}, {}).notes.empty());
    FitResult ever = EvaluatePlacement({Pods()}, {}, PlacementScope::kEver);
    CHECK(ever.fits);
    CHECK(ever.notes.empty());
  }

  TEST_CASE(
      "TFCluster: applies with no nodes, a NotReady node refuses apply and scale unless "
      "preflight is off") {
    FakeCluster fake;
    Client client = fake.client("team-a");
    TFCluster cluster(client, OneWorker());
    FitResult fit = cluster.Preflight();
    CHECK(fit.fits);
    REQUIRE(fit.notes.size() == 1);
    CHECK(Has(fit.notes[0], "the cluster has no nodes"));
    cluster.Apply();
    CHECK(fake.Find("batch/v1", "Job", "team-a", "mnist-worker-0").has_value());

    fake.AddNode("n1", kSharedLabels);
    MakeNotReady(fake, "n1");
    try {
      cluster.Scale("worker", 2);
      FAIL("expected TFClusterFailed");
    } catch (const TFClusterFailed& e) {
      INFO(std::string(e.what()));
      CHECK(Has(e.what(), "node n1: NotReady"));
    }
    CHECK_FALSE(fake.Find("batch/v1", "Job", "team-a", "mnist-worker-1").has_value());
    TFApplyOptions skip;
    skip.preflight = false;
    cluster.Scale("worker", 2, skip);
    CHECK(fake.Find("batch/v1", "Job", "team-a", "mnist-worker-1").has_value());
    CHECK_THROWS_AS(TFCluster(client, OneWorker()).Apply(), TFClusterFailed);
    CHECK_NOTHROW(TFCluster(client, OneWorker()).Apply(skip));
  }

  TEST_CASE("DevInstance: Create and Start refused on a cordoned node unless preflight is off") {
    FakeCluster fake;
    fake.AddNode("n1", kSharedLabels);
    ChangeNode(fake, "n1", [](Json& n) { n["spec"]["unschedulable"] = true; });
    Client client = fake.client("team-a");
    DevInstance lab(client, Lab());
    try {
      lab.Create();
      FAIL("expected DevInstanceFailed");
    } catch (const DevInstanceFailed& e) {
      INFO(std::string(e.what()));
      CHECK(Has(e.what(), "node n1: cordoned"));
    }
    CHECK_FALSE(fake.Find("apps/v1", "StatefulSet", "team-a", "lab").has_value());
    DevCreateOptions create;
    create.start = false;
    create.preflight = false;
    lab.Create(create);
    CHECK(fake.Find("apps/v1", "StatefulSet", "team-a", "lab").value()["spec"]["replicas"] == 0);
    CHECK_THROWS_AS(lab.Start(), DevInstanceFailed);
    CHECK(fake.Find("apps/v1", "StatefulSet", "team-a", "lab").value()["spec"]["replicas"] == 0);
    DevStartOptions start;
    start.preflight = false;
    DevStartResult started = lab.Start(start);
    CHECK_FALSE(started.password.empty());
    CHECK(fake.Find("apps/v1", "StatefulSet", "team-a", "lab").value()["spec"]["replicas"] == 1);
  }

  TEST_CASE("ScheduledJob: RunNow and Apply refused on a tainted node unless preflight is off") {
    FakeCluster fake;
    fake.AddNode("n1", kSharedLabels);
    ChangeNode(fake, "n1", [](Json& n) {
      n["spec"]["taints"] = Json::array({TaintJson("dedicated", "infra", "NoSchedule")});
    });
    Client client = fake.client("team-a");
    ScheduledJob task(client, Task());
    try {
      task.RunNow();
      FAIL("expected a refusal");
    } catch (const Error& e) {
      INFO(std::string(e.what()));
      CHECK(Has(e.what(), "node n1: taint dedicated=infra:NoSchedule not tolerated"));
    }
    CHECK(fake.Objects("batch/v1", "Job", "team-a").empty());
    RunOptions run;
    run.preflight = false;
    task.RunNow(run);
    CHECK(fake.Objects("batch/v1", "Job", "team-a").size() == 1);

    ScheduledJobSpec nightly = Task();
    nightly.name = "nightly";
    nightly.schedule = "30 2 * * *";
    ScheduledJob scheduled(client, nightly);
    CHECK_THROWS_AS(scheduled.Apply(), Error);
    ApplyScheduleOptions apply;
    apply.preflight = false;
    scheduled.Apply(apply);
    CHECK(fake.Find("batch/v1beta1", "CronJob", "team-a", "nightly").has_value());
  }

  TEST_CASE("wait: no node can take it yet (no nodes at all) is waited for until the timeout") {
    FakeCluster fake;
    Client client = fake.client("team-a");
    TFCluster cluster(client, OneWorker());
    cluster.Apply();
    const std::string why = "0/0 nodes are available.";
    AddUnschedulableReplicas(fake, why);
    std::vector<std::string> progress;
    try {
      cluster.Wait(
          {.until = WaitUntil::kReady,
           .timeout = std::chrono::milliseconds(400),
           .on_progress = [&](const TFClusterStatus& st) { progress.push_back(st.message); }});
      FAIL("expected Timeout");
    } catch (const Timeout& e) {
      INFO(std::string(e.what()));
      CHECK(Has(e.what(), "-0: Unschedulable: no node can take it yet: " + why));
    }
    REQUIRE_FALSE(progress.empty());
    CHECK(Has(progress.back(), "no node can take it yet: " + why));
    // Status (not a wait) tells the scheduler's words as they are.
    const std::string status = cluster.Status().message;
    CHECK(Has(status, "-0: Unschedulable: " + why));
    CHECK_FALSE(Has(status, "yet"));
  }

  TEST_CASE(
      "wait: NotReady and cordoned nodes are waited for, a pod bigger than every node "
      "still fails at once") {
    FakeCluster fake;
    fake.AddNode("n1", kSharedLabels, "4", "16Gi");
    fake.AddNode("n2", kSharedLabels, "4", "16Gi");
    Client client = fake.client("team-a");
    TFCluster cluster(client, OneWorker());
    cluster.Apply();
    MakeNotReady(fake, "n1");
    ChangeNode(fake, "n2", [](Json& n) { n["spec"]["unschedulable"] = true; });
    AddUnschedulableReplicas(fake, "0/2 nodes are available: 1 node(s) were unschedulable.");
    CHECK_THROWS_AS(cluster.Wait({.timeout = std::chrono::milliseconds(300)}), Timeout);

    // Eight CPUs on nodes of four: no node could ever take it, the wait says so at once.
    FakeCluster small;
    small.AddNode("n1", kSharedLabels, "4", "16Gi");
    Client c = small.client("team-a");
    TFCluster big(c, OneWorker("8"));
    TFApplyOptions skip;
    skip.preflight = false;
    big.Apply(skip);
    AddUnschedulableReplicas(small, "0/1 nodes are available: 1 Insufficient cpu.");
    const auto started = std::chrono::steady_clock::now();
    try {
      big.Wait({.timeout = std::chrono::seconds(20)});
      FAIL("expected TFClusterFailed");
    } catch (const TFClusterFailed& e) {
      INFO(std::string(e.what()));
      CHECK(Has(e.what(), "cannot start: "));
      CHECK(Has(e.what(), "bigger than any node"));
    }
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
  }

  TEST_CASE("wait: a DevInstance whose pod no node can take yet is waited for") {
    FakeCluster fake;
    Client client = fake.client("team-a");
    DevInstance lab(client, Lab());
    lab.Create();  // no nodes: the pre-flight notes it and lets it through
    Json sts = fake.Find("apps/v1", "StatefulSet", "team-a", "lab").value();
    const std::string why = "0/0 nodes are available.";
    fake.Add(UnschedulablePod(sts["spec"]["template"], "lab-0", "team-a", why));
    try {
      lab.Wait({.timeout = std::chrono::milliseconds(3000)});
      FAIL("expected Timeout");
    } catch (const Timeout& e) {
      INFO(std::string(e.what()));
      CHECK(Has(e.what(), "Unschedulable: no node can take it yet: " + why));
    }
  }
}
