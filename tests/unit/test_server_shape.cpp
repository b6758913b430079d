// Server objects of the wrong shape (issue #17): a field of the wrong JSON type reaches the
// caller as a DecodeError naming the object and the field, never as an nlohmann exception.
// First the checker itself; then a sweep over the workloads on the in-memory fake cluster: every
// field of every object the readers use is given a value of another JSON type in turn, and each
// reader must answer or throw a tfk8s error.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/quota.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/testing/fake_cluster.hpp"
#include "tfk8s/tfcluster.hpp"
#include "workloads/server_shape.hpp"

using namespace tfk8s;
using tfk8s::testing::FakeCluster;

namespace {

Json RunningPod() {
  return Json::parse(R"({
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p", "namespace": "team-a", "labels": {"app": "x"}},
    "spec": {"nodeName": "n1", "containers": [
      {"name": "main", "resources": {"requests": {"cpu": "1"}}}]},
    "status": {"phase": "Running", "containerStatuses": [
      {"name": "main", "ready": true, "restartCount": 0, "state": {"running": {}}},
      {"name": "side", "ready": false, "restartCount": 2,
       "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}})");
}

std::string FieldOfError(const Json& object, std::string_view kind = "") {
  try {
    internal::CheckServerObject(object, kind, "test");
  } catch (const DecodeError& e) {
    return e.field() + " | " + e.what();
  }
  return "";
}

// Every path of `j` below `path`, depth first (arrays by index).
void Paths(const Json& j, std::vector<std::vector<std::string>>* out,
           std::vector<std::string> path) {
  if (!path.empty()) out->push_back(path);
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      auto p = path;
      p.push_back(k);
      Paths(v, out, p);
    }
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      auto p = path;
      p.push_back(std::to_string(i));
      Paths(j[i], out, p);
    }
  }
}

Json* At(Json* j, const std::vector<std::string>& path) {
  for (const auto& s : path) j = j->is_array() ? &(*j)[std::stoul(s)] : &(*j)[s];
  return j;
}

// A value of another JSON type than `v`.
Json Other(const Json& v) {
  if (v.is_string()) return 42;
  if (v.is_number()) return "42";
  if (v.is_boolean()) return "yes";
  if (v.is_object()) return Json::array({1});
  if (v.is_array()) return Json{{"a", 1}};
  return Json();
}

}  // namespace

