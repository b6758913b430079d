// WorkloadLogStream: a push-style producer turned into a pull stream (order, back-pressure,
// cancellation, errors); a TFCluster's logs against the fake cluster (the query parameters, the
// replicas that have not started).
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include "tfk8s/error.hpp"
#include "tfk8s/testing/fake_cluster.hpp"
#include "tfk8s/tfcluster.hpp"
#include "tfk8s/workload.hpp"

using namespace tfk8s;
using std::chrono::milliseconds;

TEST_SUITE("workload_logs") {
  TEST_CASE("lines arrive in order with their source, the end is reported") {
    WorkloadLogStream s([](const WorkloadLogStream::Emit& emit, const auto&) {
      for (int i = 0; i < 5; ++i) emit({"worker-" + std::to_string(i % 2), std::to_string(i)});
    });
    for (int i = 0; i < 5; ++i) {
      auto l = s.Next(milliseconds(2000));
      REQUIRE(l);
      CHECK(l->source == "worker-" + std::to_string(i % 2));
      CHECK(l->line == std::to_string(i));
    }
    CHECK_FALSE(s.Next(milliseconds(2000)));
    CHECK(s.ended());
    CHECK(WorkloadLogLine{"ps-0", "ready"}.Prefixed() == "[ps-0] ready");
  }

  TEST_CASE("a full queue pauses the producer instead of growing") {
    std::atomic<int> produced{0};
    WorkloadLogStream s(
        [&](const WorkloadLogStream::Emit& emit, const auto&) {
          for (int i = 0; i < 100; ++i) {
            if (!emit({"p", std::to_string(i)})) return;
            ++produced;
          }
        },
        /*capacity=*/4);
    std::this_thread::sleep_for(milliseconds(200));
    CHECK(produced.load() <= 5);  // four queued, one waiting to be queued
    int read = 0;
    while (auto l = s.Next(milliseconds(2000))) {
      CHECK(l->line == std::to_string(read));
      ++read;
    }
    CHECK(read == 100);
  }

  TEST_CASE("Cancel and destruction stop a producer that waits for lines") {
    std::atomic<bool> stopped{false};
    auto producer = [&](const WorkloadLogStream::Emit&, const std::function<bool()>& cancelled) {
      while (!cancelled()) std::this_thread::sleep_for(milliseconds(10));
      stopped = true;
    };
    {
      WorkloadLogStream s(producer);
      CHECK_FALSE(s.Next(milliseconds(50)));  // nothing yet, not ended
      CHECK_FALSE(s.ended());
      s.Cancel();
      CHECK(s.ended());
      CHECK_FALSE(s.Next(milliseconds(50)));
    }  // joins
    CHECK(stopped.load());
    stopped = false;
    { WorkloadLogStream s(producer); }  // destroyed unread: cancels and joins
    CHECK(stopped.load());
  }

  TEST_CASE("the producer's error is thrown once, after the lines it emitted") {
    WorkloadLogStream s([](const WorkloadLogStream::Emit& emit, const auto&) {
      emit({"attempt-1", "started"});
      throw NotFound(ErrorKind::kNotFound, "run team-a/r-1 was deleted", 404, "NotFound");
    });
    auto l = s.Next(milliseconds(2000));
    REQUIRE(l);
    CHECK(l->line == "started");
    CHECK_THROWS_AS(s.Next(milliseconds(2000)), NotFound);
    CHECK_FALSE(s.Next(milliseconds(100)));
    CHECK(s.ended());
  }

  TEST_CASE("a moved stream keeps reading, the moved-from one owns nothing") {
    WorkloadLogStream a([](const WorkloadLogStream::Emit& emit, const auto&) {
      emit({"s", "one"});
    });
    WorkloadLogStream b(std::move(a));
    auto l = b.Next(milliseconds(2000));
    REQUIRE(l);
    CHECK(l->line == "one");
  }
}

