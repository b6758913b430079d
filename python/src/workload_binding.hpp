#pragma once
// The Python side of the workload spine: one binding per member of tfk8s::Workload<Kind>
// (construction, load, list, list_refs, validate_spec, spec, preflight, status, wait, render,
// to_yaml), written once and instantiated per kind. Each kind's bind_*.cpp adds only its own
// verbs (apply, scale, start, run_now…). See docs/adr/0002-workload-spine.md.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <utility>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "workload_calls.hpp"

namespace tfk8s::python {

/// A wait's timeout in seconds (None: a year).
inline std::chrono::milliseconds WaitTimeout(std::optional<double> seconds) {
  return seconds ? std::chrono::milliseconds(
                       static_cast<std::int64_t>(std::max(0.0, *seconds) * 1000.0))
                 : std::chrono::milliseconds(std::chrono::hours(24 * 365));
}

/// "ready" / "finished".
inline WaitUntil ParseWaitUntil(const std::string& until) {
  if (until == "ready") return WaitUntil::kReady;
  if (until == "finished") return WaitUntil::kFinished;
  throw ValidationError("until", until, "must be \"ready\" or \"finished\"");
}

/// Binds the shared life of workload class `W` (a Workload<Kind>) on `cls`. `raise` raises a
/// stored C++ error as its Python exception (the kind's failure as tfk8s.WorkloadFailed with
/// `.status`) and must throw; `noun` names the kind in docstrings ("cluster").
template <typename W>
void BindWorkloadSpine(py::class_<W>& cls, const char* noun,
                       void (*raise)(const std::exception_ptr&)) {
  using Spec = typename W::SpecType;
  using Status = typename W::StatusType;
  const std::string a = noun;
  cls.def(py::init([](Client client, const Json& spec) {
            return W(std::move(client), Spec::FromJson(spec));
          }),
          py::arg("client"), py::arg("spec"),
          "Reads the spec dict (defaults and inference filled in by the C++ FromJson) and "
          "validates it; sends nothing.")
      .def_static(
          "load",
          [raise](Client client, const std::string& ns, const std::string& name) {
            return CallWithoutGil([&] { return W::Load(std::move(client), ns, name); }, raise);
          },
          py::arg("client"), py::arg("namespace"), py::arg("name"),
          ("Loads an existing " + a + " from its root object.").c_str())
      .def_static(
          "list_refs",
          [raise](Client client, const std::string& ns, const std::string& owner,
                  const std::string& label_selector) {
            return ToJsonList(CallWithoutGil(
                [&] { return W::ListRefs(std::move(client), ns, owner, label_selector); }, raise));
          },
          py::arg("client"), py::arg("namespace") = "", py::arg("owner") = "",
          py::arg("label_selector") = "",
          "[{namespace, name, owner}] in a namespace (\"\" = every namespace), of owner only "
          "when given, of the label selector only when given (selected by the server).")
      .def_static(
          "validate_spec", [](const Json& spec) { Spec::FromJson(spec).Validate(); },
          py::arg("spec"), "Raises ValidationError when the spec is invalid.")
      .def_property(
          "spec", [](const W& w) { return w.spec().ToJson(); },
          [](W& w, const Json& spec) { w.set_spec(Spec::FromJson(spec)); },
          "The spec as a dict; setting it validates (same name, namespace and owner).")
      .def(
          "preflight",
          [raise](W& w) { return CallWithoutGil([&] { return w.Preflight(); }, raise).ToJson(); },
          "Quota headroom, node placement and the kind's own checks, as {fits, shortfalls, "
          "problems, notes, message}.")
      .def(
          "status",
          [raise](W& w) { return CallWithoutGil([&] { return w.Status(); }, raise).ToJson(); },
          "The status as a dict.")
      .def(
          "render",
          [raise](const W& w) { return CallWithoutGil([&] { return w.Render(); }, raise); },
          "Every object apply sends, as dicts (sends at most discovery requests).")
      .def(
          "render_for_apply",
          [raise](const W& w) { return CallWithoutGil([&] { return w.RenderForApply(); }, raise); },
          "What kubectl apply should get: render(), owned by the root when it exists (one GET); "
          "an on-demand run named from its content.")
      .def(
          "to_yaml",
          [raise](const W& w) { return CallWithoutGil([&] { return w.ToYaml(); }, raise); },
          "render() as a YAML stream for kubectl apply -f.");
  if constexpr (requires(W & w, const WaitOptions<Status>& o) { w.Wait(o); }) {
    cls.def(
        "wait",
        [raise](W& w, const std::string& until, std::optional<double> timeout,
                const std::optional<py::function>& on_progress) {
          const WaitUntil what = ParseWaitUntil(until);
          return WaitWithProgress<Status>(
              [&](const auto& report, const auto& cancelled) {
                return w.Wait({.until = what,
                               .timeout = WaitTimeout(timeout),
                               .on_progress = report,
                               .cancelled = cancelled});
              },
              ToJsonOf<Status>, on_progress, raise);
        },
        py::arg("until") = "ready", py::arg("timeout") = py::none(),
        py::arg("on_progress") = py::none(),
        "Waits on a worker thread until 'ready' or 'finished'; Ctrl-C cancels it. Raises "
        "WorkloadFailed (with .status) when the workload fails or cannot start.");
  }
}

}  // namespace tfk8s::python
