// DevInstance idle detection and culling: a read-only probe run in the pod (Client::Exec)
// reads what its user was last seen doing; the culler records it on the StatefulSet and stops
// instances idle longer than its policy.

#include <fmt/format.h>

#include <algorithm>
#include <mutex>
#include <optional>

#include "tfk8s/devinstance.hpp"
#include "util/concurrent.hpp"
#include "util/json_parse.hpp"
#include "workloads/common.hpp"
#include "workloads/cron.hpp"
#include "workloads/devinstance_internal.hpp"

namespace tfk8s {

using internal::AnnotationOf;
using namespace internal::kinds;
using Clock = std::chrono::system_clock;

namespace internal {

namespace {

// A time the system clock holds (about the years 1678-2261); nullopt beyond, where converting
// the seconds to the clock's nanoseconds would overflow.
std::optional<Clock::time_point> FromEpoch(std::int64_t seconds) {
  constexpr std::int64_t kLimit =
      std::chrono::duration_cast<std::chrono::seconds>(Clock::duration::max()).count() - 1;
  if (seconds > kLimit || seconds < -kLimit) return std::nullopt;
  return Clock::time_point(std::chrono::seconds(seconds));
}

std::string Rfc3339(Clock::time_point t) {
  return FormatTimestamp(std::chrono::time_point_cast<std::chrono::seconds>(t));
}

std::optional<Clock::time_point> ParseTime(const std::string& text) {
  if (auto t = ParseTimestamp(text)) return FromEpoch(t->time_since_epoch().count());
  return std::nullopt;
}

}  // namespace

std::optional<DevActivity> ParseDevActivity(std::string_view output, std::string* why) {
  auto fail = [&](const std::string& reason) -> std::optional<DevActivity> {
    if (why) *why = reason;
    return std::nullopt;
  };
  // The pod writes this output and a privileged loop reads it: too deep is one more bad answer.
  Json j;
  try {
    j = internal::ParseJson(output, "the probe's answer");
  } catch (const DecodeError& e) {
    return fail(e.what());
  }
  if (!j.is_object()) return fail("the probe's answer is not a JSON object");
  if (!j.contains("now") || !j["now"].is_number_integer()) return fail("no clock in the answer");
  DevActivity a;
  auto now = FromEpoch(j["now"].get<std::int64_t>());
  if (!now) return fail("the clock in the answer is out of range");
  a.probed_at = *now;
  if (j.contains("ssh_sessions") && j["ssh_sessions"].is_number_integer()) {
    a.ssh_sessions = std::max(0, j["ssh_sessions"].get<int>());
  }
  if (j.contains("code_server_heartbeat") && j["code_server_heartbeat"].is_number_integer()) {
    a.code_server_heartbeat = FromEpoch(j["code_server_heartbeat"].get<std::int64_t>());
    if (!a.code_server_heartbeat) return fail("code-server's heartbeat is out of range");
  }
  if (j.contains("jupyter") && j["jupyter"].is_object()) {
    const Json& jup = j["jupyter"];
    if (jup.contains("last_activity") && jup["last_activity"].is_string()) {
      a.jupyter_last_activity = ParseTime(jup["last_activity"].get<std::string>());
      if (!a.jupyter_last_activity) return fail("Jupyter's last activity is not an RFC 3339 time");
    }
    if (jup.contains("kernels") && jup["kernels"].is_number_integer()) {
      a.jupyter_kernels = std::max(0, jup["kernels"].get<int>());
    }
    if (jup.contains("connections") && jup["connections"].is_number_integer()) {
      a.jupyter_connections = std::max(0, jup["connections"].get<int>());
    }
  }
  return a;
}

std::optional<AppliedIdlePolicy> IdlePolicyFor(const std::optional<DevIdlePolicy>& own,
                                               const DevCullOptions& options) {
  if (own)
    return AppliedIdlePolicy{own->after, "its own policy (idle.after " + own->AfterText() + ")"};
  if (options.policy_only) return std::nullopt;
  DevIdlePolicy fallback{options.idle_after};
  return AppliedIdlePolicy{options.idle_after,
                           "the culler's default (" + fallback.AfterText() + ")"};
}

void DecideCull(const AppliedIdlePolicy& policy, DevIdleAction action, const DevActivity& activity,
                DevCullDecision* decision) {
  auto idle = activity.Idle();
  if (activity.ActiveNow()) {  // no policy weighed: in use whatever the times say
    decision->outcome = "active";
    decision->reason = fmt::format("in use now ({} kernel(s), {} SSH session(s))",
                                   activity.jupyter_kernels, activity.ssh_sessions);
  } else if (idle < policy.after) {
    decision->outcome = "active";
    decision->reason = fmt::format("idle {}s, less than {}s of {}", idle.count(),
                                   policy.after.count(), policy.source);
  } else {
    decision->outcome = action == DevIdleAction::kReport ? "would-stop" : "stop";
    decision->reason =
        fmt::format("idle {}s since {}, at least {}s of {}", idle.count(),
                    Rfc3339(activity.LastActivity()), policy.after.count(), policy.source);
  }
}

}  // namespace internal

bool DevActivity::ActiveNow() const { return jupyter_kernels > 0 || ssh_sessions > 0; }

Clock::time_point DevActivity::LastActivity() const {
  if (ActiveNow()) return probed_at;
  Clock::time_point last{};
  for (const auto& t : {jupyter_last_activity, code_server_heartbeat, started, recorded}) {
    if (t && *t > last) last = *t;
  }
  // Nothing seen at all: idle since the probe (never culled on no evidence).
  if (last == Clock::time_point{}) return probed_at;
  return std::min(last, probed_at);
}

std::chrono::seconds DevActivity::Idle() const {
  return std::chrono::duration_cast<std::chrono::seconds>(probed_at - LastActivity());
}

Json DevActivity::ToJson() const {
  auto time = [](const std::optional<Clock::time_point>& t) -> Json {
    return t ? Json(internal::Rfc3339(*t)) : Json();
  };
  return {{"namespace", namespace_name},
          {"name", name},
          {"jupyter_last_activity", time(jupyter_last_activity)},
          {"jupyter_kernels", jupyter_kernels},
          {"jupyter_connections", jupyter_connections},
          {"ssh_sessions", ssh_sessions},
          {"code_server_heartbeat", time(code_server_heartbeat)},
          {"started", time(started)},
          {"recorded", time(recorded)},
          {"probed_at", internal::Rfc3339(probed_at)},
          {"last_activity", internal::Rfc3339(LastActivity())},
          {"idle_seconds", Idle().count()},
          {"active_now", ActiveNow()}};
}

std::string ToString(DevIdleAction action) {
  return action == DevIdleAction::kStop ? "stop" : "report";
}

Json DevCullDecision::ToJson() const {
  return {{"namespace", namespace_name},
          {"name", name},
          {"owner", owner},
          {"outcome", outcome},
          {"activity", activity ? activity->ToJson() : Json()},
          {"reason", reason}};
}

std::string FormatCullTable(const std::vector<DevCullDecision>& decisions) {
  const char* row = "{:<16} {:<24} {:<12} {:<11} {:>9}  {}\n";
  std::string out =
      fmt::format(fmt::runtime(row), "NAMESPACE", "NAME", "OWNER", "OUTCOME", "IDLE", "REASON");
  for (const auto& d : decisions) {
    std::string idle = d.activity ? fmt::format("{}s", d.activity->Idle().count()) : "-";
    out += fmt::format(fmt::runtime(row), d.namespace_name, d.name, d.owner, d.outcome, idle,
                       d.reason);
  }
  return out;
}

namespace {

// When the instance's container started, from its pod's status.
std::optional<Clock::time_point> ContainerStarted(const Json& pod) {
  const Json& statuses =
      pod.value("status", Json::object()).value("containerStatuses", Json::array());
  for (const auto& c : statuses) {
    if (c.value("name", "") != internal::kDevContainer) continue;
    const Json& running = c.value("state", Json::object()).value("running", Json::object());
    if (running.contains("startedAt") && running["startedAt"].is_string()) {
      return internal::ParseTime(running["startedAt"].get<std::string>());
    }
  }
  return std::nullopt;
}

DevInstanceStatus NotRunning(const std::string& reason) {
  DevInstanceStatus st;
  st.reason = reason;
  st.message = reason;
  return st;
}

}  // namespace

DevActivity DevInstance::Activity(std::chrono::milliseconds timeout) {
  const std::string& ns = spec_.namespace_name;
  const std::string pod_name = internal::DevPodName(spec_);
  auto pod = internal::GetOptional(client_, kPods, ns, pod_name);
  std::string phase = pod ? pod->value("status", Json::object()).value("phase", "") : "";
  if (phase != "Running") {
    std::string why = pod ? "its pod is " + phase : "it has no pod (stopped?)";
    throw DevInstanceFailed(
        fmt::format("DevInstance {}/{}: cannot read its activity: {}", ns, spec_.name, why),
        NotRunning(why));
  }
  ExecOptions o;
  o.container = internal::kDevContainer;
  o.timeout = timeout;
  ExecResult r = client_.Exec(ns, pod_name, {"/bin/sh", "-c", internal::DevActivityProbe()}, o);
  std::string why;
  std::optional<DevActivity> a;
  if (r.exit_code == 0) a = internal::ParseDevActivity(r.out, &why);
  if (!a) {
    if (r.exit_code != 0) why = fmt::format("the probe exited with {}: {}", r.exit_code, r.err);
    throw DevInstanceFailed(
        fmt::format("DevInstance {}/{}: cannot read its activity: {}", ns, spec_.name, why),
        NotRunning(why));
  }
  a->namespace_name = ns;
  a->name = spec_.name;
  a->started = ContainerStarted(*pod);
  if (auto sts = internal::GetOptional(client_, kStatefulSets, ns, spec_.name)) {
    a->recorded = internal::ParseTime(AnnotationOf(*sts, internal::kLastActivityAnnotation));
  }
  return *a;
}

std::vector<DevCullDecision> CullIdleDevInstances(Client client, const DevCullOptions& options) {
  if (!options.policy_only && options.idle_after.count() <= 0) {
    throw ValidationError("idle_after", std::to_string(options.idle_after.count()) + "s",
                          "must be positive");
  }
  std::vector<DevInstanceSummary> running;
  for (auto& s :
       DevInstance::List(client, options.namespace_name, options.owner, options.label_selector)) {
    if (s.running) running.push_back(std::move(s));
  }
  std::vector<DevCullDecision> out(running.size());
  internal::ForEachConcurrently(
      running.size(),
      [&](std::size_t i) {
        const DevInstanceSummary& s = running[i];
        DevCullDecision& d = out[i];
        d.namespace_name = s.namespace_name;
        d.name = s.name;
        d.owner = s.owner;
        std::optional<DevInstance> loaded;
        try {
          // Its identity checked against its StatefulSet: a stored spec naming another
          // instance is never acted on (its owner may edit it; the culler may stop anyone's).
          loaded.emplace(DevInstance::Load(client, s.namespace_name, s.name));
        } catch (const std::exception& e) {
          d.outcome = "unknown";
          d.reason = std::string("not acted on: ") + e.what();
          return;
        }
        DevInstance& instance = *loaded;
        try {
          auto policy = internal::IdlePolicyFor(instance.spec().idle, options);
          if (!policy) {  // not probed: nothing is read or written
            d.outcome = "skipped";
            d.reason = "no idle policy of its own, and the culler runs without a default";
            return;
          }
          DevActivity a = instance.Activity(options.probe_timeout);
          // Recorded only when it moves forward, and not by a dry run (which writes nothing).
          Clock::time_point last = a.LastActivity();
          std::string note;  // a failed record does not change the decision
          if (options.action == DevIdleAction::kStop && (!a.recorded || last > *a.recorded)) {
            try {
              client.Patch(kStatefulSets, s.namespace_name, s.name, PatchType::kMerge,
                           {{"metadata",
                             {{"annotations",
                               {{internal::kLastActivityAnnotation, internal::Rfc3339(last)}}}}}});
            } catch (const std::exception& e) {
              note = std::string("; recording the last activity failed: ") + e.what();
            }
          }
          d.activity = a;
          internal::DecideCull(*policy, options.action, a, &d);
          if (d.outcome == "stop") {
            try {
              instance.Stop();
              d.outcome = "stopped";
            } catch (const std::exception& e) {
              d.outcome = "unknown";
              d.reason += std::string("; stopping it failed: ") + e.what();
            }
          }
          d.reason += note;
        } catch (const DevInstanceFailed& e) {  // this instance only; the pass goes on
          d.outcome = "unknown";
          d.reason = e.what();
        } catch (const std::exception& e) {  // e.g. the exec refused (Forbidden, no kubelet)
          d.outcome = "unknown";
          d.reason = std::string("cannot read its activity: ") + e.what();
        }
      },
      8);
  return out;
}

}  // namespace tfk8s
