// Fleet's pure part: which workload an object belongs to, and each workload's entry (phase,
// owner, creation time, requested resources) from rendered objects plus hand-made pods and
// Jobs in the shapes the API server returns. No server.
#include <doctest/doctest.h>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/fleet.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"
#include "workloads/fleet_internal.hpp"

using namespace tfk8s;
using internal::ComputeFleetEntry;
using internal::FleetKey;
using internal::FleetKeyOf;
using internal::FleetObserved;
using internal::FleetSource;
using internal::RequestedResources;

namespace {

constexpr std::int64_t kGi = 1024LL * 1024 * 1024;

// Stamps the object as the server would have stored it.
Json Stored(Json object, const std::string& created = "2026-12-01T10:00:00Z") {
  object["metadata"]["creationTimestamp"] = created;
  return object;
}

Json Find(const std::vector<Json>& objects, const std::string& kind) {
  for (const auto& o : objects) {
    if (o.value("kind", "") == kind) return o;
  }
  FAIL("no " << kind << " rendered");
  return {};
}

// A Running, Ready pod with `labels`.
Json RunningPod(const std::string& ns, const std::string& name, const Json& labels) {
  Json pod = Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"creationTimestamp": "2026-12-01T10:00:05Z"},
    "spec": {"nodeName": "sim-1", "containers": []},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
  })");
  pod["metadata"]["name"] = name;
  pod["metadata"]["namespace"] = ns;
  pod["metadata"]["labels"] = labels;
  return pod;
}

FleetObserved Observe(const std::vector<std::pair<FleetSource, const Json*>>& objects) {
  FleetObserved seen;
  for (const auto& [source, object] : objects) {
    seen.by_source[static_cast<std::size_t>(source)].push_back(object);
  }
  return seen;
}

TFClusterSpec Cluster() {
  TFClusterSpec s;
  s.name = "mnist";
  s.namespace_name = "team-b";
  s.owner = "bob";
  s.ps.replicas = 1;
  s.ps.resources = {"500m", "1Gi", "", "", 0};
  s.worker.replicas = 2;
  s.worker.resources = {"1", "2Gi", "", "", 1};
  return s;
}

DevInstanceSpec Instance() {
  DevInstanceSpec s;
  s.name = "notebook";
  s.namespace_name = "team-a";
  s.owner = "alice";
  s.resources = {"500m", "1Gi", "", "", 1};
  return s;
}

ScheduledJobSpec Task() {
  ScheduledJobSpec s;
  s.name = "nightly";
  s.namespace_name = "team-a";
  s.owner = "alice";
  s.image = "python:3.11-slim";
  s.entry_path = "train.py";
  s.resources = {"100m", "128Mi", "", "", 0};
  s.schedule = "0 3 * * *";
  return s;
}

}  // namespace

