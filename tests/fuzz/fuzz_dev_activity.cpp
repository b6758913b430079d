// Harness: the DevInstance idle probe's answer (internal::ParseDevActivity,
// src/workloads/devinstance_idle.cpp). The probe runs inside the user's pod, so its output is
// whatever the pod's owner makes it print; the culler that reads it runs with cluster-wide
// rights. Then what the culler does with a parsed answer: DevActivity's LastActivity / Idle /
// ToJson, DecideCull and FormatCullTable.
// Properties: nothing throws (a bad answer is nullopt with a reason); counts are never
// negative; the idle time is never negative and LastActivity() is never after the probe's
// clock; in use now means idle 0 and "active"; DecideCull's outcome is one of its three.

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_util.hpp"
#include "workloads/devinstance_internal.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tfk8s::fuzz;
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::optional<tfk8s::DevActivity> activity;
  std::string why;
  try {
    activity = tfk8s::internal::ParseDevActivity(text, &why);
  } catch (const std::exception& e) {
    Fail("ParseDevActivity threw (it reports a bad answer as nullopt)", e.what());
  }
  if (!activity) {
    Check(!why.empty(), "ParseDevActivity refused an answer without a reason", text);
    return 0;
  }
  tfk8s::DevActivity& a = *activity;
  Check(a.ssh_sessions >= 0 && a.jupyter_kernels >= 0 && a.jupyter_connections >= 0,
        "a negative count", text);
  Check(!a.started && !a.recorded, "the probe's answer set started or recorded", text);
  // What the culler adds from the StatefulSet and the pod.
  a.started = std::chrono::system_clock::time_point{} + std::chrono::seconds(1);
  std::chrono::seconds idle{};
  Check(Guarded("DevActivity",
                [&] {
                  idle = a.Idle();
                  Check(a.LastActivity() <= a.probed_at, "last activity after the probe's clock",
                        text);
                  (void)a.ToJson().dump();
                }),
        "DevActivity's accessors threw", text);
  Check(idle.count() >= 0, "a negative idle time", text);
  if (a.ActiveNow()) Check(idle.count() == 0, "in use now but idle", text);

  for (auto action : {tfk8s::DevIdleAction::kStop, tfk8s::DevIdleAction::kReport}) {
    tfk8s::DevCullDecision decision;
    decision.activity = a;
    const tfk8s::internal::AppliedIdlePolicy policy{std::chrono::seconds(7200), "fuzz"};
    Check(Guarded("DecideCull",
                  [&] {
                    tfk8s::internal::DecideCull(policy, action, a, &decision);
                    (void)tfk8s::FormatCullTable({decision});
                    (void)decision.ToJson().dump();
                  }),
          "DecideCull threw", text);
    const bool stop = decision.outcome == "stop" || decision.outcome == "would-stop";
    Check(stop || decision.outcome == "active", "DecideCull's outcome is unknown",
          decision.outcome);
    if (a.ActiveNow()) Check(!stop, "an instance in use now would be stopped", text);
    if (stop) Check(idle >= policy.after, "stopped before the policy's idle time", text);
  }
  return 0;
}
