// DevInstance idle detection: the probe's answer read into a DevActivity, what counts as
// activity, and the decision table (pure parts; the probe itself runs on the real node's e2e).

#include <doctest/doctest.h>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/testing/fake_cluster.hpp"
#include "workloads/devinstance_internal.hpp"

using namespace tfk8s;
using Clock = std::chrono::system_clock;

namespace {

Clock::time_point At(std::int64_t epoch) { return Clock::time_point(std::chrono::seconds(epoch)); }

DevActivity Parse(const std::string& text) {
  std::string why;
  auto a = internal::ParseDevActivity(text, &why);
  REQUIRE_MESSAGE(a.has_value(), why);
  return *a;
}

}  // namespace

TEST_SUITE("devinstance_idle") {
  TEST_CASE("the probe's answer: Jupyter's activity file, SSH sessions, code-server, clock") {
    DevActivity a = Parse(
        R"({"jupyter":{"last_activity": "2026-12-02T15:46:43Z", "kernels": 2,)"
        R"( "connections": 1},"ssh_sessions":0,"code_server_heartbeat":1796226000,)"
        R"("now":1796226403})");
    CHECK(a.probed_at == At(1796226403));
    REQUIRE(a.jupyter_last_activity.has_value());
    CHECK(*a.jupyter_last_activity == At(1796226403));  // 2026-12-02T15:46:43Z
    CHECK(a.jupyter_kernels == 2);
    CHECK(a.jupyter_connections == 1);
    CHECK(a.code_server_heartbeat == At(1796226000));
    CHECK(a.ActiveNow());  // a running kernel

    // No Jupyter under tfk8s's script, no heartbeat: only the clock and SSH.
    a = Parse(R"({"jupyter":null,"ssh_sessions":1,"code_server_heartbeat":null,"now":100})");
    CHECK_FALSE(a.jupyter_last_activity.has_value());
    CHECK_FALSE(a.code_server_heartbeat.has_value());
    CHECK(a.ssh_sessions == 1);
    CHECK(a.ActiveNow());
  }

  TEST_CASE("a malformed answer is refused with the reason") {
    std::string why;
    CHECK_FALSE(internal::ParseDevActivity("sh: tr: not found", &why).has_value());
    CHECK(why == "the probe's answer is not a JSON object");
    CHECK_FALSE(internal::ParseDevActivity(R"({"ssh_sessions":0})", &why).has_value());
    CHECK(why == "no clock in the answer");
    CHECK_FALSE(internal::ParseDevActivity(
                    R"({"jupyter":{"last_activity":"yesterday"},"now":5})", &why)
                    .has_value());
    CHECK(why == "Jupyter's last activity is not an RFC 3339 time");
  }

  TEST_CASE("last activity: the newest sign, the container start as the floor, never ahead") {
    DevActivity a;
    a.probed_at = At(10'000);
    // Nothing seen at all: not idle (never culled on no evidence).
    CHECK(a.LastActivity() == At(10'000));
    CHECK(a.Idle() == std::chrono::seconds(0));
    a.started = At(1'000);
    CHECK(a.Idle() == std::chrono::seconds(9'000));
    a.jupyter_last_activity = At(4'000);
    CHECK(a.Idle() == std::chrono::seconds(6'000));
    a.code_server_heartbeat = At(7'000);
    CHECK(a.LastActivity() == At(7'000));
    a.recorded = At(8'000);  // an SSH session an earlier pass saw
    CHECK(a.Idle() == std::chrono::seconds(2'000));
    a.recorded = At(20'000);  // a clock ahead of the pod's: never a negative idle time
    CHECK(a.Idle() == std::chrono::seconds(0));
    a.recorded.reset();
    a.ssh_sessions = 1;  // in use now, whatever the times say
    CHECK(a.Idle() == std::chrono::seconds(0));
    Json j = a.ToJson();
    CHECK(j["active_now"] == true);
    CHECK(j["probed_at"] == "1970-01-01T02:46:40Z");
    CHECK(j["started"] == "1970-01-01T00:16:40Z");
    CHECK(j["recorded"].is_null());
  }

  TEST_CASE("the culler: no action without evidence, stopped instances skipped") {
    testing::FakeCluster fake;
    fake.AddNode("n1", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}, "32", "128Gi");
    Client client = fake.client("team-a");
    DevCullOptions o;
    o.idle_after = std::chrono::seconds(0);
    CHECK_THROWS_AS(CullIdleDevInstances(client, o), ValidationError);
    o.idle_after = std::chrono::seconds(1);
    CHECK(CullIdleDevInstances(client, o).empty());  // none at all

    DevInstanceSpec spec;
    spec.owner = "alice";
    spec.name = "lab";
    spec.namespace_name = "team-a";
    spec.resources = {"2", "4Gi", "", "", 0};
    DevInstance lab(client, spec);
    lab.Create();
    spec.name = "parked";
    DevInstance parked(client, spec);
    DevCreateOptions stopped;
    stopped.start = false;
    parked.Create(stopped);
    // The fake runs no controllers: lab has no pod, so its activity cannot be read and it is
    // kept; the stopped one is not probed at all.
    auto decisions = CullIdleDevInstances(client, o);
    REQUIRE(decisions.size() == 1);
    CHECK(decisions[0].name == "lab");
    CHECK(decisions[0].owner == "alice");
    CHECK(decisions[0].outcome == "unknown");
    CHECK_FALSE(decisions[0].activity.has_value());
    CHECK(decisions[0].reason.find("cannot read its activity: it has no pod") !=
          std::string::npos);
    CHECK(fake.Find("apps/v1", "StatefulSet", "team-a", "lab").value()["spec"]["replicas"] == 1);
    CHECK_THROWS_AS(lab.Activity(), DevInstanceFailed);
    DevCullDecision d{"team-a", "lab", "alice", "unknown", std::nullopt, "no kubelet"};
    CHECK(FormatCullTable({d}).find("team-a") != std::string::npos);
    CHECK(d.ToJson()["activity"].is_null());
    CHECK(ToString(DevIdleAction::kReport) == "report");
  }
}
