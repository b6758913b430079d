#pragma once
// Shared by the workload bindings (TFCluster, DevInstance, ScheduledJob): raising a stored C++
// error as its Python exception (with the workload's status attached), calling without the GIL,
// and a blocking wait that runs on a worker thread while the Python thread reports progress and
// stays responsive to Ctrl-C.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "tfk8s/pod_security.hpp"

namespace tfk8s::python {

/// Raises `instance` (a Python exception object) as the current Python exception.
[[noreturn]] inline void RaiseInstance(const py::object& instance) {
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
  throw py::error_already_set();
}

/// Raises the Python exception for `error`; a `Failed` (a workload's failure carrying a status)
/// becomes tfk8s.WorkloadFailed with `.status` set to `to_json(status)` as a dict.
template <typename Failed, typename ToJson>
[[noreturn]] void RaiseWithStatus(const std::exception_ptr& error, ToJson&& to_json) {
  py::object instance;
  try {
    std::rethrow_exception(error);
  } catch (const Failed& e) {
    instance = ErrorToPython(e);
    instance.attr("status") = JsonToPython(to_json(e.status()));
  } catch (...) {
    instance = ExceptionToPython(std::current_exception());
  }
  RaiseInstance(instance);
}

/// Runs f() without the GIL; an exception is raised, with the GIL held again, by raise(error),
/// which must throw.
template <typename F, typename Raise>
auto CallWithoutGil(F&& f, Raise&& raise) -> decltype(f()) {
  std::exception_ptr error;
  {
    py::gil_scoped_release release;
    try {
      return f();
    } catch (...) {
      error = std::current_exception();
    }
  }
  raise(error);
  std::terminate();  // raise() always throws
}

/// Runs run(report, cancelled) -- a blocking C++ wait that calls report(status) with updates
/// and stops when cancelled() is true -- on a worker thread. Meanwhile this thread waits without
/// the GIL, hands each new update to on_progress as the dict to_json(status) (repeats of the
/// last one are dropped) and runs Python's signal handlers: Ctrl-C or an exception from
/// on_progress cancels and joins the worker, then propagates. Returns to_json(result); the
/// wait's error is raised by raise(error).
template <typename Status, typename Run, typename ToJson, typename Raise>
py::object WaitWithProgress(Run&& run, ToJson&& to_json,
                            const std::optional<py::function>& on_progress, Raise&& raise) {
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    bool done = false;
    std::exception_ptr error;
    Status result;
    std::optional<Status> progress;  // the latest update not yet handed to Python
    std::atomic<bool> cancelled{false};
  };
  auto state = std::make_shared<State>();
  std::thread worker([state, &run] {
    auto report = [state](const Status& s) {
      std::lock_guard lock(state->mutex);
      state->progress = s;
      state->changed.notify_all();
    };
    auto cancelled = [state] { return state->cancelled.load(); };
    try {
      auto result = run(report, cancelled);
      std::lock_guard lock(state->mutex);
      state->result = std::move(result);
    } catch (...) {
      std::lock_guard lock(state->mutex);
      state->error = std::current_exception();
    }
    std::lock_guard lock(state->mutex);
    state->done = true;
    state->changed.notify_all();
  });
  std::string last;
  try {
    while (true) {
      // Wake for an update or the end; the timeout is the C++ wait's own.
      auto update = WaitInSlices(
          std::nullopt,
          [&](std::chrono::milliseconds slice) -> std::optional<Status> {
            std::unique_lock lock(state->mutex);
            state->changed.wait_for(lock, slice,
                                    [&] { return state->done || state->progress.has_value(); });
            std::optional<Status> s = std::move(state->progress);
            state->progress.reset();
            return s;
          },
          [&] {
            std::lock_guard lock(state->mutex);
            return state->done;
          });
      if (update && on_progress) {
        nlohmann::json j = to_json(*update);
        std::string key = j.dump();
        if (key != last) {
          last = std::move(key);
          (*on_progress)(JsonToPython(j));
        }
      }
      std::lock_guard lock(state->mutex);
      if (state->done && !state->progress) break;
    }
  } catch (...) {
    state->cancelled = true;  // KeyboardInterrupt or an exception from on_progress
    {
      py::gil_scoped_release release;
      worker.join();
    }
    throw;
  }
  {
    py::gil_scoped_release release;
    worker.join();
  }
  if (state->error) raise(state->error);
  return JsonToPython(to_json(state->result));
}

/// The Pod Security pre-flight of a workload call made from Python (`pod_security_admission`
/// "refuse" or "warn"): Options() collects the warnings while the call runs without the GIL;
/// Emit(), with the GIL held again after the call, issues each as a tfk8s.PodSecurityWarning.
class PodSecurityWarnings {
 public:
  explicit PodSecurityWarnings(const std::string& admission) {
    if (admission == "warn") {
      admission_ = PodSecurityAdmission::kWarn;
    } else if (admission != "refuse") {
      throw ValidationError("pod_security_admission", admission, "must be 'refuse' or 'warn'");
    }
  }
  PodSecurityPreflight Options() {
    PodSecurityPreflight options;
    options.admission = admission_;
    auto lines = lines_;
    options.on_warning = [lines](const std::string& line) { lines->push_back(line); };
    return options;
  }
  void Emit() const {
    if (lines_->empty()) return;
    py::object category = py::module_::import("tfk8s._core").attr("PodSecurityWarning");
    for (const auto& line : *lines_) {
      if (PyErr_WarnEx(category.ptr(), line.c_str(), 2) != 0) throw py::error_already_set();
    }
  }

 private:
  PodSecurityAdmission admission_ = PodSecurityAdmission::kRefuse;
  std::shared_ptr<std::vector<std::string>> lines_ = std::make_shared<std::vector<std::string>>();
};

}  // namespace tfk8s::python