TEST_SUITE("fleet") {
  TEST_CASE("kinds round-trip as strings and an unknown kind is a ValidationError") {
    for (FleetKind k : {FleetKind::kTFCluster, FleetKind::kDevInstance, FleetKind::kScheduledJob}) {
      CHECK(ParseFleetKind(ToString(k)) == k);
    }
    CHECK_THROWS_AS(ParseFleetKind("Quota"), ValidationError);
    CHECK(ToString(FleetChangeType::kRemoved) == "REMOVED");
  }

  TEST_CASE("objects map to their workload by label, a TFCluster's label first") {
    Json cluster_pod = RunningPod("ns", "mnist-worker-0",
                                  {{"tfk8s.io/cluster", "mnist"}, {"tfk8s.io/instance", "x"}});
    auto key = FleetKeyOf(FleetSource::kPods, cluster_pod);
    REQUIRE(key);
    CHECK(*key == FleetKey{FleetKind::kTFCluster, "ns", "mnist"});

    Json dev_pod = RunningPod("ns", "notebook-0", {{"tfk8s.io/instance", "notebook"}});
    CHECK(FleetKeyOf(FleetSource::kPods, dev_pod) ==
          FleetKey{FleetKind::kDevInstance, "ns", "notebook"});

    Json run = {{"metadata",
                 {{"name", "nightly-1"},
                  {"namespace", "ns"},
                  {"labels", {{"tfk8s.io/scheduledjob", "nightly"}}}}}};
    CHECK(FleetKeyOf(FleetSource::kJobs, run) ==
          FleetKey{FleetKind::kScheduledJob, "ns", "nightly"});
    // A run's pods say nothing its Job does not.
    CHECK_FALSE(FleetKeyOf(FleetSource::kPods, run));
    CHECK_FALSE(FleetKeyOf(FleetSource::kStatefulSets, Json::object()));
  }

  TEST_CASE("TFCluster: phase from the workload's own status, resources from the spec") {
    TFClusterSpec spec = Cluster();
    std::vector<Json> rendered = RenderTFCluster(spec);
    Json root = Stored(rendered.front());
    FleetKey key{FleetKind::kTFCluster, "team-b", "mnist"};

    CHECK_FALSE(ComputeFleetEntry(key, {}));  // no root: no cluster

    auto pending = ComputeFleetEntry(key, Observe({{FleetSource::kRootConfigMaps, &root}}));
    REQUIRE(pending);
    CHECK(pending->phase == "Pending");
    CHECK(pending->owner == "bob");
    CHECK(pending->requested.gpus == 2);
    CHECK(pending->requested.cpu_milli == 2500);
    CHECK(pending->requested.memory_bytes == 5 * kGi);
    CHECK(pending->created == std::chrono::system_clock::time_point(
                                  std::chrono::seconds(1'796'119'200)));  // 2026-12-01T10:00Z

    std::vector<Json> pods;
    pods.push_back(RunningPod(
        "team-b", "mnist-ps-0",
        {{"tfk8s.io/cluster", "mnist"}, {"tfk8s.io/role", "ps"}, {"tfk8s.io/index", "0"}}));
    for (int i = 0; i < 2; ++i) {
      pods.push_back(RunningPod("team-b", "mnist-worker-" + std::to_string(i),
                                {{"tfk8s.io/cluster", "mnist"},
                                 {"tfk8s.io/role", "worker"},
                                 {"tfk8s.io/index", std::to_string(i)}}));
    }
    auto running = ComputeFleetEntry(key, Observe({{FleetSource::kRootConfigMaps, &root},
                                                   {FleetSource::kPods, &pods[0]},
                                                   {FleetSource::kPods, &pods[1]},
                                                   {FleetSource::kPods, &pods[2]}}));
    REQUIRE(running);
    CHECK(running->phase == "Running");
    CHECK_MESSAGE(running->message == "3 replicas running", running->message);
    CHECK_FALSE(*running == *pending);

    Json broken = root;
    broken["data"]["spec.json"] = "{not json";
    auto unknown = ComputeFleetEntry(key, Observe({{FleetSource::kRootConfigMaps, &broken}}));
    REQUIRE(unknown);
    CHECK(unknown->phase == "Unknown");
    CHECK_MESSAGE(unknown->message.find("not JSON") != std::string::npos, unknown->message);
  }

  TEST_CASE("DevInstance: Pending, Running, Stopped (nothing requested when stopped)") {
    DevInstanceSpec spec = Instance();
    Json sts = Stored(Find(RenderDevInstance(spec), "StatefulSet"));
    FleetKey key{FleetKind::kDevInstance, "team-a", "notebook"};

    auto pending = ComputeFleetEntry(key, Observe({{FleetSource::kStatefulSets, &sts}}));
    REQUIRE(pending);
    CHECK(pending->phase == "Pending");
    CHECK(pending->owner == "alice");
    CHECK(pending->requested.gpus == 1);
    CHECK(pending->requested.cpu_milli == 500);
    CHECK(pending->requested.memory_bytes == kGi);

    Json pod = RunningPod("team-a", "notebook-0", {{"tfk8s.io/instance", "notebook"}});
    auto running = ComputeFleetEntry(
        key, Observe({{FleetSource::kStatefulSets, &sts}, {FleetSource::kPods, &pod}}));
    REQUIRE(running);
    CHECK(running->phase == "Running");

    Json stopped_sts = sts;
    stopped_sts["spec"]["replicas"] = 0;
    auto stopped = ComputeFleetEntry(key, Observe({{FleetSource::kStatefulSets, &stopped_sts}}));
    REQUIRE(stopped);
    CHECK(stopped->phase == "Stopped");
    CHECK(stopped->requested == FleetResources{});
    // Its pod alone is not an instance.
    CHECK_FALSE(ComputeFleetEntry(key, Observe({{FleetSource::kPods, &pod}})));
  }

  TEST_CASE("ScheduledJob: Scheduled, Suspended, Running, and an on-demand task's result") {
    ScheduledJobSpec spec = Task();
    Json cronjob = Stored(RenderCronJob(spec));
    FleetKey key{FleetKind::kScheduledJob, "team-a", "nightly"};

    auto scheduled = ComputeFleetEntry(key, Observe({{FleetSource::kCronJobs, &cronjob}}));
    REQUIRE(scheduled);
    CHECK(scheduled->phase == "Scheduled");
    CHECK(scheduled->owner == "alice");
    CHECK_MESSAGE(scheduled->message == "schedule \"0 3 * * *\"", scheduled->message);
    CHECK(scheduled->requested.cpu_milli == 100);
    CHECK(scheduled->requested.memory_bytes == 128 * 1024 * 1024);

    Json suspended_cj = cronjob;
    suspended_cj["spec"]["suspend"] = true;
    auto suspended = ComputeFleetEntry(key, Observe({{FleetSource::kCronJobs, &suspended_cj}}));
    REQUIRE(suspended);
    CHECK(suspended->phase == "Suspended");
    CHECK(suspended->requested.cpu_milli == 100);  // one run's pods, resumed or not

    Json run = Stored(RenderRunJob(spec), "2026-12-01T11:00:00Z");
    run["metadata"]["name"] = "nightly-manual";
    run["status"] = {{"active", 1}};
    auto running = ComputeFleetEntry(
        key, Observe({{FleetSource::kCronJobs, &cronjob}, {FleetSource::kJobs, &run}}));
    REQUIRE(running);
    CHECK(running->phase == "Running");
    CHECK_MESSAGE(running->message.find("nightly-manual") != std::string::npos, running->message);

    // Without a schedule: the newest run's result.
    Json done = run;
    done["status"] = {{"succeeded", 1},
                      {"conditions", {{{"type", "Complete"}, {"status", "True"}}}}};
    auto on_demand = ComputeFleetEntry(key, Observe({{FleetSource::kJobs, &done}}));
    REQUIRE(on_demand);
    CHECK(on_demand->phase == "Succeeded");
    CHECK(on_demand->created ==
          std::chrono::system_clock::time_point(std::chrono::seconds(1'796'122'800)));
    CHECK_FALSE(ComputeFleetEntry(key, {}));
  }

  TEST_CASE("requested resources: replicas, limits as requests, init containers at their max") {
    Json deployment = Json::parse(R"({
      "apiVersion": "apps/v1", "kind": "Deployment",
      "metadata": {"name": "web", "namespace": "ns"},
      "spec": {"replicas": 3, "template": {"spec": {
        "initContainers": [{"name": "init", "resources": {"requests": {"cpu": "2"}}}],
        "containers": [
          {"name": "a", "resources": {"limits": {"cpu": "250m", "memory": "1Gi"}}},
          {"name": "b", "resources": {"requests": {"cpu": "250m", "nvidia.com/gpu": "1"},
                                      "limits": {"nvidia.com/gpu": "1"}}}
        ]}}}
    })");
    FleetResources r = RequestedResources({deployment});
    CHECK(r.cpu_milli == 3 * 2000);  // the init container's 2 cores outweigh 250m + 250m
    CHECK(r.memory_bytes == 3 * kGi);
    CHECK(r.gpus == 3);
    Json j = r.ToJson();
    CHECK(j["cpu"].get<double>() == doctest::Approx(6.0));
  }
}
