// ScheduledJob and ScheduledJobWatcher: the C++ classes with dicts in and out (the spec in
// ScheduledJobSpec::ToJson()'s format). tfk8s.ScheduledJob / tfk8s.ScheduledJobWatcher
// (python/tfk8s/scheduledjob.py) are the Pythonic front ends.
//
// WaitForRun runs on a worker thread calling ScheduledJob::WaitForRun in short slices (it has
// no cancellation hook); the caller waits without the GIL (WaitInSlices), so Ctrl-C stops it.
// The watcher's callback runs on the watcher's threads: it takes the GIL, and an exception it
// raises is reported to stderr (sys.unraisablehook) without stopping the watcher.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tfk8s/scheduledjob.hpp"
#include "workload_binding.hpp"
#include "workload_calls.hpp"

namespace tfk8s::python {

namespace {

using NoGil = py::call_guard<py::gil_scoped_release>;
using Ms = std::chrono::milliseconds;
using TimePoint = std::chrono::system_clock::time_point;

[[noreturn]] void RaiseStored(const std::exception_ptr& error) {
  RaiseInstance(ExceptionToPython(error));
}

template <typename F>
auto CallNoGil(F&& f) -> decltype(f()) {
  return CallWithoutGil(std::forward<F>(f), RaiseStored);
}

py::object WaitForRun(ScheduledJob& task, const std::string& run, std::optional<double> timeout,
                      const std::optional<py::function>& on_progress) {
  auto total = timeout ? Ms(static_cast<std::int64_t>(std::max(0.0, *timeout) * 1000.0))
                       : Ms(std::chrono::hours(24 * 365));
  return WaitWithProgress<JobRun>(
      [&](const auto& report, const auto& cancelled) {
        WaitOptions<JobRun> options;
        options.until = WaitUntil::kFinished;
        options.timeout = total;
        options.on_progress = report;
        options.cancelled = cancelled;
        return task.WaitForRun(run, options);
      },
      ToJsonOf<JobRun>, on_progress, RaiseStored);
}

/// Writes a line to Python's sys.stderr (GIL held).
void WriteStderr(const std::string& text) {
  try {
    py::module_::import("sys").attr("stderr").attr("write")(DecodeLenient(text + "\n"));
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("tfk8s.ScheduledJobWatcher");
  }
}

/// Reads the options dict that tfk8s.ScheduledJobWatcher builds from its keywords: a key that
/// is present overrides the value it is read into, converted as a keyword argument would be.
class OptionsDict {
 public:
  explicit OptionsDict(const py::dict& options) : options_(options) {}

  template <typename T>
  void Read(const char* key, T* out) {
    known_.emplace_back(key);
    if (!options_.contains(key)) return;
    try {
      *out = options_[key].template cast<T>();
    } catch (const py::cast_error&) {
      throw py::type_error(std::string("ScheduledJobWatcher: option '") + key +
                           "' has the wrong type");
    }
  }

  /// Whole seconds, from a number of seconds.
  void Read(const char* key, std::chrono::seconds* out) {
    auto seconds = static_cast<double>(out->count());
    Read(key, &seconds);
    *out = std::chrono::seconds(static_cast<std::int64_t>(seconds));
  }

  /// Raises TypeError for a key no Read() asked for (a misspelt option).
  void RejectUnknown() const {
    for (const auto& [key, value] : options_) {
      const auto name = py::str(key).cast<std::string>();
      if (std::find(known_.begin(), known_.end(), name) == known_.end()) {
        throw py::type_error("ScheduledJobWatcher: unknown option '" + name + "'");
      }
    }
  }

