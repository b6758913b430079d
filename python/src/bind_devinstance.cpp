// DevInstance: the C++ class with dicts in and out (the spec in DevInstanceSpec::ToJson()'s
// format). tfk8s.DevInstance (python/tfk8s/devinstance.py) is the Pythonic front end.
//
// Wait runs on a worker thread that calls DevInstance::Wait in short slices (it has no
// cancellation hook of its own); the calling thread waits without the GIL (WaitInSlices), so
// Ctrl-C raises KeyboardInterrupt within about a slice and the worker is joined, never leaked.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.hpp"
#include "tfk8s/devinstance.hpp"
#include "workload_binding.hpp"
#include "workload_calls.hpp"

namespace tfk8s::python {

namespace {

using NoGil = py::call_guard<py::gil_scoped_release>;
using Ms = std::chrono::milliseconds;

/// Raises the Python exception for `error`; a DevInstanceFailed becomes tfk8s.WorkloadFailed
/// with `.status` set to the status dict.
[[noreturn]] void RaiseStored(const std::exception_ptr& error) {
  RaiseWithStatus<DevInstanceFailed>(error, ToJsonOf<DevInstanceStatus>);
}

template <typename F>
auto CallNoGil(F&& f) -> decltype(f()) {
  return CallWithoutGil(std::forward<F>(f), RaiseStored);
}

DevShareMode ParseShareMode(const std::string& mode) {
  if (mode == "ro") return DevShareMode::kReadOnly;
  if (mode == "rw") return DevShareMode::kReadWrite;
  throw ValidationError("mode", mode, "must be \"ro\" or \"rw\"");
}

// The class: construction, loading, listing and the spec.
py::class_<DevInstance> BindDevInstanceClass(py::module_& m) {
  py::class_<DevInstance> cls(m, "DevInstance",
                              "The C++ DevInstance with dicts in and out. Use tfk8s.DevInstance.");
  BindWorkloadSpine(cls, "instance", RaiseStored);
  cls.def_static(
      "list",
      [](Client client, const std::string& ns, const std::string& owner) {
        std::vector<DevInstanceSummary> rows;
        {
          py::gil_scoped_release release;
          rows = DevInstance::List(std::move(client), ns, owner);
        }
        Json out = Json::array();
        for (const auto& r : rows) {
          out.push_back({{"namespace", r.namespace_name},
                         {"name", r.name},
                         {"owner", r.owner},
                         {"image", r.image},
                         {"running", r.running},
                         {"ready", r.ready},
                         {"created", r.created}});
        }
        return out;
      },
      py::arg("client"), py::arg("namespace"), py::arg("owner") = "",
      "Instances in a namespace (\"\" = all) as dicts, optionally only one owner's.");
  return cls;
}

// Create, apply, start, stop, restart, delete.
void BindDevLifecycle(py::class_<DevInstance>& cls) {
  cls.def(
         "create",
         [](DevInstance& d, bool start, bool preflight, const std::string& pod_security_admission) {
           PodSecurityWarnings warnings(pod_security_admission);
           DevCreateOptions options;
           options.start = start;
           options.preflight = preflight;
           options.pod_security = warnings.Options();
           auto started = StartToJson(CallNoGil([&] { return d.Create(options); }));
           warnings.Emit();
           return started;
         },
         py::arg("start") = true, py::arg("preflight") = true,
         py::arg("pod_security_admission") = "refuse",
         "Creates the instance; returns {password, access} (the only copy of the password).")
      .def(
          "apply", [](DevInstance& d) { CallNoGil([&] { d.Apply(); }); },
          "Converges an existing instance to the spec (keeps its password and state).")
      .def(
          "start",
          [](DevInstance& d, bool preflight) {
            DevStartOptions options;
            options.preflight = preflight;
            return StartToJson(CallNoGil([&] { return d.Start(options); }));
          },
          py::arg("preflight") = true, "Starts with a fresh password; returns {password, access}.")
      .def(
          "stop",
          [](DevInstance& d, bool keep_ports) {
            DevStopOptions options;
            options.keep_ports = keep_ports;
            CallNoGil([&] { d.Stop(options); });
          },
          py::arg("keep_ports") = false, "Stops the instance (replicas 0); volumes are kept.")
      .def(
          "restart",
          [](DevInstance& d, bool preflight) {
            DevStartOptions options;
            options.preflight = preflight;
            return StartToJson(CallNoGil([&] { return d.Restart(options); }));
          },
          py::arg("preflight") = true,
          "A fresh password and a new pod; returns {password, access}.")
      .def(
          "delete",
          [](DevInstance& d, bool delete_home_volume, std::optional<double> wait) {
            DevDeleteOptions options;
            options.delete_home_volume = delete_home_volume;
            if (wait) options.wait = Ms(static_cast<std::int64_t>(std::max(0.0, *wait) * 1000));
            CallNoGil([&] { d.Delete(options); });
          },
          py::arg("delete_home_volume") = false, py::arg("wait") = py::none(),
          "Deletes the instance; `wait` seconds for it to be gone.");
}

// Access, logs and activity (status, wait and rendering are the spine's).
void BindDevObservers(py::class_<DevInstance>& cls) {
  cls.def(
         "access", [](DevInstance& d) { return CallNoGil([&] { return d.Access(); }).ToJson(); },
         "{user, endpoints, table}: where each tool is reached (no password).")
      .def(
          "logs",
          [](const DevInstance& d, bool follow, std::optional<std::int64_t> tail_lines,
             std::optional<std::int64_t> since_seconds, bool timestamps) {
            WorkloadLogOptions options;
            options.follow = follow;
            options.tail_lines = tail_lines;
            options.since_seconds = since_seconds;
            options.timestamps = timestamps;
            return WrapWorkloadLogs(d.StreamLogs(std::move(options)));
          },
          py::arg("follow") = false, py::arg("tail_lines") = py::none(),
          py::arg("since_seconds") = py::none(), py::arg("timestamps") = false,
          "The container's log; returns a WorkloadLogs iterator of (pod, line).")
      .def(
          "activity",
          [](DevInstance& d, double timeout) {
            auto ms = Ms(static_cast<std::int64_t>(std::max(0.0, timeout) * 1000));
            return CallNoGil([&] { return d.Activity(ms); }).ToJson();
          },
          py::arg("timeout") = 20.0,
          "What the user was last seen doing (a probe run in the pod): Jupyter's last activity "
          "and kernels, open SSH sessions, code-server's heartbeat, idle seconds.");
}

// The idle culler's pass.
void BindDevCulling(py::module_& m) {
  m.def(
      "dev_cull_idle",
      [](Client client, const std::string& ns, const std::string& owner, double idle_after,
         bool dry_run, bool policy_only) {
        DevCullOptions options;
        options.namespace_name = ns;
        options.owner = owner;
        options.idle_after = std::chrono::seconds(static_cast<std::int64_t>(idle_after));
        options.policy_only = policy_only;
        options.action = dry_run ? DevIdleAction::kReport : DevIdleAction::kStop;
        Json out = Json::array();
        for (const auto& d : CallNoGil([&] { return CullIdleDevInstances(client, options); })) {
          out.push_back(d.ToJson());
        }
        return out;
      },
      py::arg("client"), py::arg("namespace"), py::arg("owner"), py::arg("idle_after"),
      py::arg("dry_run"), py::arg("policy_only") = false,
      "One culling pass: stops (or with dry_run reports) running instances idle at least their "
      "own policy's `after` (spec `idle`) or, without one, idle_after seconds (with policy_only: "
      "not at all); returns one decision per running instance.");
}

// Shared volumes: create, share, unshare, the grants of a claim.
void BindDevVolumes(py::module_& m) {
  m.def(
      "dev_create_volume",
      [](Client client, const Json& spec) {
        DevVolumeSpec s;
        s.owner = spec.value("owner", "");
        s.name = spec.value("name", "");
        s.namespace_name = spec.value("namespace", "default");
        s.size = spec.value("size", "10Gi");
        s.storage_class = spec.value("storageClass", "");
        if (spec.contains("accessModes")) {
          s.access_modes = spec["accessModes"].get<std::vector<std::string>>();
        }
        py::gil_scoped_release release;
        return CreateVolume(client, s);
      },
      py::arg("client"), py::arg("spec"),
      "Creates a PVC owned by spec['owner'] ({owner, name, namespace, size, storageClass, "
      "accessModes}).");
  m.def(
      "dev_share_volume",
      [](Client client, const std::string& ns, const std::string& claim, const std::string& owner,
         const std::string& grantee, const std::string& mode) {
        auto parsed = ParseShareMode(mode);
        py::gil_scoped_release release;
        ShareVolume(client, ns, claim, owner, grantee, parsed);
      },
      py::arg("client"), py::arg("namespace"), py::arg("claim"), py::arg("owner"),
      py::arg("grantee"), py::arg("mode"), "Grants `grantee` \"ro\" or \"rw\" on owner's PVC.");
  m.def(
      "dev_unshare_volume",
      [](Client client, const std::string& ns, const std::string& claim, const std::string& owner,
         const std::string& grantee) {
        py::gil_scoped_release release;
        UnshareVolume(client, ns, claim, owner, grantee);
      },
      py::arg("client"), py::arg("namespace"), py::arg("claim"), py::arg("owner"),
      py::arg("grantee"), "Removes `grantee`'s grant.");
  m.def(
      "dev_volume_grants",
      [](const Json& pvc) {
        std::map<std::string, std::string> out;
        for (const auto& [user, mode] : VolumeGrants(pvc)) out[user] = ToString(mode);
        return out;
      },
      py::arg("pvc"), "The grants recorded on a PVC object (user → \"ro\"/\"rw\").");
}

}  // namespace

void BindDevInstance(py::module_& m) {
  py::class_<DevInstance> cls = BindDevInstanceClass(m);
  BindDevLifecycle(cls);
  BindDevObservers(cls);
  BindDevCulling(m);
  BindDevVolumes(m);
}

}  // namespace tfk8s::python
