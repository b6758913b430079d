// TFCluster against the local cluster: apply, Running on the right simulated nodes, status,
// scale, logs, success, fail-fast, pre-flight, delete.
#include <set>

#include "cluster.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

TFClusterSpec SmallCluster(const std::string& ns, const std::string& name) {
  TFClusterSpec s;
  s.name = name;
  s.namespace_name = ns;
  s.ps.replicas = 1;
  s.ps.resources = {"500m", "1Gi", "", "", 0};
  s.worker.replicas = 2;
  s.worker.resources = {"1", "2Gi", "", "", 1};  // one GPU each: lands on sim-gpu-*
  s.placement.cputype = "xeon-gold";
  s.placement.gputype = "v100";
  s.storage = TFStorageSpec{};
  s.storage->size = "1Gi";
  s.storage->access_modes = {"ReadWriteOnce"};
  return s;
}

// Every object kind a cluster may own, to check that nothing is left behind.
int ObjectsWithLabel(Client& c, const std::string& ns, const std::string& cluster) {
  ListOptions sel;
  sel.label_selector = "tfk8s.io/cluster=" + cluster;
  int n = 0;
  for (const ResourceType& t :
       {ResourceType{"", "v1", "ConfigMap", "configmaps", true},
        ResourceType{"", "v1", "Service", "services", true},
        ResourceType{"", "v1", "Pod", "pods", true},
        ResourceType{"", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true},
        ResourceType{"batch", "v1", "Job", "jobs", true},
        ResourceType{"apps", "v1", "StatefulSet", "statefulsets", true},
        ResourceType{"apps", "v1", "Deployment", "deployments", true}}) {
    n += static_cast<int>(c.ListAll(t, ns, sel)["items"].size());
  }
  return n;
}

}  // namespace

