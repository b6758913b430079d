// DevInstance idle detection: the probe's answer read into a DevActivity, what counts as
// activity, and the decision table (pure parts; the probe runs here under /bin/sh against a
// HOME this test makes, and in a pod on the real node's e2e).

#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/testing/fake_cluster.hpp"
#include "workloads/devinstance_internal.hpp"

using namespace tfk8s;
using Clock = std::chrono::system_clock;

namespace {

Clock::time_point At(std::int64_t epoch) { return Clock::time_point(std::chrono::seconds(epoch)); }

template <typename F>
void ExpectInvalid(F f, const std::string& field, const std::string& why_part) {
  try {
    f();
    FAIL("expected ValidationError on " << field);
  } catch (const ValidationError& e) {
    CHECK(e.field() == field);
    CHECK_MESSAGE(std::string(e.what()).find(why_part) != std::string::npos, e.what());
  }
}

DevInstanceSpec LabSpec(const std::string& name) {
  DevInstanceSpec spec;
  spec.owner = "alice";
  spec.name = name;
  spec.namespace_name = "team-a";
  spec.resources = {"2", "4Gi", "", "", 0};
  return spec;
}

DevActivity Parse(const std::string& text) {
  std::string why;
  auto a = internal::ParseDevActivity(text, &why);
  REQUIRE_MESSAGE(a.has_value(), why);
  return *a;
}

}  // namespace

