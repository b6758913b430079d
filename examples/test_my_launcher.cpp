// A user's unit test with no cluster: the code under test (LaunchExperiment, a small launcher
// such as a team would write on top of tfk8s) runs against tfk8s::testing::FakeCluster, an
// in-memory API server, and the test checks what it created. Plain checks, no test framework:
// the program exits 1 with a message on the first failure. CTest runs it (label `unit`).
//
//   ./test_my_launcher

#include <iostream>
#include <map>
#include <stdexcept>
#include <string>

#include <tfk8s/client.hpp>
#include <tfk8s/testing/fake_cluster.hpp>
#include <tfk8s/tfcluster.hpp>

namespace {

// ---- the code under test --------------------------------------------------------------------

/// One training experiment of the team: `workers` GPU workers and one ps, in the team's queue.
struct Experiment {
  std::string name;
  std::string team;
  int workers = 2;
  int gpus_per_worker = 1;
  std::string script = "python /data/train.py";
};

/// Launches an experiment through any client: a real cluster in production, a fake in tests.
/// Returns the uid of the cluster's root object. Refuses experiments without workers.
std::string LaunchExperiment(tfk8s::Client client, const Experiment& e) {
  if (e.workers < 1) throw std::invalid_argument("an experiment needs at least one worker");
  tfk8s::TFClusterSpec spec;
  spec.name = e.name;
  spec.namespace_name = e.team;
  spec.labels = {{"team", e.team}};
  spec.ps.replicas = 1;
  spec.ps.resources = {"1", "2Gi", "", "", 0};
  spec.worker.replicas = e.workers;
  spec.worker.resources = {"4", "16Gi", "", "", e.gpus_per_worker};
  spec.worker.script = e.script;
  tfk8s::TFCluster cluster(std::move(client), spec);
  auto applied = cluster.Apply();  // quota and placement pre-flight, then server-side apply
  return applied.front()["metadata"]["uid"].get<std::string>();
}

// ---- the test -------------------------------------------------------------------------------

int failures = 0;

void Check(bool ok, const std::string& what) {
  if (ok) return;
  std::cerr << "FAILED: " << what << "\n";
  ++failures;
}

// A cluster with two GPU nodes the default placement accepts (nodetype=tensorflow, shared pool).
void AddNodes(tfk8s::testing::FakeCluster& fake) {
  const std::map<std::string, std::string> labels = {{"nodetype", "tensorflow"},
                                                     {"pooltype", "shared"}};
  fake.AddNode("gpu-1", labels, "32", "128Gi", 4);
  fake.AddNode("gpu-2", labels, "32", "128Gi", 4);
}

void TestLaunchCreatesOneJobPerReplica() {
  tfk8s::testing::FakeCluster fake;
  AddNodes(fake);
  std::string uid = LaunchExperiment(fake.client("vision"), {"resnet", "vision", 3, 2});

  auto root = fake.Find("v1", "ConfigMap", "vision", "resnet");
  Check(root.has_value(), "the root ConfigMap exists");
  Check(root && (*root)["metadata"]["uid"] == uid, "the returned uid is the root's");
  Check(fake.Objects("batch/v1", "Job", "vision").size() == 4, "one Job per replica (1 ps + 3)");
  Check(fake.Objects("v1", "Service", "vision").size() == 2, "one Service per role (ps, worker)");
  auto worker = fake.Find("batch/v1", "Job", "vision", "resnet-worker-2");
  Check(worker.has_value(), "worker 2 exists");
  if (worker) {
    const auto& container = (*worker)["spec"]["template"]["spec"]["containers"][0];
    Check(container["resources"]["limits"]["nvidia.com/gpu"] == "2", "two GPUs per worker");
    Check((*worker)["metadata"]["labels"]["team"] == "vision", "the team label is set");
  }
}

void TestExperimentTooBigForAnyNodeCreatesNothing() {
  tfk8s::testing::FakeCluster fake;
  AddNodes(fake);
  try {
    LaunchExperiment(fake.client("vision"), {"huge", "vision", 2, 8});  // 8 GPUs: no node has
    Check(false, "an experiment no node can hold is refused");
  } catch (const tfk8s::Error& e) {
    Check(std::string(e.what()).find("nothing was created") != std::string::npos,
          "the error says nothing was created: " + std::string(e.what()));
  }
  Check(fake.Objects("batch/v1", "Job", "vision").empty(), "no Job was created");
}

void TestServerErrorsReachTheCaller() {
  tfk8s::testing::FakeCluster fake;
  AddNodes(fake);
  // The first request after discovery (one of the pre-flight's lists) is refused, as a user
  // without the right RBAC role would see it.
  fake.FailNext(403, "Forbidden", "jobs.batch is forbidden: User \"bob\" cannot list");
  try {
    LaunchExperiment(fake.client("vision"), {"denied", "vision"});
    Check(false, "a Forbidden answer is reported");
  } catch (const tfk8s::Forbidden& e) {
    Check(e.http_code() == 403, "the error carries the HTTP code");
  }
}

void TestNoWorkersIsRefusedBeforeAnyRequest() {
  tfk8s::testing::FakeCluster fake;
  fake.ClearRequests();
  try {
    LaunchExperiment(fake.client("vision"), {"empty", "vision", 0});
    Check(false, "zero workers is refused");
  } catch (const std::invalid_argument&) {
  }
  Check(fake.requests().empty(), "nothing was sent");
}

}  // namespace

int main() {
  TestLaunchCreatesOneJobPerReplica();
  TestExperimentTooBigForAnyNodeCreatesNothing();
  TestServerErrorsReachTheCaller();
  TestNoWorkersIsRefusedBeforeAnyRequest();
  if (failures > 0) {
    std::cerr << failures << " check(s) failed\n";
    return 1;
  }
  std::cout << "test_my_launcher: all checks passed\n";
  return 0;
}
