// Priority classes against the local cluster: a workload naming a PriorityClass reaches the
// server with priorityClassName on every pod template, the Priority admission plugin gives its
// pods the class's value, and a class the server does not have is refused by the pre-flight
// before anything is created. (What a class would preempt is computed without I/O and tested in
// tests/unit/test_placement.cpp: filling the shared simulated nodes here would evict other
// tests' pods.)
#include <string>

#include "cluster.hpp"
#include "tfk8s/devinstance.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;
using namespace tfk8s::itest;

namespace {

const ResourceType kPriorityClasses{"scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses",
                                    false};
const ResourceType kJobs{"batch", "v1", "Job", "jobs", true};
const ResourceType kStatefulSets{"apps", "v1", "StatefulSet", "statefulsets", true};

constexpr std::int64_t kValue = 4242;

// A PriorityClass of its own for one test (cluster-scoped, so deleted explicitly).
class TestPriorityClass {
 public:
  explicit TestPriorityClass(Client client)
      : client_(std::move(client)), name_(UniqueName("tfk8s-it-prio")) {
    client_.Create(kPriorityClasses, "",
                   {{"apiVersion", "scheduling.k8s.io/v1"},
                    {"kind", "PriorityClass"},
                    {"metadata", {{"name", name_}}},
                    {"value", kValue},
                    {"description", "tfk8s integration test"}});
  }
  ~TestPriorityClass() {
    try {
      client_.Delete(kPriorityClasses, "", name_);
    } catch (...) {
    }
  }
  TestPriorityClass(const TestPriorityClass&) = delete;
  TestPriorityClass& operator=(const TestPriorityClass&) = delete;
  const std::string& name() const { return name_; }

 private:
  Client client_;
  std::string name_;
};

// The pods of `selector` in `ns` once there are `count` of them (empty on timeout).
std::vector<Json> PodsOf(Client& c, const std::string& ns, const std::string& selector,
                         std::size_t count) {
  std::vector<Json> pods;
  TestNamespace::WaitFor(
      [&] {
        ListOptions o;
        o.label_selector = selector;
        pods = c.ListAll(kPods, ns, o)["items"].get<std::vector<Json>>();
        return pods.size() >= count;
      },
      std::chrono::seconds(60));
  return pods;
}

// The three workloads, small enough for the simulated nodes, naming `priority_class`.
TFClusterSpec Cluster(const std::string& ns, const std::string& name, int workers,
                      const std::string& priority_class) {
  TFClusterSpec s;
  s.name = name;
  s.namespace_name = ns;
  s.strategy = TFStrategy::kMultiWorkerMirrored;
  s.worker.replicas = workers;
  s.worker.resources = {"100m", "128Mi", "", "", 0};
  s.pod.priority_class = priority_class;
  return s;
}

ScheduledJobSpec Task(const std::string& ns, const std::string& name,
                      const std::string& priority_class) {
  ScheduledJobSpec s;
  s.name = name;
  s.namespace_name = ns;
  s.image = "python:3.11-slim";
  s.entry_path = "train.py";
  s.resources = {"100m", "128Mi", "", "", 0};
  s.pod.priority_class = priority_class;
  return s;
}

DevInstanceSpec Lab(const std::string& ns, const std::string& name,
                    const std::string& priority_class) {
  DevInstanceSpec s;
  s.owner = "alice";
  s.name = name;
  s.namespace_name = ns;
  s.resources = {"100m", "128Mi", "", "", 0};
  s.home.enabled = false;
  s.pod.priority_class = priority_class;
  return s;
}

}  // namespace