TEST_SUITE("server shape") {
  TEST_CASE("the checker names the object and the path of a field of the wrong type") {
    CHECK(FieldOfError(RunningPod()).empty());
    Json pod = RunningPod();
    pod["status"]["containerStatuses"][1]["restartCount"] = "2";
    CHECK(FieldOfError(pod) ==
          "status.containerStatuses[1].restartCount | test: the server's Pod team-a/p has field "
          "\"status.containerStatuses[1].restartCount\" of type string, not a number");
    pod = RunningPod();
    pod["status"]["containerStatuses"][1]["state"]["terminated"]["exitCode"] = "1";
    CHECK(FieldOfError(pod).rfind("status.containerStatuses[1].state.terminated.exitCode |", 0) ==
          0);
    pod = RunningPod();
    pod["metadata"]["labels"]["app"] = 7;
    CHECK(FieldOfError(pod).rfind("metadata.labels.app |", 0) == 0);
    // A parent of the wrong type is reported as itself, not through its children.
    pod = RunningPod();
    pod["status"] = "Running";
    CHECK(FieldOfError(pod).rfind("status |", 0) == 0);
    pod = RunningPod();
    pod["status"]["containerStatuses"] = Json{{"main", 1}};
    CHECK(FieldOfError(pod).rfind("status.containerStatuses |", 0) == 0);
    // Absent and null fields are fine.
    pod = RunningPod();
    pod["status"]["phase"] = nullptr;
    pod["spec"].erase("nodeName");
    CHECK(FieldOfError(pod).empty());
    // The kind comes from the caller (list items have none) or from the object.
    Json job = {{"kind", "Job"}, {"metadata", {{"name", "j"}}}, {"status", {{"active", "1"}}}};
    CHECK(FieldOfError(job).rfind("status.active |", 0) == 0);
    job.erase("kind");
    CHECK(FieldOfError(job).empty());  // read as no particular kind: only the common fields
    CHECK(FieldOfError(job, "Job").rfind("status.active |", 0) == 0);
    // A controller's pod template is read like a pod.
    Json sts = {
        {"kind", "StatefulSet"},
        {"metadata", {{"name", "s"}}},
        {"spec",
         {{"template",
           {{"spec",
             {{"containers",
               Json::array({{{"name", "c"}, {"resources", {{"requests", {{"cpu", 2}}}}}}})}}}}}}}};
    CHECK(FieldOfError(sts).rfind("spec.template.spec.containers[0].resources.requests.cpu |", 0) ==
          0);
    CHECK(FieldOfError(Json::array(), "Pod").find("is array, not an object") != std::string::npos);
  }

  TEST_CASE(
      "sweep: every field of every object the workloads read, of another type, gives a tfk8s error "
      "at worst") {
    FakeCluster fake;
    fake.AddNode("n1", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}, "64", "256Gi", 8);
    Client client = fake.client("team-a");

    TFClusterSpec tf;
    tf.name = "mnist";
    tf.namespace_name = "team-a";
    tf.ps.replicas = 1;
    tf.ps.resources = {"1", "2Gi", "", "", 0};
    tf.worker.replicas = 1;
    tf.worker.resources = {"1", "2Gi", "", "", 1};
    TFCluster cluster(client, tf);
    cluster.Apply();

    DevInstanceSpec dev;
    dev.owner = "alice";
    dev.name = "lab";
    dev.namespace_name = "team-a";
    dev.resources = {"1", "1Gi", "", "", 0};
    dev.expose.backend = DevExposure::kNodePort;
    DevInstance lab(client, dev);
    lab.Create();

    ScheduledJobSpec sj;
    sj.name = "nightly";
    sj.namespace_name = "team-a";
    sj.image = "python:3.11-slim";
    sj.entry_path = "train.py";
    sj.exec_command = "python3";
    sj.resources = {"1", "1Gi", "", "", 0};
    sj.schedule = "30 2 * * *";
    ScheduledJob job(client, sj);
    job.Apply();

    // What the controllers would have made: running pods, a finished run, events, usage.
    const char* kOwner = R"({"apiVersion": "batch/v1", "kind": "Job", "name": "mnist-worker-0"})";
    Json pod = RunningPod();
    pod["metadata"]["name"] = "mnist-worker-0-abcde";
    pod["metadata"]["labels"] = {{"tfk8s.io/cluster", "mnist"},
                                 {"tfk8s.io/role", "worker"},
                                 {"tfk8s.io/index", "0"},
                                 {"tfk8s.io/instance", "lab"},
                                 {"statefulset.kubernetes.io/pod-name", "lab-0"}};
    pod["metadata"]["ownerReferences"] = Json::array({Json::parse(kOwner)});
    pod["status"]["conditions"] = Json::parse(R"([{"type": "Ready", "status": "True"}])");
    fake.Add(pod);
    Json run = {{"apiVersion", "batch/v1"},
                {"kind", "Job"},
                {"metadata",
                 {{"name", "nightly-1"},
                  {"namespace", "team-a"},
                  {"labels", {{"tfk8s.io/scheduled-job", "nightly"}}},
                  {"creationTimestamp", "2026-12-01T02:30:00Z"}}},
                {"spec", {{"completions", 1}, {"backoffLimit", 0}}},
                {"status",
                 {{"succeeded", 1},
                  {"startTime", "2026-12-01T02:30:01Z"},
                  {"completionTime", "2026-12-01T02:31:00Z"},
                  {"conditions", Json::parse(R"([{"type": "Complete", "status": "True"}])")}}}};
    fake.Add(run);
    fake.Add({{"apiVersion", "v1"},
              {"kind", "Event"},
              {"metadata", {{"name", "e1"}, {"namespace", "team-a"}}},
              {"involvedObject", {{"kind", "Job"}, {"name", "mnist-worker-0"}, {"uid", "u"}}},
              {"reason", "FailedCreate"},
              {"message", "exceeded quota"},
              {"count", 1}});
    fake.Add({{"apiVersion", "v1"},
              {"kind", "ResourceQuota"},
              {"metadata", {{"name", "team-a"}, {"namespace", "team-a"}}},
              {"spec", {{"hard", {{"requests.cpu", "32"}}}}},
              {"status", {{"hard", {{"requests.cpu", "32"}}}, {"used", {{"requests.cpu", "1"}}}}}});

    const std::vector<std::pair<const char*, std::function<void()>>> readers = {
        {"TFCluster::Status", [&] { TFCluster(client, tf).Status(); }},
        {"TFCluster::Preflight", [&] { TFCluster(client, tf).Preflight(); }},
        {"TFCluster::List", [&] { TFCluster::List(client, "team-a"); }},
        {"DevInstance::Status", [&] { DevInstance(client, dev).Status(); }},
        {"DevInstance::Access", [&] { DevInstance(client, dev).Access(); }},
        {"DevInstance::List", [&] { DevInstance::List(client, "team-a"); }},
        {"ScheduledJob::Status", [&] { ScheduledJob(client, sj).Status(); }},
        {"ScheduledJob::History", [&] { ScheduledJob(client, sj).History(); }},
        {"GetQuotaUsage", [&] { GetQuotaUsage(client, "team-a"); }},
    };
    for (const auto& [name, read] : readers) {
      CAPTURE(name);
      CHECK_NOTHROW(read());  // the baseline answers
    }

    // Each kind with the readers that read it (indexes into `readers`; all of them would
    // multiply the run time, which matters under the sanitizers).
    struct Kind {
      const char* api_version;
      const char* kind;
      std::vector<int> read_by;
    };
    int mutations = 0;
    for (const Kind& k :
         {Kind{"v1", "Pod", {0, 1, 3, 5, 7}}, Kind{"batch/v1", "Job", {0, 6, 7}},
          Kind{"apps/v1", "StatefulSet", {3, 4, 5}}, Kind{"v1", "Service", {0, 4}},
          Kind{"v1", "Event", {0, 3}}, Kind{"v1", "Node", {1}}, Kind{"v1", "ResourceQuota", {1, 8}},
          Kind{"v1", "ConfigMap", {0, 2}}, Kind{"batch/v1beta1", "CronJob", {6, 7}},
          Kind{"v1", "PersistentVolumeClaim", {1, 3, 5}}}) {
      for (const Json& original : fake.Objects(k.api_version, k.kind, "")) {
        std::vector<std::vector<std::string>> paths;
        Paths(original, &paths, {});
        for (const auto& path : paths) {
          // The fake's own bookkeeping (identity, kind) is not what is tested here.
          // Of an array, the first element stands for the rest (bounds the run time).
          if (std::any_of(path.begin(), path.end(), [](const std::string& p) {
                return !p.empty() && p != "0" &&
                       p.find_first_not_of("0123456789") == std::string::npos;
              })) {
            continue;
          }
          const std::string& top = path.front();
          if (top == "apiVersion" || top == "kind") continue;
          if (top == "metadata" &&
              (path.size() == 1 || path[1] == "name" || path[1] == "namespace" ||
               path[1] == "resourceVersion" || path[1] == "uid")) {
            continue;
          }
          Json mutated = original;
          Json* field = At(&mutated, path);
          Json other = Other(*field);
          if (other.is_null()) continue;
          *field = other;
          fake.Add(mutated);
          ++mutations;
          std::string where = std::string(k.kind) + " " + original["metadata"].value("name", "");
          for (auto p : path) where += "." + p;
          for (int r : k.read_by) {
            const auto& [name, read] = readers[r];
            try {
              read();
            } catch (const Error&) {
              // Typed: a DecodeError, or the reader's own verdict on what it found.
            } catch (const std::exception& e) {
              FAIL_CHECK(
                  (std::string(name) + " on " + where + " = " + other.dump() + ": " + e.what()));
            }
          }
          fake.Add(original);
        }
      }
    }
    CHECK(mutations > 200);
  }
}
