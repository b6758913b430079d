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

namespace {

// What the server adds around what the entries read: managedFields, a last-applied
// annotation, pod networking and image details, a volume and an env var on every container.
Json ServerShaped(Json object) {
  Json& meta = object["metadata"];
  meta["uid"] = "uid-" + meta.value("name", std::string("x"));
  meta["resourceVersion"] = "4711";
  meta["generation"] = 3;
  meta["managedFields"] = Json::array(
      {{{"manager", "tfk8s"}, {"operation", "Apply"}, {"fieldsV1", {{"f:spec", Json::object()}}}}});
  meta["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = object.dump();
  meta["ownerReferences"] = Json::array({{{"apiVersion", "v1"},
                                          {"kind", "CronJob"},
                                          {"name", "owner"},
                                          {"uid", "u-1"},
                                          {"controller", true},
                                          {"blockOwnerDeletion", true}}});
  auto pad_pod_spec = [](Json& spec) {
    spec["volumes"] = Json::array({{{"name", "home"}, {"emptyDir", Json::object()}}});
    spec["tolerations"] = Json::array({{{"key", "gpu"}, {"operator", "Exists"}}});
    for (const char* list : {"containers", "initContainers"}) {
      if (!spec.contains(list)) continue;
      for (auto& c : spec[list]) {
        c["env"] = Json::array({{{"name", "A"}, {"value", "1"}}});
        c["volumeMounts"] = Json::array({{{"name", "home"}, {"mountPath", "/home"}}});
      }
    }
  };
  Json& spec = object["spec"];
  if (spec.is_object()) {
    if (object.value("kind", "") == "Pod") pad_pod_spec(spec);
    if (spec.contains("template")) pad_pod_spec(spec["template"]["spec"]);
    if (spec.contains("jobTemplate")) pad_pod_spec(spec["jobTemplate"]["spec"]["template"]["spec"]);
    spec["selector"] = {{"matchLabels", {{"a", "b"}}}};
  }
  if (object.value("kind", "") == "Pod") {
    Json& status = object["status"];
    status["podIP"] = "10.0.0.1";
    status["hostIP"] = "192.0.2.1";
    status["qosClass"] = "Burstable";
    if (status.contains("conditions")) {
      for (auto& c : status["conditions"]) c["lastTransitionTime"] = "2026-12-01T10:00:06Z";
    }
  }
  return object;
}

Json Trimmed(FleetSource source, Json object) {
  internal::TrimForFleet(source, object);
  return object;
}

// The entry of `key` from the server-shaped objects equals the one from their trimmed copies
// (and the trimmed copies map to the same workloads).
void CheckTrimKeepsEntry(const FleetKey& key,
                         const std::vector<std::pair<FleetSource, Json>>& objects) {
  std::vector<std::pair<FleetSource, Json>> full, cut;
  for (const auto& [source, object] : objects) {
    full.emplace_back(source, ServerShaped(object));
    cut.emplace_back(source, Trimmed(source, full.back().second));
    CHECK(FleetKeyOf(source, full.back().second) == FleetKeyOf(source, cut.back().second));
    const Json& meta = cut.back().second["metadata"];
    CHECK_FALSE(meta.contains("managedFields"));
    CHECK_FALSE(meta.value("annotations", Json::object())
                    .contains("kubectl.kubernetes.io/last-applied-configuration"));
    CHECK(cut.back().second.dump().find("volumeMounts") == std::string::npos);
    CHECK(cut.back().second.dump().size() < full.back().second.dump().size());
  }
  auto observe = [](const std::vector<std::pair<FleetSource, Json>>& list) {
    FleetObserved seen;
    for (const auto& [source, object] : list) {
      seen.by_source[static_cast<std::size_t>(source)].push_back(&object);
    }
    return seen;
  };
  auto from_full = ComputeFleetEntry(key, observe(full));
  auto from_cut = ComputeFleetEntry(key, observe(cut));
  REQUIRE(from_full.has_value() == from_cut.has_value());
  if (from_full) {
    CHECK_MESSAGE(*from_full == *from_cut, from_full->ToJson().dump()
                                               << " != " << from_cut->ToJson().dump());
  }
}

Json CrashingPod(const std::string& ns, const std::string& name, const Json& labels) {
  Json pod = RunningPod(ns, name, labels);
  pod["status"]["conditions"] =
      Json::array({{{"type", "Ready"},
                    {"status", "False"},
                    {"reason", "ContainersNotReady"},
                    {"message", "containers with unready status: [main]"}}});
  pod["status"]["containerStatuses"] = Json::array(
      {{{"name", "main"},
        {"ready", false},
        {"restartCount", 4},
        {"image", "python:3.11-slim"},
        {"imageID", "sha256:abc"},
        {"containerID", "cri://1"},
        {"state", {{"waiting", {{"reason", "CrashLoopBackOff"}, {"message", "back-off 40s"}}}}},
        {"lastState",
         {{"terminated", {{"exitCode", 1}, {"reason", "Error"}, {"message", "boom"}}}}}}});
  return pod;
}

}  // namespace

TEST_SUITE("fleet") {
  TEST_CASE("trimmed objects (what the Fleet keeps) give the entries of the full ones") {
    // TFCluster: pending (root only), running, one replica crash-looping, a terminating pod.
    TFClusterSpec tf = Cluster();
    Json root = Stored(RenderTFCluster(tf).front());
    root["data"]["other"] = "not read";
    FleetKey tf_key{FleetKind::kTFCluster, "team-b", "mnist"};
    auto tf_labels = [](const std::string& role, int i) {
      return Json{{"tfk8s.io/cluster", "mnist"},
                  {"tfk8s.io/role", role},
                  {"tfk8s.io/index", std::to_string(i)}};
    };
    Json ps = RunningPod("team-b", "mnist-ps-0", tf_labels("ps", 0));
    Json w0 = RunningPod("team-b", "mnist-worker-0", tf_labels("worker", 0));
    Json w1 = CrashingPod("team-b", "mnist-worker-1", tf_labels("worker", 1));
    Json gone = RunningPod("team-b", "mnist-worker-1-old", tf_labels("worker", 1));
    gone["metadata"]["deletionTimestamp"] = "2026-12-01T10:01:00Z";
    CheckTrimKeepsEntry(tf_key, {{FleetSource::kRootConfigMaps, root}});
    CheckTrimKeepsEntry(tf_key, {{FleetSource::kRootConfigMaps, root},
                                 {FleetSource::kPods, ps},
                                 {FleetSource::kPods, w0},
                                 {FleetSource::kPods,
                                  RunningPod("team-b", "mnist-worker-1", tf_labels("worker", 1))}});
    CheckTrimKeepsEntry(tf_key, {{FleetSource::kRootConfigMaps, root},
                                 {FleetSource::kPods, ps},
                                 {FleetSource::kPods, w0},
                                 {FleetSource::kPods, w1},
                                 {FleetSource::kPods, gone}});

    // DevInstance: pending, running, crash-looping, stopped, with a recorded last activity.
    DevInstanceSpec dev = Instance();
    Json sts = Stored(Find(RenderDevInstance(dev), "StatefulSet"));
    sts["metadata"]["annotations"]["tfk8s.io/last-activity"] = "2026-12-01T10:10:00Z";
    FleetKey dev_key{FleetKind::kDevInstance, "team-a", "notebook"};
    Json labels = {{"tfk8s.io/instance", "notebook"}};
    Json stopped = sts;
    stopped["spec"]["replicas"] = 0;
    CheckTrimKeepsEntry(dev_key, {{FleetSource::kStatefulSets, sts}});
    CheckTrimKeepsEntry(dev_key,
                        {{FleetSource::kStatefulSets, sts},
                         {FleetSource::kPods, RunningPod("team-a", "notebook-0", labels)}});
    CheckTrimKeepsEntry(dev_key,
                        {{FleetSource::kStatefulSets, sts},
                         {FleetSource::kPods, CrashingPod("team-a", "notebook-0", labels)}});
    CheckTrimKeepsEntry(dev_key, {{FleetSource::kStatefulSets, stopped}});
    auto with_activity = ComputeFleetEntry(dev_key, Observe({{FleetSource::kStatefulSets, &sts}}));
    REQUIRE(with_activity);
    REQUIRE(with_activity->last_activity);
    CHECK(*with_activity->last_activity ==
          std::chrono::system_clock::time_point(std::chrono::seconds(1'796'119'800)));
    CHECK(with_activity->ToJson()["last_activity"] == 1'796'119'800);

    // ScheduledJob: scheduled, suspended, a run active, a failed run without a schedule.
    ScheduledJobSpec task = Task();
    Json cronjob = Stored(RenderCronJob(task));
    Json suspended = cronjob;
    suspended["spec"]["suspend"] = true;
    Json run = Stored(RenderRunJob(task), "2026-12-01T11:00:00Z");
    run["metadata"]["name"] = "nightly-manual";
    run["metadata"]["annotations"]["cronjob.kubernetes.io/instantiate"] = "manual";
    run["status"] = {{"active", 1}, {"startTime", "2026-12-01T11:00:01Z"}};
    Json failed = run;
    failed["status"] = {{"failed", 2},
                        {"conditions",
                         {{{"type", "Failed"},
                           {"status", "True"},
                           {"reason", "BackoffLimitExceeded"},
                           {"message", "Job has reached the specified backoff limit"}}}}};
    FleetKey task_key{FleetKind::kScheduledJob, "team-a", "nightly"};
    CheckTrimKeepsEntry(task_key, {{FleetSource::kCronJobs, cronjob}});
    CheckTrimKeepsEntry(task_key, {{FleetSource::kCronJobs, suspended}});
    CheckTrimKeepsEntry(task_key, {{FleetSource::kCronJobs, cronjob}, {FleetSource::kJobs, run}});
    CheckTrimKeepsEntry(task_key, {{FleetSource::kJobs, failed}});
  }
}
