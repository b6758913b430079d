// The one conversion path: result types convert themselves to JSON (snake_case keys) in the
// library; the Python bindings only return that JSON.
#include <doctest/doctest.h>

#include <chrono>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/placement.hpp"
#include "tfk8s/quota.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "tfk8s/tfcluster.hpp"

using namespace tfk8s;

TEST_SUITE("workload kit") {
  TEST_CASE("results as JSON: every field, times as epoch seconds or null") {
    JobRun run;
    run.name = "nightly-1";
    run.result = RunResult::kFailed;
    run.start_time = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
    run.duration = std::chrono::seconds(42);
    run.attempts = 2;
    Json j = run.ToJson();
    CHECK(j["name"] == "nightly-1");
    CHECK(j["result"] == ToString(RunResult::kFailed));
    CHECK(j["start_time"] == 1700000000.0);
    CHECK(j["end_time"].is_null());
    CHECK(j["duration"] == 42);
    CHECK(j["finished"] == true);
    CHECK(j["attempts"] == 2);

    ScheduleStatus schedule;
    schedule.exists = true;
    schedule.api_version = "batch/v1beta1";
    CHECK(schedule.ToJson()["api_version"] == "batch/v1beta1");
    CHECK(schedule.ToJson()["next_schedule_time"].is_null());

    TFClusterStatus status;
    status.name = "kit";
    status.namespace_name = "team-a";
    status.phase = TFClusterPhase::kPending;
    status.replicas.push_back({"worker", 0, "kit-worker-0", "Pending", "", 0, "Unschedulable"});
    status.replicas.push_back({"ps", 0, "kit-ps-0", "Running", "node-1", 1, ""});
    j = status.ToJson();
    CHECK(j["name"] == "kit");
    CHECK(j["namespace"] == "team-a");
    CHECK(j["phase"] == "Pending");
    CHECK(j["not_ready"] == 1);
    CHECK(j["replicas"][0]["reason"] == "Unschedulable");
    CHECK(j["table"] == status.Table());

    DevInstanceStatus dev;
    dev.phase = DevPhase::kRunning;
    dev.ready_tools = {"jupyter"};
    CHECK(dev.ToJson()["phase"] == "Running");
    CHECK(dev.ToJson()["ready_tools"] == Json::array({"jupyter"}));

    FitResult fit;
    fit.fits = false;
    fit.problems = {"no node has gputype=a100"};
    j = fit.ToJson();
    CHECK(j["fits"] == false);
    CHECK(j["problems"] == Json::array({"no node has gputype=a100"}));
    CHECK(j["message"] == fit.Message());
    CHECK(j["shortfalls"] == Json::array());
  }
}