 private:
  const py::dict& options_;
  std::vector<std::string> known_;
};

/// The watcher's options from tfk8s.ScheduledJobWatcher's keywords (callbacks apart).
ScheduledJobWatcherOptions WatcherOptions(const py::dict& keywords) {
  OptionsDict in(keywords);
  ScheduledJobWatcherOptions options;
  in.Read("namespace", &options.namespace_name);
  in.Read("scheduled_job", &options.scheduled_job);
  std::optional<std::string> webhook_url;
  std::map<std::string, std::string> webhook_headers;
  bool webhook_allow_insecure_headers = false;
  in.Read("webhook_url", &webhook_url);
  in.Read("webhook_headers", &webhook_headers);
  in.Read("webhook_allow_insecure_headers", &webhook_allow_insecure_headers);
  if (webhook_url) {
    AlertWebhook webhook;
    webhook.url = *webhook_url;
    webhook.headers = std::move(webhook_headers);
    webhook.allow_insecure_headers = webhook_allow_insecure_headers;
    options.webhook = std::move(webhook);
  }
  in.Read("alert_on_failure", &options.alert_on_failure);
  in.Read("alert_on_timeout", &options.alert_on_timeout);
  in.Read("alert_on_missed_schedule", &options.alert_on_missed_schedule);
  in.Read("missed_schedule_grace", &options.missed_schedule_grace);
  in.Read("max_alert_age", &options.max_alert_age);
  in.Read("identity", &options.identity);
  in.Read("clean_up_tf_clusters", &options.clean_up_tf_clusters);
  in.Read("bound_history", &options.bound_history);
  in.RejectUnknown();
  return options;
}

/// The C++ watcher plus the Python callables it calls. The callables are owned here (not by
/// the C++ std::function) so that they are released with the GIL held, after the watcher's
/// threads are gone.
class PyWatcher {
 public:
  PyWatcher(Client client, ScheduledJobWatcherOptions options, py::object on_alert,
            py::object on_error)
      : on_alert_(std::move(on_alert)), on_error_(std::move(on_error)) {
    if (!on_alert_.is_none()) {
      options.on_alert = [this](const ScheduledJobAlert& alert) {
        py::gil_scoped_acquire gil;
        try {
          on_alert_(JsonToPython(alert.ToJson()));
        } catch (py::error_already_set& e) {
          // Never let the callback kill the watcher: report and go on.
          WriteStderr("tfk8s.ScheduledJobWatcher: exception in on_alert callback:");
          e.discard_as_unraisable("tfk8s.ScheduledJobWatcher on_alert");
        } catch (const std::exception& e) {
          WriteStderr(std::string("tfk8s.ScheduledJobWatcher: on_alert failed: ") + e.what());
        }
      };
    }
    options.on_error = [this](const std::string& message) {
      py::gil_scoped_acquire gil;
      if (on_error_.is_none()) {
        WriteStderr("tfk8s.ScheduledJobWatcher: " + message);
        return;
      }
      try {
        on_error_(DecodeLenient(message));
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("tfk8s.ScheduledJobWatcher on_error");
      }
    };
    watcher_ = std::make_unique<ScheduledJobWatcher>(std::move(client), std::move(options));
  }
  PyWatcher(const PyWatcher&) = delete;
  PyWatcher& operator=(const PyWatcher&) = delete;
  PyWatcher(PyWatcher&&) = delete;
  PyWatcher& operator=(PyWatcher&&) = delete;
  ~PyWatcher() {
    // The watcher's threads may be waiting for the GIL: release it while they are joined.
    py::gil_scoped_release release;
    watcher_.reset();
  }

  void Start() {
    py::gil_scoped_release release;
    watcher_->Start();
  }
  void Stop() {
    py::gil_scoped_release release;
    watcher_->Stop();
  }
  int AlertsSent() const { return watcher_->alerts_sent(); }
  int AlertsFailed() const { return watcher_->alerts_failed(); }
  void RaiseError() const {
    auto error = watcher_->error();
    if (error) RaiseStored(error);
  }