TEST_SUITE("devinstance_idle") {
  TEST_CASE("the probe's answer: Jupyter's activity file, SSH sessions, code-server, clock") {
    DevActivity a =
        Parse(R"({"jupyter":{"last_activity": "2026-12-02T15:46:43Z", "kernels": 2,)"
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

  TEST_CASE("the embedded probe runs under /bin/sh and its answer parses") {
    // The text of src/workloads/scripts/dev_activity_probe.sh after its "#!" line.
    const std::string probe = internal::DevActivityProbe();
    CHECK(probe.rfind("j=$(cat /tmp/tfk8s/jupyter-activity.json", 0) == 0);
    CHECK(probe.back() == '\n');
    // A HOME whose code-server heartbeat was last touched at a known time.
    std::string dir = (std::filesystem::temp_directory_path() / "tfk8s-probe-XXXXXX").string();
    REQUIRE(::mkdtemp(dir.data()) != nullptr);
    const std::filesystem::path home = dir;
    const std::filesystem::path beat = home / ".local/share/code-server/heartbeat";
    std::filesystem::create_directories(beat.parent_path());
    std::ofstream(beat).put('\n');
    const utimbuf when{1796226000, 1796226000};
    REQUIRE(::utime(beat.c_str(), &when) == 0);

    int out[2];
    REQUIRE(::pipe(out) == 0);
    const std::string home_env = "HOME=" + home.string();
    char* const env[] = {const_cast<char*>(home_env.c_str()),
                         const_cast<char*>("PATH=/usr/bin:/bin"), nullptr};
    const auto before = Clock::now();
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(out[1], 1);
      ::close(out[0]);
      ::execle("/bin/sh", "sh", "-c", probe.c_str(), static_cast<char*>(nullptr), env);
      ::_exit(127);
    }
    ::close(out[1]);
    std::string output;
    char buf[512];
    ssize_t n;
    while ((n = ::read(out[0], buf, sizeof buf)) > 0) output.append(buf, static_cast<size_t>(n));
    ::close(out[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    std::filesystem::remove_all(home);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);

    DevActivity a = Parse(output);
    CHECK(a.code_server_heartbeat == At(1796226000));
    // The pod's clock (`date +%s`): this machine's, whole seconds.
    CHECK(a.probed_at >= std::chrono::floor<std::chrono::seconds>(before));
    CHECK(a.probed_at <= Clock::now());
  }

  TEST_CASE("a malformed answer is refused with the reason") {
    std::string why;
    CHECK_FALSE(internal::ParseDevActivity("sh: tr: not found", &why).has_value());
    CHECK(why == "the probe's answer is not a JSON object");
    CHECK_FALSE(internal::ParseDevActivity(R"({"ssh_sessions":0})", &why).has_value());
    CHECK(why == "no clock in the answer");
    CHECK_FALSE(
        internal::ParseDevActivity(R"({"jupyter":{"last_activity":"yesterday"},"now":5})", &why)
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
    CHECK(decisions[0].reason.find("cannot read its activity: it has no pod") != std::string::npos);
    CHECK(fake.Find("apps/v1", "StatefulSet", "team-a", "lab").value()["spec"]["replicas"] == 1);
    CHECK_THROWS_AS(lab.Activity(), DevInstanceFailed);
    DevCullDecision d{"team-a", "lab", "alice", "unknown", std::nullopt, "no kubelet"};
    CHECK(FormatCullTable({d}).find("team-a") != std::string::npos);
    CHECK(d.ToJson()["activity"].is_null());
    CHECK(ToString(DevIdleAction::kReport) == "report");
  }

  TEST_CASE("an instance's own idle policy: the spec key, its annotations, a round trip") {
    DevInstanceSpec spec = LabSpec("lab");
    Json j = spec.ToJson();
    CHECK_FALSE(j.contains("idle"));  // specs without a policy read back as before
    CHECK_FALSE(DevInstanceSpec::FromJson(j).idle.has_value());

    j["idle"] = {{"after", "90m"}, {"action", "stop"}};
    DevInstanceSpec back = DevInstanceSpec::FromJson(j);
    REQUIRE(back.idle.has_value());
    CHECK(back.idle->after == std::chrono::minutes(90));
    CHECK(back.idle->action == DevIdleAction::kStop);
    CHECK(back.ToJson()["idle"] == Json{{"after", "90m"}, {"action", "stop"}});
    j["idle"] = {{"after", "7200"}};  // seconds, action "stop" by default
    back = DevInstanceSpec::FromJson(j);
    CHECK(back.idle->after == std::chrono::hours(2));
    CHECK(back.idle->AfterText() == "2h");
    CHECK(DevIdlePolicy{std::chrono::seconds(45)}.AfterText() == "45s");

    auto objects = RenderDevInstance(back, {});
    const Json& sts = objects.at(0);
    REQUIRE(sts["kind"] == "StatefulSet");
    CHECK(sts["metadata"]["annotations"]["tfk8s.io/idle-after"] == "2h");
    CHECK(sts["metadata"]["annotations"]["tfk8s.io/idle-action"] == "stop");
    auto plain = RenderDevInstance(LabSpec("lab"), {});
    CHECK_FALSE(plain.at(0)["metadata"]["annotations"].contains("tfk8s.io/idle-after"));
  }

  TEST_CASE("an idle policy is checked: field, value and reason") {
    auto from = [](Json idle) {
      Json j = LabSpec("lab").ToJson();
      j["idle"] = std::move(idle);
      return DevInstanceSpec::FromJson(j);
    };
    ExpectInvalid([&] { from({{"after", "2d"}}); }, "idle.after", "unknown unit");
    ExpectInvalid([&] { from({{"after", "soon"}}); }, "idle.after", "whole number");
    ExpectInvalid([&] { from({{"action", "stop"}}); }, "idle.after", "is required");
    ExpectInvalid([&] { from({{"after", "1500ms"}}); }, "idle.after", "whole seconds");
    ExpectInvalid(
        [&] {
          from({{"after", "2h"}, {"action", "delete"}});
        },
        "idle.action", "must be stop");
    ExpectInvalid([&] { from("2h"); }, "idle", "must be an object");
    DevInstanceSpec spec = LabSpec("lab");
    spec.idle = DevIdlePolicy{std::chrono::seconds(0)};
    ExpectInvalid([&] { spec.Validate(); }, "idle.after", "must be a positive duration");
    spec.idle = DevIdlePolicy{std::chrono::hours(1), DevIdleAction::kReport};
    ExpectInvalid([&] { spec.Validate(); }, "idle.action", "must be stop");
  }

  TEST_CASE("the culler's choice: the instance's own policy first, else the default") {
    DevCullOptions o;
    o.idle_after = std::chrono::hours(2);
    DevIdlePolicy own{std::chrono::minutes(30)};
    auto applied = internal::IdlePolicyFor(own, o);
    REQUIRE(applied.has_value());
    CHECK(applied->after == std::chrono::minutes(30));
    CHECK(applied->source == "its own policy (idle.after 30m)");
    auto fallback = internal::IdlePolicyFor(std::nullopt, o);
    REQUIRE(fallback.has_value());
    CHECK(fallback->after == std::chrono::hours(2));
    CHECK(fallback->source == "the culler's default (2h)");
    o.policy_only = true;  // no default: only instances with a policy
    CHECK_FALSE(internal::IdlePolicyFor(std::nullopt, o).has_value());
    CHECK(internal::IdlePolicyFor(own, o)->after == std::chrono::minutes(30));

    // Canned activity: idle 1 hour (last sign at 6'400, probed at 10'000).
    DevActivity a;
    a.probed_at = At(10'000);
    a.jupyter_last_activity = At(6'400);
    DevCullDecision d;
    internal::DecideCull(*applied, DevIdleAction::kStop, a, &d);  // 1h >= 30m: stop
    CHECK(d.outcome == "stop");
    CHECK(d.reason ==
          "idle 3600s since 1970-01-01T01:46:40Z, at least 1800s of its own policy "
          "(idle.after 30m)");
    internal::DecideCull(*applied, DevIdleAction::kReport, a, &d);  // a dry run
    CHECK(d.outcome == "would-stop");
    internal::DecideCull(*fallback, DevIdleAction::kStop, a, &d);  // 1h < 2h: kept
    CHECK(d.outcome == "active");
    CHECK(d.reason == "idle 3600s, less than 7200s of the culler's default (2h)");
    a.ssh_sessions = 1;  // in use now: no policy weighed
    internal::DecideCull(*applied, DevIdleAction::kStop, a, &d);
    CHECK(d.outcome == "active");
    CHECK(d.reason == "in use now (0 kernel(s), 1 SSH session(s))");
  }

  TEST_CASE("the culler without a default: instances without a policy are not probed") {
    testing::FakeCluster fake;
    fake.AddNode("n1", {{"nodetype", "tensorflow"}, {"pooltype", "shared"}}, "32", "128Gi");
    Client client = fake.client("team-a");
    DevInstance plain(client, LabSpec("plain"));
    plain.Create();
    DevInstanceSpec spec = LabSpec("timed");
    spec.idle = DevIdlePolicy{std::chrono::hours(1)};
    DevInstance timed(client, spec);
    timed.Create();

    DevCullOptions o;
    o.namespace_name = "team-a";
    o.policy_only = true;
    o.idle_after = std::chrono::seconds(0);  // not used without a default
    auto decisions = CullIdleDevInstances(client, o);
    REQUIRE(decisions.size() == 2);
    std::map<std::string, DevCullDecision> by_name;
    for (const auto& d : decisions) by_name[d.name] = d;
    CHECK(by_name["plain"].outcome == "skipped");
    CHECK(by_name["plain"].reason ==
          "no idle policy of its own, and the culler runs without a default");
    CHECK_FALSE(by_name["plain"].activity.has_value());
    // The one with a policy is probed (the fake has no pod, so it is kept as "unknown").
    CHECK(by_name["timed"].outcome == "unknown");
    CHECK(by_name["timed"].reason.find("cannot read its activity") != std::string::npos);
    o.policy_only = false;  // with a default, idle_after must be positive again
    CHECK_THROWS_AS(CullIdleDevInstances(client, o), ValidationError);
  }
}