TEST_SUITE("priority class") {
  TEST_CASE("every workload's pods carry the class; the server gives them its value") {
    Client c = AdminClient();
    TestNamespace ns(c, "prio");
    TestPriorityClass pc(c);

    // TFCluster: both workers' Job templates, and the pods, which admission gives the value.
    TFCluster cluster(c, Cluster(ns.name(), "urgent", 2, pc.name()));
    const FitResult fit = cluster.Preflight();
    CHECK(fit.fits);
    // The empty-enough simulated nodes take both workers without evicting anything.
    for (const auto& note : fit.notes) CHECK(note.find("would preempt") == std::string::npos);
    cluster.Apply();
    for (const char* job : {"urgent-worker-0", "urgent-worker-1"}) {
      CAPTURE(job);
      CHECK(c.Get(kJobs, ns.name(), job)["spec"]["template"]["spec"]["priorityClassName"] ==
            pc.name());
    }
    const std::vector<Json> pods = PodsOf(c, ns.name(), "tfk8s.io/cluster=urgent", 2);
    REQUIRE(pods.size() == 2);
    for (const Json& pod : pods) {
      CAPTURE(pod["metadata"]["name"]);
      CHECK(pod["spec"]["priorityClassName"] == pc.name());
      CHECK(pod["spec"]["priority"] == kValue);
    }
    const TFClusterStatus st =
        cluster.Wait({.until = WaitUntil::kReady, .timeout = std::chrono::seconds(90)});
    CHECK(st.phase == TFClusterPhase::kRunning);

    // ScheduledJob: the CronJob's template as the server stored it, and a run's pod.
    ScheduledJobSpec job_spec = Task(ns.name(), "nightly", pc.name());
    job_spec.schedule = "0 3 * * *";
    job_spec.pod_annotations = {{"sim.tfk8s.io/exit-code", "0"}, {"sim.tfk8s.io/exit-after", "30"}};
    ScheduledJob job(c, job_spec);
    const Json cronjob = job.Apply();
    CHECK(cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["priorityClassName"] ==
          pc.name());
    const JobRun run = job.RunNow();
    const std::vector<Json> run_pods = PodsOf(c, ns.name(), "job-name=" + run.name, 1);
    REQUIRE(run_pods.size() == 1);
    CHECK(run_pods[0]["spec"]["priorityClassName"] == pc.name());
    CHECK(run_pods[0]["spec"]["priority"] == kValue);

    // DevInstance: its StatefulSet's template and its pod.
    DevInstance dev(c, Lab(ns.name(), "lab", pc.name()));
    dev.Create();
    CHECK(c.Get(kStatefulSets, ns.name(), "lab")["spec"]["template"]["spec"]["priorityClassName"] ==
          pc.name());
    const std::vector<Json> dev_pods = PodsOf(c, ns.name(), "tfk8s.io/instance=lab", 1);
    REQUIRE(dev_pods.size() == 1);
    CHECK(dev_pods[0]["spec"]["priorityClassName"] == pc.name());
    CHECK(dev_pods[0]["spec"]["priority"] == kValue);

    cluster.Delete();
    job.Delete();
    dev.Delete();
  }

  TEST_CASE("a class the server does not have is refused before anything is created") {
    Client c = AdminClient();
    TestNamespace ns(c, "prio");
    const std::string missing = UniqueName("tfk8s-it-missing");

    TFCluster cluster(c, Cluster(ns.name(), "orphan", 1, missing));
    const FitResult fit = cluster.Preflight();
    CHECK_FALSE(fit.fits);
    CHECK(fit.Message().find("priorityClassName \"" + missing + "\": no PriorityClass named " +
                             missing + " on the server") != std::string::npos);
    try {
      cluster.Apply();
      FAIL("applied a TFCluster naming a missing PriorityClass");
    } catch (const TFClusterFailed& e) {
      CHECK(std::string(e.what()).find("nothing was created") != std::string::npos);
    }

    const std::string refusal = "no PriorityClass named " + missing;
    CHECK_THROWS_WITH(ScheduledJob(c, Task(ns.name(), "orphan", missing)).RunNow(),
                      doctest::Contains(refusal.c_str()));

    CHECK_THROWS_WITH(DevInstance(c, Lab(ns.name(), "orphan", missing)).Create(),
                      doctest::Contains(refusal.c_str()));

    // Nothing of the three reached the server.
    for (const ResourceType& t :
         {kConfigMaps, ResourceType{"", "v1", "Service", "services", true}, kJobs, kStatefulSets,
          ResourceType{"", "v1", "Secret", "secrets", true},
          ResourceType{"", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true}}) {
      CAPTURE(t.plural);
      ListOptions managed;
      managed.label_selector = "app.kubernetes.io/managed-by=tfk8s";
      CHECK(c.ListAll(t, ns.name(), managed)["items"].empty());
    }
  }
}
