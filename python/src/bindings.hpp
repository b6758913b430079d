#pragma once
// Shared declarations of the tfk8s._core bindings: one Bind* function per area (each in its own
// bind_<area>.cpp), the nlohmann::json <-> Python conversion and the error translation.
//
// Adding a workload (TFCluster, Quota, ...) is one new bind_<area>.cpp with a Bind<Area>()
// declared here and called from module.cpp.

#include <pybind11/pybind11.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "tfk8s/devinstance.hpp"
#include "tfk8s/error.hpp"
#include "tfk8s/workload.hpp"

namespace tfk8s {
struct FitResult;
}  // namespace tfk8s

namespace tfk8s::python {

namespace py = pybind11;

/// A result type's ToJson() (the one conversion path: the library converts, bindings return).
template <typename T>
nlohmann::json ToJsonOf(const T& value) {
  return value.ToJson();
}
/// The password and access of a DevInstance start or a TFCluster session (the Python record
/// keeps the password out of repr).
inline nlohmann::json StartToJson(const DevStartResult& r) {
  return {{"password", r.password}, {"access", r.access.ToJson()}};
}
/// [ToJson() of each].
template <typename T>
nlohmann::json ToJsonList(const std::vector<T>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : values) out.push_back(v.ToJson());
  return out;
}

// ---- areas ----------------------------------------------------------------------------------
/// Exception classes (tfk8s.Error and subclasses), StatusCause and the exception translator.
void BindErrors(py::module_& m);
/// Quantity.
void BindQuantity(py::module_& m);
/// Name and label validation (tfk8s::validation).
void BindValidation(py::module_& m);
/// ClientConfig, ExecConfig, RetryPolicy, RateLimit and the loaders.
void BindConfig(py::module_& m);
/// ResourceType, the option structs and Client (everything but streams).
void BindClient(py::module_& m);
/// WatchStream, LogStream, Informer and the Client methods that open them.
void BindStreams(py::module_& m);
/// Client.exec and Client.port_forward, PortForward (bind_pod_streams.cpp).
void BindPodStreams(py::module_& m);
/// TFCluster and its log iterator (bind_tfcluster.cpp).
void BindTFCluster(py::module_& m);
/// Queues, quota usage, pre-flight checks and node placement (bind_quota.cpp).
void BindQuota(py::module_& m);
/// DevInstance, its access info and the volume-sharing helpers (bind_devinstance.cpp).
void BindDevInstance(py::module_& m);
/// ScheduledJob and ScheduledJobWatcher (bind_scheduledjob.cpp).
void BindScheduledJob(py::module_& m);
/// Fleet: the live in-memory view of every workload (bind_fleet.cpp).
void BindFleet(py::module_& m);
/// check_pod_security(): the Pod Security Standards checker (bind_pod_security.cpp).
void BindPodSecurity(py::module_& m);
void BindTesting(py::module_& m);  ///< FakeCluster, the test seam (bind_testing.cpp).
/// json_roundtrip(): the JSON conversion on its own, for tests and benchmarks.
void BindJson(py::module_& m);

// ---- JSON -----------------------------------------------------------------------------------
/// Converts JSON to the equivalent Python object (dict, list, str, int, float, bool, None).
py::object JsonToPython(const nlohmann::json& value);
/// Decodes JSON text (a server's answer) straight into Python objects; "" gives {}. Text that
/// is not JSON raises tfk8s.TransportError naming `context` (e.g. "list pods default").
py::object JsonTextToPython(std::string text, const std::string& context);
/// Converts a Python object to JSON: dict and other mappings with str keys, list, tuple, str,
/// int, float, bool, None, tfk8s.Quantity (as its string) and any object with a to_dict()
/// method. Raises TypeError/ValueError naming the path of the offending value.
nlohmann::json PythonToJson(py::handle object);

// ---- errors ---------------------------------------------------------------------------------
/// The Python exception instance (of the class matching e.kind()) carrying e's attributes.
py::object ErrorToPython(const Error& e);
/// Converts a stored exception (a tfk8s::Error or anything else) to a Python exception instance.
py::object ExceptionToPython(const std::exception_ptr& error);

/// An informer's failure as a dict: InformerFailure::ToJson() plus "error", the exception
/// instance (bind_streams.cpp; the Fleet's errors use it too).
py::dict FailureToPython(const InformerFailure& failure);

// ---- workload logs ----------------------------------------------------------------------------
/// A WorkloadLogStream as a Python _core.WorkloadLogs iterator of (source, line) tuples
/// (bind_streams.cpp, which binds the type before the workloads use it).
py::object WrapWorkloadLogs(WorkloadLogStream stream);

// ---- text -----------------------------------------------------------------------------------
/// Decodes UTF-8 that did not come from a JSON parser (logs): invalid bytes become U+FFFD.
py::str DecodeLenient(std::string_view text);

// ---- waiting --------------------------------------------------------------------------------
/// How long one wait without the GIL may last before checking for KeyboardInterrupt.
inline constexpr std::chrono::milliseconds kWaitSlice{100};

/// Calls poll(slice) without the GIL, in slices of at most kWaitSlice, until it returns a value,
/// `finished()` becomes true or `timeout` (seconds; nullopt = no limit) passes. Between slices
/// it runs Python's signal handlers, so Ctrl-C raises KeyboardInterrupt promptly.
template <typename Poll, typename Finished>
auto WaitInSlices(std::optional<double> timeout, Poll&& poll, Finished&& finished)
    -> decltype(poll(kWaitSlice)) {
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> deadline;
  if (timeout) {
    deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(std::max(0.0, *timeout)));
  }
  while (true) {
    auto slice = kWaitSlice;
    if (deadline) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
      slice = std::clamp(left, std::chrono::milliseconds(1), kWaitSlice);
    }
    decltype(poll(slice)) result;
    {
      py::gil_scoped_release release;
      result = poll(slice);
    }
    if (result || finished()) return result;
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    if (deadline && Clock::now() >= *deadline) return result;
  }
}

}  // namespace tfk8s::python

// ---- nlohmann::json as a pybind11 type: dicts and lists cross directly -------------------------
namespace pybind11::detail {

template <>
struct type_caster<nlohmann::json> {
 public:
  PYBIND11_TYPE_CASTER(nlohmann::json, const_name("Any"));

  bool load(handle src, bool /*convert*/) {
    value = tfk8s::python::PythonToJson(src);
    return true;
  }

  static handle cast(const nlohmann::json& src, return_value_policy /*policy*/, handle /*parent*/) {
    return tfk8s::python::JsonToPython(src).release();
  }
};

}  // namespace pybind11::detail