namespace {

TFClusterSpec LogCluster() {
  TFClusterSpec tf;
  tf.name = "c";
  tf.namespace_name = "default";
  tf.ps.replicas = 1;
  tf.worker.replicas = 2;
  tf.worker.script = "python train.py";
  return tf;
}

// A pod of replica role-index: `phase`, its container waiting for `waiting` when not empty.
Json ReplicaPod(const std::string& role, int index, const std::string& phase,
                const std::string& waiting = "") {
  Json pod = {{"apiVersion", "v1"},
              {"kind", "Pod"},
              {"metadata",
               {{"name", "c-" + role + "-" + std::to_string(index) + "-x"},
                {"namespace", "default"},
                {"labels",
                 {{"tfk8s.io/cluster", "c"},
                  {"tfk8s.io/role", role},
                  {"tfk8s.io/index", std::to_string(index)}}}}},
              {"spec", {{"containers", {{{"name", "tensorflow"}, {"image", "tf"}}}}}},
              {"status", {{"phase", phase}}}};
  if (!waiting.empty()) {
    pod["status"]["containerStatuses"] = {{{"name", "tensorflow"},
                                           {"ready", false},
                                           {"restartCount", 0},
                                           {"state", {{"waiting", {{"reason", waiting}}}}}}};
  }
  return pod;
}

std::vector<std::string> Read(WorkloadLogStream stream) {
  std::vector<std::string> out;
  while (auto line = stream.Next(std::chrono::seconds(10))) out.push_back(line->Prefixed());
  return out;
}

}  // namespace

TEST_SUITE("workload_logs") {
  TEST_CASE("tail, since and previous reach each pod's log request as query parameters") {
    tfk8s::testing::FakeCluster fake;
    fake.Add(ReplicaPod("ps", 0, "Running"));
    fake.Add(ReplicaPod("worker", 0, "Running"));
    fake.Add(ReplicaPod("worker", 1, "Running"));
    TFCluster cluster(fake.client(), LogCluster());
    WorkloadLogOptions o;
    o.tail_lines = 20;
    o.since_seconds = 300;
    o.previous = true;
    fake.ClearRequests();
    CHECK(Read(cluster.StreamLogs(o)).empty());  // the fake's logs are empty
    int log_requests = 0;
    for (const auto& r : fake.requests()) {
      if (!r.path.ends_with("/log")) continue;
      ++log_requests;
      CHECK(r.query.find("tailLines=20") != std::string::npos);
      CHECK(r.query.find("sinceSeconds=300") != std::string::npos);
      CHECK(r.query.find("previous=true") != std::string::npos);
    }
    CHECK(log_requests == 3);
    CHECK(WorkloadLogOptions{}.ForPod().previous == false);
    CHECK(o.ForPod("c").previous == true);
  }

  TEST_CASE("a replica not started says so at once and none started is an error") {
    tfk8s::testing::FakeCluster fake;
    fake.Add(ReplicaPod("ps", 0, "Running"));
    fake.Add(ReplicaPod("worker", 0, "Pending", "ContainerCreating"));
    // worker-1 has no pod at all.
    TFCluster cluster(fake.client(), LogCluster());
    const auto started = std::chrono::steady_clock::now();
    std::vector<std::string> lines = Read(cluster.StreamLogs({}));
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
    REQUIRE(lines.size() == 2);
    std::sort(lines.begin(), lines.end());
    CHECK(lines[0].starts_with("[worker-0] (not started: Pending"));
    CHECK(lines[0].find("ContainerCreating") != std::string::npos);
    CHECK(lines[1].starts_with("[worker-1] (not started: Missing"));

    // Only replicas that have not started: the notices, then an error saying so.
    WorkloadLogStream workers = cluster.StreamLogs({.source = "worker"});
    std::vector<std::string> notices;
    std::string error;
    try {
      while (auto line = workers.Next(std::chrono::seconds(10))) notices.push_back(line->source);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::kWorkloadFailed);
      error = e.what();
    }
    CHECK(notices.size() == 2);
    CHECK(error.find("no replica of TFCluster default/c has started") != std::string::npos);
    CHECK(error.find("worker-0 (Pending") != std::string::npos);
    CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(10));
  }

  TEST_CASE("followed, a replica not started is noticed, then read once it starts") {
    tfk8s::testing::FakeCluster fake;
    fake.Add(ReplicaPod("worker", 0, "Pending", "ContainerCreating"));
    TFCluster cluster(fake.client(), LogCluster());
    WorkloadLogOptions o;
    o.source = "worker-0";
    o.follow = true;
    o.pending_wait = std::chrono::seconds(20);
    WorkloadLogStream stream = cluster.StreamLogs(o);
    auto first = stream.Next(std::chrono::seconds(5));
    REQUIRE(first);
    CHECK(first->source == "worker-0");
    CHECK(first->line.find("not started: Pending") != std::string::npos);
    CHECK(first->line.find("follow") != std::string::npos);
    fake.ClearRequests();
    fake.Add(ReplicaPod("worker", 0, "Running"));
    // Its (empty) log is read, then the stream ends.
    CHECK_FALSE(stream.Next(std::chrono::seconds(10)));
    CHECK(stream.ended());
    bool read_log = false;
    for (const auto& r : fake.requests()) read_log = read_log || r.path.ends_with("/log");
    CHECK(read_log);
  }
}