 private:
  py::object on_alert_;
  py::object on_error_;
  std::unique_ptr<ScheduledJobWatcher> watcher_;
};

}  // namespace

void BindScheduledJob(py::module_& m) {
  py::class_<ScheduledJob> cls(
      m, "ScheduledJob", "The C++ ScheduledJob with dicts in and out. Use tfk8s.ScheduledJob.");
  BindWorkloadSpine(cls, "task", RaiseStored);
  cls.def_static("list", &ScheduledJob::List, py::arg("client"), py::arg("namespace"), NoGil(),
                 "Names of the tasks in a namespace.")
      .def_static(
          "validate_schedule",
          [](const std::string& schedule, const std::string& time_zone) {
            ValidateCronSchedule(schedule, time_zone);
          },
          py::arg("schedule"), py::arg("time_zone") = "",
          "Raises ValidationError for a bad cron expression or time zone.")
      .def_property_readonly(
          "command_line", [](const ScheduledJob& t) { return t.spec().CommandLine(); },
          "The shell form of the command, for display.")
      .def(
          "apply",
          [](ScheduledJob& t, bool preflight, bool dry_run,
             const std::string& pod_security_admission) {
            PodSecurityWarnings warnings(pod_security_admission);
            ApplyScheduleOptions options;
            options.preflight = preflight;
            options.dry_run = dry_run;
            options.pod_security = warnings.Options();
            auto cronjob = CallNoGil([&] { return t.Apply(options); });
            warnings.Emit();
            return cronjob;
          },
          py::arg("preflight") = true, py::arg("dry_run") = false,
          py::arg("pod_security_admission") = "refuse",
          "Creates or updates the CronJob; returns it.")
      .def(
          "run_now",
          [](ScheduledJob& t, const std::string& job_name,
             const std::map<std::string, std::string>& pod_annotations, bool preflight,
             bool dry_run, const std::string& pod_security_admission) {
            PodSecurityWarnings warnings(pod_security_admission);
            RunOptions options;
            options.job_name = job_name;
            options.pod_annotations = pod_annotations;
            options.preflight = preflight;
            options.dry_run = dry_run;
            options.pod_security = warnings.Options();
            auto run = CallNoGil([&] { return t.RunNow(options); }).ToJson();
            warnings.Emit();
            return run;
          },
          py::arg("job_name") = "",
          py::arg("pod_annotations") = std::map<std::string, std::string>{},
          py::arg("preflight") = true, py::arg("dry_run") = false,
          py::arg("pod_security_admission") = "refuse", "Starts a run; returns it.")
      .def("suspend", &ScheduledJob::Suspend, NoGil())
      .def("resume", &ScheduledJob::Resume, NoGil())
      .def(
          "delete",
          [](ScheduledJob& t, bool foreground, bool keep_runs, std::optional<double> wait) {
            ScheduledJobDeleteOptions options;
            options.foreground = foreground;
            options.keep_runs = keep_runs;
            if (wait) options.wait = Ms(static_cast<std::int64_t>(std::max(0.0, *wait) * 1000));
            CallNoGil([&] { t.Delete(options); });
          },
          py::arg("foreground") = false, py::arg("keep_runs") = false, py::arg("wait") = py::none(),
          "Deletes the CronJob and its runs.")
      .def(
          "history",
          [](ScheduledJob& t) { return ToJsonList(CallNoGil([&] { return t.History(); })); },
          "Every run still on the server, oldest first.")
      .def(
          "get_run",
          [](ScheduledJob& t, const std::string& run) {
            return CallNoGil([&] { return t.GetRun(run); }).ToJson();
          },
          py::arg("run"), "One run by Job name.")
      .def("wait_for_run", &WaitForRun, py::arg("run"), py::arg("timeout") = py::none(),
           py::arg("on_progress") = py::none(),
           "Waits on a worker thread until the run finished; Ctrl-C cancels it. Raises Timeout.")
      .def(
          "logs",
          [](ScheduledJob& t, const std::string& run, std::optional<std::int64_t> tail_lines,
             bool timestamps) {
            WorkloadLogOptions options;
            options.source = run;
            options.tail_lines = tail_lines;
            options.timestamps = timestamps;
            auto logs = CallNoGil([&] { return t.Logs(options); });
            py::list out;
            for (const auto& a : logs) {
              py::dict d;
              d["attempt"] = a.attempt;
              d["pod"] = a.pod;
              d["phase"] = a.phase;
              d["exit_code"] = a.exit_code ? py::object(py::int_(*a.exit_code)) : py::none();
              d["text"] = DecodeLenient(a.text);
              out.append(d);
            }
            return out;
          },
          py::arg("run"), py::arg("tail_lines") = py::none(), py::arg("timestamps") = false,
          "Logs of every attempt: dicts {attempt, pod, phase, exit_code, text}.")
      .def(
          "stream_logs",
          [](ScheduledJob& t, const std::string& run, bool follow, double pending_wait) {
            WorkloadLogOptions options;
            options.source = run;
            options.follow = follow;
            options.pending_wait = std::chrono::milliseconds(
                static_cast<std::int64_t>(std::max(0.0, pending_wait) * 1000.0));
            return WrapWorkloadLogs(t.StreamLogs(std::move(options)));
          },
          py::arg("run"), py::arg("follow") = true, py::arg("pending_wait") = 120.0,
          "A run's logs as a WorkloadLogs iterator of (attempt, line); with `follow`, until the "
          "run finished (waiting up to `pending_wait` seconds for an attempt to start).");

  py::class_<PyWatcher>(m, "ScheduledJobWatcher",
                        "The C++ ScheduledJobWatcher. Use tfk8s.ScheduledJobWatcher.")
      .def(py::init([](Client client, const py::dict& options, py::object on_alert,
                       py::object on_error) {
             return std::make_unique<PyWatcher>(std::move(client), WatcherOptions(options),
                                                std::move(on_alert), std::move(on_error));
           }),
           py::arg("client"), py::arg("options"), py::arg("on_alert") = py::none(),
           py::arg("on_error") = py::none(),
           "`options`: the keywords of tfk8s.ScheduledJobWatcher (namespace, scheduled_job, "
           "webhook_url, ...); an absent one keeps the C++ default.")
      .def("start", &PyWatcher::Start, "Runs the watcher on a background thread.")
      .def("stop", &PyWatcher::Stop, "Stops the background thread (idempotent).")
      .def_property_readonly("alerts_sent", &PyWatcher::AlertsSent)
      .def_property_readonly("alerts_failed", &PyWatcher::AlertsFailed)
      .def("raise_error", &PyWatcher::RaiseError,
           "Raises the error that ended the background thread, if any.");
}

}  // namespace tfk8s::python
