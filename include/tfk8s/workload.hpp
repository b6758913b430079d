#pragma once
/// @file
/// What every workload's lifecycle shares: the options of a wait. A wait is driven by watches
/// (no polling), reports progress, and can be cancelled from another thread.

#include <chrono>
#include <functional>

namespace tfk8s {

/// What a wait waits for.
enum class WaitUntil {
  kReady,     ///< Running and ready (a TFCluster: every replica; a DevInstance: its tools).
  kFinished,  ///< Done, successfully or not (a TFCluster's chief; a ScheduledJob's run).
};

/// Options of a workload's wait (TFCluster::Wait, DevInstance::Wait,
/// ScheduledJob::WaitForRun). `Status` is the workload's status type.
template <typename Status>
struct WaitOptions {
  /// What to wait for (a ScheduledJob run always waits until it finished).
  WaitUntil until = WaitUntil::kReady;
  /// How long at most; the Timeout error then names this whole duration.
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  /// Called with each new status (repeats dropped), from the waiting thread.
  std::function<void(const Status&)> on_progress;
  /// Asked at least once a second; returning true ends the wait with CancelledError. The
  /// watches stay open for the whole wait.
  std::function<bool()> cancelled;
};

}  // namespace tfk8s
