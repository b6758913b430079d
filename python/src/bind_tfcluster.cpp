// TFCluster: the C++ class with dicts in and out (the spec in TFClusterSpec::ToJson()'s format).
// tfk8s.TFCluster (python/tfk8s/tfcluster.py) is the Pythonic front end.
//
// Long waits (Wait, Logs) run on a worker thread; the calling thread waits for it without the
// GIL, in slices (WaitInSlices), so Ctrl-C raises KeyboardInterrupt promptly and stops the
// worker through its cancellation hook.

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tfk8s/tfcluster.hpp"
#include "workload_binding.hpp"
#include "workload_calls.hpp"

namespace tfk8s::python {

namespace {

using NoGil = py::call_guard<py::gil_scoped_release>;

/// Raises the Python exception for `error`; a TFClusterFailed becomes tfk8s.WorkloadFailed with
/// `.status` set to the status dict.
[[noreturn]] void RaiseStored(const std::exception_ptr& error) {
  RaiseWithStatus<TFClusterFailed>(error, ToJsonOf<TFClusterStatus>);
}

/// Runs f() without the GIL; a TFClusterFailed becomes WorkloadFailed with `.status`.
template <typename F>
auto CallNoGil(F&& f) -> decltype(f()) {
  return CallWithoutGil(std::forward<F>(f), RaiseStored);
}

}  // namespace

void BindTFCluster(py::module_& m) {
  py::class_<TFCluster> cls(m, "TFCluster",
                            "The C++ TFCluster with dicts in and out. Use tfk8s.TFCluster.");
  BindWorkloadSpine(cls, "cluster", RaiseStored);
  cls.def_static("list", &TFCluster::List, py::arg("client"), py::arg("namespace"), NoGil(),
                 "Names of the clusters in a namespace.")
      .def(
          "apply",
          [](TFCluster& c, bool dry_run, bool preflight, bool prune,
             const std::string& pod_security_admission) {
            PodSecurityWarnings warnings(pod_security_admission);
            TFApplyOptions options;
            options.dry_run = dry_run;
            options.preflight = preflight;
            options.prune = prune;
            options.pod_security = warnings.Options();
            auto objects = CallNoGil([&] { return c.Apply(options); });
            warnings.Emit();
            return objects;
          },
          py::arg("dry_run") = false, py::arg("preflight") = true, py::arg("prune") = true,
          py::arg("pod_security_admission") = "refuse",
          "Creates or updates every object; returns them.")
      .def(
          "scale",
          [](TFCluster& c, const std::string& role, int replicas, bool preflight) {
            TFApplyOptions options;
            options.preflight = preflight;
            CallNoGil([&] { c.Scale(role, replicas, options); });
          },
          py::arg("role"), py::arg("replicas"), py::arg("preflight") = true)
      .def(
          "logs",
          [](TFCluster& c, const std::string& role, int index, bool follow,
             std::optional<std::int64_t> tail_lines, std::optional<std::int64_t> since_seconds,
             bool timestamps) {
            WorkloadLogOptions options;
            options.source = index >= 0 ? role + "-" + std::to_string(index) : role;
            options.follow = follow;
            options.tail_lines = tail_lines;
            options.since_seconds = since_seconds;
            options.timestamps = timestamps;
            return WrapWorkloadLogs(c.StreamLogs(std::move(options)));
          },
          py::arg("role") = "", py::arg("index") = -1, py::arg("follow") = false,
          py::arg("tail_lines") = py::none(), py::arg("since_seconds") = py::none(),
          py::arg("timestamps") = false,
          "Starts reading logs; returns a WorkloadLogs iterator of (replica, line).")
      .def(
          "delete",
          [](TFCluster& c, bool foreground, bool keep_storage, std::optional<double> wait) {
            TFDeleteOptions options;
            options.foreground = foreground;
            options.keep_storage = keep_storage;
            if (wait) {
              options.wait =
                  std::chrono::milliseconds(static_cast<std::int64_t>(std::max(0.0, *wait) * 1000));
            }
            c.Delete(options);
          },
          py::arg("foreground") = false, py::arg("keep_storage") = false,
          py::arg("wait") = py::none(), NoGil(),
          "Deletes the cluster (cascading); `wait` seconds for every object to be gone.")
      .def("clean_up_after_success", &TFCluster::CleanUpAfterSuccess, NoGil())
      .def(
          "session",
          [](TFCluster& c) { return StartToJson(CallNoGil([&] { return c.Session(); })); },
          "The session's password and access (Jupyter and SSH).");
}

}  // namespace tfk8s::python