TEST_SUITE("tfcluster") {
  TEST_CASE("apply, Running on the right nodes, status, scale up and down, delete") {
    Client c = AdminClient();
    TestNamespace ns(c);
    TFCluster cluster(c, SmallCluster(ns.name(), "mnist"));
    cluster.Apply();
    auto st = cluster.Wait({.until = WaitUntil::kReady, .timeout = std::chrono::seconds(90)});
    CHECK(st.phase == TFClusterPhase::kRunning);
    REQUIRE(st.replicas.size() == 3);
    for (const auto& r : st.replicas) {
      CHECK(r.phase == "Running");
      if (r.role == "worker") CHECK(r.node.rfind("sim-gpu-", 0) == 0);
      if (r.role == "ps") CHECK(r.node.rfind("sim-cpu-", 0) == 0);
    }
    CHECK(st.Table().find("worker") != std::string::npos);
    CHECK(TFCluster::List(c, ns.name()) == std::vector<std::string>{"mnist"});

    // Loading back from the root object gives the same spec.
    TFCluster loaded = TFCluster::Load(c, ns.name(), "mnist");
    CHECK(loaded.spec().ToJson() == cluster.spec().ToJson());

    // Scale up: a third worker, and every replica's TF_CONFIG names it.
    cluster.Scale("worker", 3);
    st = cluster.Wait({.until = WaitUntil::kReady, .timeout = std::chrono::seconds(120)});
    CHECK(st.replicas.size() == 4);
    const ResourceType jobs{"batch", "v1", "Job", "jobs", true};
    for (const char* name : {"mnist-ps-0", "mnist-worker-0", "mnist-worker-2"}) {
      auto job = c.Get(jobs, ns.name(), name);
      std::string tf_config;
      for (const auto& e : job["spec"]["template"]["spec"]["containers"][0]["env"]) {
        if (e["name"] == "TF_CONFIG") tf_config = e["value"];
      }
      CHECK(Json::parse(tf_config)["cluster"]["worker"].size() == 3);
    }
    // Scale down: the surplus replica's objects go away.
    cluster.Scale("worker", 1);
    CHECK(TestNamespace::WaitFor(
        [&] {
          ListOptions sel;
          sel.label_selector = "tfk8s.io/cluster=mnist,tfk8s.io/role=worker";
          return c.ListAll(jobs, ns.name(), sel)["items"].size() == 1;
        },
        std::chrono::seconds(60)));
    st = cluster.Wait({.until = WaitUntil::kReady, .timeout = std::chrono::seconds(120)});
    CHECK(st.replicas.size() == 2);

    TFDeleteOptions del;
    del.wait = std::chrono::seconds(90);
    cluster.Delete(del);
    CHECK(TestNamespace::WaitFor([&] { return ObjectsWithLabel(c, ns.name(), "mnist") == 0; },
                                 std::chrono::seconds(60)));
  }

  TEST_CASE("merged logs from every replica, and success when the chief exits 0") {
    Client c = AdminClient();
    TestNamespace ns(c);
    TFClusterSpec s = SmallCluster(ns.name(), "logs");
    s.storage.reset();
    s.worker.resources.gpus = 0;
    s.chief.replicas = 1;
    s.chief.restart_policy = "Never";
    s.chief.pod_annotations = {{"sim.tfk8s.io/log-lines", "chief says hello"},
                               {"sim.tfk8s.io/exit-code", "0"},
                               {"sim.tfk8s.io/exit-after", "4"}};
    s.worker.pod_annotations = {{"sim.tfk8s.io/log-lines", "worker step 1\nworker step 2"}};
    TFCluster cluster(c, s);
    cluster.Apply();
    cluster.Wait({.until = WaitUntil::kReady, .timeout = std::chrono::seconds(90)});

    std::set<std::string> replicas;
    std::vector<std::string> lines;
    cluster.Logs({}, [&](const WorkloadLogLine& l) {
      replicas.insert(l.source);
      lines.push_back(l.Prefixed());
      return true;
    });
    CHECK(replicas == std::set<std::string>{"chief-0", "ps-0", "worker-0", "worker-1"});
    CHECK(std::find(lines.begin(), lines.end(), "[worker-1] worker step 2") != lines.end());
    CHECK(std::find(lines.begin(), lines.end(), "[chief-0] chief says hello") != lines.end());

    auto done = cluster.Wait({.until = WaitUntil::kFinished, .timeout = std::chrono::seconds(90)});
    CHECK(done.phase == TFClusterPhase::kSucceeded);
    CHECK(done.message.find("chief-0") != std::string::npos);
    cluster.CleanUpAfterSuccess();
    CHECK(TestNamespace::WaitFor(
        [&] {
          ListOptions sel;
          sel.label_selector = "tfk8s.io/cluster=logs,tfk8s.io/role in (ps,worker)";
          return c.ListAll({"batch", "v1", "Job", "jobs", true}, ns.name(), sel)["items"].empty();
        },
        std::chrono::seconds(30)));
    cluster.Delete();
  }

  TEST_CASE("a gputype no node has fails fast, before anything is created") {
    Client c = AdminClient();
    TestNamespace ns(c);
    TFClusterSpec s = SmallCluster(ns.name(), "nowhere");
    s.placement.gputype = "a100";
    TFCluster cluster(c, s);
    auto fit = cluster.Preflight();
    CHECK_FALSE(fit.fits);
    CHECK(fit.Message().find("a100") != std::string::npos);
    try {
      cluster.Apply();
      FAIL("expected the pre-flight to refuse");
    } catch (const TFClusterFailed& e) {
      CHECK(std::string(e.what()).find("a100") != std::string::npos);
    }
    CHECK(ObjectsWithLabel(c, ns.name(), "nowhere") == 0);

    // Without the pre-flight, Wait fails fast with the scheduler's reason instead of timing out.
    TFApplyOptions no_check;
    no_check.preflight = false;
    cluster.Apply(no_check);
    auto t0 = std::chrono::steady_clock::now();
    try {
      cluster.Wait({.until = WaitUntil::kReady, .timeout = std::chrono::seconds(120)});
      FAIL("expected TFClusterFailed");
    } catch (const TFClusterFailed& e) {
      CHECK(std::string(e.what()).find("a100") != std::string::npos);
      CHECK(e.status().phase != TFClusterPhase::kRunning);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));
    cluster.Delete();
  }

  TEST_CASE("quota pre-flight refuses before anything is created") {
    Client c = AdminClient();
    TestNamespace ns(c);
    Json quota = {{"apiVersion", "v1"},
                  {"kind", "ResourceQuota"},
                  {"metadata", {{"name", "gpus"}, {"namespace", ns.name()}}},
                  {"spec", {{"hard", {{"requests.nvidia.com/gpu", "1"}}}}}};
    c.Apply(quota);
    TFCluster cluster(c, SmallCluster(ns.name(), "toobig"));  // 2 GPUs
    try {
      cluster.Apply();
      FAIL("expected QuotaExceeded");
    } catch (const QuotaExceeded& e) {
      CHECK(e.resources() == std::vector<std::string>{"requests.nvidia.com/gpu"});
      CHECK(std::string(e.what()).find("nothing was created") != std::string::npos);
    }
    CHECK(ObjectsWithLabel(c, ns.name(), "toobig") == 0);
  }

  TEST_CASE("statefulset topology: the seed's design with Parallel start") {
    Client c = AdminClient();
    TestNamespace ns(c);
    TFClusterSpec s = SmallCluster(ns.name(), "tf-dis-task");
    s.topology = TFTopology::kStatefulSet;
    s.ps.replicas = 2;
    s.worker.replicas = 3;
    s.worker.resources.gpus = 0;
    s.storage.reset();
    s.session = TFSessionSpec{};
    s.tensorboard = TFTensorBoardSpec{};
    TFCluster cluster(c, s);
    cluster.Apply();
    auto st = cluster.Wait({.until = WaitUntil::kReady, .timeout = std::chrono::seconds(120)});
    std::set<std::string> pods;
    for (const auto& r : st.replicas) pods.insert(r.pod);
    for (const char* p : {"tf-dis-task-ps-0", "tf-dis-task-ps-1", "tf-dis-task-worker-0",
                          "tf-dis-task-worker-1", "tf-dis-task-worker-2"}) {
      CHECK_MESSAGE(pods.count(p), p);
    }
    ListOptions seed_selector;
    seed_selector.label_selector = "taskname=tf-dis-task";
    CHECK(c.ListAll({"", "v1", "Service", "services", true}, ns.name(), seed_selector)["items"]
              .size() == 5);  // ps, worker, session, session-ssh, tf-board
    TFDeleteOptions del;
    del.wait = std::chrono::seconds(90);
    cluster.Delete(del);
    CHECK(TestNamespace::WaitFor([&] { return ObjectsWithLabel(c, ns.name(), "tf-dis-task") == 0; },
                                 std::chrono::seconds(60)));
  }
}
